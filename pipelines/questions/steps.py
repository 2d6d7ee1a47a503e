"""The steps every question type shares: an answer being built (:class:`AnswerDraft`), and :class:`Steps`, what
the handlers read the store and the look-up path's components through (per-document retrieval and its
confidence, the documents a question names, quote validation, the LLM's writing of a comparison or summary)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from haystack import Document

from connectors.log import get_logger
from connectors.store_api import DocInfo
from pipelines.answer_policy import Draft, Validated
from pipelines.components._text import GENERIC, STOPWORDS, terms
from pipelines.components.citation_validator import chunk_id_of
from pipelines.figures.arithmetic import recompute
from pipelines.models import Answer, AnswerKind, Computation, RawCitation, RetrievalMode, RetrievedChunk

if TYPE_CHECKING:
    from pipelines.query import QueryEngine

log = get_logger(__name__)

AnswerMode = Literal["extractive", "llm"]


@dataclass
class AnswerDraft:
    """An answer being built: text with [n] markers and the raw citations it refers to."""

    lines: list[str] = field(default_factory=list)
    citations: list[RawCitation] = field(default_factory=list)
    docs: dict[str, Document] = field(default_factory=dict)

    def cite(self, doc: Document, quote: str) -> str:
        n = len(self.citations) + 1
        self.citations.append(RawCitation(n=n, chunk_id=chunk_id_of(doc), quote=quote))
        self.docs[chunk_id_of(doc)] = doc
        return f"[{n}]"


def leaf(section: str) -> str:
    return section.split(" > ")[-1].strip()


def top(section: str) -> str:
    return section.split(" > ")[0].strip()


def page_text(doc: Document) -> str:
    m = doc.meta or {}
    a, b = int(m.get("page_start", 0) or 0), int(m.get("page_end", 0) or 0)
    return f"p. {a}" if not b or a == b else f"pp. {a}–{b}"


retrieved = RetrievedChunk.of_document


def doc_filter(doc_id: str) -> dict[str, Any]:
    return {"field": "meta.doc_id", "operator": "==", "value": doc_id}


def content_words(text: str) -> list[str]:
    return [t for t in terms(text) if t not in GENERIC]


class Steps:
    """What the handlers share, over ``engine`` (the warmed-up :class:`pipelines.query.QueryEngine` whose store,
    retrieval and extractive answerer they use): its store, a citation validator, the refusal threshold."""

    def __init__(self, engine: QueryEngine) -> None:
        self.engine = engine
        self.store = engine.store
        self.validator = engine.policy.validator  # one validator, one rule for what a quote must match
        self.threshold = engine.settings.refusal_threshold

    def finish(self, draft: AnswerDraft, kind: AnswerKind, *, refused: bool = False, note: str = "",
               choices: Sequence[str] = (), mode: AnswerMode = "extractive",
               computation: Computation | None = None) -> Answer | None:
        """Validate every quote against its chunk; an answer whose quotes did not all validate is not given
        (the look-up path answers instead). ``mode`` "llm": the draft holds the model's words (a multi-part
        question's parts), its quotes validated here again all the same. A ``computation`` is recomputed from the
        validated quotes (:func:`pipelines.figures.arithmetic.recompute`); one that does not hold is not given."""
        v = Validated.of(self.validator.run(citations=draft.citations, documents=list(draft.docs.values())))
        if v.failures:
            log.warning("quote_not_validated", kind=kind, n_failures=len(v.failures))
            return None
        if computation is not None and not recompute(computation, v.citations):
            log.error("computation_not_recomputed", kind=kind)
            return None
        return Answer(
            text="\n".join(draft.lines), citations=v.citations, refused=refused, mode=mode,
            retrieved=[retrieved(d) for d in draft.docs.values()], note=note, validation=v.counts,
            kind=kind, choices=list(choices), computation=computation,
        )

    def written(self, instruction: str, draft: AnswerDraft, context: list[Document], kind: AnswerKind,
                *, said: Sequence[str] = ()) -> Answer | None:
        """With an LLM configured, the model writes the comparison or summary from ``context`` (the answer
        policy's own generation: citations validated, one stricter retry, unsupported claims dropped); without
        one, or when the model fails or refuses, the extractive ``draft``. ``said``: fixed lines of the draft
        the model's text is followed by whatever it wrote (a document that says nothing, named as such)."""
        llm = self.engine.llm
        if llm is None:
            return self.finish(draft, kind)
        fallback = self.finish(draft, kind)
        if fallback is None:
            return None
        for d in draft.docs.values():  # the draft's quotes are the fallback: their chunks must be in the context
            if all(chunk_id_of(c) != chunk_id_of(d) for c in context):
                context.append(d)
        ext = Draft(text="\n".join(draft.lines), citations=draft.citations)
        written = self.engine.policy.generate(instruction, context, [], ext)
        if written.refused or written.mode != "llm":
            return fallback.model_copy(update={"note": written.note or fallback.note})
        text = "\n".join([written.text, *said])
        return written.model_copy(update={"text": text, "kind": kind, "retrieved": [retrieved(d) for d in context]})

    def documents(self, scopes: list[str]) -> list[DocInfo]:
        """The documents of ``scopes`` by file name, from the listing the structure router read this question's
        file names from (:class:`~pipelines.catalogue.DocumentCatalogue`): both see the same documents."""
        return sorted(self.engine.router.documents(scopes), key=lambda d: d.file)

    def named(self, question: str, scopes: list[str], docs: list[DocInfo]) -> tuple[list[DocInfo], list[str]]:
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

    def search(self, query: str, scopes: list[str], mode: RetrievalMode, k: int,
               filters: dict[str, Any] | None) -> tuple[list[Document], Draft, float]:
        """Retrieve within ``filters``, draft the extractive answer, and its confidence: the look-up's own
        public steps (:meth:`pipelines.query.QueryEngine.retrieve_within`, ``draft``, ``signals``)."""
        e = self.engine
        r = e.retrieve_within(query, scopes, mode, k, filters)
        ext = e.draft(r, k)
        return r.hits, ext, e.signals(r, ext, scopes).confidence

    def and_in_first(self, question: str, query: str, scopes: list[str], mode: RetrievalMode,
                     k: int) -> tuple[list[Document], list[Document]]:
        """The passages retrieval puts forward for ``question`` (routed ones first, then its top ``k``), and a search
        for ``query`` within the document it ranked first: where an answer kind looks for a sentence or a table
        the question's own words may not find. ``([], [])`` when nothing is retrieved."""
        r = self.engine.retrieve(question, scopes, mode, k)
        first = r.routed + r.hits
        if not first:
            return [], []
        doc_id = str((first[0].meta or {}).get("doc_id", ""))
        more, _ = self.engine.search(query, scopes, mode=mode, filters=doc_filter(doc_id) if doc_id else None)
        return first[:k], more

    def page_chunks(self, scopes: list[str], doc_id: str, page: int) -> list[Document]:
        """The chunks of one page of a document in ``scopes``, in reading order."""
        return self.store.fetch(scopes=scopes, filters={"operator": "AND", "conditions": [
            doc_filter(doc_id), {"field": "meta.page_start", "operator": "==", "value": page}]}, limit=200)

    def chunks(self, scopes: list[str], chunk_ids: list[str]) -> list[Document]:
        doc_ids = sorted({c.rsplit(":", 1)[0] for c in chunk_ids})
        want = set(chunk_ids)
        out: list[Document] = []
        for doc_id in doc_ids:
            out += [d for d in self.store.fetch(scopes=scopes, filters=doc_filter(doc_id), limit=2000)
                    if chunk_id_of(d) in want]
        return out
