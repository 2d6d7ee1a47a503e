"""A metric no statement prints, computed from quoted rows: growth, margins, ratios, averages, days payable,
working capital, EBITDA (:func:`computed_metric`).

The answer line shows the formula with every operand and the result, rounded and in the unit the question asks
for, and says it was computed from the quotes; each operand's row is quoted with its column header and unit line.
The metric's definition is :data:`pipelines.components.statements.FORMULAS`' (a question naming a line item with
"year-over-year", "growth" or "N-year average" computes that over the item itself). Nothing is computed from a
figure that is not quoted: an operand no retrieved page prints leaves the question to the look-up. Before the
answer is given, :func:`pipelines.figures.arithmetic.recompute` reads every operand again from its *validated*
quote and recomputes the result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING

from connectors.log import get_logger
from pipelines.components.instructions import Instructions
from pipelines.components.statements import SEARCH_WORDS, asked_item, formula_for, line_item, row_is, wanted_statements
from pipelines.figures.arithmetic import FormulaError, Operand, evaluate, instantiate, readable
from pipelines.figures.numbers import grouped, parse_figure, rounded
from pipelines.figures.periods import AskedPeriod, asked_period
from pipelines.figures.tables import SCALE, UNIT_WORD, Row, Span, read_page
from pipelines.models import Answer, Computation, ComputedOperand
from pipelines.questions.figures import (
    OUTFLOWS,
    Found,
    asked_unit,
    candidate_pages,
    column_span,
    find_rows,
    item_rows,
    page_of,
    page_reader,
    primary_statement,
    spans_period,
    statement_order,
    statement_title,
)
from pipelines.questions.kinds import AVERAGE, DRIVERS, GROWTH, SHARE_OF_REVENUE, Question
from pipelines.questions.steps import AnswerDraft, Steps, doc_filter, page_text

if TYPE_CHECKING:
    from pipelines.query import Retrieval

log = get_logger(__name__)

# expenses an income statement prints as deductions, in parentheses, that a formula reads as amounts; a row that
# nets a benefit ("Benefit (provision) for income taxes") keeps its sign
EXPENSES = frozenset({"income tax expense", "interest expense"})
# "if gross margin is not a useful metric for a company like this, then state that and explain why"
NOT_USEFUL = re.compile(r"\bif\b[^.?]{0,80}\bnot (?:a |an )?(?:useful|relevant|meaningful|applicable)\b", re.I)
MIN_STATEMENT_ROWS = 8  # a page with fewer rows is a fragment of a statement, not one whose lines can be told
_CHANGE = re.compile(r"\b(?:chang(?:e|ed|es)|increase[ds]?|decrease[ds]?|differ(?:ence)?)\b", re.I)

# asks whether a metric moves, not only its value: "an improving operating margin profile", "is it declining"
_TREND = re.compile(r"\b(?:improv(?:e|es|ed|ing|ement)|declin(?:e|es|ed|ing)|deteriorat\w*|trend\w*|profile)\b",
                    re.I)
_RANGE = re.compile(r"(?:fy\s*)?((?:19|20)\d\d)\s*(?:-|–|to|through|and)\s*(?:the\s+)?(?:fy\s*)?((?:19|20)\d\d)",
                    re.I)
_COUNT = {"two": 2, "three": 3, "four": 4, "five": 5}


def _years(question: str, period: AskedPeriod, latest: int, *, metric: bool,
           percent: bool = False) -> tuple[list[int], str]:
    """The years the metric is computed for and how they combine: ``single`` (one year), ``average`` (the mean over
    a range), ``growth`` (the change from the first year to the last, in percent), ``change`` (a rate's change
    between two years, in percentage points: "how much has the effective tax rate changed between FY2021 and
    FY2022"; "is the operating margin improving" compares the year asked with the one before). For a ``metric``
    (a formula), only "N-year average" averages over years: "average PP&E between FY2018 and FY2019" is its own
    definition."""
    span = _RANGE.search(question)
    multi = AVERAGE.search(question)
    if multi and (not metric or multi.group(1)):
        if span:
            a, b = sorted((int(span.group(1)), int(span.group(2))))
            return list(range(a, b + 1)), "average"
        word = ((m.group(1) or "") if (m := AVERAGE.search(question)) else "").lower()
        n = _COUNT.get(word, int(word) if word.isdigit() else 3)
        end = period.year or latest
        return list(range(end - n + 1, end + 1)), "average"
    if metric and percent and span and _CHANGE.search(question):
        a, b = sorted((int(span.group(1)), int(span.group(2))))
        return [a, b], "change"
    if metric and not span and _TREND.search(question):  # "does it have an improving operating margin profile as
        end = period.year or latest  # of FY2022": the year asked beside the year before
        return [end - 1, end], "change" if percent else "growth"
    if GROWTH.search(question):
        if span:
            a, b = sorted((int(span.group(1)), int(span.group(2))))
            return [a, b], "growth"
        end = period.year or latest
        return [end - 1, end], "growth"
    return [period.year or latest], "single"


def _cell(found: list[Found], year: int, period: AskedPeriod) -> tuple[Found, int] | None:
    """The row (as found) and column of ``year`` among ``found``: a column over the span ``period`` asks first
    (:func:`spans_period`), then in :func:`statement_order`."""
    order = statement_order(found)

    def fits(f: Found) -> bool:
        years = f.row.header.years if f.row.header else ()
        return year in years and spans_period(f, years.index(year), period)

    ranked = sorted(found, key=lambda f: (not fits(f), order(f)))
    for f in ranked:
        years = f.row.header.years if f.row.header else ()
        if year in years:
            col = years.index(year)
            if col < len(f.row.cells) and parse_figure(f.row.cells[col]) is not None:
                return f, col
    return None


@dataclass(frozen=True)
class _Plan:
    """What to compute: the arithmetic over line items (``template``), the metric's ``name`` and its definition as
    a reader reads it (``formula``); ``percent``: shown in percent; ``metric``: a defined metric, not a line item's
    own growth or average; ``printed``: ``template`` is the rate as the filing prints it, already in percent."""

    template: str
    name: str
    formula: str
    percent: bool
    metric: bool
    printed: bool = False


def _plan(question: str) -> _Plan | None:
    """The computation ``question`` asks for, or None."""
    formula = formula_for(question)
    item = asked_item(question)
    if formula is not None:
        return _Plan(formula.expr.replace(" * 100", ""), formula.name, formula.formula, formula.percent, metric=True)
    if item is not None and item.name != "revenue" and SHARE_OF_REVENUE.search(question):
        return _Plan("{" + item.name + "} / {revenue}", f"{item.name} as a share of revenue",
                     f"{item.name} ÷ revenue", percent=True, metric=False)
    if item is not None and (GROWTH.search(question) or AVERAGE.search(question)):
        name = f"{item.name} growth" if GROWTH.search(question) else item.name
        return _Plan("{" + item.name + "}", name, item.name, percent=False, metric=False)
    return None


def computed_metric(steps: Steps, q: Question) -> Answer | None:
    """A metric computed from quoted rows; ``None`` when the question asks none, or a figure it needs is not
    printed on the pages retrieval puts forward (the look-up answers instead). A metric the filing prints as a row
    of its own (:attr:`Formula.printed`, the effective tax rate) is read from that row where every year asked has
    it, and computed from its definition where not."""
    plan = _plan(q.text)
    if plan is None:
        return None
    if DRIVERS.search(re.split(r"[?.]\s", q.text, maxsplit=1)[0]):  # "what drove the change in gross margin":
        # the story, not the figure (an "if it is not useful, explain why" after it still computes); a filing that
        # prints no line of the metric has no story of it to tell
        if not (plan.metric and NOT_USEFUL.search(q.text)):
            return None
        return _not_printed(steps, q, plan, steps.engine.retrieve(q.text, q.scopes, q.mode, q.k))
    r = steps.engine.retrieve(q.text, q.scopes, q.mode, q.k)  # once, for every reading below
    formula = formula_for(q.text)
    if formula is not None and formula.printed:
        as_printed = _computed(steps, q, replace(plan, template="{" + formula.printed + "}",
                                                 formula=f"the {formula.printed} as printed", printed=True), r)
        if as_printed is not None:
            return as_printed
    answer = _computed(steps, q, plan, r)
    if answer is None and plan.metric and NOT_USEFUL.search(q.text):
        return _not_printed(steps, q, plan, r)
    return answer


def _not_printed(steps: Steps, q: Question, plan: _Plan, r: Retrieval) -> Answer | None:
    """"If gross margin is not a useful metric for a company like this, say so": the filing's own statement that
    would print a line the metric needs (a card issuer's income statement has no cost of goods sold), quoted by its
    title and column header, and the line it lacks named; ``None`` when the statement prints every line or is not
    found. ``r``: the question's retrieval."""
    first = r.routed + r.hits
    doc_id = str((first[0].meta or {}).get("doc_id", "")) if first else ""
    if not doc_id:
        return None
    read = page_reader(steps, q.scopes)
    for line in dict.fromkeys(re.findall(r"\{([^{}]+)\}", plan.template)):
        item = line_item(line)
        kind = next(iter(wanted_statements(line)), "")
        if not kind:
            continue
        hits, _ = steps.engine.search(f"consolidated {SEARCH_WORDS[kind]}", q.scopes, mode=q.mode,
                                      filters=doc_filter(doc_id))
        for d, page in candidate_pages(hits):
            chunks = read(d, page) + read(d, page + 1)  # a statement runs onto the next page
            title = statement_title(read(d, page), kind)
            if primary_statement(read(d, page)) != kind or title is None or "comprehensive" in title.text.lower():
                continue  # comprehensive income is a statement of its own, after the income statement
            rows = read_page(chunks).rows
            if len(rows) < MIN_STATEMENT_ROWS or any(row_is(item, row.label, row.group) for row in rows):
                break  # a statement that prints the line (the metric was not computed for another reason)
            header = next((row.header for row in rows if row.header is not None), None)
            if header is None:
                break
            draft = AnswerDraft()
            marks = draft.cite(title.doc, title.text) + draft.cite(header.span.doc, header.span.text)
            meta = title.doc.meta or {}
            draft.lines.append(f"{meta.get('file_name', 'The PDF')}'s {title.text.strip()} ({page_text(title.doc)}) "
                               f"prints no {line} line {marks}: {plan.name} is not computed from its statements, and "
                               f"is not a measure this filing reports.")
            return steps.finish(draft, "computed")
    return None


def _computed(steps: Steps, q: Question, plan: _Plan, r: Retrieval) -> Answer | None:
    """The answer computing ``plan`` from rows on the pages retrieval (``r``) puts forward, or None where an operand
    is not printed there."""
    template, name, percent, text_formula = plan.template, plan.name, plan.percent, plan.formula
    period = asked_period(q.text)
    pages = candidate_pages(r.routed + r.hits)
    if not pages:
        return None
    found = _one_filing(_rows_by_line(steps, q, template, pages))

    def rows_of(name_: str) -> list[Found]:
        return found.get(name_, [])

    first = rows_of(_first_line(template))
    headers = [f.row.header.years for f in first if f.row.header]
    latest = max((max(y) for y in headers), default=0)
    if not latest:
        return None
    years, how = _years(q.text, period, latest, metric=plan.metric, percent=percent)
    operands: list[Operand] = []
    per_year = [instantiate(template, y, operands) for y in years]
    draft = AnswerDraft()
    cited: dict[tuple[str, int], int] = {}
    bound: list[ComputedOperand] = []
    shown: dict[str, str] = {}
    cells: list[tuple[Operand, Row, int]] = []
    spans: dict[int, tuple[str, Span | None]] = {}  # the span each year's column covers, from the first operand's
    for o in operands:
        at = _cell(rows_of(o.item), o.year, period)
        if at is None or plan.printed and not _a_rate(at[0].row.cells[at[1]]):
            log.info("computed_operand_missing", item=o.item, year=o.year)
            return None
        cells.append((o, at[0].row, at[1]))
        spans.setdefault(o.year, column_span(*at))
    if all(line is not None for _, line in spans.values()):  # a quarter's figures: say which span, and quote it
        for _, line in spans.values():
            if line is not None and (line.doc.id, line.start) not in cited:
                cited[(line.doc.id, line.start)] = 0
                draft.cite(line.doc, line.text)
    scales = [row.scale for _, row, _ in cells if row.scale]
    scale = max(set(scales), key=scales.count) if scales else ""  # a table that states no unit: its neighbours'
    mixed = len(set(scales)) > 1
    for o, row, col in cells:
        header = row.header
        if header is not None and (header.span.doc.id, header.span.start) not in cited:
            cited[(header.span.doc.id, header.span.start)] = 0
            draft.cite(header.span.doc, header.span.text)
        if row.unit is not None and not plan.printed and (row.unit.doc.id, row.unit.start) not in cited:
            cited[(row.unit.doc.id, row.unit.start)] = 0
            draft.cite(row.unit.doc, row.unit.text)
        key = (row.span.doc.id, row.span.start)
        if key not in cited:
            cited[key] = int(draft.cite(row.span.doc, row.span.text).strip("[]"))
        cell = row.cells[col]
        outflow = o.item in OUTFLOWS or (o.item in EXPENSES and not re.search(r"benefit", row.label, re.I))
        bound.append(ComputedOperand(name=o.name, n=cited[key], cell=cell, outflow=outflow,
                                     scale="" if plan.printed else row.scale or scale))
        shown[o.name] = (cell.strip("()") if outflow else cell) + (f" {UNIT_WORD[row.scale]}" if mixed and row.scale
                                                                   else "")
    expression, factor, unit_text, decimals = _combine(per_year, how, percent, q.text, r.instructions, scale,
                                                       rate=plan.printed)
    values = {b.name: (abs(v) if b.outflow else v) * SCALE.get(b.scale, Decimal(1))
              for b in bound if (v := parse_figure(b.cell)) is not None}
    try:
        result = rounded(evaluate(expression, values) * factor, decimals)
    except FormulaError:
        return None
    names = {o.name: f"{o.item} {o.year}" for o in operands}
    where = _where(draft)
    ns = "".join(f"[{b.n}]" for b in {b.n: b for b in bound}.values())
    period_text = _period_text(years, how, [spans[y][0] if spans[y][1] is not None else "" for y in years])
    figure = f"{grouped(result, decimals)}{unit_text}"
    shown_expression = readable(expression, shown)
    if how == "change":  # a reader wants both rates beside their difference
        shown_expression = f"({shown_expression})"
        each = [grouped(rounded(evaluate(e, values) * factor, decimals), decimals) for e in per_year]
        figure += f" (from {each[0]}% in fiscal {years[0]} to {each[-1]}% in fiscal {years[-1]})"
    draft.lines.append(f"{name[:1].upper() + name[1:]} {period_text} = {_described(how, text_formula)} = "
                       f"{shown_expression}{_factor_text(factor)} = {figure} "
                       f"(computed from the quoted rows {ns}).")
    draft.lines.append("Operands: " + "; ".join(f"{names[b.name]}: {b.cell} [{b.n}]" for b in bound) + f". {where}")
    computation = Computation(expression=expression, operands=bound, factor=str(factor), decimals=decimals,
                              result=str(result))
    return steps.finish(draft, "computed", computation=computation)


def _rows_by_line(steps: Steps, q: Question, template: str, pages: list[tuple[str, int]]) -> dict[str, list[Found]]:
    """The rows of each line item ``template`` names, on ``pages``, and on the statement pages where the other lines
    were found (cost of sales on the income statement that printed net sales, when retrieval put forward the
    balance sheet, or another year's filing)."""
    lines = list(dict.fromkeys(re.findall(r"\{([^{}]+)\}", template)))
    read = page_reader(steps, q.scopes)
    found = {line: item_rows(steps, line_item(line), pages, q.scopes, q.mode, read) for line in lines}
    statement_pages = list(dict.fromkeys(page_of(f) for rows in found.values() for f in rows if f.statement))
    more = [p for p in statement_pages if p not in pages]
    for line, rows in found.items():
        seen = {page_of(f) for f in rows}
        extra = find_rows(steps, line_item(line), [p for p in more if p not in seen], q.scopes, read) if more else []
        found[line] = rows + [replace(f, rank=f.rank + len(pages)) for f in extra]
    return found


def _a_rate(cell: str) -> bool:
    """Whether a cell reads as a rate in percent ("21.6 %", "23%"), not an amount."""
    value = parse_figure(cell)
    return value is not None and abs(value) < 100


def _one_filing(found: dict[str, list[Found]]) -> dict[str, list[Found]]:
    """Each line's rows from one document, where one prints every line: the one retrieval ranked first among them.
    In a channel holding a company's 10-K and its quarterly release, a year's turnover reads the 10-K's cost of
    sales and inventories, not one from each (the release's quarter beside the 10-K's year)."""
    everywhere = set.intersection(*({page_of(f)[0] for f in rows} for rows in found.values())) if found else set()
    if not everywhere:
        return found
    best = min(everywhere, key=lambda d: min(f.rank for rows in found.values() for f in rows if page_of(f)[0] == d))
    return {line: [f for f in rows if page_of(f)[0] == best] for line, rows in found.items()}


def _first_line(template: str) -> str:
    m = re.search(r"\{([^{}]+)\}", template)
    return m.group(1) if m else ""


def _combine(per_year: list[str], how: str, percent: bool, question: str, said: Instructions,
             scale: str, *, rate: bool = False) -> tuple[str, Decimal, str, int]:
    """The expression over every year, the factor it is multiplied by, the unit shown, and the decimals. The
    operands are in dollars (each times its table's unit), so a figure is shown back in the unit asked, else in
    its tables' ``scale``; a ratio's units cancel. A ``rate`` as printed is in percent already."""
    asked = said.decimals
    hundred = Decimal(1) if rate else Decimal(100)
    if how == "growth":
        a, b = per_year[0], per_year[-1]
        return f"(({b} - {a}) / {a})", Decimal(100), "%", 1 if asked is None else asked
    if how == "change":
        return f"({per_year[-1]} - {per_year[0]})", hundred, " percentage points", 1 if asked is None else asked
    expression = per_year[0] if how == "single" else f"mean({', '.join(per_year)})"
    if percent:
        return expression, hundred, "%", 1 if asked is None else asked
    unit = asked_unit(said)
    if scale and not re.search(r"\bratio|turnover|days|\bdpo\b|\bdio\b|\bdso\b|\bccc\b|cycle|return on", question,
                                re.I):
        target = unit or scale
        places = (2 if unit and unit != scale else 0) if asked is None else asked
        return expression, Decimal(1) / SCALE[target], f" {UNIT_WORD[target]}", places
    return expression, Decimal(1), "", 2 if asked is None else asked


def _factor_text(factor: Decimal) -> str:
    return " × 100" if factor == 100 else ""


def _described(how: str, formula: str) -> str:
    if how == "average":
        return f"the mean over the years of ({formula})"
    if how == "growth":
        return f"(later − earlier) ÷ earlier, of {formula}"
    if how == "change":
        return f"later − earlier, of {formula}"
    return formula


def _period_text(years: list[int], how: str, spans: list[str]) -> str:
    """How the answer names its years: "for fiscal 2022", or, where the columns are a quarter's or a half-year's
    (``spans``, one per year, "" where the page names none), "for the three months ended March 31, 2021"."""
    named = [f"the {s}, {y}" if s[-1:].isdigit() else f"the {s} in {y}" for s, y in zip(spans, years, strict=True)] \
        if spans and all(spans) else [f"fiscal {y}" for y in years]
    if how == "average":
        return f"over fiscal {years[0]}–{years[-1]} ({len(years)}-year average)"
    if how in ("growth", "change"):
        return f"from {named[0]} to {named[-1]}"
    return f"for {named[0]}"


def _where(draft: AnswerDraft) -> str:
    files = sorted({str((d.meta or {}).get("file_name", "")) for d in draft.docs.values()} - {""})
    pages = sorted({int((d.meta or {}).get("page_start", 0) or 0) for d in draft.docs.values()})
    return f"From {', '.join(files)}, p. {', '.join(str(p) for p in pages)}; each row with its column header" \
           " and unit line."

