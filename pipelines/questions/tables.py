"""Max / min over a table: "which year had the highest revenue", "which product line has the longest refund
window" answered from a parsed table's column, the row named by its label cell and quoted under its header
(:func:`table_extreme`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from haystack import Document

from pipelines.components._text import terms
from pipelines.components.structure_router import parse_refs
from pipelines.models import Answer, RetrievalMode
from pipelines.questions.kinds import LOW_WORDS, superlative
from pipelines.questions.steps import AnswerDraft, Steps, content_words, page_text

# a cell holding one measure: an optional sign or currency, a number, an optional scale or unit of a word or two
# ("30 days", "$1,200", "12%", "(4.8%)", "€3.2 million", "2 years")
_VALUE = re.compile(r"^\(?\s*([-−–]?)\s*(?:[$€£¥]|usd|eur|gbp)?\s*(\d[\d,]*(?:\.\d+)?)\s*(%|[a-z]+(?:\s+[a-z]+)?)?"
                    r"\s*\)?$", re.I)
# a unit's size in the column's own terms, so "6 months" and "2 years" compare as lengths of time
_SCALE = {"thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "mn": 1e6, "billion": 1e9, "bn": 1e9, "b": 1e9,
          "day": 1, "days": 1, "week": 7, "weeks": 7, "month": 30, "months": 30, "year": 365, "years": 365,
          "hour": 1 / 24, "hours": 1 / 24, "minute": 1 / 1440, "minutes": 1 / 1440}
# what a superlative measures when the question names no column ("which plan is cheapest?"): the words a
# header of that measure carries
_MEASURED_BY = {
    "time": ({"longest", "shortest", "earliest", "latest", "fastest", "slowest"},
             {"day", "week", "month", "year", "hour", "minute", "period", "window", "time", "duration", "term",
              "length", "date"}),
    "money": ({"cheapest", "costliest", "dearest"},
              {"price", "cost", "fee", "charge", "amount", "rate", "eur", "usd", "gbp"}),
}
_TOTAL = re.compile(r"(?i)(?:grand\s+)?totals?\b")
_PERIOD = re.compile(r"(?i)(?:fy\s?)?(?:19|20)\d{2}")
_VERBS = {"has", "had", "have", "is", "was", "are", "were", "does", "did", "do", "offers", "offer", "gives"}
_ADJECTIVES = {"longest", "shortest", "largest", "smallest", "biggest", "greatest", "cheapest", "earliest", "latest",
               "fastest", "slowest", "heaviest", "lightest", "widest", "narrowest", "highest", "lowest", "costliest",
               "dearest", "tallest", "deepest", "strongest", "weakest"}


@dataclass(frozen=True)
class ExtremeRow:
    """The row a max / min question asks for: its ``label`` (the row's key cell), the ``column`` header, the
    ``value`` cell, and the verbatim ``header`` and ``row`` lines of the table."""

    label: str
    column: str
    value: str
    header: str
    row: str


def table_extreme(steps: Steps, question: str, scopes: list[str], mode: RetrievalMode) -> Answer | None:
    """"Which year in table 2 had the highest revenue?": the row with the max / min of the column the
    question names, its label cell stated, the header and the row quoted."""
    m = superlative(question)
    if not m:
        return None
    said = m.group(1).lower()
    low = said in LOW_WORDS
    refs = parse_refs(question)
    tables: list[Document] = []
    named_tables = [lab for lab in refs.labels if lab.startswith("Table")]
    if named_tables:
        tables = steps.store.fetch(scopes=scopes, filters={"field": "meta.label", "operator": "in",
                                                           "value": named_tables}, limit=10)
    else:
        r = steps.engine.retrieve(question, scopes, mode, 12)  # routed as a look-up is: "for MGM" reads MGM's
        hits = r.routed + [h for h in r.hits if all(h.id != d.id for d in r.routed)]
        tables = [h for h in hits[:12]
                  if (h.meta or {}).get("element_type") == "table"]
        tables += [t for t in _tables_beside(steps, scopes, hits[:3]) if all(t.id != x.id for x in tables)]
    q_terms = set(content_words(question)) - {"highest", "lowest", "larg", "small", "bigg", "great", "most",
                                              "least", "fewest", "maximum", "minimum", "max", "min", "top"}
    for t in tables:
        found = extreme_row(t.content or "", q_terms, question, low=low)
        if found is None:
            continue
        draft = AnswerDraft()
        label = str((t.meta or {}).get("label", "") or "the table")
        where = f"{label} of {(t.meta or {}).get('file_name', 'the PDF')} ({page_text(t)})"
        word = said if said in _ADJECTIVES else "lowest" if low else "highest"
        marks = draft.cite(t, found.header) + draft.cite(t, found.row)
        column = f"value for {found.column}" if _PERIOD.fullmatch(found.column) else found.column
        draft.lines.append(f"{found.label}: the {word} {column} in {where} is {found.value} {marks}.")
        return steps.finish(draft, "table")
    return None


def _tables_beside(steps: Steps, scopes: list[str], hits: list[Document]) -> list[Document]:
    """The tables on the page of a best passage that is not one ("The following tables set forth the percentage
    of net sales by category": the table under it is what the question reads)."""
    out: list[Document] = []
    for h in hits:
        m = h.meta or {}
        if m.get("element_type") == "table" or not m.get("doc_id"):
            continue
        out += [c for c in steps.page_chunks(scopes, str(m["doc_id"]), int(m.get("page_start", 0) or 0))
                if (c.meta or {}).get("element_type") == "table"]
    return out


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.split("|")]


def cell_value(cell: str) -> float | None:
    """The number a cell holds, its unit or scale applied ("30 days" 30, "2 years" 730, "$1,200" 1200, "12%" 12,
    "(4.8%)" -4.8); ``None`` for a cell that is not one measure."""
    m = _VALUE.match(cell.strip())
    if not m:
        return None
    sign, digits, unit = m.groups()
    try:
        value = float(digits.replace(",", ""))
    except ValueError:
        return None
    scale = 1.0
    if unit and unit != "%":
        words = unit.lower().split()
        if len(words) > 1 and words[0] not in _SCALE:
            return None  # "14 working days", "30 days from delivery": a phrase, not one measure
        scale = _SCALE.get(words[0], 1.0)
    negative = bool(sign) or cell.strip().startswith("(") and cell.strip().endswith(")")
    return (-value if negative else value) * scale


def _measure_column(header: list[str], key_col: int, measure: set[str], said: set[str],
                    rows: list[list[str]]) -> int | None:
    """The column a question's measure names: the header sharing the most of its terms ("refund window" and
    "Refund window (days)"); with none, the one column whose header or cells are of the kind the superlative
    measures ("longest": a length of time)."""
    scored = [(len(measure & set(terms(h))), -i) for i, h in enumerate(header) if i != key_col]
    scored = [s for s in scored if s[0] > 0]
    if scored:
        return -max(scored)[1]
    periods = [i for i, h in enumerate(header) if i != key_col and _PERIOD.fullmatch(h.strip())]
    if periods and len(periods) == len(header) - 1:  # columns of years, none asked for: the latest, when its
        latest = max(periods, key=lambda i: header[i])  # cells are one measure (shares of a whole, not the
        kinds = {r[latest].strip().endswith("%") for r in rows}  # lines of a statement: sales, margins...)
        return latest if len(kinds) == 1 else None
    for adjectives, words in _MEASURED_BY.values():
        if not adjectives & said:
            continue
        fits = [i for i, h in enumerate(header) if i != key_col and (words & set(terms(h)) or all(
            words & set(terms(r[i])) for r in rows if r[i]))]
        if len(fits) == 1:
            return fits[0]
    return None


def extreme_row(content: str, q_terms: set[str], question: str, *, low: bool) -> ExtremeRow | None:
    """The max (``low``: min) row of the column whose header matches the question's measure best; its label is
    the column the question asks "which <X>" about ("which product line": the "Product line" column), else the
    first (a row's label cell)."""
    lines = [ln for ln in content.split("\n") if "|" in ln]
    if len(lines) < 3:
        return None
    header = _cells(lines[0])
    rows = [ln for ln in lines[1:] if len(_cells(ln)) == len(header)]
    if len(rows) < 2:
        return None
    which = re.search(r"\b(?:which|what|who)\s+(\w+)(?:\s+(\w+))?", question, re.I)
    which_words = [w for w in (which.groups() if which else ()) if w and w.lower() not in _VERBS]
    which_terms = set(terms(" ".join(which_words[:2])))
    key_col = next((i for i, h in enumerate(header) if which_terms & set(terms(h))), 0)
    measure = q_terms - set(terms(header[key_col])) - which_terms
    said = {w.lower() for w in re.findall(r"[a-z]+", question, re.I)}
    col = _measure_column(header, key_col, measure, said, [_cells(ln) for ln in rows])
    if col is None:
        return None
    # a total (its label "Total…" or none: the sum under a column of shares) is no row the question can mean
    rows = [ln for ln in rows if _cells(ln)[key_col] and not _TOTAL.match(_cells(ln)[key_col])]
    values = [(v, ln) for ln in rows if (v := cell_value(_cells(ln)[col])) is not None]
    if len(values) < 2:
        return None
    pick = min(values, key=lambda x: x[0]) if low else max(values, key=lambda x: x[0])
    tied = [ln for v, ln in values if v == pick[0]]
    if len(tied) > 1:
        return None  # a tie: quoting one row would mislead
    row = pick[1].strip()
    return ExtremeRow(label=_cells(row)[key_col], column=header[col], value=_cells(row)[col],
                      header=lines[0].strip(), row=row)
