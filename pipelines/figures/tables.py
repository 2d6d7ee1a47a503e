"""A page's chunks read as the tables a reader sees: the unit line, the column headers (periods), the rows.

Statements print their unit once, above the table ("(In millions, except per share data)"), and their periods as a
header line ("December 2, 2022 December 3, 2021", "2017 2016 2015"); the indexer keeps these in the text chunk that
opens the page and the rows in the table chunks after it. :func:`read_page` puts them back together, each part with
the chunk and the span it is quoted from, so an answer can quote the row, its header and its unit, every quote a
span of a stored chunk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

from haystack import Document

from pipelines.figures.numbers import is_figure, parse_figure
from pipelines.figures.periods import years_in

# "(In millions, except per share data)", "(Dollars in millions)", "(MILLIONS, EXCEPT PER COMMON SHARE DATA)"
_UNIT = re.compile(r"\(?[^()\n]{0,40}?\bin (thousands|millions|billions)\b[^()\n]{0,60}\)?|"
                   r"\((thousands|millions|billions)\b[^()\n]{0,60}\)", re.I)
_MONTH_DAY = re.compile(r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2},?", re.I)
_LETTER = re.compile(r"[A-Za-z]")
SCALE = {"thousands": Decimal(1_000), "millions": Decimal(1_000_000), "billions": Decimal(1_000_000_000)}
UNIT_WORD = {"thousands": "thousand", "millions": "million", "billions": "billion"}


@dataclass(frozen=True)
class Span:
    """Text quoted from a chunk: ``doc`` and the ``start``/``end`` offsets of its content."""

    doc: Document
    start: int
    end: int

    @property
    def text(self) -> str:
        return (self.doc.content or "")[self.start : self.end]


@dataclass(frozen=True)
class Header:
    """A column-header line: the ``years`` of its columns, left to right."""

    span: Span
    years: tuple[int, ...]


@dataclass(frozen=True)
class Row:
    """A table row: its ``label`` and its printed ``cells`` (figures, left to right), the ``header`` above it and the
    ``unit`` line of its table, when the page has them."""

    span: Span
    label: str
    cells: tuple[str, ...]
    header: Header | None = None
    unit: Span | None = None
    group: str = ""  # the label-only line above it that groups it ("Cost of revenue:"), if any
    section: str = ""  # the heading that opens its section since the header ("Liabilities"), if any

    def value(self, column: int) -> Decimal | None:
        """The figure in ``column`` (0-based), or None."""
        return parse_figure(self.cells[column]) if 0 <= column < len(self.cells) else None

    @property
    def scale(self) -> str:
        """"thousands", "millions", "billions" when the table's unit line says so (and the row is no per-share or
        percentage figure), else ""."""
        if self.unit is None or re.search(r"per (?:common )?(?:share|unit)|%|\bpercent|\bratios?\b|\bmargins?\b",
                                          f"{self.label} {self.group}", re.I):
            return ""
        m = _UNIT.search(self.unit.text)
        return (m.group(1) or m.group(2)).lower() if m else ""


@dataclass
class Page:
    """The rows of one page, in reading order, each with the header and unit above it."""

    rows: list[Row] = field(default_factory=list)


def _lines(doc: Document) -> list[tuple[int, int]]:
    content = doc.content or ""
    out, pos = [], 0
    for line in content.split("\n"):
        start = pos + (len(line) - len(line.lstrip()))
        end = pos + len(line.rstrip())
        if end > start:
            out.append((start, end))
        pos += len(line) + 1
    return out


_TOKEN = re.compile(r"[^\s|]+")
_NOTE = re.compile(r"\(notes?\b", re.I)


def split_rows(text: str, columns: int = 1) -> list[tuple[int, int, str, list[str]]]:
    """The rows a line holds, as ``(start, end, label, cells)``: "Total assets | $ 27,165 $ | 27,241" is one; a text
    layer that ran a statement's rows together ("Purchases of property and equipment (442) (348) (419) Purchases of
    long-term investments (46) (42) (15)") is several, each a label followed by its figures: fewer figures than the
    table's ``columns`` before more words are the label's own ("allowances of $23 and of $16, respectively"), and so
    is a note reference ("Inventories, net (Note 6)"). A
    label's lead-in up to a colon ("Cash flows from operating activities: Net income") is dropped; a span without a
    label or a figure is no row."""
    rows: list[tuple[int, int, str, list[str]]] = []
    label: list[re.Match[str]] = []
    cells: list[re.Match[str]] = []

    def close() -> None:
        words = [m.group(0) for m in label]
        name = " ".join(words).strip(" :$")
        name = name.rsplit(": ", 1)[-1].strip(" :$") if ": " in name else name
        figures = [m.group(0).lstrip("$") for m in cells if m.group(0) not in ("$", "%")]
        if figures and _LETTER.search(name):
            first = next(m for m in label if name.split()[0] in m.group(0)) if name.split() else label[0]
            rows.append((first.start(), cells[-1].end(), name, figures))

    note = False  # inside a note reference, "(Note 6)", "(Notes 11 and 15)": part of the label
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        if note or (label and not cells and _NOTE.match(tok)):
            label.append(m)
            note = not tok.endswith(")")
            continue
        if is_figure(tok) or tok in ("$", "%"):
            if tok == "%" and cells:
                continue
            if label:
                cells.append(m)
            continue
        if cells and len([c for c in cells if c.group(0) not in ("$", "%")]) >= columns:
            close()
            label, cells = [], []
        elif cells:  # figures inside the label
            label += cells
            cells = []
        label.append(m)
    if label and cells:
        close()
    return rows


def split_row(text: str) -> tuple[str, list[str]] | None:
    """A line's one row: its label and figures ("Total assets | $ 27,165 $ | 27,241" -> ("Total assets",
    ["27,165", "27,241"])); None for a line that holds no row or several."""
    rows = split_rows(text)
    return (rows[0][2], rows[0][3]) if len(rows) == 1 else None


_NOTE_REF = re.compile(r"\((?:see )?notes? \d+(?:\s*(?:,|and)\s*\d+)*\)", re.I)


def _header_years(text: str) -> tuple[int, ...]:
    """The years of a column-header line: two or more years and no other figure ("December 2, 2022 December 3,
    2021", "Years Ended December 31, 2017 2016 2015"); () for any other line."""
    years = years_in(text)
    if len(years) < 2:
        return ()
    rest = _NOTE_REF.sub(" ", _MONTH_DAY.sub(" ", text))  # "(Note 1)" is no column
    others = [t for t in rest.replace("|", " ").split() if is_figure(t) and not re.fullmatch(r"(?:19|20)\d\d", t)]
    return tuple(years) if not others else ()


def amounts(cells: list[str], columns: int) -> list[str]:
    """A row's figures under a header of ``columns`` periods: an earnings release prints each period's amount with
    its share of net sales beside it ("$ 3,226,773 | 100.0% $ 2,729,388 | 100.0%" under "2023 2022"), so when
    dropping the percentages leaves one figure a period, those are the row's cells."""
    if len(cells) <= columns:
        return cells
    kept = [c for c in cells if not c.endswith("%")]
    return kept if len(kept) == columns else cells


def unlabelled_figures(text: str) -> list[str]:
    """The figures of a line that prints only figures (" | 5,162,082 | 12,899,672 | 11,763,096"), else []."""
    tokens = [t for t in text.replace("|", " ").split() if t not in ("$", "%")]
    return [t.lstrip("$") for t in tokens] if len(tokens) >= 2 and all(is_figure(t) for t in tokens) else []


def sums_to(rows: list[Row], cells: list[str]) -> bool:
    """Whether ``cells`` are the column sums of ``rows`` (at least two distinct rows; every column all of whose rows
    print a figure agrees, to the rounding of one unit a row, and at least one column does)."""
    distinct = list({(r.label, r.cells): r for r in rows}.values())
    if len(distinct) < 2:
        return False
    checked = 0
    for col, cell in enumerate(cells):
        total = parse_figure(cell)
        values = [r.value(col) for r in distinct]
        if total is None or any(v is None or len(r.cells) != len(cells) for v, r in zip(values, distinct, strict=True)):
            continue
        if abs(sum(v for v in values if v is not None) - total) > len(distinct):
            return False
        checked += 1
    return checked > 0


def read_page(chunks: list[Document]) -> Page:
    """The rows of ``chunks`` (a page's, or consecutive pages', in reading order) with the nearest column header and
    unit line above each.

    A statement often prints a section's total with no label: "Revenues", its rows, then " | 5,162,082 | …". Such a
    line is read as the row "Total revenues" when its figures are the sums of the rows under the section's heading
    (:func:`sums_to`), its span running from the heading to the total so that the quote shows what was added."""
    page = Page()
    header: Header | None = None
    unit: Span | None = None
    group = ""
    heading: Span | None = None  # the label-only line that opens the current section ("Revenues")
    section: list[Row] = []  # the rows under it
    for doc in chunks:
        content = doc.content or ""
        for start, end in _lines(doc):
            text = content[start:end]
            m = _UNIT.search(text)
            if m and len(text) <= 120:
                lead = len(m.group(0)) - len(m.group(0).lstrip())
                unit = Span(doc, start + m.start() + lead, start + m.end())
            years = _header_years(text)
            if years:
                header = Header(Span(doc, start, end), years)
                heading, section = None, []
                continue
            rows = split_rows(text, len(header.years) if header else 1)
            for a, b, label, cells in rows:
                cells = amounts(cells, len(header.years)) if header else cells
                row = Row(Span(doc, start + a, start + b), label, tuple(cells), header, unit, group,
                          heading.text.strip(" |:") if heading is not None else "")
                page.rows.append(row)
                section.append(row)
            if rows:
                continue
            figures = unlabelled_figures(text)
            if figures and heading is not None and sums_to(section, figures):
                span = Span(doc, heading.start, end) if heading.doc is doc else Span(doc, start, end)
                name = heading.text.strip(" |:")
                page.rows.append(Row(span, f"Total {name[0].lower()}{name[1:]}", tuple(figures), header, unit,
                                     group))
                heading, section = None, []
            elif _LETTER.search(text) and not m and len(text.strip(" |")) <= 60:
                heading, section = Span(doc, start, start + len(text.rstrip(" |"))), []
            if text.strip(" |").endswith(":") and len(text.strip(" |")) <= 80:  # "Earnings per share: |  |  |"
                group = text.strip(" |:")
    return page
