"""Questions about whole documents: "summarise <a document>" (:func:`summary`: the opening sentence of each
top-level section, pages shown) and "compare X in A and B" (:func:`compare`: retrieval within each document
separately, one cited block per document, and a document that says nothing named as such). With an LLM the model
writes either from the same passages (:meth:`pipelines.questions.steps.Steps.written`)."""

from __future__ import annotations

import re

from haystack import Document

from pipelines.components._text import sentence_spans
from pipelines.components.citation_validator import chunk_id_of
from pipelines.components.extractive_answerer import is_heading_line, skip_heading_lines
from pipelines.models import Answer, RetrievalMode
from pipelines.questions.kinds import ALL_DOCS, COMPARE, SUMMARY, THIS_DOC
from pipelines.questions.steps import AnswerDraft, Steps, content_words, doc_filter, page_text, top

MAX_COMPARED = 6  # documents compared side by side; more than that is not a comparison anyone reads
MAX_SUMMARY_SECTIONS = 15
MAX_SUMMARY_QUOTE = 300


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
        if len(text.split()) < 4 or is_heading_line(text, doc):
            continue
        if len(text) > max_chars:
            text = text[:max_chars].rsplit(" ", 1)[0]
        return text
    return ""


def summary(steps: Steps, question: str, scopes: list[str]) -> Answer | None:
    """A whole document summarised: the opening sentence of each top-level section."""
    docs = steps.documents(scopes)
    named, phrases = steps.named(question, scopes, docs)
    rest = SUMMARY.sub(" ", question)
    for p in phrases:
        rest = re.sub(rf"(?i)\b{re.escape(p)}\b", " ", rest)
    rest = THIS_DOC.sub(" ", rest)
    if content_words(re.sub(r"(?i)\b(agreement|contract|handbook|report|manual|policy|pdf|document)s?\b",
                            " ", rest)):
        return None  # "summarise the code of conduct": a part, which the look-up path finds by its heading
    if not named and len(docs) == 1 and (THIS_DOC.search(question) or not rest.strip(" ?.")):
        named = docs
    if len(named) != 1:
        return None
    d = named[0]
    chunks = steps.store.fetch(scopes=scopes, filters=doc_filter(d.doc_id), limit=2000)
    groups: dict[str, list[Document]] = {}
    for c in chunks:
        if (c.meta or {}).get("element_type") == "table":
            continue
        groups.setdefault(top(str((c.meta or {}).get("section", "") or "")), []).append(c)
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
    docs = steps.documents(scopes)
    if len(docs) < 2:
        return None
    named, phrases = steps.named(question, scopes, docs)
    if len(named) < 2:
        if not ALL_DOCS.search(question) and not re.search(r"\b(?:pdfs|documents|files)\b", question, re.I):
            return None
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
