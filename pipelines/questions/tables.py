"""Max / min over a table: "which year had the highest revenue" answered from a parsed table's column, its row
quoted (:func:`table_extreme`)."""

from __future__ import annotations

import re

from haystack import Document

from pipelines.components._text import terms
from pipelines.components.structure_router import parse_refs
from pipelines.models import Answer, RetrievalMode
from pipelines.questions.kinds import EXTREME, LOW_WORDS
from pipelines.questions.steps import AnswerDraft, Steps, content_words, page_text

_NUMBER = re.compile(r"^[^\d\-]*(-?\d[\d,]*(?:\.\d+)?)\s*%?\s*[a-zA-Z]*$")


def table_extreme(steps: Steps, question: str, scopes: list[str], mode: RetrievalMode) -> Answer | None:
    """"Which year in table 2 had the highest revenue?": the row with the max / min of the column the
    question names, quoted, its key cell stated."""
    m = EXTREME.search(question)
    if not m:
        return None
    low = m.group(1).lower() in LOW_WORDS
    refs = parse_refs(question)
    tables: list[Document] = []
    named_tables = [lab for lab in refs.labels if lab.startswith("Table")]
    if named_tables:
        tables = steps.store.fetch(scopes=scopes, filters={"field": "meta.label", "operator": "in",
                                                           "value": named_tables}, limit=10)
    else:
        hits, _ = steps.engine.search(question, scopes, mode=mode)
        tables = [h for h in hits[:8]
                  if (h.meta or {}).get("element_type") == "table"]
    q_terms = set(content_words(question)) - {"highest", "lowest", "larg", "small", "bigg", "great", "most",
                                              "least", "fewest", "maximum", "minimum", "max", "min", "top"}
    for t in tables:
        found = _extreme_row(t.content or "", q_terms, question, low=low)
        if found is None:
            continue
        key, column, value, row = found
        draft = AnswerDraft()
        label = str((t.meta or {}).get("label", "") or "the table")
        where = f"{label} of {(t.meta or {}).get('file_name', 'the PDF')} ({page_text(t)})"
        word = "lowest" if low else "highest"
        draft.lines.append(f"{key}: the {word} {column} in {where} is {value} {draft.cite(t, row)}.")
        return steps.finish(draft, "table")
    return None


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.split("|")]


def _number(cell: str) -> float | None:
    m = _NUMBER.match(cell.strip())
    if not m:
        return None
    try:
        return float(m.group(1).replace(",", ""))
    except ValueError:
        return None


def _extreme_row(content: str, q_terms: set[str], question: str, *, low: bool) -> tuple[str, str, str, str] | None:
    """(key cell, column header, value, row line) of the max (``low``: min) row of the column whose header
    shares the most terms with the question; the key is the column the question asks "which <X>" about,
    else the first."""
    lines = [ln for ln in content.split("\n") if "|" in ln]
    if len(lines) < 3:
        return None
    header = _cells(lines[0])
    rows = [ln for ln in lines[1:] if len(_cells(ln)) == len(header)]
    if len(rows) < 2:
        return None
    which = re.search(r"\b(?:which|what|who)\s+(\w+)", question, re.I)
    which_terms = set(terms(which.group(1))) if which else set()
    key_col = next((i for i, h in enumerate(header) if which_terms & set(terms(h))), 0)
    measure = q_terms - set(terms(header[key_col])) - which_terms
    scored = [(len(measure & set(terms(h))), -i) for i, h in enumerate(header) if i != key_col]
    scored = [s for s in scored if s[0] > 0]
    if not scored:
        return None
    col = -max(scored)[1]
    values = [(v, ln) for ln in rows if (v := _number(_cells(ln)[col])) is not None]
    if len(values) < 2:
        return None
    pick = min(values, key=lambda x: x[0]) if low else max(values, key=lambda x: x[0])
    tied = [ln for v, ln in values if v == pick[0]]
    if len(tied) > 1:
        return None  # a tie: quoting one row would mislead
    row = pick[1].strip()
    return _cells(row)[key_col], header[col], _cells(row)[col], row
