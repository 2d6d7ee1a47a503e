"""A line item's figure: "What were Adobe's total assets at the end of fiscal 2022?" answered with the figure, its
row, its period and its unit ("Total assets, December 2, 2022 (fiscal 2022): $27,165 million [3]"), the row quoted
together with its column header and the table's unit line (:func:`line_item_figure`).

The line item is matched by meaning through :data:`pipelines.components.statements.LINE_ITEMS` (capital expenditure
is "Purchases of property and equipment"; total current liabilities is not total liabilities); the column is the
period the question names (:mod:`pipelines.figures.periods`), the latest when it names none, and "not in this
filing" when the table has no such period. Every figure in the answer line is copied from the quoted row; a unit
the question asks for ("in USD billions") is shown beside it, converted from the quoted figure and said to be.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from haystack import Document

from pipelines.components.instructions import Instructions
from pipelines.components.statements import (
    SEARCH_WORDS,
    TITLES,
    LineItem,
    asked_item,
    formula_for,
    row_is,
    statement_kind,
    wanted_statements,
)
from pipelines.figures.numbers import grouped, parse_figure
from pipelines.figures.periods import AskedPeriod, asked_period
from pipelines.figures.tables import SCALE, UNIT_WORD, Header, Row, Span, read_page
from pipelines.models import Answer, RetrievalMode
from pipelines.questions.kinds import SHARE_OF_REVENUE, Question
from pipelines.questions.steps import AnswerDraft, Steps, doc_filter

# a question about the item's story or its outlook ("is growth in EPS expected to accelerate in FY2023?": the
# guidance says, no column prints a year to come), not its figure
_NARRATIVE = re.compile(r"\b(?:why|explain|describe|discuss|drivers?|reasons?|what (?:drove|caused)|how did|"
                        r"expect(?:s|ed)?|guid(?:e|es|ed|ance)|outlook|forecasts?)\b", re.I)
_DATE = re.compile(r"\b[A-Z][a-z]{2,8}\.? \d{1,2}, (?:19|20)\d\d\b")
# the span a statement's columns cover, said above its header ("Three months ended March 31,", "13 Weeks Ended")
_COVERS = re.compile(r"\b(three|six|nine|twelve|thirteen|twenty-six|thirty-nine|fifty-two|fifty-three|\d{1,2})[- ]"
                     r"(months?|weeks?) ended,?(?:\s+([A-Z][a-z]{2,8}\.? \d{1,2}))?", re.I)
# a page that discusses a statement ("Analysis of Consolidated Statements of Income", "the following table
# illustrates the change in … the consolidated balance sheet"), not the statement itself
_DISCUSSED = re.compile(r"\b(?:analysis|overview|discussion|illustrates)\b", re.I)
_ANNUAL = {"twelve", "12", "fifty-two", "52", "fifty-three", "53"}
_ABOVE = 240  # how far above a column header its spans are looked for
MAX_PAGES = 8
# line items a cash flow statement prints as outflows, in parentheses, that a reader asks for as amounts
OUTFLOWS = frozenset({"capital expenditure", "dividends paid"})


@dataclass(frozen=True)
class Found:
    """A row that is the line item, on the ``rank``-th page retrieval put forward."""

    row: Row
    rank: int
    statement: str  # the statement the page is ("balance", "income", ...), "" for another page
    consolidated: bool = False  # the page titles itself consolidated (a primary statement, not a schedule or the
    # discussion's copy of it)
    spans: tuple[Span, ...] = ()  # what its table says its column groups cover, in order (:func:`spans_above`)


def asked_unit(said: Instructions) -> str:
    """"thousands", "millions" or "billions" when the question asked for its answer in one (its parsed
    instructions, :attr:`pipelines.query.Retrieval.instructions`), else ""."""
    return said.unit.removeprefix("USD ") if said.unit.startswith("USD ") else ""


def column_names(header: str, years: tuple[int, ...]) -> list[str]:
    """Each column's name as the header prints it ("December 2, 2022"), or its year."""
    dates = _DATE.findall(header)
    return dates if len(dates) == len(years) else [str(y) for y in years]


def column_for(years: tuple[int, ...], period: AskedPeriod) -> int | None:
    """The column of the year the question names (its first, for a quarter's "three months" before "six"), the
    latest year's when it names none; None when the table has no such year."""
    if period.year is None:
        return years.index(max(years))
    return years.index(period.year) if period.year in years else None


def figure_text(row: Row, cell: str, *, outflow: bool = False) -> str:
    """A cell as an answer prints it: "$27,165 million", "$10.10 per share", "-$112 million" for "(112)"; an
    ``outflow`` (capital expenditure, dividends paid: printed in parentheses on a cash flow statement) as its
    amount, "$442 million (an outflow, printed (442))"."""
    value = parse_figure(cell)
    dollars = "$" in row.span.text or (row.unit is not None and "$" in row.unit.text) or row.scale != ""
    sign = "-" if value is not None and value < 0 and not outflow else ""
    digits = cell.strip("()$-% ")
    text = f"{sign}{'$' if dollars and not cell.endswith('%') else ''}{digits}{'%' if cell.endswith('%') else ''}"
    if row.scale:
        text += f" {UNIT_WORD[row.scale]}"
    elif re.search(r"per (?:common )?share", f"{row.label} {row.group}", re.I):
        text += " per share"
    if outflow and value is not None and value < 0:
        text += f" (an outflow, printed {cell})"
    return text


def period_phrase(header: Header, name: str, statement: str, span: str = "") -> str:
    """How the answer names a column: "at December 2, 2022" ("at the end of 2022" under a bare year) on a balance
    sheet; under a ``span`` (:func:`column_span`) "for the three months ended March 31, 2021" (a dated column, or a
    bare year whose span names the day) or "for the 52 weeks ended in 2023"; "for the year ended December 2, 2022"
    where the header says years ended; else "for 2017"."""
    if statement == "balance":
        return f"at {name}" if _DATE.match(name) else f"at the end of {name}"
    if span:
        if _DATE.match(name):
            return f"for the {' '.join(span.split()[:3])} {name}"
        return f"for the {span}, {name}" if span[-1].isdigit() else f"for the {span} in {name}"
    if not _DATE.match(name):
        return f"for {name}"
    before = (header.span.doc.content or "")[max(0, header.span.start - 160) : header.span.end].lower()
    return f"for the year ended {name}" if re.search(r"years? ended|fiscal year", before) else f"for {name}"


def text_above(chunks: list[Document], at: Span, reach: int) -> list[tuple[Document, int, int]]:
    """The ``reach`` characters of a page's text before ``at`` (a span of one of ``chunks``), as (chunk, start, end)
    ranges in reading order: the chunk before on the page is read too when ``at`` opens its chunk."""
    where = [(at.doc, max(0, at.start - reach), at.start)]
    i = next((k for k, d in enumerate(chunks) if d is at.doc), 0)
    if at.start < reach and i > 0:
        before = chunks[i - 1].content or ""
        where.insert(0, (chunks[i - 1], max(0, len(before) - (reach - at.start)), len(before)))
    return where


def spans_above(chunks: list[Document], header: Span) -> tuple[Span, ...]:
    """What the line nearest above a table's column header (or the header itself) says its column groups cover
    ("Three months ended March 31", "13 Weeks Ended  52 Weeks Ended"), as quotable spans (:func:`text_above`)."""
    where = text_above(chunks, header, _ABOVE)
    doc, lo, _ = where[-1]
    where[-1] = (doc, lo, header.end)  # the header line itself may say it
    last: list[Span] = []
    for doc, lo, hi in where:
        text = doc.content or ""
        for line_start in sorted({text.rfind("\n", 0, m.start()) + 1 for m in _COVERS.finditer(text, lo, hi)}):
            line_end = text.find("\n", line_start)
            line_end = hi if line_end < 0 or line_end > hi else line_end
            last = [Span(doc, m.start(), m.end()) for m in _COVERS.finditer(text, line_start, line_end)]
    return tuple(last)


def column_span(found: Found, column: int) -> tuple[str, Span | None]:
    """The span the ``column`` of the row's header falls under ("three months ended March 31") and where the page
    says it: the columns split evenly into as many groups as the table names spans (:func:`spans_above`)."""
    years = found.row.header.years if found.row.header else ()
    if not found.spans or len(years) % len(found.spans):
        return "", None
    line = found.spans[column // (len(years) // len(found.spans))]
    m = _COVERS.search(line.text)
    if m is None:
        return "", None
    return " ".join([m.group(1).lower(), m.group(2).lower(), "ended"] + ([m.group(3)] if m.group(3) else [])), line


def spans_period(found: Found, column: int, period: AskedPeriod) -> bool:
    """Whether the ``column`` covers the span ``period`` asks: a quarter's when it asks one, a whole year's
    ("twelve months ended", "52 weeks ended", or no span printed) when it does not."""
    span = column_span(found, column)[0]
    return not span or (span.split(" ", 1)[0] in _ANNUAL) != period.quarterly


def converted(row: Row, cell: str, unit: str, decimals: int | None, *, outflow: bool = False) -> str:
    """The figure in the unit the question asks for, or "" when it is the table's own (or has none)."""
    value = parse_figure(cell)
    if value is not None and outflow:
        value = abs(value)
    if not unit or not row.scale or unit == row.scale or value is None:
        return ""
    places = decimals if decimals is not None else (2 if SCALE[unit] > SCALE[row.scale] else 0)
    amount = value * SCALE[row.scale] / SCALE[unit]
    return f"{'-' if amount < 0 else ''}${grouped(abs(amount), places)} {UNIT_WORD[unit]}"


def statement_of(chunks: list[Document]) -> str:
    """The statement the page is; a title read as table cells ("CONSOLIDATED | BALANCE | SHEETS") counts too."""
    text = "\n".join(c.content or "" for c in chunks).replace("|", " ")
    return statement_kind(text[:400], text)


def _titled_primary(chunks: list[Document]) -> bool:
    """Whether a page's head titles it consolidated and does not discuss a statement ("Analysis of …")."""
    head = "\n".join(c.content or "" for c in chunks)[:400].replace("|", " ")
    return "consolidated" in head.lower() and not _DISCUSSED.search(head)


def primary_statement(chunks: list[Document]) -> str:
    """The statement a page is when it is a primary one (titled consolidated, not a discussion's copy), else ""."""
    return statement_of(chunks) if _titled_primary(chunks) else ""


def statement_title(chunks: list[Document], kind: str) -> Span | None:
    """The line of a statement page that titles it ("CONSOLIDATED STATEMENTS OF INCOME"), as a quotable span."""
    for doc in chunks:
        text = doc.content or ""
        for m in re.finditer(r"[^\n]+", text):
            line = m.group(0).replace("’", "'").lower()
            if len(line) <= 120 and any(t in line for t in TITLES[kind]):
                return Span(doc, m.start(), m.end())
    return None


PageReader = Callable[[str, int], list[Document]]


def page_reader(steps: Steps, scopes: list[str]) -> PageReader:
    """Reads a page's chunks (:meth:`Steps.page_chunks`) once for one question, however many line items look at
    it: a cash conversion cycle reads five items off the same statements."""
    read: dict[tuple[str, int], list[Document]] = {}

    def chunks(doc_id: str, page: int) -> list[Document]:
        if (doc_id, page) not in read:
            read[(doc_id, page)] = steps.page_chunks(scopes, doc_id, page)
        return read[(doc_id, page)]

    return chunks


def find_rows(steps: Steps, item: LineItem, pages: list[tuple[str, int]], scopes: list[str],
              read: PageReader | None = None) -> list[Found]:
    """The rows that are ``item`` on ``pages`` (document id and page, in retrieval order), each with its header;
    ``read`` a question's :func:`page_reader` (by default each page is read from the store)."""
    read = read or page_reader(steps, scopes)
    found: list[Found] = []
    for rank, (doc_id, page) in enumerate(pages):
        chunks = read(doc_id, page)
        rows = [r for r in read_page(chunks).rows if row_is(item, r.label, r.group)]
        if rows and all(r.header is None for r in rows) and page > 1:  # a statement continued from the page before
            before = read(doc_id, page - 1)
            rows = [r for r in read_page(before + chunks).rows
                    if row_is(item, r.label, r.group) and r.span.doc in chunks]
        lead = list({id(d): d for r in rows if r.header and (d := r.header.span.doc) not in chunks}.values())
        statement = statement_of(lead + chunks)  # a title at the foot of the page before counts
        found += [Found(r, rank, statement, _titled_primary(lead + chunks), spans_above(lead + chunks, r.header.span))
                  for r in rows if r.header is not None and r.cells]
    return found


def item_rows(steps: Steps, item: LineItem, pages: list[tuple[str, int]], scopes: list[str],
              mode: RetrievalMode, read: PageReader | None = None) -> list[Found]:
    """The rows that are ``item`` on ``pages``, and on the pages a search for the item's consolidated statement finds
    in the document retrieval ranked first (a busy filing's schedules and segment tables can crowd its primary
    statement out of the first pages)."""
    read = read or page_reader(steps, scopes)
    found = find_rows(steps, item, pages, scopes, read)
    if not pages:
        return found
    kinds = wanted_statements(item.name)
    query = f"consolidated {SEARCH_WORDS[kinds[0]] if kinds else 'statements'} {item.name}"
    hits, _ = steps.engine.search(query, scopes, mode=mode, filters=doc_filter(pages[0][0]))
    more = [p for p in candidate_pages(hits) if p not in pages]
    return found + [replace(f, rank=f.rank + len(pages)) for f in find_rows(steps, item, more, scopes, read)]


def candidate_pages(docs: list[Document]) -> list[tuple[str, int]]:
    """Distinct (document, page) of ``docs``, in their order, at most :data:`MAX_PAGES`. A passage that runs onto
    the next page (a statement's title and column header at the foot of the page before its rows) names both."""
    out: list[tuple[str, int]] = []
    for d in docs:
        m = d.meta or {}
        doc_id, start = str(m.get("doc_id", "")), int(m.get("page_start", 0) or 0)
        end = int(m.get("page_end", start) or start)
        for key in ((doc_id, start), (doc_id, end)):
            if doc_id and key not in out:
                out.append(key)
    return out[:MAX_PAGES]


def best(found: list[Found], period: AskedPeriod) -> Found | None:
    """The row to answer from: one whose header has the asked year (or any, when none is asked), the latest period's
    when none is asked, a column over the span asked (a year's, unless a quarter is asked: an earnings release
    prints the quarter's table first) before another, on a statement page before any other page
    (:func:`statement_order`), a row with a cell per column before one without, then in retrieval order."""
    if not found:
        return None

    order = statement_order(found)

    def key(f: Found) -> tuple[bool, int, bool, int, bool, int]:
        years = f.row.header.years if f.row.header else ()
        has_year = period.year is None or period.year in years
        latest = -max(years, default=0) if period.year is None else 0  # no year asked: the latest filing's
        col = column_for(years, period) if years and has_year else None
        return (not has_year, latest, col is not None and not spans_period(f, col, period), order(f),
                len(f.row.cells) != len(years), f.rank)

    return min(found, key=key)


def statement_order(found: list[Found]) -> Callable[[Found], int]:
    """How far down a row's page is in reading preference: a consolidated statement, then any statement, then any
    other page; within a document retrieval put forward first, statements in page order (a filing prints the
    registrant's statements before a subsidiary's or a parent-company schedule)."""
    doc_rank: dict[str, int] = {}
    for f in sorted(found, key=lambda f: f.rank):
        doc_rank.setdefault(_doc_of(f), len(doc_rank))

    def order(f: Found) -> int:
        tier = 0 if f.statement and f.consolidated else 1 if f.statement else 2
        page = int((f.row.span.doc.meta or {}).get("page_start", 0) or 0) if tier < 2 else f.rank
        return (tier * 1000 + doc_rank[_doc_of(f)]) * 100_000 + page

    return order


def page_of(f: Found) -> tuple[str, int]:
    """The document id and page a found row is on."""
    meta = f.row.span.doc.meta or {}
    return str(meta.get("doc_id", "")), int(meta.get("page_start", 0) or 0)


def _doc_of(f: Found) -> str:
    return page_of(f)[0]


def line_item_figure(steps: Steps, q: Question) -> Answer | None:
    """The figure of the line item ``q`` asks for, in the period it names; ``None`` when the question asks no line
    item, asks about its story, or no page retrieval puts forward has the item's row under a period header."""
    item = asked_item(q.text)
    if item is None or formula_for(q.text) is not None or _NARRATIVE.search(q.text):
        return None
    if item.name == "revenue" and SHARE_OF_REVENUE.search(q.text):
        return None  # "wages expense as a percent of net sales": a share of sales, of a line no statement names
    period = asked_period(q.text)
    r = steps.engine.retrieve(q.text, q.scopes, q.mode, q.k)
    chosen = best(item_rows(steps, item, candidate_pages(r.routed + r.hits), q.scopes, q.mode), period)
    if chosen is None or chosen.row.header is None:
        return None
    row, header = chosen.row, chosen.row.header
    names = column_names(header.span.text, header.years)
    draft = AnswerDraft()
    doc = row.span.doc
    meta = doc.meta or {}
    where = f"{meta.get('file_name', 'the PDF')}, p. {meta.get('page_start', '?')}"
    col = column_for(header.years, period)
    asked_span = _COVERS.search(q.text)  # "for the six months ended June 30, 2021": that group's column of the year
    if col is not None and asked_span is not None:
        col = next((i for i, y in enumerate(header.years) if y == header.years[col]
                    and column_span(chosen, i)[0].startswith(asked_span.group(1).lower())), col)
    span, span_line = column_span(chosen, col) if col is not None else ("", None)
    if span_line is None or chosen.statement == "balance":
        span = ""  # a balance sheet's date says the period already
    span_n = draft.cite(span_line.doc, span_line.text) if span and span_line is not None else ""
    unit_n = draft.cite(row.unit.doc, row.unit.text) if row.unit is not None else ""
    header_n = draft.cite(header.span.doc, header.span.text)
    row_n = draft.cite(doc, row.span.text)
    if col is None:  # the filing does not report the period asked
        have = ", ".join(str(y) for y in header.years)
        draft.lines.append(f"{where} has no {period.year} figure for {item.name}: its table reports {have} "
                           f"{header_n} {row_n}.")
        return steps.finish(draft, "figure", refused=True)
    if col >= len(row.cells):
        return None
    cell = row.cells[col]
    fiscal = f" (fiscal {header.years[col]})" if names[col] != str(header.years[col]) else ""
    outflow = item.name in OUTFLOWS
    per_share = re.search(r"per (?:common |ordinary )?share", row.group, re.I)  # "Earnings per common share,
    label = f"{row.group}, {row.label[:1].lower()}{row.label[1:]}" if per_share else row.label  # basic", not "Basic"
    line = (f"{label} {period_phrase(header, names[col], chosen.statement, span)}{fiscal}: "
            f"{figure_text(row, cell, outflow=outflow)} {row_n}")
    other = converted(row, cell, asked_unit(r.instructions), r.instructions.decimals, outflow=outflow)
    if other:
        line += f", that is {other} (converted from the quoted figure)"
    draft.lines.append(line + ".")
    unit_note = f" {unit_n}" if unit_n else ""
    span_note = f", the span its columns cover {span_n}" if span_n else ""
    draft.lines.append(f"From {where}: the row {row_n}, its column header {header_n}{span_note}"
                       f"{unit_note and ' and unit'}{unit_note}.")
    return steps.finish(draft, "figure")

