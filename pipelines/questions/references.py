"""Questions about what a scope holds rather than what its PDFs say: a table, figure, section, page or appendix
that no PDF in scope has (:func:`not_found`: that fact and what does exist), and "what kind of document is this?"
(:func:`document_type`: the type word as the title page prints it, quoted)."""

from __future__ import annotations

import re

from connectors.store_api import DocInfo
from pipelines.components.structure_router import parse_refs
from pipelines.models import Answer
from pipelines.questions.kinds import APPENDIX, EXAMPLE, YEAR
from pipelines.questions.steps import AnswerDraft, Steps, doc_filter, page_text

NOT_FOUND_NO_LABELS = "The PDFs here have no numbered tables or figures."
# Document types as title pages print them; the longest first so "services agreement" beats "agreement".
DOC_TYPES = sorted(
    ["employee handbook", "handbook", "master services agreement", "services agreement", "agreement", "contract",
     "annual report", "report", "policy", "invoice", "user manual", "manual", "memorandum", "memo", "minutes",
     "proposal", "specification", "guide", "guidelines", "statement", "letter", "terms and conditions",
     "datasheet", "data sheet", "brochure", "presentation", "white paper", "thesis", "curriculum vitae",
     "resume", "form", "plan", "budget", "licence", "license", "lease", "certificate", "newsletter",
     "handbook", "code of conduct", "procedure", "regulation", "standard", "catalogue", "catalog"],
    key=len, reverse=True,
)


def absent_years(steps: Steps, question: str, scopes: list[str]) -> list[str]:
    """The years ``question`` names that no PDF in ``scopes`` prints (as "2024", "FY2024" or "FY24"); a year
    inside an example of the answer's format ("in a list like ['2006', '2007']") is not asked about."""
    asked = EXAMPLE.sub(" ", question)
    years = dict.fromkeys(m.group(1) for m in YEAR.finditer(asked))
    if not years:
        return []
    found = steps.store.bm25_matches_each([f"{y} FY{y} FY{y[2:]}" for y in years], scopes=scopes)
    return [y for y in years if not found[f"{y} FY{y} FY{y[2:]}"]]


def absent_period(steps: Steps, question: str, scopes: list[str]) -> Answer | None:
    """A question about a year no PDF in scope mentions ("…in 2024?" of a 2018 survey) is answered with that
    fact: a passage about another year would answer a question nobody asked."""
    years = absent_years(steps, question, scopes)
    if not years or not steps.documents(scopes):
        return None
    draft = AnswerDraft()
    draft.lines.append(f"The PDFs here never mention {' or '.join(years)}, so they can't answer for "
                       f"{'that year' if len(years) == 1 else 'those years'}.")
    return steps.finish(draft, "not_found", refused=True)


def not_found(steps: Steps, question: str, scopes: list[str]) -> Answer | None:
    """"What does Figure 1 show?" with no Figure 1 in scope: say so, and list what does exist."""
    refs = parse_refs(question)
    missing: list[str] = []
    exists = False
    for label in refs.labels:
        if steps.store.fetch(scopes=scopes, filters={"field": "meta.label", "operator": "==", "value": label},
                             limit=1):
            exists = True
        else:
            missing.append(label)
    for sid in refs.section_ids:
        if steps.store.fetch(scopes=scopes, filters={"field": "meta.section_id", "operator": "==", "value": sid},
                             limit=1):
            exists = True
        else:
            missing.append(f"section {sid}")
    docs = steps.documents(scopes)
    most_pages = max((d.pages for d in docs), default=0)
    if refs.pages:
        if refs.pages[0] <= most_pages:
            exists = True
        else:
            a, b = refs.pages
            missing.append(f"page {a}" if a == b else f"pages {a}–{b}")
    if refs.nth_page:
        exists = True
    for m in APPENDIX.finditer(question):
        name = f"{m.group(1).capitalize()} {m.group(2).upper()}"
        found = steps.store.bm25_search(name, scopes=scopes, top_k=5)
        if any(name.lower() in str((d.meta or {}).get("section", "")).lower() for d in found):
            exists = True
        else:
            missing.append(name)
    if not missing or exists or not docs:
        return None  # it exists (the look-up path fetches it), or partly: the look-up path answers that part
    draft = AnswerDraft()
    what = " or ".join(missing)
    draft.lines.append(f"There is no {what} in the PDFs here.")
    if any(x.startswith(("Table", "Figure")) for x in missing):
        draft.lines.append(_labels_line(steps, scopes))
    if any(x.startswith("section") for x in missing):
        draft.lines.append(_sections_line(steps, scopes, docs))
    if any(x.startswith("page") for x in missing):
        draft.lines.append("They have " + ", ".join(f"{d.file}: {d.pages} page{'s' if d.pages != 1 else ''}"
                                                    for d in docs[:10]) + ".")
    return steps.finish(draft, "not_found", refused=True)

def _labels_line(steps: Steps, scopes: list[str]) -> str:
    chunks = steps.store.fetch(scopes=scopes, filters={"field": "meta.element_type", "operator": "in",
                                                       "value": ["table", "caption", "text", "list"]}, limit=2000)
    by_file: dict[str, list[str]] = {}
    for d in chunks:
        m = d.meta or {}
        label = str(m.get("label", "") or "")
        if label:
            entry = f"{label} ({page_text(d)})"
            if entry not in by_file.setdefault(str(m.get("file_name", "")), []):
                by_file[str(m.get("file_name", ""))].append(entry)
    if not by_file:
        return NOT_FOUND_NO_LABELS
    return "They have: " + "; ".join(f"{f}: {', '.join(labels)}" for f, labels in sorted(by_file.items())) + "."

def _sections_line(steps: Steps, scopes: list[str], docs: list[DocInfo]) -> str:
    parts = []
    for d in docs[:10]:
        ids: list[str] = []
        for c in steps.store.fetch(scopes=scopes, filters=doc_filter(d.doc_id), limit=500):
            sid = str((c.meta or {}).get("section_id", "") or "")
            if sid and "." not in sid and sid not in ids:
                ids.append(sid)
        if ids:
            parts.append(f"{d.file}: sections {', '.join(ids)}")
    return ("They have " + "; ".join(parts) + ".") if parts else "The PDFs here have no numbered sections."

def document_type(steps: Steps, question: str, scopes: list[str]) -> Answer | None:
    docs = steps.documents(scopes)
    if not docs:
        return None
    named, _ = steps.named(question, scopes, docs)
    targets = (named or docs)[:10]
    draft = AnswerDraft()
    for d in targets:
        first = steps.store.fetch(scopes=scopes, filters=doc_filter(d.doc_id), limit=1)
        if not first:
            continue
        chunk = first[0]
        head_lines = [ln.strip() for ln in (chunk.content or "").split("\n") if ln.strip()][:3]
        title = next((ln for ln in head_lines if len(ln) >= 8), "")
        if not title:
            continue
        kind = next((t for t in DOC_TYPES if re.search(rf"\b{re.escape(t)}\b", " ".join(head_lines), re.I)), "")
        quote = "\n".join(head_lines[:2]) if len("\n".join(head_lines[:2])) <= 200 else title
        if kind:
            article = "an" if kind[0] in "aeiou" else "a"
            draft.lines.append(f"{d.file} is {article} {kind}; its first page reads {draft.cite(chunk, quote)}")
        else:
            draft.lines.append(f"{d.file} does not say what kind of document it is on its first page, which "
                               f"reads {draft.cite(chunk, quote)}")
    if not draft.citations:
        return None
    return steps.finish(draft, "document_type")
