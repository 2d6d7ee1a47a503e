"""Questions about whole documents: "summarise <a document>" (:func:`summary`: the opening sentence of each
top-level section of its content, pages shown; front matter, references, acknowledgements, appendices and
checklists left out) and "compare X in A and B" (:func:`compare`: retrieval within each document separately, one
cited block per document, and a document that says nothing named as such) or "compare X and Y" within the PDFs
(:func:`compare_topics`: each topic retrieved on its own, one cited block per topic). With an LLM the model writes
either from the same passages (:meth:`pipelines.questions.steps.Steps.written`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from haystack import Document

from connectors.store_api import DocInfo
from pipelines.components._text import STOPWORDS, sentence_spans
from pipelines.components.citation_validator import chunk_id_of
from pipelines.components.extractive_answerer import is_heading_line, skip_heading_lines
from pipelines.models import Answer, RetrievalMode
from pipelines.questions.kinds import ALL_DOCS, COMPARE, SUMMARY, THIS_DOC
from pipelines.questions.steps import AnswerDraft, Steps, content_words, doc_filter, leaf, page_text, top

MAX_COMPARED = 6  # documents compared side by side; more than that is not a comparison anyone reads
MAX_SUMMARY_SECTIONS = 15
MAX_SUMMARY_QUOTE = 300
# what a question may call a whole document, beyond its file name
_DOC_NOUNS = re.compile(
    r"(?i)\b(?:the|this|that|these|our|my|whole|entire|full|main|key|points?|it|(?:\w+[-\s])?(?:agreement|contract|"
    r"handbook|report|manual|policy|pdf|document|doc|file|paper|article|study|filing|release|deck|slides?|"
    r"presentation|memo|letter|brochure|guide|statement|proposal|form|10-?k|10-?q|8-?k|transcript|publication))s?\b")
# a real section title: it starts as titles do and is no sentence ("Activities) Regulations 2014." is the tail of
# one that a layout split into a heading)
_TITLE = re.compile(r"^[A-Z0-9ÀÁÂÄÅÉÈÖÜ§].*(?<![.,;])$")
_ABSTRACT = re.compile(r"(?i)^(?:abstract|summary|executive summary)$")  # not "Summary of findings", a section
_BACK_MATTER = re.compile(r"(?i)^(?:[A-Z]\.?\s+|\d+\.?\s+)?(?:references|bibliography|works cited|"
                          r"acknowledge?ments?|appendix|appendices|annex|.*\bchecklist)\b")
_FRONT_LINE = re.compile(r"@|©|\(c\) \d{4}|\bproceedings of\b|\barxiv\b|\bdoi:|https?://", re.I)
_AUTHORS = re.compile(r"\b[A-Z][a-z]+\d(?:,\d)*\b.*\b[A-Z][a-z]+\d")  # "Pan1,2 ... Kan4": names numbered


def _first_sentence(doc: Document, max_chars: int = MAX_SUMMARY_QUOTE) -> str:
    """The first sentence of ``doc`` that is not a heading, cut at a word boundary to ``max_chars`` (a prefix
    of the chunk's own text, so still verbatim)."""
    content = doc.content or ""
    lines = (doc.meta or {}).get("element_type") in ("table", "list")
    for s0, e in sentence_spans(content, lines=lines):
        s = skip_heading_lines(content, s0, e, doc)
        text = content[s:e].strip()
        if "\n" in text:  # a title block run into the first sentence: the sentence is its last line
            text = text.rsplit("\n", 1)[1].strip()
        if len(text.split()) < 4 or is_heading_line(text, doc) or not _reads_as_prose(text):
            continue
        if len(text) > max_chars:
            text = text[:max_chars].rsplit(" ", 1)[0]
        return text
    return ""


def _reads_as_prose(text: str) -> bool:
    """A sentence a summary may open a section with: not a fragment cut mid-sentence ("marily of simple
    claims"), not a question (a checklist's "Did you describe the limitations?"), not a title-page line (authors
    with affiliation numbers, e-mail addresses, a copyright or proceedings line)."""
    if not text[:1].isupper() and not text[:1].isdigit() or text.rstrip().endswith("?") or _FRONT_LINE.search(text):
        return False
    words = re.findall(r"[A-Za-z][\w\-]*", text)
    return sum(w[0].islower() for w in words) >= max(2, len(words) // 4)  # a line of names is all capitals


def _outline(chunks: list[Document]) -> dict[str, list[Document]]:
    """The document's top-level sections in reading order, each with its chunks, less what is not its content:
    untitled text, the title block and author lines before an abstract, and the back matter (references,
    acknowledgements, appendices, checklists) with everything after it."""
    groups: dict[str, list[Document]] = {}
    for c in sorted(chunks, key=lambda c: int((c.meta or {}).get("chunk_index", 0) or 0)):
        if (c.meta or {}).get("element_type") == "table":
            continue
        groups.setdefault(top(str((c.meta or {}).get("section", "") or "")), []).append(c)
    titles = list(groups)
    opening = next((i for i, t in enumerate(titles) if _ABSTRACT.match(t)), 0)
    end = len(titles)
    n_before = 0
    for i, t in enumerate(titles):
        if _BACK_MATTER.search(t) and n_before >= len(chunks) // 3:
            end = i  # what follows a paper's references is its appendix
            break
        n_before += len(groups[t])
    return {t: groups[t] for t in titles[opening:end] if _TITLE.match(t) and not _BACK_MATTER.search(t)
            and not _FRONT_LINE.search(t) and not _AUTHORS.search(t)}


def _called(steps: Steps, scopes: list[str], docs: list[DocInfo], rest: str) -> list[DocInfo]:
    """The documents whose first page prints what the question calls its document ("the inspection report"; "the
    paper": "Long Papers", or an abstract), when it calls it more than "the document"."""
    nouns = [w for w in re.findall(r"[a-z]+", rest.lower())
             if w not in STOPWORDS | {"whole", "entire", "full", "main", "key", "point", "points", "it"}
             or w == "paper"]
    nouns = [w for w in nouns if w not in ("document", "doc", "pdf", "file")]
    if not nouns:
        return []
    # a paper need not call itself one: its first page opens an abstract (an "article" is also a contract's part)
    pats = [re.compile(r"\b(?:papers?|abstract)\b" if w == "paper" else rf"\b{re.escape(w)}", re.I) for w in nouns]
    out = []
    for d in docs:
        first = steps.store.fetch(scopes=scopes, filters={"operator": "AND", "conditions": [
            doc_filter(d.doc_id), {"field": "meta.page_start", "operator": "==", "value": 1}]}, limit=50)
        text = " ".join(c.content or "" for c in first)
        if all(p.search(text) for p in pats):
            out.append(d)
    return out


def summary(steps: Steps, question: str, scopes: list[str]) -> Answer | None:
    """A whole document summarised: the opening sentence of each top-level section of its content."""
    docs = steps.documents(scopes)
    named, phrases = steps.named(question, scopes, docs)
    rest = SUMMARY.sub(" ", question)
    for p in phrases:
        rest = re.sub(rf"(?i)\b{re.escape(p)}\b", " ", rest)
    rest = THIS_DOC.sub(" ", rest)
    # what the question calls the document ("the paper", "this filing", "the earnings release") names no part
    # of it; a word left that is not such a name asks for a part ("summarise the code of conduct"), which the
    # look-up path finds by its heading
    if content_words(_DOC_NOUNS.sub(" ", rest)):
        return None
    if not named and len(docs) == 1:
        named = docs
    elif not named and 1 < len(docs) <= MAX_COMPARED:
        named = _called(steps, scopes, docs, rest)
    if len(named) != 1:
        return None
    d = named[0]
    chunks = steps.store.fetch(scopes=scopes, filters=doc_filter(d.doc_id), limit=2000)
    groups = _outline(chunks)
    draft = AnswerDraft()
    shown = 0
    for section, members in groups.items():
        if shown >= MAX_SUMMARY_SECTIONS:
            break
        for c in members:
            quote = _first_sentence(c)
            if quote:
                title = section or "(untitled)"
                draft.lines.append(f"• {title} ({page_text(c)}) {draft.cite(c, quote)}")
                shown += 1
                break
    if not draft.citations:
        return None
    more = len(groups) - shown
    head = f"A summary of {d.file} ({d.pages} pages): the opening sentence of each section."
    draft.lines.insert(0, head)
    if more > 0:
        draft.lines.append(f"…and {more} more section{'s' if more != 1 else ''} not shown.")
    instruction = (f"{question}\nSummarise {d.file} section by section from these passages (the opening of "
                   "each section), one sentence a section, every sentence cited.")
    return steps.written(instruction, draft, list(draft.docs.values()), "summary")


def compare(steps: Steps, question: str, scopes: list[str], mode: RetrievalMode, k: int) -> Answer | None:
    """Two or more documents compared on a topic, one block per document; or, when the question names no two
    documents, two topics compared wherever the PDFs state them (:func:`compare_topics`)."""
    docs = steps.documents(scopes)
    if len(docs) < 2:
        return compare_topics(steps, question, scopes, mode, k, docs[0] if docs else None)
    named, phrases = steps.named(question, scopes, docs)
    if len(named) < 2:
        if not ALL_DOCS.search(question) and not re.search(r"\b(?:pdfs|documents|files)\b", question, re.I):
            return compare_topics(steps, question, scopes, mode, k, named[0] if named else None)
        if len(docs) > MAX_COMPARED:
            return None
        named = docs
    named = named[:MAX_COMPARED]
    topic = COMPARE.sub(" ", ALL_DOCS.sub(" ", question))
    for p in phrases:
        topic = re.sub(rf"(?i)\b(?:the\s+)?{re.escape(p)}\b", " ", topic)
    topic = re.sub(r"(?i)\b(?:the\s+)?(?:two\s+)?(?:pdfs|documents|files|docs)\b", " ", topic)
    topic = re.sub(r"(?i)\b(?:how|what|do|does|on|about|in|and|between|with|regarding|say|said|says)\b", " ",
                   topic)
    topic = " ".join(topic.replace("?", " ").split()).strip(" ,.")
    if not content_words(topic):
        return None
    draft = AnswerDraft()
    draft.lines.append(f"What each PDF says about {topic}:")
    silent: list[str] = []
    said: list[str] = []
    context: list[Document] = []
    for d in named:
        hits, ext, conf = steps.search(topic, scopes, mode, k, doc_filter(d.doc_id))
        by_id = {chunk_id_of(h): h for h in hits}
        cits = [c for c in ext.citations if c["chunk_id"] in by_id]
        if conf < steps.threshold or not cits:
            silent.append(d.file)
            said.append(f"• {d.file}: says nothing about {topic} that I could find.")
            draft.lines.append(said[-1])
            continue
        marks = "".join(draft.cite(by_id[c["chunk_id"]], c["quote"]) for c in cits[:3])
        draft.lines.append(f"• {d.file} {marks}")
        context += hits[:3]
    if len(silent) == len(named):
        return None  # neither says anything: the look-up path's refusal names the closest passages
    told = (f" {', '.join(silent)} say{'s' if len(silent) == 1 else ''} nothing about it; a line after your "
            "answer says so." if silent else "")
    writes = [d.file for d in named if d.file not in silent]
    instruction = (f"{question}\nCompare what each document says, one short paragraph per document "
                   f"({', '.join(writes)}), each naming its document.{told}")
    return steps.written(instruction, draft, context, "compare", said=said)  # the model may not say it


def topics_compared(question: str) -> list[str]:
    """The things "compare X and Y", "how does X differ from Y", "X vs Y" set side by side (two or three), each
    with a content word; ``[]`` when the question sets no two things side by side."""
    rest = COMPARE.sub(" ", re.sub(r"(?i)\s+(?:vs\.?|versus)\s+", " and ", question))
    rest = re.sub(r"(?i)^\s*(?:please\s+)?(?:how|what|in what way)\s+(?:does|do|did|is|are|was|were)?\s*(?:the\s+)?",
                  " ", rest)
    rest = re.sub(r"(?i)\b(?:what is|what are|what's|between|the\s+(?=\s*$))\b", " ", rest)
    parts = [p.strip(" ?.,;:") for p in re.split(r"(?i)\s*(?:,\s*and\b|\band\b|,|\bfrom\b|\bwith\b|\bto\b|"
                                                  r"\bagainst\b)\s*", rest)]
    parts = [re.sub(r"(?i)^(?:the|a|an|our|their)\s+", "", p) for p in parts if p]
    parts = [p for p in parts if content_words(p)]
    return parts if 2 <= len(parts) <= 3 else []


def _names(topic: str, others: list[str]) -> Callable[[str], bool]:
    """Whether a sentence names ``topic`` by the words that tell it from the ``others`` ("sick" of "sick leave"
    beside "bereavement leave")."""
    shared = {w for o in others for w in re.findall(r"[a-z]+", o.lower())}
    words = [w for w in re.findall(r"[a-z]+", topic.lower()) if w not in STOPWORDS and w not in shared]
    pats = [re.compile(rf"\b{re.escape(w[:-1] if w.endswith('s') and len(w) > 3 else w)}", re.I) for w in words]
    return lambda sentence: bool(pats) and all(p.search(sentence) for p in pats)


def _own_sentences(topic: str, topics: list[str], hits: list[Document], cited: Sequence[Mapping[str, Any]],
                   quoted: set[str]) -> Sequence[Mapping[str, Any]]:
    """Up to two quotes about ``topic`` alone: the extractive draft's, less any naming another topic too ("this
    section describes annual, parental, sick and bereavement leave" says nothing of one's own); else the first
    sentences of the passages that name it and no other; else the draft's as they are."""
    others = [t for t in topics if t != topic]
    mine = _names(topic, others)
    theirs = [_names(o, [t for t in topics if t != o]) for o in others]
    alone = [c for c in cited if c["quote"] not in quoted and not any(o(c["quote"]) for o in theirs)]
    if alone:
        return alone[:2]
    found: list[dict[str, Any]] = []
    for h in hits:
        content = h.content or ""
        headed = mine(leaf(str((h.meta or {}).get("section", "") or "")))  # under its own heading ("4.3 Sick leave")
        for a, b in sentence_spans(content):
            text = content[skip_heading_lines(content, a, b, h):b].strip()
            if (len(found) < 2 and len(text.split()) >= 4 and text not in quoted and (headed or mine(text))
                    and not any(o(text) for o in theirs)):
                found.append({"chunk_id": chunk_id_of(h), "quote": text})
    return found or [c for c in cited if c["quote"] not in quoted][:2]


def compare_topics(steps: Steps, question: str, scopes: list[str], mode: RetrievalMode, k: int,
                   doc: DocInfo | None) -> Answer | None:
    """"Compare annual leave and parental leave": each topic retrieved on its own (within ``doc`` when the
    question names one), one cited block per topic, and a topic the PDFs say nothing about named as such. One
    search for both would quote whichever topic its best passages happen to be about."""
    topics = topics_compared(question)
    if not topics:
        return None
    where = f" in {doc.file}" if doc is not None else ""
    filters = doc_filter(doc.doc_id) if doc is not None else None
    draft = AnswerDraft()
    draft.lines.append(f"What the PDFs say about {' and '.join(topics)}{where}:")
    said: list[str] = []
    context: list[Document] = []
    quoted: set[str] = set()
    for topic in topics:
        hits, ext, conf = steps.search(topic, scopes, mode, k, filters)
        by_id = {chunk_id_of(h): h for h in hits}
        cits = _own_sentences(topic, topics, hits, [c for c in ext.citations if c["chunk_id"] in by_id], quoted)
        if conf < steps.threshold or not cits:
            said.append(f"• {topic}: the PDFs say nothing about it that I could find.")
            draft.lines.append(said[-1])
            continue
        quoted.update(c["quote"] for c in cits)
        marks = "".join(draft.cite(by_id[c["chunk_id"]], c["quote"]) for c in cits)
        draft.lines.append(f"• {topic} {marks}")
        context += hits[:3]
    if len(said) == len(topics):
        return None  # none stated: the look-up path's refusal names the closest passages
    instruction = (f"{question}\nCompare {' and '.join(topics)}: one short paragraph per topic, each saying what the "
                   "passages state about it.")
    return steps.written(instruction, draft, context, "compare", said=said)
