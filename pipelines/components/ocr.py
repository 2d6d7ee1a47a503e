"""OcrFallback: Tesseract for the pages whose text layer is empty or too thin.

The work, and how it was tuned, is in :mod:`pipelines.reading.ocr` (no Haystack there, so the indexer can run
it in a small child process); this component is the same step for pipelines and benchmarks that read
in-process.
"""

from __future__ import annotations

from typing import Any

from haystack import component, default_from_dict, default_to_dict

from pipelines.reading.layout import Page, ParsedPdf
from pipelines.reading.ocr import OcrOptions, ocr_pdf
from pipelines.reading.text import PageCallback


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
        self.options = OcrOptions(  # validates: ValueError naming the bad argument
            enabled=enabled, dpi=dpi, language=language, page_timeout_s=page_timeout_s, max_pixels=max_pixels,
            layout=layout,
        )
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
        return {"parsed": ocr_pdf(data, parsed, self.options, deadline=deadline, on_page=on_page)}

    def psm_for(self, page: Page) -> int:
        """Tesseract's page segmentation mode for ``page`` (see :meth:`OcrOptions.psm_for`)."""
        return self.options.psm_for(page)
