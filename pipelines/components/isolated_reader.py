"""IsolatedPdfReader: guard, text layer and OCR of one upload, in a child process with a memory limit.

The guard, the text layer and OCR (:func:`pipelines.reading.reader.read_pdf`), run
by :func:`pipelines.reading.reader.read_pdf_isolated`: the child's address space is capped at
``max_memory_mb`` and it is killed a few seconds past the document's deadline, so no PDF can take the indexer
down. A child costs ~20-35 ms per upload (see :mod:`pipelines.reading.isolation`); ``warm_up`` starts the
fork server it is forked from (~0.3 s, once per process). The embedding model stays in this process.
"""

from __future__ import annotations

from typing import Any

from haystack import component, default_from_dict, default_to_dict

from connectors import uploads
from pipelines.reading.isolation import start as start_fork_server
from pipelines.reading.layout import IngestError, IngestFailure, ParsedPdf
from pipelines.reading.ocr import OcrOptions
from pipelines.reading.reader import ReadOptions, read_pdf_isolated
from pipelines.reading.text import PageCallback

MIN_MEMORY_MB = 256


@component
class IsolatedPdfReader:
    def __init__(
        self,
        *,
        max_file_mb: float = uploads.MAX_FILE_MB,
        max_pages: int = uploads.MAX_PAGES,
        max_stream_mb: float = uploads.MAX_STREAM_MB,
        max_total_inflated_mb: float = uploads.MAX_DECODED_MB,
        ocr_min_chars: int = 40,
        ocr_enabled: bool = True,
        ocr_dpi: int = 200,
        ocr_language: str = "eng",
        ocr_page_timeout_s: float = 60.0,
        max_memory_mb: int = 1500,
        max_chars: int = uploads.MAX_DOCUMENT_CHARS,
        max_lines: int = uploads.MAX_DOCUMENT_LINES,
    ) -> None:
        if max_memory_mb < MIN_MEMORY_MB:
            raise ValueError(f"max_memory_mb must be at least {MIN_MEMORY_MB}")
        self.options = ReadOptions(  # validates: ValueError naming the bad argument
            max_file_mb=max_file_mb,
            max_pages=max_pages,
            max_stream_mb=max_stream_mb,
            max_total_inflated_mb=max_total_inflated_mb,
            ocr_min_chars=ocr_min_chars,
            ocr=OcrOptions(enabled=ocr_enabled, dpi=ocr_dpi, language=ocr_language, page_timeout_s=ocr_page_timeout_s),
            max_chars=max_chars,
            max_lines=max_lines,
        )
        self.max_memory_mb = max_memory_mb

    def to_dict(self) -> dict[str, Any]:
        o = self.options
        return default_to_dict(
            self,
            max_file_mb=o.max_file_mb,
            max_pages=o.max_pages,
            max_stream_mb=o.max_stream_mb,
            max_total_inflated_mb=o.max_total_inflated_mb,
            ocr_min_chars=o.ocr_min_chars,
            ocr_enabled=o.ocr.enabled,
            ocr_dpi=o.ocr.dpi,
            ocr_language=o.ocr.language,
            ocr_page_timeout_s=o.ocr.page_timeout_s,
            max_memory_mb=self.max_memory_mb,
            max_chars=o.max_chars,
            max_lines=o.max_lines,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IsolatedPdfReader:
        return default_from_dict(cls, data)

    def warm_up(self) -> None:
        """Start the fork server now rather than on the first upload; safe to call again."""
        start_fork_server()

    @component.output_types(parsed=ParsedPdf, failed=list[IngestFailure])
    def run(
        self,
        data: bytes,
        deadline: float | None = None,
        on_page: PageCallback | None = None,
        on_ocr: PageCallback | None = None,
    ) -> dict[str, Any]:
        """Read one upload in a child process.

        :param data: the file's bytes.
        :param deadline: a ``time.monotonic()`` value: the document's time budget (the child is killed past it).
        :param on_page: called as each page's text layer is read (progress).
        :param on_ocr: called as each page is recognised by OCR (progress).
        :returns: ``parsed``, the pages, and ``failed=[]``; or no pages and ``failed=[IngestFailure]`` with the
            reason the user sees (the file's own problem, "too large when decompressed" when the child ran out of
            memory, the timeout), so the steps after it do not run. Raises
            :class:`pipelines.reading.isolation.ChildCrashedError` when the child failed through our fault.
        """
        try:
            parsed = read_pdf_isolated(
                data, self.options, max_memory_mb=self.max_memory_mb, deadline=deadline, on_page=on_page, on_ocr=on_ocr
            )
        except IngestError as e:
            return {"failed": [IngestFailure.of(e)]}
        return {"parsed": parsed, "failed": []}
