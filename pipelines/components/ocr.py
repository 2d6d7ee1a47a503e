"""OcrFallback: Tesseract for the pages whose text layer is empty or too thin.

Pages are rendered one at a time with pypdfium2 (greyscale, ``dpi``, capped at ``max_pixels``) and
the image is dropped before the next page, so memory stays flat however long the document is. A
page whose OCR fails or times out is skipped and reported (``Page.ocr_failed``); running past the
document's time budget fails the whole ingest.

``layout="auto"`` reads a landscape page as a slide (Tesseract's sparse-text mode, which also finds
chart labels and scattered boxes) and a portrait page as a document (columns and paragraphs). On the
105 gold pages of the dev set's image-only decks, sparse mode found a few more gold answers than the
document mode (22 vs 20 of 65 cases, 50 vs 46 of 100 answer elements, ~4% more words) in the same
time (~0.9 s/page either way, timed interleaved); rendering at 150 or 300 dpi instead of 200 found
no more, and turning off Tesseract's inverted-text pass lost a fifth of them (light text on dark slides).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from haystack import component, default_from_dict, default_to_dict

from connectors.ocr import OcrError, OcrUnavailableError, ocr_image
from pipelines.components.clean_text import clean_text
from pipelines.components.layout import IngestError, Line, Page, ParsedPdf

PageCallback = Callable[[int, int], None]

_MIN_LINE_CONFIDENCE = 30.0
_DOCUMENT_PSM = 3  # columns and paragraphs
_SPARSE_PSM = 11  # as much text as possible, no layout assumed
_LAYOUT_PSM: dict[str, int | None] = {"auto": None, "document": _DOCUMENT_PSM, "sparse": _SPARSE_PSM}


@component
class OcrFallback:
    def __init__(
        self,
        *,
        enabled: bool = True,
        dpi: int = 200,
        language: str = "eng",
        page_timeout_s: float = 60.0,
        max_pixels: int = 40_000_000,
        layout: str = "auto",
    ) -> None:
        if not 72 <= dpi <= 600:
            raise ValueError("dpi must be between 72 and 600")
        if page_timeout_s <= 0:
            raise ValueError("page_timeout_s must be positive")
        if not language or not all(part.isalnum() or part == "_" for part in language.split("+")):
            raise ValueError("language must be Tesseract language codes like 'eng' or 'eng+deu'")
        if max_pixels < 1_000_000:
            raise ValueError("max_pixels must be at least 1,000,000")
        if layout not in _LAYOUT_PSM:
            raise ValueError(f"layout must be one of {sorted(_LAYOUT_PSM)}")
        self.enabled = enabled
        self.dpi = dpi
        self.language = language
        self.page_timeout_s = page_timeout_s
        self.max_pixels = max_pixels
        self.layout = layout

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            enabled=self.enabled,
            dpi=self.dpi,
            language=self.language,
            page_timeout_s=self.page_timeout_s,
            max_pixels=self.max_pixels,
            layout=self.layout,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OcrFallback:
        return default_from_dict(cls, data)

    @component.output_types(parsed=ParsedPdf)
    def run(
        self,
        data: bytes,
        parsed: ParsedPdf,
        deadline: float | None = None,
        on_page: PageCallback | None = None,
    ) -> dict[str, Any]:
        todo = [p for p in parsed.pages if p.needs_ocr]
        if not self.enabled or not todo:
            return {"parsed": parsed}
        import pypdfium2 as pdfium

        pdf = pdfium.PdfDocument(data)
        new_pages: dict[int, Page] = {}
        try:
            for done, page in enumerate(todo, start=1):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise IngestError(
                        "Reading this PDF (including OCR of scanned pages) took longer than the time allowed "
                        "per document, so it was not indexed.",
                        code="timeout",
                    )
                timeout = self.page_timeout_s if remaining is None else min(self.page_timeout_s, remaining)
                new_pages[page.number] = self._ocr_page(pdf, page, timeout)
                if on_page is not None:
                    on_page(done, len(todo))
                if deadline is not None and time.monotonic() > deadline:
                    raise IngestError(
                        "Reading this PDF (including OCR of scanned pages) took longer than the time allowed "
                        "per document, so it was not indexed.",
                        code="timeout",
                    )
        finally:
            pdf.close()
        pages = [new_pages.get(p.number, p) for p in parsed.pages]
        return {"parsed": dataclasses.replace(parsed, pages=pages)}

    def psm_for(self, page: Page) -> int:
        """Tesseract's page segmentation mode for ``page``: with ``layout="auto"``, sparse text for a landscape
        page (a slide), columns and paragraphs for a portrait one (a scanned document)."""
        fixed = _LAYOUT_PSM[self.layout]
        if fixed is not None:
            return fixed
        return _SPARSE_PSM if page.width > page.height else _DOCUMENT_PSM

    def _ocr_page(self, pdf: Any, page: Page, timeout_s: float) -> Page:
        scale = self.dpi / 72.0
        pixels = page.width * scale * page.height * scale
        if pixels > self.max_pixels:
            scale *= (self.max_pixels / pixels) ** 0.5
        try:
            pg = pdf[page.number - 1]
            try:
                bitmap = pg.render(scale=scale, grayscale=True)
                image = bitmap.to_pil()
            finally:
                pg.close()
            result = ocr_image(image, language=self.language, timeout_s=timeout_s, psm=self.psm_for(page))
            del image, bitmap
        except OcrUnavailableError:
            return dataclasses.replace(page, ocr_failed=True)
        except (OcrError, Exception):  # noqa: BLE001 - one bad page is skipped and reported, never fatal
            return dataclasses.replace(page, ocr_failed=True)
        to_pt = 1.0 / scale
        lines: list[Line] = []
        for ln in result.lines:
            text = clean_text(ln.text).strip()
            if ln.confidence < _MIN_LINE_CONFIDENCE or not any(c.isalnum() for c in text):
                continue
            lines.append(Line(
                page=page.number,
                text=text,
                x0=ln.x0 * to_pt,
                top=ln.top * to_pt,
                x1=ln.x1 * to_pt,
                bottom=ln.bottom * to_pt,
                size=(ln.bottom - ln.top) * to_pt,
                ocr_confidence=ln.confidence,
            ))
        if not lines:
            # nothing legible: keep whatever thin text layer the page had
            return dataclasses.replace(page, ocr=True, ocr_confidence=result.confidence)
        return dataclasses.replace(page, lines=lines, ocr=True, ocr_confidence=result.confidence)
