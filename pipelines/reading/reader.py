"""The whole reading of an upload: guard, text layer, OCR. In this process (:func:`read_pdf`) or in a child
process under a memory limit and the document's deadline (:func:`read_pdf_isolated`, what the indexer uses)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from connectors.uploads import (
    MAX_DECODED_MB,
    MAX_DOCUMENT_CHARS,
    MAX_DOCUMENT_LINES,
    MAX_FILE_MB,
    MAX_PAGES,
    MAX_STREAM_MB,
)
from pipelines.reading.guard import guard_pdf
from pipelines.reading.isolation import run_isolated
from pipelines.reading.layout import IngestError, ParsedPdf
from pipelines.reading.ocr import OcrOptions, ocr_pdf
from pipelines.reading.text import PageCallback, parse_pdf

TOO_MUCH_TEXT = (
    "The PDF holds more text than one document may have here (CITEBOT_MAX_DOCUMENT_CHARS / _ELEMENTS), so it was "
    "not indexed. Split it into smaller PDFs."
)


@dataclass(frozen=True)
class ReadOptions:
    """The limits and settings of one reading; invalid values raise :class:`ValueError`."""

    max_file_mb: float = MAX_FILE_MB
    max_pages: int = MAX_PAGES
    max_stream_mb: float = MAX_STREAM_MB
    max_total_inflated_mb: float = MAX_DECODED_MB
    ocr_min_chars: int = 40
    ocr: OcrOptions = field(default_factory=OcrOptions)
    max_chars: int = MAX_DOCUMENT_CHARS  # text of the whole document
    max_lines: int = MAX_DOCUMENT_LINES  # its text lines (each becomes objects the bot's process keeps)

    def __post_init__(self) -> None:
        if self.max_file_mb <= 0:
            raise ValueError("max_file_mb must be positive")
        if self.max_pages < 1:
            raise ValueError("max_pages must be at least 1")
        if self.max_stream_mb <= 0 or self.max_total_inflated_mb < self.max_stream_mb:
            raise ValueError("max_stream_mb must be positive and not above max_total_inflated_mb")
        if self.ocr_min_chars < 0:
            raise ValueError("ocr_min_chars must be >= 0")
        if self.max_chars < 1 or self.max_lines < 1:
            raise ValueError("max_chars and max_lines must be at least 1")


def read_pdf(
    data: bytes,
    options: ReadOptions,
    *,
    deadline: float | None = None,
    on_page: PageCallback | None = None,
    on_ocr: PageCallback | None = None,
) -> ParsedPdf:
    """Guard, then parse every page, then OCR the pages without a usable text layer."""
    guard_pdf(
        data,
        max_file_mb=options.max_file_mb,
        max_pages=options.max_pages,
        max_stream_mb=options.max_stream_mb,
        max_total_inflated_mb=options.max_total_inflated_mb,
    )
    parsed = parse_pdf(data, ocr_min_chars=options.ocr_min_chars, deadline=deadline, on_page=on_page)
    check_size(parsed, options)
    parsed = ocr_pdf(data, parsed, options.ocr, deadline=deadline, on_page=on_ocr)
    check_size(parsed, options)
    return parsed


def check_size(parsed: ParsedPdf, options: ReadOptions) -> None:
    """Refuse a document with more text or lines than the caps: in the child, so what it hands the bot (which
    expands every line into objects it keeps while indexing) stays bounded by them."""
    lines = chars = 0
    for page in parsed.pages:
        lines += len(page.lines)
        chars += sum(len(line.text) for line in page.lines)
        if lines > options.max_lines or chars > options.max_chars:
            raise IngestError(TOO_MUCH_TEXT, code="too_much_text")


def read_pdf_isolated(
    data: bytes,
    options: ReadOptions,
    *,
    max_memory_mb: int,
    deadline: float | None,
    on_page: PageCallback | None = None,
    on_ocr: PageCallback | None = None,
) -> ParsedPdf:
    """:func:`read_pdf` in a child process limited to ``max_memory_mb`` (see :mod:`pipelines.reading.isolation`
    for what each way of failing raises); progress comes back to ``on_page`` and ``on_ocr`` here."""
    callbacks = {"parsing": on_page, "ocr": on_ocr}

    def progress(phase: str, done: int, total: int) -> None:
        callback = callbacks.get(phase)
        if callback is not None:
            callback(done, total)

    parsed: ParsedPdf = run_isolated(
        _read_in_child, data, options, deadline, max_memory_mb=max_memory_mb, deadline=deadline,
        on_progress=progress,
    )
    return parsed


def _read_in_child(report: Callable[..., None], data: bytes, options: ReadOptions, deadline: float | None) -> ParsedPdf:
    return read_pdf(
        data, options, deadline=deadline,
        on_page=lambda done, total: report("parsing", done, total),
        on_ocr=lambda done, total: report("ocr", done, total),
    )
