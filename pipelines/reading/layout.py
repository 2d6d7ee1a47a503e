"""The page model reading produces (pages, lines), the elements the structure step makes of it, and the ingest
error type: plain data passed between reading and the indexing components. It lives with reading because the
reader's child process builds it without loading any component (Haystack pulls in torch).

Coordinates are PDF points with a top-left origin (``top`` grows downwards), whatever produced the
line (the text layer or OCR).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


class IngestError(Exception):
    """A document cannot be indexed; ``reason`` is a fixed, user-facing sentence (no exception text)."""

    def __init__(self, reason: str, *, code: str = "failed") -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


@dataclass(frozen=True)
class IngestFailure:
    """Why one file was not indexed, as a component output (``failed=[...]``): ``reason`` is the fixed,
    user-facing sentence of the :class:`IngestError` it came from, ``code`` the short name the log records."""

    reason: str
    code: str = "failed"

    @classmethod
    def of(cls, error: IngestError) -> IngestFailure:
        return cls(reason=error.reason, code=error.code)


@dataclass(frozen=True)
class Line:
    """One visual line (or one row of a table: several cells on one baseline)."""

    page: int  # 1-based
    text: str
    x0: float
    top: float
    x1: float
    bottom: float
    size: float = 0.0  # font size in points (0 = unknown, e.g. OCR)
    bold: bool = False
    cells: tuple[str, ...] = ()  # >1 when the line is made of separate runs with wide gaps between them
    cell_x: tuple[float, ...] = ()  # left edge of each cell
    hyphen_join: bool = False  # the line ended in a hyphenated word break: glue the next line without a space
    ocr_confidence: float | None = None


@dataclass
class Page:
    number: int  # 1-based
    width: float
    height: float
    label: str = ""  # the page's label from the PDF's /PageLabels ("iii", "17", "6985"), "" when it has none
    lines: list[Line] = field(default_factory=list)
    chars: int = 0  # non-space characters in the text layer
    needs_ocr: bool = False
    ocr: bool = False
    ocr_confidence: float | None = None
    ocr_failed: bool = False


@dataclass
class ParsedPdf:
    """What the parser found: pages with lines, plus the outline (level, title, 1-based page)."""

    pages: list[Page]
    outline: list[tuple[int, str, int]] = field(default_factory=list)

    @property
    def page_count(self) -> int:
        return len(self.pages)

    @property
    def ocr_pages(self) -> list[int]:
        return [p.number for p in self.pages if p.ocr]

    @property
    def skipped_pages(self) -> list[int]:
        return [p.number for p in self.pages if p.ocr_failed]


ElementKind = Literal["heading", "paragraph", "list", "table", "caption"]


@dataclass
class Element:
    """A structural unit of the document, in reading order."""

    kind: ElementKind
    text: str  # paragraph/list/caption text; heading title; table: "" (see rows)
    page_start: int
    page_end: int
    level: int = 0  # headings: 1 = top level
    font_size: float = 0.0  # headings: size of the heading's font (levels of un-numbered headings)
    numbering: str = ""  # headings: "4.2", "12", "IV"
    label: str = ""  # "Table 2", "Figure 1"
    caption: str = ""  # tables: the caption line
    header: tuple[str, ...] = ()  # tables: the header row
    rows: list[tuple[str, ...]] = field(default_factory=list)  # tables: body rows
    row_pages: list[int] = field(default_factory=list)  # tables: page of each body row
    items: list[str] = field(default_factory=list)  # lists: one string per item
    # paragraphs over a page break: (offset in ``text`` where the page's text starts, page number)
    page_offsets: list[tuple[int, int]] = field(default_factory=list)
    ocr: bool = False
    ocr_confidence: float | None = None
    section: str = ""  # heading path, " > "-joined (filled by the structure step)
    section_id: str = ""
