"""PdfGuard: refuse what must not be parsed, before the parser sees it.

Checks, in order: empty file, not a PDF (magic bytes, whatever the extension), over the size limit,
truncated (no ``%%EOF`` near the end), a decompression bomb (a Flate stream inflating past a budget),
cannot be opened (corrupt), password-protected (the empty password is tried first), over the page
limit. Each refusal is a fixed sentence the user can act on.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

from haystack import component, default_from_dict, default_to_dict

from pipelines.components.layout import IngestError

_STREAM_RE = re.compile(rb"/FlateDecode[^>]*>>\s*stream\r?\n")
_MB = 1024 * 1024


def check_pdf_bytes(
    data: bytes,
    *,
    max_file_mb: float,
    max_stream_mb: float,
    max_total_inflated_mb: float,
) -> None:
    """Raise :class:`IngestError` when ``data`` is not a PDF we are willing to open."""
    if not data:
        raise IngestError("The file is empty.", code="empty")
    if b"%PDF-" not in data[:1024]:
        raise IngestError("This file is not a PDF (it does not start with the PDF signature).", code="not_pdf")
    if len(data) > max_file_mb * _MB:
        raise IngestError(
            f"The file is {len(data) / _MB:.1f} MB, over the {max_file_mb:g} MB limit.", code="too_large"
        )
    if b"%%EOF" not in data[-4096:]:
        raise IngestError("The PDF is truncated or damaged (its end is missing); please upload it again.",
                          code="truncated")
    _check_inflation(data, max_stream_mb=max_stream_mb, max_total_mb=max_total_inflated_mb)


def _check_inflation(data: bytes, *, max_stream_mb: float, max_total_mb: float) -> None:
    """Inflate every Flate stream with a budget; a bomb is refused before anything renders it."""
    per_stream = int(max_stream_mb * _MB)
    budget = int(max_total_mb * _MB)
    total = 0
    for m in _STREAM_RE.finditer(data):
        start = m.end()
        end = data.find(b"endstream", start)
        if end < 0:
            end = len(data)
        inflater = zlib.decompressobj()
        produced = 0
        pos = start
        try:
            while pos < end:
                chunk = inflater.decompress(data[pos:min(end, pos + 65536)], per_stream - produced + 1)
                produced += len(chunk)
                # whatever did not fit stays in unconsumed_tail: keep inflating it without new input
                while inflater.unconsumed_tail and produced <= per_stream:
                    chunk = inflater.decompress(inflater.unconsumed_tail, per_stream - produced + 1)
                    produced += len(chunk)
                if produced > per_stream or total + produced > budget:
                    raise IngestError(
                        "The PDF contains a compressed stream that expands to an unsafe size "
                        "(a possible decompression bomb), so it was not opened.",
                        code="bomb",
                    )
                if inflater.eof:
                    break
                pos += 65536
        except zlib.error:
            pass  # a damaged stream is the parser's problem (it will skip or fail on it)
        total += produced


@component
class PdfGuard:
    """Validate PDF bytes and open them once to learn the page count."""

    def __init__(
        self,
        *,
        max_file_mb: float = 50.0,
        max_pages: int = 2000,
        max_stream_mb: float = 256.0,
        max_total_inflated_mb: float = 1024.0,
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
        """Return the same bytes and the page count, or raise :class:`IngestError` with the reason."""
        import pypdfium2 as pdfium

        check_pdf_bytes(
            data,
            max_file_mb=self.max_file_mb,
            max_stream_mb=self.max_stream_mb,
            max_total_inflated_mb=self.max_total_inflated_mb,
        )
        try:
            pdf = pdfium.PdfDocument(data)  # pdfium tries the empty user password itself
        except pdfium.PdfiumError as e:
            if "password" in str(e).lower():
                raise IngestError(
                    "The PDF is password-protected. Remove the password (or export an unprotected copy) "
                    "and upload it again.",
                    code="encrypted",
                ) from e
            raise IngestError("The PDF is damaged and could not be opened.", code="corrupt") from e
        try:
            n = len(pdf)
        finally:
            pdf.close()
        if n == 0:
            raise IngestError("The PDF has no pages.", code="corrupt")
        if n > self.max_pages:
            raise IngestError(f"The PDF has {n} pages, over the {self.max_pages}-page limit.", code="too_many_pages")
        return {"data": data, "pages": n}
