"""Where a company operates: "What are the geographies that American Express primarily operates in as of 2022?"
answered with the regions its geographic table reports, the table's header quoted (:func:`geographies`).

A filing names its regions where it reports by them: a "Geographic operations" or "Geographic areas" table whose
columns are the regions ("United States | EMEA | APAC | LACC"). The regions named are copied from the
quoted line; totals, eliminations and "other" columns are left out. No such table among the pages retrieval puts
forward leaves the question to the look-up.
"""

from __future__ import annotations

import re

from haystack import Document

from pipelines.models import Answer
from pipelines.questions.kinds import GEOGRAPHIES, Question
from pipelines.questions.steps import AnswerDraft, Steps, page_text

TITLE = re.compile(r"\bgeograph(?:y|ic|ical)\b", re.I)
# a column or row that is no region: the unit, a total, what is not allocated to one
_NOT_A_REGION = re.compile(r"(?i)^\(?(?:in |dollars |\$ )?(?:millions|thousands|billions)\)?$|total|consolidated|"
                           r"eliminations?|unallocated|corporate|other|^\s*$|\d")
MIN_REGIONS = 2


def _regions(cells: list[str]) -> list[str]:
    return [c.strip() for c in cells if re.search(r"[A-Za-z]{2}", c) and len(c.strip()) <= 40
            and not _NOT_A_REGION.search(c.strip())]


def _header_regions(doc: Document) -> tuple[str, list[str]] | None:
    """A table line of the chunk whose cells are regions and no figures ("(Millions) | United States | EMEA | …")."""
    for line in (doc.content or "").split("\n"):
        cells = [c for c in line.split("|")]
        if len(cells) < 3 or re.search(r"\d", line):  # a header line names, a row of figures counts
            continue
        regions = _regions(cells)
        if len(regions) >= MIN_REGIONS + 1:
            return line.strip(), regions
    return None


def geographies(steps: Steps, q: Question) -> Answer | None:
    """The regions the routed filing's geographic table reports, quoted; ``None`` when the question asks no such
    thing or no retrieved page has the table."""
    if not GEOGRAPHIES.search(q.text):
        return None
    first, more = steps.and_in_first(q.text, "geographic operations regions revenues by geographic area", q.scopes,
                                     q.mode, q.k)
    for doc in first + more[:10]:
        meta = doc.meta or {}
        page = steps.page_chunks(q.scopes, str(meta.get("doc_id", "")), int(meta.get("page_start", 0) or 0))
        if not any(TITLE.search((c.content or "")[:600]) for c in page):
            continue
        for chunk in page:
            found = _header_regions(chunk)
            if found is None:
                continue
            line, regions = found
            draft = AnswerDraft()
            marks = draft.cite(chunk, line)
            where = f"{(chunk.meta or {}).get('file_name', 'the PDF')} ({page_text(chunk)})"
            names = f"{', '.join(regions[:-1])} and {regions[-1]}"
            draft.lines.append(f"The geographic regions {where} reports by: {names} {marks}.")
            return steps.finish(draft, "geographies")
    return None
