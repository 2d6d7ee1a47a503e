"""PdfParser: the text layer of each page as positioned lines, with font size and weight.

The work is :func:`pipelines.reading.text.parse_pdf` (no Haystack there, so the indexer can run it in a
small child process); this component is the same step for pipelines and benchmarks that parse in-process.
"""

from __future__ import annotations

from typing import Any

from haystack import component, default_from_dict, default_to_dict

from pipelines.reading.layout import ParsedPdf
from pipelines.reading.text import PageCallback, parse_pdf


@component
class PdfParser:
    """Parse every page's text layer; flag pages that need OCR."""

    def __init__(self, *, ocr_min_chars: int = 40) -> None:
        if ocr_min_chars < 0:
            raise ValueError("ocr_min_chars must be >= 0")
        self.ocr_min_chars = ocr_min_chars

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, ocr_min_chars=self.ocr_min_chars)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PdfParser:
        return default_from_dict(cls, data)

    @component.output_types(parsed=ParsedPdf)
    def run(
        self,
        data: bytes,
        deadline: float | None = None,
        on_page: PageCallback | None = None,
    ) -> dict[str, Any]:
        """``deadline`` is a ``time.monotonic()`` value; past it the parse stops with :class:`IngestError`."""
        return {"parsed": parse_pdf(data, ocr_min_chars=self.ocr_min_chars, deadline=deadline, on_page=on_page)}
