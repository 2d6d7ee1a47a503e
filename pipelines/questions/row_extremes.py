"""Max / min over a statement's rows: "Which region had the highest EBITDAR in FY2022?", "What was the largest
liability on the balance sheet in 2022?", "Among operations, investing and financing activities, which brought in
the most cash?" (:func:`row_extreme`).

A filing's tables put periods in columns and the things compared in rows, often without a ruled header (the figures
reader, :func:`pipelines.figures.tables.read_page`, reads them). The table is the one whose title, section heading
or rows name the question's measure; the column is the period asked (a year's, unless a quarter is asked), the
latest when none is; the rows are the options the question lists, or else the rows of the section its measure names
("Liabilities"), totals left out. The answer names the row and quotes it with its column header, the line saying
what its columns cover and the table's title; where the question listed options, each option's row is quoted
beside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from haystack import Document

from pipelines.components._text import terms
from pipelines.figures.numbers import parse_figure
from pipelines.figures.periods import AskedPeriod, asked_period
from pipelines.figures.tables import Header, Row, Span, read_page
from pipelines.models import Answer, RetrievalMode
from pipelines.questions.figures import (
    Found,
    candidate_pages,
    column_names,
    column_span,
    figure_text,
    page_reader,
    period_phrase,
    spans_above,
    spans_period,
    statement_of,
    text_above,
)
from pipelines.questions.kinds import LOW_WORDS, superlative
from pipelines.questions.steps import AnswerDraft, Steps, content_words, page_text

_TITLE_ABOVE = 320  # how far above a table's column header its title is looked for
# no peer of the rows around it: a total, a roll-forward's balance
_NOT_A_PEER = re.compile(r"(?i)^(?:grand\s+)?totals?\b|^net (?:increase|decrease|change)\b|\bbalance,? "
                         r"(?:at )?(?:beginning|end)\b")
_YEAR = re.compile(r"(?:19|20)\d\d")
# a label that swallowed a figure: the table's columns were misread, so no row of it can be ranked
_MISREAD = re.compile(r"\$\s*\d|\d\.\d|\d,\d{3}")
# "among operations, investing, and financing activities, which …": the options the question compares
_AMONG = re.compile(r"\bamong\s+(?:the\s+)?(.+?)\s*,?\s+(?:which|what|who)\b", re.I)
# a row label that is a statement's line, not one of peers (regions, segments, products) a measure ranks
_STATEMENT_LINE = re.compile(r"(?i)\b(?:income|revenues?|sales|expenses?|costs?|loss(?:es)?|gains?|profit|tax(?:es)?|"
                             r"shares?|cash|provision|interest|earnings|depreciation|amortization|dividends?|"
                             r"assets?|liabilit(?:y|ies)|equity|debt)\b")
# a superlative of a change ("the biggest drop year over year"): no column holds it
_CHANGE = re.compile(r"(?i)\b(?:drops?|declines?|decreases?|increases?|growth|grew|rises?|fell|falls?|changes?|"
                     r"improve(?:d|ment)?|performance|year[- ]over[- ]year|yoy)\b")
# what "which <noun>" asks about when it is a column, not a row: a period
_PERIOD_NOUNS = {"year", "quarter", "period", "month", "fiscal"}


@dataclass(frozen=True)
class _Pick:
    """The row picked, the rows it was picked from (the listed options), its column, and the title it was found by."""

    found: Found
    column: int
    rows: tuple[Row, ...]
    title: Span | None
    score: int


def options(question: str) -> list[str]:
    """The options "among A, B, and C, which …" lists, or [] when it lists none."""
    m = _AMONG.search(question)
    if not m:
        return []
    parts = [p.strip(" ,") for p in re.split(r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+", m.group(1))]
    parts = [p for p in parts if content_words(p)]
    return parts if len(parts) >= 2 else []


def _measure(question: str, which_noun: str) -> set[str]:
    """The terms naming what is compared: the question's content words less the superlative, the options, the
    period and what "which" asks for."""
    text = _AMONG.sub(" which ", question)
    text = re.sub(r"\([^)]*\)", " ", text)  # "(or lost the least)"
    drop = set(terms(which_noun)) | {"highest", "lowest", "largest", "smallest", "most", "least", "biggest",
                                     "greatest", "worst", "best", "top", "bottom", "maximum", "minimum", "fy",
                                     "fiscal", "year", "quarter"}
    drop |= {stem for stem in terms(" ".join(sorted(LOW_WORDS)))}
    return {t for t in content_words(text) if t not in drop and not re.fullmatch(r"(?:fy)?\d+|q\d", t)}


_NO_NOUN = {"", "is", "was", "are", "were", "has", "had", "have", "does", "did", "do"}


def _which_noun(question: str) -> str:
    m = re.search(r"\b(?:which|what)\s+(?:of\s+\S+\s+)?(\w+)", question, re.I)
    return m.group(1).lower() if m else ""


def _title(chunks: list[Document], header: Header, measure: set[str]) -> tuple[Span | None, int]:
    """The line of the table's caption above ``header`` naming most of ``measure`` ("ADJUSTED PROPERTY EBITDAR"), and
    how many of its terms it names. The caption is read upwards from the header to the row of figures that ends the
    table before, so another table's title never names this one."""
    lines: list[tuple[Document, int, str]] = []
    for d, lo, hi in text_above(chunks, header.span, _TITLE_ABOVE):
        text = d.content or ""
        lines += [(d, lo + m.start(), m.group(0)) for m in re.finditer(r"[^\n]+", text[lo:hi])]
    best: tuple[Span | None, int] = (None, 0)
    for d, start, raw in reversed(lines):
        line = raw.strip(" |")
        if "|" in line or len(re.findall(r"\d[\d,.]*", line)) > 1:
            break  # a row of figures: the table before ends here
        overlap = len(measure & set(terms(line)))
        if overlap > best[1] and len(line) <= 200:
            at = start + (len(raw) - len(raw.lstrip(" |")))
            best = (Span(d, at, at + len(line)), overlap)
    return best


def _column(found: Found, period: AskedPeriod) -> int | None:
    """The column of the year asked (the latest when none is), over a year's span unless a quarter is asked."""
    years = found.row.header.years if found.row.header else ()
    if not years:
        return None
    year = period.year or max(years)
    cols = [i for i, y in enumerate(years) if y == year]
    fitting = [i for i in cols if spans_period(found, i, period)]
    return next(iter(fitting or cols), None)


def _group_rows(rows: list[Row], measure: set[str]) -> list[Row]:
    """The rows under the group line the measure names whole ("Operating profit:" in a segment table that prints
    "Net sales:" first; a one-word group, "Income:", is too loose to tell), up to its total: what follows a total
    reconciles it (corporate items), and a row labelled as the measure itself is its total too. [] when no group
    names it."""
    out: list[Row] = []
    for row in rows:
        named = set(terms(row.group))
        if len(named) < 2 or not named <= measure:  # the question names the group whole ("operating profit")
            if out:
                break
            continue
        if _NOT_A_PEER.search(row.label) or set(terms(row.label)) <= measure | {"total"}:
            if out:
                break
            continue
        out.append(row)
    return out


def _option_rows(rows: list[Row], wanted: list[str], measure: set[str]) -> list[Row] | None:
    """One row per option (its words all in the row's label; among several, the one naming most of the measure,
    then the last: a section's total comes after its lines), or None when an option has none."""
    out: list[Row] = []
    for option in wanted:
        words = set(terms(option))
        named = [r for r in rows if words and words <= set(terms(r.label)) and r not in out]
        if not named:
            return None
        out.append(max(enumerate(named), key=lambda x: (len(measure & set(terms(x[1].label))), x[0]))[1])
    return out


def row_extreme(steps: Steps, question: str, scopes: list[str], mode: RetrievalMode) -> Answer | None:
    """The row with the max / min figure in the period asked, among the listed options or the rows of the table the
    question's measure names; ``None`` when the question asks which period (a column), ranks a change (the biggest
    drop: no column holds it), or no page retrieval puts forward has such a table."""
    m = superlative(question)
    which_noun = _which_noun(question)
    if not m or which_noun in _PERIOD_NOUNS or _CHANGE.search(question):
        return None
    low = m.group(1).lower() in LOW_WORDS
    wanted = options(question)
    measure = _measure(question, which_noun)
    if not measure and not wanted:
        return None
    # the thing ranked, when a section of the table is named by it: "the largest liability" (rows under
    # "Liabilities"); not when "which segment" asks for another kind of row than the section holds
    ranked = set(terms(" ".join(question[m.end():].split()[:1]))) if which_noun in _NO_NOUN else set()
    period = asked_period(question)
    r = steps.engine.retrieve(question, scopes, mode, 12)
    read = page_reader(steps, scopes)
    picks: list[tuple[int, int, _Pick]] = []
    for rank, (doc_id, page) in enumerate(candidate_pages(r.routed + r.hits)):
        chunks = read(doc_id, page)
        statement = statement_of(chunks)
        meta = (chunks[0].meta or {}) if chunks else {}
        own = set(terms(f"{meta.get('doc_issuer', '')} {meta.get('file_name', '')}"))  # "MGM": whose, not what
        about = measure - own
        rows_read = read_page(chunks).rows
        if rows_read and all(r.header is None for r in rows_read) and page > 1:  # a table continued from the page
            chunks = read(doc_id, page - 1) + [c for c in chunks if c.id not in {b.id for b in read(doc_id, page - 1)}]
            rows_read = read_page(chunks).rows  # before: its header and title are there
        tables: dict[tuple[str, int], list[Row]] = {}
        for row in rows_read:
            table = tables.setdefault((row.header.span.doc.id, row.header.span.start), []) if row.header else []
            if row.cells and row.label and all((o.label, o.cells) != (row.label, row.cells) for o in table):
                table.append(row)  # a row once, though overlapping chunks both hold it
        for rows in (t for t in tables.values() if t):
            header = rows[0].header
            assert header is not None
            title, score = _title(chunks, header, about)
            if wanted:
                chosen = _option_rows(rows, wanted, about)
                if chosen is None:
                    continue
            else:
                sections = [r for r in rows if ranked & set(terms(r.section))]
                grouped = [] if sections or which_noun in _NO_NOUN else _group_rows(rows, about)
                if not sections and not grouped and (which_noun in _NO_NOUN or score * 2 < max(len(about), 1)):
                    continue  # "the largest expense" ranks a section's rows; a title naming under half of the
                    # measure is another table's
                chosen = [r for r in (sections or grouped or rows) if not _NOT_A_PEER.search(r.label)]
                if any(_MISREAD.search(r.label) for r in chosen):
                    continue
                if not sections and not grouped and any(_STATEMENT_LINE.search(r.label) for r in chosen):
                    continue  # a statement's lines (net revenue, net income), not peers ranked against each other
                score += 1 if sections or grouped else 0
            found = Found(chosen[0], rank, statement, False, spans_above(chunks, header.span))
            col = _column(found, period)
            if col is None or len(chosen) < 2:
                continue
            if any(col < len(row.cells) and _YEAR.fullmatch(row.cells[col].strip()) for row in chosen):
                continue  # a header line read as a row ("Percentage Change Fiscal | 2022 | 2021")
            values = [(v, row) for row in chosen if col < len(row.cells) and (v := parse_figure(row.cells[col]))
                      is not None]
            if len(values) < len(chosen) if wanted else len(values) < 2:
                continue
            value, row = min(values, key=lambda x: x[0]) if low else max(values, key=lambda x: x[0])
            if sum(1 for v, _ in values if v == value) > 1:
                continue  # a tie: naming one row would mislead
            pick = _Pick(Found(row, rank, statement, False, found.spans), col, tuple(chosen) if wanted else (),
                         title, score)
            picks.append((-score, rank, pick))
    if not picks:
        return None
    return _answer(steps, min(picks, key=lambda p: p[:2])[2], m.group(1).lower(), low)


def _answer(steps: Steps, pick: _Pick, said: str, low: bool) -> Answer | None:
    row = pick.found.row
    header = row.header
    assert header is not None
    draft = AnswerDraft()
    meta = row.span.doc.meta or {}
    names = column_names(header.span.text, header.years)
    span, span_line = column_span(pick.found, pick.column)
    if pick.found.statement == "balance" or span_line is None:
        span = ""
    title_n = draft.cite(pick.title.doc, pick.title.text) if pick.title is not None else ""
    span_n = draft.cite(span_line.doc, span_line.text) if span and span_line is not None else ""
    header_n = draft.cite(header.span.doc, header.span.text)
    unit_n = draft.cite(row.unit.doc, row.unit.text) if row.unit is not None else ""
    row_n = draft.cite(row.span.doc, row.span.text)
    word = said if said not in ("most", "least", "top", "bottom", "max", "min", "maximum", "minimum") else \
        "lowest" if low else "highest"
    when = period_phrase(header, names[pick.column], pick.found.statement, span)
    line = (f"{row.label}: the {word} {when} in {meta.get('file_name', 'the PDF')} ({page_text(row.span.doc)}),"
            f" {figure_text(row, row.cells[pick.column])} {row_n}")
    others = [o for o in pick.rows if o is not row]
    if others:
        line += ", against " + "; ".join(
            f"{o.label} {figure_text(o, o.cells[pick.column])} {draft.cite(o.span.doc, o.span.text)}" for o in others)
    draft.lines.append(line + ".")
    notes = [f"its table's title {title_n}" if title_n else "", f"the span its columns cover {span_n}" if span_n
             else "", f"column header {header_n}", f"unit {unit_n}" if unit_n else ""]
    draft.lines.append("Quoted with " + ", ".join(n for n in notes if n) + ".")
    return steps.finish(draft, "table")
