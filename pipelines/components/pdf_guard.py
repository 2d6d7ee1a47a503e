"""PdfGuard: refuse what must not be parsed, before the parser sees it.

The checks are :func:`pipelines.reading.guard.guard_pdf` (no Haystack there, so the indexer can run them in a
small child process); this component is the same step for pipelines and benchmarks that read in-process.
"""

from __future__ import annotations

from typing import Any

from haystack import component, default_from_dict, default_to_dict

from pipelines.reading.guard import guard_pdf


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
        pages = guard_pdf(
            data,
            max_file_mb=self.max_file_mb,
            max_pages=self.max_pages,
            max_stream_mb=self.max_stream_mb,
            max_total_inflated_mb=self.max_total_inflated_mb,
        )
        return {"data": data, "pages": pages}
