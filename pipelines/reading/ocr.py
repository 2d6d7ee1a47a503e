"""Tesseract for the pages the text layer step flagged (a step of the reader): OCR adds, never replaces.

A page without a readable text layer takes the OCR lines. A page that kept a short text layer (a scan
with a printed page number) keeps every line of it, and gains the OCR lines that carry a word the text
layer does not have, merged in by their place on the page. A page counts as OCR'd (``Page.ocr``, the
upload's ``ocr_pages``) when OCR text was used on it.

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
import heapq
import re
import time
from dataclasses import dataclass
from typing import Any

from connectors.ocr import OcrError, OcrUnavailableError, ocr_image
from pipelines.reading.clean_text import clean_text
from pipelines.reading.layout import IngestError, Line, Page, ParsedPdf
from pipelines.reading.text import PageCallback

_MIN_LINE_CONFIDENCE = 30.0
_DOCUMENT_PSM = 3  # columns and paragraphs
_SPARSE_PSM = 11  # as much text as possible, no layout assumed
LAYOUT_PSM: dict[str, int | None] = {"auto": None, "document": _DOCUMENT_PSM, "sparse": _SPARSE_PSM}
TIMEOUT = (
    "Reading this PDF (including OCR of scanned pages) took longer than the time allowed per document, "
    "so it was not indexed."
)


@dataclass(frozen=True)
class OcrOptions:
    """How scanned pages are read; invalid values raise :class:`ValueError`."""

    enabled: bool = True
    dpi: int = 200
    language: str = "eng"
    page_timeout_s: float = 60.0
    max_pixels: int = 40_000_000
    layout: str = "auto"

    def __post_init__(self) -> None:
        if not 72 <= self.dpi <= 600:
            raise ValueError("dpi must be between 72 and 600")
        if self.page_timeout_s <= 0:
            raise ValueError("page_timeout_s must be positive")
        if not self.language or not all(part.isalnum() or part == "_" for part in self.language.split("+")):
            raise ValueError("language must be Tesseract language codes like 'eng' or 'eng+deu'")
        if self.max_pixels < 1_000_000:
            raise ValueError("max_pixels must be at least 1,000,000")
        if self.layout not in LAYOUT_PSM:
            raise ValueError(f"layout must be one of {sorted(LAYOUT_PSM)}")

    def psm_for(self, page: Page) -> int:
        """Tesseract's page segmentation mode for ``page``: with ``layout="auto"``, sparse text for a landscape
        page (a slide), columns and paragraphs for a portrait one (a scanned document)."""
        fixed = LAYOUT_PSM[self.layout]
        if fixed is not None:
            return fixed
        return _SPARSE_PSM if page.width > page.height else _DOCUMENT_PSM


def ocr_pdf(
    data: bytes,
    parsed: ParsedPdf,
    options: OcrOptions,
    *,
    deadline: float | None = None,
    on_page: PageCallback | None = None,
) -> ParsedPdf:
    """``parsed`` with every page that needs OCR read by Tesseract, its text layer kept (a new object; ``parsed``
    is not changed)."""
    todo = [p for p in parsed.pages if p.needs_ocr]
    if not options.enabled or not todo:
        return parsed
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(data)
    new_pages: dict[int, Page] = {}
    try:
        for done, page in enumerate(todo, start=1):
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise IngestError(TIMEOUT, code="timeout")
            timeout = options.page_timeout_s if remaining is None else min(options.page_timeout_s, remaining)
            new_pages[page.number] = _ocr_page(pdf, page, options, timeout)
            if on_page is not None:
                on_page(done, len(todo))
            if deadline is not None and time.monotonic() > deadline:
                raise IngestError(TIMEOUT, code="timeout")
    finally:
        pdf.close()
    pages = [new_pages.get(p.number, p) for p in parsed.pages]
    return dataclasses.replace(parsed, pages=pages)


def _ocr_page(pdf: Any, page: Page, options: OcrOptions, timeout_s: float) -> Page:
    scale = options.dpi / 72.0
    pixels = page.width * scale * page.height * scale
    if pixels > options.max_pixels:
        scale *= (options.max_pixels / pixels) ** 0.5
    try:
        pg = pdf[page.number - 1]
        try:
            bitmap = pg.render(scale=scale, grayscale=True)
            image = bitmap.to_pil()
        finally:
            pg.close()
        result = ocr_image(image, language=options.language, timeout_s=timeout_s, psm=options.psm_for(page))
        del image, bitmap
    except OcrUnavailableError:
        return dataclasses.replace(page, ocr_failed=True)
    except MemoryError:  # past the reading process's memory limit: the whole PDF is too large, not one page
        raise
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
    merged = add_ocr_lines(page.lines, lines)
    if len(merged) == len(page.lines):
        return page  # OCR found nothing the text layer lacks: the page is as it was
    return dataclasses.replace(page, lines=merged, ocr=True, ocr_confidence=result.confidence)


_WORD = re.compile(r"\w+")


def add_ocr_lines(text_lines: list[Line], ocr_lines: list[Line]) -> list[Line]:
    """The text layer's lines, all of them and unchanged, with the OCR lines that hold a word the text layer
    lacks (case-insensitive), merged by their place on the page (each list keeps its own order)."""
    if not text_lines:
        return ocr_lines
    known = {w.casefold() for ln in text_lines for w in _WORD.findall(ln.text)}
    new = [ln for ln in ocr_lines if any(w.casefold() not in known for w in _WORD.findall(ln.text))]
    if not new:
        return text_lines
    return list(heapq.merge(text_lines, new, key=lambda ln: ln.top))
