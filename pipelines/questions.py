"""Question types beyond a look-up (issue 24): compare, summarise, "is there a Figure 1?", "which limit?",
max / min over a table, "what kind of document is this?", and multi-part questions with a part the PDFs
don't cover.

:class:`QuestionTypes` is asked first by :meth:`pipelines.service.CitebotService.answer`; each handler either
answers (an :class:`Answer` with its ``kind``) or returns ``None`` and the ordinary look-up path
(:meth:`pipelines.query.QueryEngine.answer`) answers as before. Without an LLM every answer here is extractive:
the text around the quotes is fixed wording, file names, section titles, table labels and cells, never invented
prose. With one, the model writes comparisons, summaries and each part of a multi-part question (the answer
policy's generation: quotes validated, one stricter retry, unsupported sentences dropped); the fixed lines that
say a document or a part has nothing stay. Either way every quote goes through :class:`CitationValidator`
against the chunk it cites before anyone sees it. A question that looks like a follow-up of earlier turns is
left to the look-up path, which rewrites it from the thread (only references and "what kind of document" are
answered here whatever came before).

The handlers, in the order they are tried (:func:`classify` decides which apply):

* ``not_found``: the question names a table, figure, section, page or appendix that no PDF in scope has:
  that fact, and the labels that do exist; never unrelated passages;
* ``document_type``: "what kind of document is this": the type word as the title page prints it, quoted;
* ``summary``: "summarise <a document>": the opening sentence of each top-level section, pages shown
  (a page range or a section is summarised by the look-up path already);
* ``compare``: "compare X in A and B", "do both PDFs ...": retrieval within each document separately, one
  cited block per document, and a document that says nothing named as such;
* ``table``: "which year had the highest revenue": the max / min of a parsed table column, its row quoted;
* ``clarify``: a short "what is the <thing>?" whose best passages (those the look-up answer would read) state
  it in different sections: ask back, the readings numbered, each quoted, each a follow-up question in
  ``choices`` (the chat adapters draw them as buttons);
* ``partial`` / ``multi_part``: "what is X and what is Y?": each part answered on a line of its own, and a
  part the PDFs don't cover named as such.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from haystack import Document

from connectors.log import get_logger
from connectors.store_api import DocInfo
from pipelines.answer_policy import Draft, Validated
from pipelines.components._text import GENERIC, STOPWORDS, sentence_spans, terms
from pipelines.components.citation_validator import CitationValidator, chunk_id_of
from pipelines.components.extractive_answerer import _is_heading_line, _skip_heading_lines
from pipelines.components.llm_answerer import _MARKER
from pipelines.components.query_rewriter import looks_like_follow_up
from pipelines.components.question_analyzer import word_forms
from pipelines.components.refusal import confidence
from pipelines.components.structure_router import parse_refs
from pipelines.models import Answer, AnswerKind, RetrievalMode, RetrievedChunk, Turn

if TYPE_CHECKING:
    from pipelines.query import QueryEngine

log = get_logger("citebot.questions")

AnswerMode = Literal["extractive", "llm"]

MAX_COMPARED = 6  # documents compared side by side; more than that is not a comparison anyone reads
MAX_SUMMARY_SECTIONS = 15
MAX_SUMMARY_QUOTE = 300
MAX_CHOICES = 4  # readings offered by a "which one?" (a Slack actions block holds 25 buttons, a Teams card 6)
MAX_PARTS = 4

CHOICE_ARROW = "→ ask"
CHOICE_QUOTE_WORDS = 7  # a reading's follow-up question names it by its opening words
CHOICE_HINT = "Reply with the number (in this thread), or ask again naming the one you mean."
_CHOICE_REPLY = re.compile(r"\s*(?:#|no\.?\s*|number\s*|option\s*)?(\d)\s*[.)]?\s*", re.I)
NOTE_PARTIAL = "Part of your question isn't covered by the PDFs here."
NOT_FOUND_NO_LABELS = "The PDFs here have no numbered tables or figures."

_COMPARE = re.compile(r"\b(compare|comparison|comparing|differ|differs|difference|differences|versus|vs\.?|"
                      r"contrast|both|each (?:document|pdf|file))\b", re.I)
_ALL_DOCS = re.compile(r"\b(?:both|the (?:two|\d+) (?:pdfs|documents|files)|all (?:the )?(?:pdfs|documents|files)|"
                       r"each (?:document|pdf|file))\b", re.I)
_SUMMARY = re.compile(r"^\s*(?:please\s+)?(?:summari[sz]e|give (?:me )?(?:an? )?(?:short |brief )?(?:summary|"
                      r"overview) of|(?:an? )?(?:short |brief )?(?:summary|overview) of|what(?:'s| is) in|"
                      r"tl;?dr(?: of)?)\b", re.I)
_THIS_DOC = re.compile(r"\b(?:this|the|that) (?:document|pdf|file|doc)\b", re.I)
_DOC_TYPE = re.compile(
    r"\b(?:what|which)\s+(?:kind|type|sort)\s+of\s+(?:a\s+)?(?:document|pdf|file|doc)\b"
    r"|\bwhat\s+(?:is|are)\s+(?:this|these|the)\s+(?:document|pdf|file|doc)s?(?:\s+about)?\s*\??$"
    r"|\bwhat\s+(?:documents|pdfs|files)\s+(?:are|do you have)\b",
    re.I,
)
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
_EXTREME = re.compile(r"\b(highest|lowest|largest|smallest|biggest|greatest|most|least|fewest|maximum|minimum|"
                      r"max|min|top|bottom|peak|best|worst)\b", re.I)
_LOW_WORDS = {"lowest", "smallest", "least", "fewest", "minimum", "min", "bottom", "worst"}
_SHORT_DEFINITE = re.compile(
    r"^\s*(?:what|which|how \w+)\s+(?:is|are|was|were|'s)\s+(?:the|our|my)\s+"
    r"([a-z][\w\-]*(?:\s[a-z][\w\-]*)?)\s*\??\s*$",
    re.I,
)
_APPENDIX = re.compile(r"\b(appendix|annex|schedule|exhibit|attachment)\s+([A-Z]|\d{1,3}|[IVX]{1,5})\b", re.I)
# "what is X and what is Y", "X? And Y?": parts that each ask their own question
# What a short question's thing may be called where the PDFs state one ("the limit": "up to 20 hours").
SYNONYMS: dict[str, tuple[str, ...]] = {
    "limit": ("up to", "maximum", "at most", "no more than", "cap", "capped"),
    "cap": ("up to", "maximum", "at most", "limit", "limited"),
    "maximum": ("up to", "at most", "no more than", "limit"),
    "deadline": ("within", "no later than", "at least"),
    "fee": ("fees", "charge", "price"),
    "rate": ("per hour", "per mile", "per day", "per night"),
    "period": ("days", "weeks", "months"),
    "budget": ("allowance",),
    "allowance": ("budget",),
}
_PART_SPLIT = re.compile(r"\s*(?:\?\s*|[;,]?\s+)(?:and|also|plus)\s+(?=(?:what|how|when|where|who|which|why|is|are|"
                         r"does|do|can|may)\b)|\?\s+(?=\S)", re.I)
_NUMBER = re.compile(r"^[^\d\-]*(-?\d[\d,]*(?:\.\d+)?)\s*%?\s*[a-zA-Z]*$")
# a sentence after the first is a part of its own only when it asks ("Who approves overtime?"); one that
# instructs ("Base your judgments on the balance sheet.", "If it is not a useful metric, say why.") is the
# first question's context, as analysts write them
_ASKS = re.compile(r"^(?:what|how|when|where|who|whom|whose|which|why|is|are|was|were|does|do|did|can|could|may|"
                   r"might|has|have|had|should|will|would)\b", re.I)


class QuestionKind(StrEnum):
    """What a question asks for, as far as the words tell (:func:`classify`)."""

    LOOKUP = "lookup"
    REFERENCE = "reference"
    DOCUMENT_TYPE = "document_type"
    SUMMARY = "summary"
    COMPARE = "compare"
    TABLE = "table"
    SHORT = "short"
    MULTI_PART = "multi_part"

    @classmethod
    def from_str(cls, value: str) -> QuestionKind:
        try:
            return cls(value)
        except ValueError as e:
            raise ValueError(f"unknown question kind {value!r}; one of {', '.join(k.value for k in cls)}") from e


def classify(question: str) -> list[QuestionKind]:
    """The kinds ``question`` may be, most specific first; always ends with ``LOOKUP``."""
    kinds: list[QuestionKind] = []
    refs = parse_refs(question)
    if refs.any or _APPENDIX.search(question):
        kinds.append(QuestionKind.REFERENCE)
    if _DOC_TYPE.search(question):
        kinds.append(QuestionKind.DOCUMENT_TYPE)
    if _SUMMARY.search(question) and not refs.any:
        kinds.append(QuestionKind.SUMMARY)
    if _COMPARE.search(question):
        kinds.append(QuestionKind.COMPARE)
    if _EXTREME.search(question) and re.search(r"\b(?:which|what|who|when)\b", question, re.I):
        kinds.append(QuestionKind.TABLE)
    if _SHORT_DEFINITE.match(question):
        kinds.append(QuestionKind.SHORT)
    if len(split_parts(question)) > 1:
        kinds.append(QuestionKind.MULTI_PART)
    kinds.append(QuestionKind.LOOKUP)
    return kinds


def split_parts(question: str) -> list[str]:
    """The questions a multi-part question asks ("What is X and what is Y?" -> two), each ending in '?'."""
    parts = [p.strip(" ?,;") for p in _PART_SPLIT.split(question)]
    parts = [p for i, p in enumerate(parts)
             if len(terms(p)) >= 1 and len(p.split()) >= 3 and (i == 0 or _ASKS.match(p))]
    if len(parts) < 2:
        return [question]
    return [p[0].upper() + p[1:] + "?" for p in parts[:MAX_PARTS]]


@dataclass
class _Draft:
    """An answer being built: text with [n] markers and the raw citations it refers to."""

    lines: list[str] = field(default_factory=list)
    citations: list[dict[str, Any]] = field(default_factory=list)
    docs: dict[str, Document] = field(default_factory=dict)

    def cite(self, doc: Document, quote: str) -> str:
        n = len(self.citations) + 1
        self.citations.append({"n": n, "chunk_id": chunk_id_of(doc), "quote": quote})
        self.docs[chunk_id_of(doc)] = doc
        return f"[{n}]"


def _leaf(section: str) -> str:
    return section.split(" > ")[-1].strip()


def _top(section: str) -> str:
    return section.split(" > ")[0].strip()


def _page_text(doc: Document) -> str:
    m = doc.meta or {}
    a, b = int(m.get("page_start", 0) or 0), int(m.get("page_end", 0) or 0)
    return f"p. {a}" if not b or a == b else f"pp. {a}–{b}"


_retrieved = RetrievedChunk.of_document


def _first_sentence(doc: Document, max_chars: int = MAX_SUMMARY_QUOTE) -> str:
    """The first sentence of ``doc`` that is not a heading, cut at a word boundary to ``max_chars`` (a prefix
    of the chunk's own text, so still verbatim)."""
    content = doc.content or ""
    lines = (doc.meta or {}).get("element_type") in ("table", "list")
    for s0, e in sentence_spans(content, lines=lines):
        s = _skip_heading_lines(content, s0, e, doc)
        text = content[s:e].strip()
        if "\n" in text:  # a title block run into the first sentence: the sentence is its last line
            text = text.rsplit("\n", 1)[1].strip()
        if len(text.split()) < 4 or _is_heading_line(text, doc):
            continue
        if len(text) > max_chars:
            text = text[:max_chars].rsplit(" ", 1)[0]
        return text
    return ""


def _doc_filter(doc_id: str) -> dict[str, Any]:
    return {"field": "meta.doc_id", "operator": "==", "value": doc_id}


def _content_words(text: str) -> list[str]:
    return [t for t in terms(text) if t not in GENERIC]


def _opening(sentence: str, words: int = CHOICE_QUOTE_WORDS) -> str:
    """The first ``words`` words of ``sentence`` (verbatim, no quotation marks), to name a reading by."""
    return " ".join(re.sub(r"[“”‘’\"]", "", sentence).split()[:words])


def _states(thing: str) -> Callable[[str], int] | None:
    """How a sentence states ``thing`` ("limit", "notice period"): 2 when it names it (each of its words in some
    form), 1 when it states it by a phrase of :data:`SYNONYMS` for its last word ("up to" for a limit; its other
    words still named: a notice period is no reading of "12 weeks of absence"), 0 when not at all. ``None`` when
    the thing has no content word."""
    words = [w for w in re.findall(r"[a-z]+", thing.lower()) if w not in STOPWORDS]
    if not words:
        return None

    def any_of(options: Sequence[str]) -> re.Pattern[str]:
        return re.compile(r"\b(?:" + "|".join(re.escape(o) for o in sorted(set(options), key=len, reverse=True))
                          + r")\b", re.I)

    *modifiers, head = words
    named = [any_of(word_forms(w)) for w in modifiers]
    head_named = any_of(word_forms(head))
    head_phrased = any_of(SYNONYMS[head]) if SYNONYMS.get(head) else None

    def how(sentence: str) -> int:
        if not all(p.search(sentence) for p in named):
            return 0
        if head_named.search(sentence):
            return 2
        return 1 if head_phrased is not None and head_phrased.search(sentence) else 0

    return how


class QuestionTypes:
    """Answers the question types of issue 24 over ``engine``'s store, or returns ``None`` for a look-up.

    Usage::

        qt = QuestionTypes(engine)
        answer = qt.answer("Compare the notice periods in both PDFs", ["slack:T1:C1"]) or engine.answer(...)

    :param engine: the warmed-up :class:`pipelines.query.QueryEngine` whose retrieval and extractive
        answerer the handlers use (per document, for a comparison).
    """

    def __init__(self, engine: QueryEngine) -> None:
        self.engine = engine
        self.store = engine.store
        self.validator = CitationValidator(fuzzy_threshold=0.9)
        self.threshold = engine.settings.refusal_threshold

    # --- entry ---------------------------------------------------------------------------------
    def answer(
        self, question: str, scopes: list[str], history: Sequence[Turn] = (), *, mode: RetrievalMode = "hybrid",
        k: int | None = None,
    ) -> Answer | None:
        """The answer when ``question`` is one of the types here, else ``None`` (ask the look-up path)."""
        question = " ".join(question.split())
        if not question:
            return None
        k = k or self.engine.settings.answer_top_k
        kinds = classify(question)
        if history and looks_like_follow_up(question):
            # "and the handbook?" is rewritten from the thread by the look-up path; only what never leans on an
            # earlier turn is answered here. A question that stands alone is answered here with or without a
            # thread before it: a Teams personal chat is one long thread, every question after the first has one.
            kinds = [kd for kd in kinds if kd in (QuestionKind.REFERENCE, QuestionKind.DOCUMENT_TYPE)]
        handlers: dict[QuestionKind, Callable[[], Answer | None]] = {
            QuestionKind.REFERENCE: lambda: self.not_found(question, scopes),
            QuestionKind.DOCUMENT_TYPE: lambda: self.document_type(question, scopes),
            QuestionKind.SUMMARY: lambda: self.summary(question, scopes),
            QuestionKind.COMPARE: lambda: self.compare(question, scopes, mode, k),
            QuestionKind.TABLE: lambda: self.table_extreme(question, scopes, mode),
            QuestionKind.SHORT: lambda: self.which_one(question, scopes, mode, k),
            QuestionKind.MULTI_PART: lambda: self.partial(question, scopes, mode, k),
        }
        for kind in kinds:
            handler = handlers.get(kind)
            out = handler() if handler else None
            if out is not None:  # its log line is the service's, as every answer's
                return out
        return None

    @staticmethod
    def resolve_choice(question: str, history: Sequence[Turn]) -> str | None:
        """A reply "2" to a "which one?" answer: the second reading's question, from the answer's own text
        (the chat thread's history is all a platform keeps); the thread's latest such answer, so a reading picked
        by its button before is no obstacle. ``None`` for anything else."""
        m = _CHOICE_REPLY.fullmatch(question)
        last = next((t for t in reversed(history) if t.role == "assistant" and CHOICE_ARROW in t.text), None)
        if not m or last is None:
            return None
        line = re.search(rf"(?m)^{m.group(1)}\. .*{re.escape(CHOICE_ARROW)} “([^”]+)”\s*$", last.text)
        return line.group(1) if line else None

    # --- shared steps --------------------------------------------------------------------------
    def _finish(self, draft: _Draft, kind: AnswerKind, *, refused: bool = False, note: str = "",
                choices: Sequence[str] = (), mode: AnswerMode = "extractive") -> Answer | None:
        """Validate every quote against its chunk; an answer whose quotes did not all validate is not given
        (the look-up path answers instead). ``mode`` "llm": the draft holds the model's words (a multi-part
        question's parts), its quotes validated here again all the same."""
        v = Validated.of(self.validator.run(citations=draft.citations, documents=list(draft.docs.values())))
        if v.failures:
            log.warning("quote_not_validated", kind=kind, n_failures=len(v.failures))
            return None
        return Answer(
            text="\n".join(draft.lines), citations=v.citations, refused=refused, mode=mode,
            retrieved=[_retrieved(d) for d in draft.docs.values()], note=note, validation=v.counts,
            kind=kind, choices=list(choices),
        )

    def _written(self, instruction: str, draft: _Draft, context: list[Document], kind: AnswerKind,
                 *, said: Sequence[str] = ()) -> Answer | None:
        """With an LLM configured, the model writes the comparison or summary from ``context`` (the answer
        policy's own generation: citations validated, one stricter retry, unsupported claims dropped); without
        one, or when the model fails or refuses, the extractive ``draft``. ``said``: fixed lines of the draft
        the model's text is followed by whatever it wrote (a document that says nothing, named as such)."""
        llm = self.engine.llm
        if llm is None:
            return self._finish(draft, kind)
        fallback = self._finish(draft, kind)
        if fallback is None:
            return None
        for d in draft.docs.values():  # the draft's quotes are the fallback: their chunks must be in the context
            if all(chunk_id_of(c) != chunk_id_of(d) for c in context):
                context.append(d)
        ext = Draft(text="\n".join(draft.lines), citations=draft.citations)
        written = self.engine.policy._llm_answer(llm, instruction, context, [], ext)  # noqa: SLF001
        if written.refused or written.mode != "llm":
            return fallback.model_copy(update={"note": written.note or fallback.note})
        text = "\n".join([written.text, *said])
        return written.model_copy(update={"text": text, "kind": kind, "retrieved": [_retrieved(d) for d in context]})

    def _documents(self, scopes: list[str]) -> list[DocInfo]:
        return sorted(self.store.list_documents(scopes=scopes), key=lambda d: d.file)

    def _named(self, question: str, scopes: list[str], docs: list[DocInfo]) -> tuple[list[DocInfo], list[str]]:
        """Documents ``question`` names, and the phrases that named them: the structure router's file names
        ("the services agreement"), or a word of one file's name no other file has ("the handbook")."""
        _, names, phrases = self.engine.router.file_filter(question, scopes)
        named = [d for d in docs if d.file in names]
        q_words = set(re.findall(r"[a-z]+", question.lower()))
        words_of = {d.doc_id: set(re.sub(r"\.pdf$", "", d.file.lower()).replace("-", "_").split("_")) for d in docs}
        for d in docs:
            if d in named:
                continue
            others = set().union(*(w for i, w in words_of.items() if i != d.doc_id)) if len(docs) > 1 else set()
            own = {w for w in words_of[d.doc_id] - others if len(w) >= 5 and w not in STOPWORDS and w.isalpha()}
            hit = sorted(own & q_words)
            if hit:
                named.append(d)
                phrases.extend(hit)
        return named, phrases

    def _search(self, query: str, scopes: list[str], mode: RetrievalMode, k: int,
                filters: dict[str, Any] | None) -> tuple[list[Document], Draft, float]:
        """Retrieve within ``filters``, draft the extractive answer, and its confidence (the look-up path's
        own components and formula, see :meth:`pipelines.query.QueryEngine._signals`)."""
        e = self.engine
        analysis = e.analyzer.run(question=query)
        hits, embedding = e._run_retrieval(mode, analysis["query"], scopes, filters)  # noqa: SLF001
        hits = e._in_scope(hits, scopes)[:k]  # noqa: SLF001
        ext = Draft.of(e.extractive.run(question=analysis["query"], documents=hits, routed=[],
                                        query_embedding=embedding, content_question=query, reference=""))
        support = e.term_support(analysis["anchors"], scopes, filters)
        words = e.term_support(analysis["words"], scopes, filters)
        return hits, ext, confidence(ext.max_cosine, support, words)

    # --- not there -----------------------------------------------------------------------------
    def not_found(self, question: str, scopes: list[str]) -> Answer | None:
        """"What does Figure 1 show?" with no Figure 1 in scope: say so, and list what does exist."""
        refs = parse_refs(question)
        missing: list[str] = []
        exists = False
        for label in refs.labels:
            if self.store.fetch(scopes=scopes, filters={"field": "meta.label", "operator": "==", "value": label},
                                limit=1):
                exists = True
            else:
                missing.append(label)
        for sid in refs.section_ids:
            if self.store.fetch(scopes=scopes, filters={"field": "meta.section_id", "operator": "==", "value": sid},
                                limit=1):
                exists = True
            else:
                missing.append(f"section {sid}")
        docs = self._documents(scopes)
        most_pages = max((d.pages for d in docs), default=0)
        if refs.pages:
            if refs.pages[0] <= most_pages:
                exists = True
            else:
                a, b = refs.pages
                missing.append(f"page {a}" if a == b else f"pages {a}–{b}")
        if refs.nth_page:
            exists = True
        for m in _APPENDIX.finditer(question):
            name = f"{m.group(1).capitalize()} {m.group(2).upper()}"
            found = self.store.bm25_search(name, scopes=scopes, top_k=5)
            if any(name.lower() in str((d.meta or {}).get("section", "")).lower() for d in found):
                exists = True
            else:
                missing.append(name)
        if not missing or exists or not docs:
            return None  # it exists (the look-up path fetches it), or partly: the look-up path answers that part
        draft = _Draft()
        what = " or ".join(missing)
        draft.lines.append(f"There is no {what} in the PDFs here.")
        if any(x.startswith(("Table", "Figure")) for x in missing):
            draft.lines.append(self._labels_line(scopes))
        if any(x.startswith("section") for x in missing):
            draft.lines.append(self._sections_line(scopes, docs))
        if any(x.startswith("page") for x in missing):
            draft.lines.append("They have " + ", ".join(f"{d.file}: {d.pages} page{'s' if d.pages != 1 else ''}"
                                                         for d in docs[:10]) + ".")
        return self._finish(draft, "not_found", refused=True)

    def _labels_line(self, scopes: list[str]) -> str:
        chunks = self.store.fetch(scopes=scopes, filters={"field": "meta.element_type", "operator": "in",
                                                          "value": ["table", "caption", "text", "list"]}, limit=2000)
        by_file: dict[str, list[str]] = {}
        for d in chunks:
            m = d.meta or {}
            label = str(m.get("label", "") or "")
            if label:
                entry = f"{label} ({_page_text(d)})"
                if entry not in by_file.setdefault(str(m.get("file_name", "")), []):
                    by_file[str(m.get("file_name", ""))].append(entry)
        if not by_file:
            return NOT_FOUND_NO_LABELS
        return "They have: " + "; ".join(f"{f}: {', '.join(labels)}" for f, labels in sorted(by_file.items())) + "."

    def _sections_line(self, scopes: list[str], docs: list[DocInfo]) -> str:
        parts = []
        for d in docs[:10]:
            ids: list[str] = []
            for c in self.store.fetch(scopes=scopes, filters=_doc_filter(d.doc_id), limit=500):
                sid = str((c.meta or {}).get("section_id", "") or "")
                if sid and "." not in sid and sid not in ids:
                    ids.append(sid)
            if ids:
                parts.append(f"{d.file}: sections {', '.join(ids)}")
        return ("They have " + "; ".join(parts) + ".") if parts else "The PDFs here have no numbered sections."

    # --- what kind of document -----------------------------------------------------------------
    def document_type(self, question: str, scopes: list[str]) -> Answer | None:
        docs = self._documents(scopes)
        if not docs:
            return None
        named, _ = self._named(question, scopes, docs)
        targets = (named or docs)[:10]
        draft = _Draft()
        for d in targets:
            first = self.store.fetch(scopes=scopes, filters=_doc_filter(d.doc_id), limit=1)
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
        return self._finish(draft, "document_type")

    # --- summaries -----------------------------------------------------------------------------
    def summary(self, question: str, scopes: list[str]) -> Answer | None:
        """A whole document summarised: the opening sentence of each top-level section."""
        docs = self._documents(scopes)
        named, phrases = self._named(question, scopes, docs)
        rest = _SUMMARY.sub(" ", question)
        for p in phrases:
            rest = re.sub(rf"(?i)\b{re.escape(p)}\b", " ", rest)
        rest = _THIS_DOC.sub(" ", rest)
        if _content_words(re.sub(r"(?i)\b(agreement|contract|handbook|report|manual|policy|pdf|document)s?\b",
                                 " ", rest)):
            return None  # "summarise the code of conduct": a part, which the look-up path finds by its heading
        if not named and len(docs) == 1 and (_THIS_DOC.search(question) or not rest.strip(" ?.")):
            named = docs
        if len(named) != 1:
            return None
        d = named[0]
        chunks = self.store.fetch(scopes=scopes, filters=_doc_filter(d.doc_id), limit=2000)
        groups: dict[str, list[Document]] = {}
        for c in chunks:
            if (c.meta or {}).get("element_type") == "table":
                continue
            groups.setdefault(_top(str((c.meta or {}).get("section", "") or "")), []).append(c)
        draft = _Draft()
        shown = 0
        for section, members in groups.items():
            if shown >= MAX_SUMMARY_SECTIONS:
                break
            for c in members:
                quote = _first_sentence(c)
                if quote:
                    title = section or "(untitled)"
                    draft.lines.append(f"• {title} ({_page_text(c)}) {draft.cite(c, quote)}")
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
        return self._written(instruction, draft, list(draft.docs.values()), "summary")

    # --- comparisons ---------------------------------------------------------------------------
    def compare(self, question: str, scopes: list[str], mode: RetrievalMode, k: int) -> Answer | None:
        docs = self._documents(scopes)
        if len(docs) < 2:
            return None
        named, phrases = self._named(question, scopes, docs)
        if len(named) < 2:
            if not _ALL_DOCS.search(question) and not re.search(r"\b(?:pdfs|documents|files)\b", question, re.I):
                return None
            if len(docs) > MAX_COMPARED:
                return None
            named = docs
        named = named[:MAX_COMPARED]
        topic = _COMPARE.sub(" ", _ALL_DOCS.sub(" ", question))
        for p in phrases:
            topic = re.sub(rf"(?i)\b(?:the\s+)?{re.escape(p)}\b", " ", topic)
        topic = re.sub(r"(?i)\b(?:the\s+)?(?:two\s+)?(?:pdfs|documents|files|docs)\b", " ", topic)
        topic = re.sub(r"(?i)\b(?:how|what|do|does|on|about|in|and|between|with|regarding|say|said|says)\b", " ",
                       topic)
        topic = " ".join(topic.replace("?", " ").split()).strip(" ,.")
        if not _content_words(topic):
            return None
        draft = _Draft()
        draft.lines.append(f"What each PDF says about {topic}:")
        silent: list[str] = []
        said: list[str] = []
        context: list[Document] = []
        for d in named:
            hits, ext, conf = self._search(topic, scopes, mode, k, _doc_filter(d.doc_id))
            by_id = {chunk_id_of(h): h for h in hits}
            cits = [c for c in ext.citations if c["chunk_id"] in by_id]
            if conf < self.threshold or not cits:
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
        return self._written(instruction, draft, context, "compare", said=said)  # the model may not say it

    # --- tables --------------------------------------------------------------------------------
    def table_extreme(self, question: str, scopes: list[str], mode: RetrievalMode) -> Answer | None:
        """"Which year in table 2 had the highest revenue?": the row with the max / min of the column the
        question names, quoted, its key cell stated."""
        m = _EXTREME.search(question)
        if not m:
            return None
        low = m.group(1).lower() in _LOW_WORDS
        refs = parse_refs(question)
        tables: list[Document] = []
        named_tables = [lab for lab in refs.labels if lab.startswith("Table")]
        if named_tables:
            tables = self.store.fetch(scopes=scopes, filters={"field": "meta.label", "operator": "in",
                                                              "value": named_tables}, limit=10)
        else:
            hits, _ = self.engine._run_retrieval(mode, question, scopes, None)  # noqa: SLF001
            tables = [h for h in self.engine._in_scope(hits, scopes)[:8]  # noqa: SLF001
                      if (h.meta or {}).get("element_type") == "table"]
        q_terms = set(_content_words(question)) - {"highest", "lowest", "larg", "small", "bigg", "great", "most",
                                                   "least", "fewest", "maximum", "minimum", "max", "min", "top"}
        for t in tables:
            found = _extreme_row(t.content or "", q_terms, question, low=low)
            if found is None:
                continue
            key, column, value, row = found
            draft = _Draft()
            label = str((t.meta or {}).get("label", "") or "the table")
            where = f"{label} of {(t.meta or {}).get('file_name', 'the PDF')} ({_page_text(t)})"
            word = "lowest" if low else "highest"
            draft.lines.append(f"{key}: the {word} {column} in {where} is {value} {draft.cite(t, row)}.")
            return self._finish(draft, "table")
        return None

    # --- which one? ----------------------------------------------------------------------------
    def which_one(self, question: str, scopes: list[str], mode: RetrievalMode, k: int) -> Answer | None:
        """A short "what is the limit?" whose best passages answer different readings: ask which.

        The readings are looked for where the look-up answer would be built from: the ``k`` passages retrieval
        ranks first. A passage is a reading when one of its sentences states the thing (:func:`_states`: the
        thing's last word in some form or in a phrase :data:`SYNONYMS` says states it, "up to 160 pounds" for a
        limit, and every other word of the thing, so "the notice period" needs "notice") and it would be
        answered at all (its best question–sentence cosine clears the refusal threshold), one reading per
        section. Two or more: the look-up answer would pick one of them by how close its words are to a
        one-word question, which favours a passage that says "limited" over one that says "up to" (0.35 against
        0.07 for the hotel limit); so the readings are offered in retrieval order instead, each quoted."""
        m = _SHORT_DEFINITE.match(question)
        if not m or len(_content_words(question)) > 2:
            return None
        thing = m.group(1)
        states = _states(thing)
        if states is None:
            return None
        e = self.engine
        hits, embedding = e._run_retrieval(mode, question, scopes, None)  # noqa: SLF001
        hits = e._in_scope(hits, scopes)[:k]  # noqa: SLF001
        readings: list[tuple[Document, str]] = []
        seen_sections: set[tuple[str, str]] = set()
        for h in hits:
            key = (str((h.meta or {}).get("doc_id", "")), _top(str((h.meta or {}).get("section", "") or "")))
            content = h.content or ""
            spans = [(_skip_heading_lines(content, a, b, h), b) for a, b in sentence_spans(content)]
            stated = [(states(content[a:b]), content[a:b]) for a, b in spans if not _is_heading_line(content[a:b], h)]
            how, sentence = max(stated, key=lambda st: st[0], default=(0, ""))  # the first that names it, if any
            if key in seen_sections or not how:
                continue
            ext = Draft.of(e.extractive.run(question=question, documents=[h], routed=[], query_embedding=embedding,
                                            content_question=question, reference=""))
            if ext.max_cosine < self.threshold:
                continue
            seen_sections.add(key)
            readings.append((h, sentence))
        readings = readings[:MAX_CHOICES]
        if len(readings) < 2:
            return None
        draft = _Draft()
        draft.lines.append(f"Which {thing} do you mean? The PDFs mention several:")
        choices: list[str] = []
        for i, (h, quote) in enumerate(readings, 1):
            meta = h.meta or {}
            section = _leaf(str(meta.get("section", "") or "")) or _page_text(h)
            sid = str(meta.get("section_id", "") or "")
            where = f"section {sid}" if sid else f"‘{section}’"  # “…” encloses the whole follow-up
            # the reading's own opening words: the look-up path finds that sentence, not another of the section
            choice = (f"{question.rstrip(' ?')} in {where} of {meta.get('file_name', 'the PDF')}, where it says "
                      f"‘{_opening(quote)}’?")
            choices.append(choice)
            draft.lines.append(f"{i}. {section} ({meta.get('file_name', '')}, {_page_text(h)}) {draft.cite(h, quote)} "
                               f"{CHOICE_ARROW} “{choice}”")
        draft.lines.append(CHOICE_HINT)
        return self._finish(draft, "clarify", choices=choices)

    # --- multi-part ----------------------------------------------------------------------------
    def partial(self, question: str, scopes: list[str], mode: RetrievalMode, k: int) -> Answer | None:
        """A multi-part question with a part the PDFs don't cover: the parts they do, and the rest named."""
        parts = split_parts(question)
        if len(parts) < 2:
            return None
        answered: list[tuple[str, Answer]] = []
        missing: list[str] = []
        for p in parts:
            a = self.engine.answer(p, scopes, mode=mode, k=k)
            if a.refused or not a.citations:
                missing.append(p)
            else:
                answered.append((p, a))
        if not answered:
            return None  # none covered: the look-up path refuses, with pointers to the closest passages
        draft = _Draft()
        written = False
        notes: list[str] = []
        for p, a in answered:
            by_id = {chunk_id_of(d): d for d in self._chunks(scopes, [c.chunk_id for c in a.citations])}
            marks = {c.n: draft.cite(by_id[c.chunk_id], c.quote) for c in a.citations if c.chunk_id in by_id}
            if a.mode == "llm":  # the model's own answer to this part, its markers renumbered into the whole
                written = True
                draft.lines.append(f"• {p} {_renumbered(a.text, marks)}")
            else:
                draft.lines.append(f"• {p} {''.join(marks.values())}")
            if a.note and a.note not in notes:
                notes.append(a.note)
        for p in missing:
            draft.lines.append(f"• {p} The PDFs don't say.")
        by: AnswerMode = "llm" if written else "extractive"
        if not missing:  # every part covered: still one cited line a part, so no part is lost to the others
            return self._finish(draft, "multi_part", note=" ".join(notes), mode=by)
        return self._finish(draft, "partial", note=" ".join([NOTE_PARTIAL, *notes]), mode=by)

    def _chunks(self, scopes: list[str], chunk_ids: list[str]) -> list[Document]:
        doc_ids = sorted({c.rsplit(":", 1)[0] for c in chunk_ids})
        want = set(chunk_ids)
        out: list[Document] = []
        for doc_id in doc_ids:
            out += [d for d in self.store.fetch(scopes=scopes, filters=_doc_filter(doc_id), limit=2000)
                    if chunk_id_of(d) in want]
        return out


def _renumbered(text: str, marks: dict[int, str]) -> str:
    """The model's answer to one part with its ``[n]`` markers renumbered into the whole answer's (``marks``:
    the part's n -> the whole's "[k]"); a marker whose citation was not kept is left out."""
    return _MARKER.sub(lambda m: f" {marks[int(m.group(1))]}" if int(m.group(1)) in marks else "", text).strip()


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
