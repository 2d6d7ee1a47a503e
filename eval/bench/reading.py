"""The reading steps as Haystack components, for the benchmarks that read in-process.

The indexer reads an upload in a small child process (:class:`pipelines.components.isolated_reader.IsolatedPdfReader`
over :func:`pipelines.reading.reader.read_pdf_isolated`); the product has no in-process reader. ``citebot bench
ingest`` and ``bench tables`` time and inspect each step on its own, so the steps are here, each a thin component
over its function in :mod:`pipelines.reading`:

* :class:`PdfGuard` — :func:`pipelines.reading.guard.guard_pdf`: refuse what must not be parsed;
* :class:`PdfParser` — :func:`pipelines.reading.text.parse_pdf`: the text layer of each page as positioned lines,
  with font size and weight; pages that need OCR flagged;
* :class:`OcrFallback` — :func:`pipelines.reading.ocr.ocr_pdf`: Tesseract for the pages without a readable text
  layer, and added to a short one on a mostly pictured page (a scan with a printed page number).
"""

from __future__ import annotations

from typing import Any

from haystack import component, default_from_dict, default_to_dict

from connectors.uploads import MAX_DECODED_MB, MAX_FILE_MB, MAX_PAGES, MAX_STREAM_MB
from pipelines.reading.guard import guard_pdf
from pipelines.reading.layout import Page, ParsedPdf
from pipelines.reading.ocr import OcrOptions, ocr_pdf
from pipelines.reading.text import PageCallback, parse_pdf


@component
class PdfGuard:
    """Validate PDF bytes and open them once to learn the page count."""

    def __init__(
        self,
        *,
        max_file_mb: float = MAX_FILE_MB,
        max_pages: int = MAX_PAGES,
        max_stream_mb: float = MAX_STREAM_MB,
        max_total_inflated_mb: float = MAX_DECODED_MB,
    ) -> None:
        if max_file_mb <= 0:
            raise ValueError("max_file_mb must be positive")
        if max_pages < 1:
            raise ValueError("max_pages must be at least 1")
        if max_stream_mb <= 0 or max_total_inflated_mb < max_stream_mb:
            raise ValueError("max_stream_mb must be positive and not above max_total_inflated_mb")
        self.max_file_mb = max_file_mb
        self.max_pages = max_pages
        self.max_stream_mb = max_stream_mb
        self.max_total_inflated_mb = max_total_inflated_mb

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            max_file_mb=self.max_file_mb,
            max_pages=self.max_pages,
            max_stream_mb=self.max_stream_mb,
            max_total_inflated_mb=self.max_total_inflated_mb,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PdfGuard:
        return default_from_dict(cls, data)

    @component.output_types(data=bytes, pages=int)
    def run(self, data: bytes) -> dict[str, Any]:
        """Check the bytes before anything parses them.

        :param data: the file's bytes.
        :returns: ``data``, the same bytes, and ``pages``, the page count; or raises :class:`IngestError` with the
            reason.
        """
        pages = guard_pdf(
            data,
            max_file_mb=self.max_file_mb,
            max_pages=self.max_pages,
            max_stream_mb=self.max_stream_mb,
            max_total_inflated_mb=self.max_total_inflated_mb,
        )
        return {"data": data, "pages": pages}


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
        """Read the text layer of every page.

        :param data: the guarded PDF's bytes.
        :param deadline: a ``time.monotonic()`` value; past it the parse stops with :class:`IngestError`.
        :param on_page: called as each page is read (progress).
        :returns: ``parsed``, the pages with their lines.
        """
        return {"parsed": parse_pdf(data, ocr_min_chars=self.ocr_min_chars, deadline=deadline, on_page=on_page)}


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
        """OCR the pages without a usable text layer.

        :param data: the PDF's bytes.
        :param parsed: its text layer, from :class:`PdfParser`.
        :param deadline: a ``time.monotonic()`` value; past it OCR stops with :class:`IngestError`.
        :param on_page: called as each page is recognised (progress).
        :returns: ``parsed``, new pages where OCR read them, the others as they were.
        """
        return {"parsed": ocr_pdf(data, parsed, self.options, deadline=deadline, on_page=on_page)}

    def psm_for(self, page: Page) -> int:
        """Tesseract's page segmentation mode for ``page`` (see :meth:`OcrOptions.psm_for`)."""
        return self.options.psm_for(page)
