"""The query side: scoped hybrid retrieval, structure routing, answers with validated quotes, refusal.

``build_query_pipeline(settings, store, mode)`` is the Haystack retrieval pipeline::

    embedder (question -> embedding) -> dense retriever --\\
                                          bm25 retriever --> ScoreFusion (CITEBOT_FUSION: weighted or rrf;
                                                                           page-diverse)

(``bm25`` and ``dense`` modes keep one branch, for ablations). Scopes are passed to both retrievers
on every run, never baked into the pipeline.

:class:`QueryEngine` runs the steps around it, each a component under ``pipelines/components``;
:meth:`QueryEngine.answer` shows the whole path in order: follow-up rewriting -> structure routing (explicit
pages/sections/tables/files fetched by metadata and put first) -> retrieval -> extractive answer (always: it
measures relevance and is the fallback) -> confidence -> the answer policy (:mod:`pipelines.answer_policy`:
refusal check, LLM answer when configured, citation validation with one stricter retry, extractive fallback)
-> :class:`pipelines.models.Answer`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from haystack import Document, Pipeline

from connectors.log import get_logger
from connectors.settings import Settings
from connectors.store_api import ChunkStore, require_scopes
from connectors.tracing import span, tag
from pipelines.answer_policy import AnswerPolicy, Decide, Decision, Draft, Signals
from pipelines.catalogue import DocumentCatalogue
from pipelines.components.citation_validator import CitationValidator
from pipelines.components.extractive_answerer import ExtractiveAnswerer
from pipelines.components.instructions import Instructions
from pipelines.components.llm_answerer import PROMPT_VERSION, LLMAnswerer
from pipelines.components.page_ranker import PageRanker
from pipelines.components.query_embedder import QueryEmbedder
from pipelines.components.query_rewriter import QueryRewriter
from pipelines.components.question_analyzer import (
    QuestionAnalyzer,
    plain_periods,
    strip_instructions,
    without_names,
    word_forms,
)
from pipelines.components.refusal import WORDS_AT_LEAST, RefusalCheck, confidence
from pipelines.components.score_fusion import ScoreFusion
from pipelines.components.structure_router import StructureRouter
from pipelines.models import Answer, RankedBy, RetrievalMode, RetrievedChunk, Timings, Turn
from pipelines.streaming import ShowText
from pipelines.triage import Triage

log = get_logger(__name__)

MAX_ROUTED = 12
MAX_TERMS = 10
__all__ = ["PROMPT_VERSION", "QueryEngine", "Retrieval", "build_query_pipeline"]


def build_query_pipeline(settings: Settings, store: ChunkStore,
                         mode: RetrievalMode | str = RetrievalMode.HYBRID) -> Pipeline:
    """The retrieval pipeline for ``mode`` (:class:`RetrievalMode`: which retrievers it runs). Run it with
    :func:`pipeline_inputs`; every retrieval goes through the pipeline built here (:meth:`QueryEngine._pipeline`)."""
    from connectors.stores import make_retrievers

    mode = RetrievalMode.from_str(mode)
    bm25, dense = make_retrievers(store, settings.retrieval_top_k)
    p = Pipeline()
    # one list: fusion only rescales and diversifies
    fusion = settings.fusion if mode is RetrievalMode.HYBRID else "weighted"
    hybrid = [settings.dense_weight, 1.0] if fusion == "weighted" else None  # rrf: equal weights
    weights = hybrid if mode.dense and mode.bm25 else [1.0]
    p.add_component("joiner", ScoreFusion(weights=weights, diverse_top=settings.answer_top_k, fusion=fusion))
    if mode.dense:
        p.add_component("embedder", QueryEmbedder(**settings.embedding_args(batched=True)))  # type: ignore[arg-type]
        p.add_component("dense", dense)
        p.connect("embedder.embedding", "dense.query_embedding")
        p.connect("dense.documents", "joiner.documents")
    if mode.bm25:
        p.add_component("bm25", bm25)
        p.connect("bm25.documents", "joiner.documents")
    return p


def pipeline_inputs(
    mode: RetrievalMode | str, query: str, scopes: list[str], filters: dict[str, Any] | None, top_k: int
) -> dict[str, Any]:
    mode = RetrievalMode.from_str(mode)
    data: dict[str, Any] = {}
    if mode.dense:
        data["embedder"] = {"text": query}
        data["dense"] = {"scopes": scopes, "filters": filters, "top_k": top_k}
    if mode.bm25:
        data["bm25"] = {"query": query, "scopes": scopes, "filters": filters, "top_k": top_k}
    return data


@dataclass(frozen=True)
class Retrieval:
    """What one retrieval hands the answer: the referenced chunks (``routed``), the fused hits, the query and
    its embedding.

    ``explicit``: the question named pages/sections/tables that exist, so quote only those; ``anchors``:
    specific terms (years, numbers, names) an answering passage must hold; ``filters``: what the question
    restricted retrieval to (a named file); ``words``: the question's content words; ``instructions``: what the
    asker said about the answer (statements to read from, unit, rounding, role), out of ``query`` and the terms.
    The company a question names routes it to that company's files and is in none of ``keywords`` (what BM25
    searched for), ``content_question``, ``anchors`` or ``words``; the embedding (``query``) reads it."""

    routed: list[Document]
    hits: list[Document]
    embedding: list[float]
    reference: str
    query: str
    content_question: str
    explicit: bool
    anchors: list[str] = field(default_factory=list)
    filters: dict[str, Any] | None = None
    words: list[str] = field(default_factory=list)
    instructions: Instructions = field(default_factory=Instructions)
    keywords: str = ""
    lead: frozenset[str] = frozenset()  # the ids of the hits page ranking put first, scored by their page

    def ranked_by(self, doc: Document) -> RankedBy:
        """Which score put ``doc`` where :meth:`context` has it: the question named it, its page, or retrieval."""
        if any(d.id == doc.id for d in self.routed):
            return "reference"
        return "page" if doc.id in self.lead else "retrieval"

    def context(self, k: int) -> list[Document]:
        """Referenced chunks first, then the top ``k`` fused hits not already there."""
        ids = {d.id for d in self.routed}
        return self.routed + [d for d in self.hits if d.id not in ids][:k]


class QueryEngine:
    """Answers questions over a store; thread-safe after :meth:`warm_up`."""

    def __init__(self, settings: Settings, store: ChunkStore, *, llm_client: Any = None,
                 catalogue: DocumentCatalogue | None = None) -> None:
        """``catalogue``: the document listing shared with the service's status line (by default one of its own):
        the router's file names and the answer kinds read it."""
        self.settings = settings
        self.store = store
        self.embedder = QueryEmbedder(**settings.embedding_args(batched=True))  # type: ignore[arg-type]
        self.router = StructureRouter(document_store=store, fetch_limit=40, catalogue=catalogue)
        self.catalogue = self.router.catalogue
        self.pages = PageRanker(document_store=store, page_weight=settings.page_weight,
                                statement_boost=settings.statement_boost, top_pages=settings.answer_top_k)
        self.analyzer = QuestionAnalyzer()
        self.extractive = ExtractiveAnswerer(**settings.embedding_args(batched=True))  # type: ignore[arg-type]
        self.llm: LLMAnswerer | None = None
        self._llm_client = llm_client
        if settings.llm_configured or llm_client is not None:
            self.llm = LLMAnswerer(
                model=settings.llm_model,
                base_url=settings.openai_base_url,
                timeout_s=settings.llm_timeout_s,
                max_retries=settings.llm_max_retries,
            )
        self.rewriter = QueryRewriter(mode="llm" if self.llm is not None else "terms")
        self.triage: Triage | None = None
        if self.llm is not None and settings.llm_max_tool_calls > 0:
            self.triage = Triage(store=store, router=self.router,
                                 search=lambda query, scopes, filters: self.search(query, scopes, filters=filters)[0],
                                 max_tool_calls=settings.llm_max_tool_calls,
                                 max_result_chars=settings.llm_tool_result_chars)
        self.policy = AnswerPolicy(
            refusal=RefusalCheck(threshold=settings.refusal_threshold),
            validator=CitationValidator(),
            llm=self.llm,
        )
        self._pipelines: dict[str, Pipeline] = {}
        self._lock = threading.Lock()
        self._warm = False
        self.embedding_mismatch: str | None = None  # the store's fingerprint when its vectors are not comparable

    # --- setup ---------------------------------------------------------------------------------
    def _pipeline(self, mode: RetrievalMode) -> Pipeline:
        mode = RetrievalMode.from_str(mode)
        with self._lock:
            if mode not in self._pipelines:
                p = build_query_pipeline(self.settings, self.store, mode)
                p.warm_up()
                self._pipelines[mode] = p
            return self._pipelines[mode]

    def warm_up(self) -> None:
        """Load the embedding model, build the hybrid pipeline, and create the LLM client (no call)."""
        if self._warm:
            return
        self.embedder.warm_up()
        self.extractive.warm_up()
        self._pipeline(RetrievalMode.HYBRID)
        self._check_embeddings()
        if self.llm is not None:
            if self._llm_client is None:
                from connectors.llm import client_from_settings

                self._llm_client = client_from_settings(self.settings)
            self.llm.set_client(self._llm_client)
            self.rewriter.set_client(self._llm_client)
            if self.triage is not None:
                self.triage.set_client(self._llm_client)
        self._warm = True

    def _check_embeddings(self) -> None:
        """Say (once, in the log) when the store's vectors were made with another model or backend: dense
        retrieval still runs, but until `citebot reindex` it compares unlike vectors."""
        from connectors.embedding import embedding_fingerprint, previous_embedding_fingerprint
        from connectors.store_api import check_embeddings

        current = self.embedder.fingerprint
        legacy = embedding_fingerprint(self.settings.resolved_model_path, self.settings.embedding_dim, "torch")
        previous = previous_embedding_fingerprint(
            self.settings.resolved_model_path, self.settings.embedding_dim, self.settings.embedding_backend
        )
        self.embedding_mismatch = check_embeddings(self.store, current, legacy=legacy, previous=previous)
        if self.embedding_mismatch:
            log.warning("embedding_mismatch", stored=self.embedding_mismatch, current=current,
                        action="run citebot reindex")

    # --- the steps of an answer, public: every answer kind is built from them ---------------------
    def retrieve(self, query: str, scopes: list[str], mode: RetrievalMode, k: int) -> Retrieval:
        """Step 1 of a look-up: analyse the question, route its explicit references (pages, sections, tables,
        files), retrieve, rank pages: a :class:`Retrieval`."""
        with span("route") as s:
            routed_out = self.router.run(question=query, scopes=scopes)
            tag(s, n_documents=len(routed_out["documents"]), explicit_reference=bool(routed_out["explicit"]))
        names = routed_out["names"]
        with span("analyze"):  # the company routing picked the files by is no word to search them for
            analysis = self.analyzer.run(question=query, names=names)
        said: Instructions = analysis["instructions"]
        filters = routed_out["filters"]
        hits, embedding = self._run_retrieval(mode, analysis["query"], scopes, filters, keywords=analysis["keywords"])
        routed = routed_out["documents"][:MAX_ROUTED]
        reference = routed_out["reference"]
        if not routed and hits:
            with span("route_headings"):
                heading_docs, heading = self.router.heading_documents(analysis["keywords"], scopes, hits[:k],
                                                                      filters, pool=hits)
            routed = heading_docs[:MAX_ROUTED]
            if heading and routed:
                reference = heading
        with span("rank_pages"):
            ranked = self.pages.run(question=analysis["query"], query_embedding=embedding, hits=hits,
                                    scopes=scopes, statements=list(said.statements))
        hits = ranked["documents"]
        if filters is None:
            routed = _in_best_document(routed, hits)
        routed = _in_scope(routed, scopes)
        hits = _in_scope(hits, scopes)
        return Retrieval(
            routed=routed, hits=hits, embedding=embedding, reference=reference, query=analysis["query"],
            content_question=_content(routed_out["content_question"], names),
            explicit=bool(routed_out["explicit"]), anchors=analysis["anchors"] or [], filters=filters,
            words=analysis["words"] or [], instructions=said, keywords=analysis["keywords"],
            lead=frozenset(ranked["lead"]),
        )

    def retrieve_within(self, query: str, scopes: list[str], mode: RetrievalMode, k: int,
                        filters: dict[str, Any] | None) -> Retrieval:
        """Retrieval within ``filters`` (one document, say) without routing or page ranking: the top ``k`` hits
        as a :class:`Retrieval`, for an answer kind that asks each document separately."""
        analysis = self.analyzer.run(question=query)
        hits, embedding = self.search(analysis["query"], scopes, mode=mode, filters=filters)
        return Retrieval(routed=[], hits=hits[:k], embedding=embedding, reference="", query=analysis["query"],
                         content_question=query, explicit=False, anchors=analysis["anchors"] or [],
                         filters=filters, words=analysis["words"] or [], instructions=analysis["instructions"],
                         keywords=analysis["keywords"])

    def search(self, query: str, scopes: list[str], *, mode: RetrievalMode = RetrievalMode.HYBRID,
               filters: dict[str, Any] | None = None) -> tuple[list[Document], list[float]]:
        """The scoped retrieval pipeline alone (``mode``'s retrievers, fused), best first, and the query's
        embedding: triage's search tool, and what an answer kind reads passages from."""
        hits, embedding = self._run_retrieval(mode, query, scopes, filters)
        return _in_scope(hits, scopes), embedding

    def draft(self, r: Retrieval, k: int) -> Draft:
        """Step 2: the extractive answer and its relevance (explicitly referenced chunks only, when there are
        some)."""
        return Draft.of(self.extractive.run(
            question=r.query,
            documents=[] if r.explicit else r.hits[:k],
            routed=r.routed,
            query_embedding=r.embedding,
            content_question=r.content_question,
            reference=r.reference,
        ))

    def signals(self, r: Retrieval, ext: Draft, scopes: list[str]) -> Signals:
        """Step 3: the draft's ``max_cosine`` and ``coverage``, the term support in the scope, and ``confidence``,
        the number the refusal threshold applies to (1.0 for an explicit reference): see :class:`Signals`.
        Both supports are one store call (:meth:`term_supports`)."""
        if r.explicit:
            return Signals(max_cosine=ext.max_cosine, coverage=ext.coverage, anchor_support=1.0, word_support=1.0,
                           confidence=1.0)
        support, words = self.term_supports([(r.anchors, 1), (r.words, WORDS_AT_LEAST)], scopes, r.filters)
        return Signals(max_cosine=ext.max_cosine, coverage=ext.coverage, anchor_support=support, word_support=words,
                       confidence=confidence(ext.max_cosine, support, words))

    def term_support(self, terms: Sequence[str], scopes: list[str], filters: dict[str, Any] | None, *,
                     at_least: int = 1) -> float:
        """Share of ``terms`` that occur anywhere in ``scopes`` (1.0 when there are none; any form of a word counts:
        "ending" is found by "ended", "sampled" by "sample", see :func:`word_forms`), counted out of ``at_least``
        terms when there are fewer. A specific term no passage holds is strong evidence the PDFs don't answer."""
        return self.term_supports([(terms, at_least)], scopes, filters)[0]

    def term_supports(self, asked: Sequence[tuple[Sequence[str], int]], scopes: list[str],
                      filters: dict[str, Any] | None) -> list[float]:
        """:meth:`term_support` of each ``(terms, at_least)`` of ``asked``, all looked up in one store call
        (:meth:`ChunkStore.bm25_matches_each`, with ``scopes`` and ``filters``): the first ``MAX_TERMS`` of each."""
        lookups = [[" ".join(word_forms(t)) for t in terms[:MAX_TERMS]] for terms, _ in asked]
        wanted = [q for qs in lookups for q in qs]
        found = self.store.bm25_matches_each(wanted, scopes=scopes, filters=filters) if wanted else {}
        out = []
        for (terms, at_least), qs in zip(asked, lookups, strict=True):
            missing = sum(1 for q in qs if not found[q])
            out.append(1.0 - missing / max(min(len(terms), MAX_TERMS), at_least) if terms else 1.0)
        return out

    def _run_retrieval(
        self, mode: RetrievalMode, query: str, scopes: list[str], filters: dict[str, Any] | None,
        *, keywords: str | None = None,
    ) -> tuple[list[Document], list[float]]:
        """Run the retrieval pipeline's own components in its graph order, without ``Pipeline.run``; BM25 searches
        for ``keywords`` when given (the query without the routed company's name), the embedding reads ``query``.

        ``Pipeline.run`` deep-copies every value passed between components, one Python call per float of
        the 384-float embedding and per document field: at 50k chunks that measured ~30 ms a question, a
        third of retrieval. These components never mutate their inputs, so the copies buy nothing here;
        ``build_query_pipeline`` still describes (and serialises) exactly this graph.
        """
        mode = RetrievalMode.from_str(mode)
        p = self._pipeline(mode)
        top_k = self.settings.retrieval_top_k
        ranked: list[list[Document]] = []
        embedding: list[float] | None = None
        if mode.dense:
            with span("embed"):
                embedding = p.get_component("embedder").run(text=query)["embedding"]
            with span("retrieve_dense") as s:
                dense = p.get_component("dense").run(query_embedding=embedding, scopes=scopes, filters=filters,
                                                     top_k=top_k)
                tag(s, n_hits=len(dense["documents"]))
            ranked.append(dense["documents"])
        if mode.bm25:
            with span("retrieve_bm25") as s:
                bm25 = p.get_component("bm25").run(query=keywords or query, scopes=scopes, filters=filters,
                                                   top_k=top_k)
                tag(s, n_hits=len(bm25["documents"]))
            ranked.append(bm25["documents"])
        with span("fuse"):
            hits = p.get_component("joiner").run(documents=ranked)["documents"]
        if embedding is None:  # bm25 mode: the answerer still ranks sentences by similarity
            with span("embed"):
                embedding = self.embedder.run(text=query)["embedding"]
        return hits, embedding

    # --- what callers outside the answer path ask ----------------------------------------------
    def passages(
        self, question: str, scopes: Sequence[str], *, mode: RetrievalMode | str = RetrievalMode.HYBRID,
        k: int | None = None,
    ) -> list[Document]:
        """The passages an answer would be built from: referenced chunks first, then the top ``k`` hits."""
        self.warm_up()
        scopes = require_scopes(list(scopes))
        k = k or self.settings.answer_top_k
        return self.retrieve(question, scopes, RetrievalMode.from_str(mode), k).context(k)

    def relevance(self, question: str, scopes: Sequence[str], *,
                  mode: RetrievalMode | str = RetrievalMode.HYBRID) -> float:
        """The score the refusal threshold applies to: the best cosine similarity between the question and a
        sentence (or table row) of the passages the answer would be built from (1.0 for an explicit reference)."""
        self.warm_up()
        scopes = require_scopes(list(scopes))
        k = self.settings.answer_top_k
        r = self.retrieve(question, scopes, RetrievalMode.from_str(mode), k)
        return self.signals(r, self.draft(r, k), scopes).confidence

    # --- the look-up -------------------------------------------------------------------------------
    def answer(
        self,
        question: str,
        scopes: Sequence[str],
        history: Sequence[Turn] = (),
        *,
        mode: RetrievalMode | str = RetrievalMode.HYBRID,
        k: int | None = None,
        show: ShowText | None = None,
        decide: Decide | None = None,
    ) -> Answer:
        """The look-up, one step a line (each a component, or a method running components):

        rewriter (question + history -> query) -> :meth:`retrieve` (analyzer -> router -> the retrieval
        pipeline: embedder -> dense + bm25 -> fusion -> referenced chunks first: a :class:`Retrieval`)
        -> :meth:`draft` (the extractive answerer: passages -> draft + relevance) -> :meth:`signals` (term support
        -> confidence) -> ``decide``, by default :meth:`pipelines.answer_policy.AnswerPolicy.decide` (refuse / LLM
        + validation, retry / extractive fallback); the LLM answer kind with tools passes its own.
        ``show``: an LLM answer's checked sentences while the model writes them (:mod:`pipelines.streaming`).
        """
        t0 = time.perf_counter()
        self.warm_up()
        scopes = require_scopes(list(scopes))
        mode = RetrievalMode.from_str(mode)
        k = k or self.settings.answer_top_k
        question = " ".join(question.split())
        if not question:
            raise ValueError("the question is empty")
        decide = decide or self.policy.decide
        with span("answer", retrieval_mode=mode.value, k=k) as root:
            with span("rewrite"):
                query = self.rewriter.run(question=question, history=list(history))["query"]
            r = self.retrieve(query, scopes, mode, k)
            with span("extract"):
                ext = self.draft(r, k)
            with span("confidence") as s:
                signals = self.signals(r, ext, scopes)
                tag(s, confidence=round(signals.confidence, 4))
            context = r.context(k)
            t_retrieved = time.perf_counter()
            with span("decide") as s:
                answer = decide(Decision(question=question, history=list(history), context=context, draft=ext,
                                         confidence=signals.confidence, scopes=scopes, show=show))
                tag(s, answer_mode=answer.mode, refused=answer.refused, n_citations=len(answer.citations))
            t_end = time.perf_counter()
            tag(root, **self._outcome_tags(answer, signals.confidence, len(context), len(r.routed)))
        return answer.model_copy(
            update={
                "confidence": signals.confidence,
                "retrieved": [RetrievedChunk.of_document(d, ranked_by=r.ranked_by(d)) for d in context],
                "timings_ms": Timings(
                    retrieve=round((t_retrieved - t0) * 1000, 1),
                    generate=round((t_end - t_retrieved) * 1000, 1),
                    total=round((t_end - t0) * 1000, 1),
                ),
            }
        )

    def _outcome_tags(self, answer: Answer, confidence: float, n_retrieved: int, n_routed: int) -> dict[str, Any]:
        """What a trace of the answer says: its outcome, confidence, validation counts, why it refused."""
        v = answer.validation
        reason = ""
        if answer.refused:
            reason = ("below_threshold" if confidence < self.settings.refusal_threshold
                      else "llm_unanswerable" if answer.mode == "llm" else "no_quotable_passage")
        return {
            "answer_mode": answer.mode, "refused": answer.refused, "refusal_reason": reason,
            "confidence": round(confidence, 4), "n_retrieved": n_retrieved, "n_routed": n_routed,
            "n_citations": len(answer.citations), "validation.exact": v.exact, "validation.normalised": v.normalised,
            "validation.fuzzy": v.fuzzy, "validation.unknown_chunk": v.unknown_chunk,
            "validation.unmatched": v.unmatched, "validation.retried": v.retried,
        }


def _content(question: str, names: list[str]) -> str:
    """What the answerer scores sentences against: the question without structural references (the router's
    ``content_question``), instructions, the company's name and period words ("fiscal")."""
    stripped = strip_instructions(question)
    return plain_periods(without_names(stripped, names) or stripped)


def _in_scope(docs: list[Document], scopes: list[str]) -> list[Document]:
    """Defence in depth: the stores filter by scope; anything else here is a bug, dropped and logged."""
    ok = [d for d in docs if (d.meta or {}).get("scope") in scopes]
    if len(ok) != len(docs):
        log.error("scope_leak_blocked", n_dropped=len(docs) - len(ok))
    return ok


def _in_best_document(routed: list[Document], hits: list[Document]) -> list[Document]:
    """"Page 14" or "figure 4" asked in a channel of many PDFs names no file: keep the referenced chunks of the
    document retrieval ranks highest among those that have them (all of them when retrieval found none)."""
    docs = {(d.meta or {}).get("doc_id") for d in routed}
    if len(docs) < 2:
        return routed
    best = next((h.meta.get("doc_id") for h in hits if h.meta and h.meta.get("doc_id") in docs), None)
    if best is None:
        return routed
    return [d for d in routed if (d.meta or {}).get("doc_id") == best]
