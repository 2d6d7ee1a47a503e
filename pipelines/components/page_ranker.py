"""PageRanker: a page-level signal beside the chunk-level one, for long documents.

Structure-aware chunks split a financial statement into many small pieces of numbers; no single piece
carries the page's title, its column years and the row the question needs, so chunk retrieval loses the
page a one-chunk-per-page retriever finds. PageRanker ranks the *pages* of the documents in play and
re-ranks the fused chunk hits by their page:

* a page's vector is a stored chunk vector (no extra model call, no re-index) compared with the question's
  embedding: its first chunk's (``head``, the default: the page's title and first lines, what a one-vector-
  per-page retriever reads, since MiniLM reads a text's first 256 word pieces) or the mean of its chunks'
  (``mean``);
* a page's evidence is the best fused score of its chunks among the hits;
* a page that is the financial statement the question reads from (:mod:`pipelines.components.statements`,
  told by its title lines and its share of amounts) is lifted.

The best chunk of each top page (by cosine with the question) leads the hits, one per page, then the hits
follow in their fused order. Page data is built from the store per document and cached (a document id
names its bytes in its scope; entries expire after ten minutes, so a `citebot reindex` is seen), so a
question costs one vector product over the pages in play. The store hands a document over as
``document_vectors`` (ids, pages, texts and one matrix of vectors): a ``Document`` is made only for the chunks
that lead.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

import numpy as np
from haystack import Document, component, default_from_dict, default_to_dict

from connectors.store_api import ChunkStore, DocumentVectors, require_scopes
from connectors.stores import store_from_dict
from pipelines.components.statements import statement_kind, wanted_statements

_CACHE_DOCS = 64
_FETCH_LIMIT = 20000
_CACHE_TTL_S = 600.0


class PageVector(Enum):
    """How a page's vector is made from its chunks' stored vectors."""

    HEAD = "head"
    MEAN = "mean"

    @staticmethod
    def from_str(value: str) -> PageVector:
        try:
            return PageVector(value)
        except ValueError:
            raise ValueError(f"page_vector must be one of {[m.value for m in PageVector]}, not {value!r}") from None


@dataclass
class _Pages:
    """One document's pages: their numbers, unit vectors and chunks per page (row numbers in ``chunks``), and (read
    the first time a question asks for a statement, most never do) their statement kinds."""

    pages: list[int]
    vectors: np.ndarray
    members: list[list[int]]
    chunks: DocumentVectors
    _kinds: list[str] | None = None

    @property
    def kinds(self) -> list[str]:
        if self._kinds is None:  # two threads may both work it out: the same list
            texts = ["\n".join(self.chunks.contents[j] for j in group) for group in self.members]
            self._kinds = [statement_kind(text[:400], text) for text in texts]
        return self._kinds

    def best_chunk(self, i: int, q: np.ndarray) -> int:
        """The chunk of page ``i`` nearest the (unit) question vector; the first of equals, in reading order."""
        vectors, has = self.chunks.vectors, self.chunks.has_vector
        best, top = -1, -np.inf
        for j in self.members[i]:
            if has[j]:
                v = vectors[j]
                c = float(v @ q) / (float(_norm(v)) or 1.0)
            else:
                c = -1.0
            if c > top:
                best, top = j, c
        return best


def _page_of(doc: Document) -> int:
    return int((doc.meta or {}).get("page_start", 0) or 0)


def _norm(x: np.ndarray) -> np.floating[Any]:
    """``np.linalg.norm`` of a 1-D float vector, the same operations (``sqrt(x.dot(x))``) without its checks: a
    question's cache misses take two a page."""
    return np.sqrt(x.dot(x))


def build_pages(chunks: DocumentVectors, page_vector: PageVector = PageVector.HEAD) -> _Pages:
    """Group one document's chunks by their first page, in reading order (``chunk_index``)."""
    by_page: dict[int, list[int]] = {}
    for j in sorted(range(len(chunks)), key=chunks.chunk_indexes.__getitem__):
        by_page.setdefault(chunks.pages[j], []).append(j)
    pages = sorted(by_page)
    vectors = np.zeros((len(pages), max(chunks.vectors.shape[1], 1)), dtype=np.float32)
    has = chunks.has_vector.tolist()
    for i, p in enumerate(pages):
        embedded = [j for j in by_page[p] if has[j]]
        if embedded:
            # the head alone needs making a unit vector (the page's other chunks count only for a mean)
            rows = embedded[:1] if page_vector is PageVector.HEAD else embedded
            units = [x / (_norm(x) or 1.0) for x in (chunks.vectors[j] for j in rows)]
            v = units[0] if page_vector is PageVector.HEAD else np.mean(units, axis=0)
            vectors[i] = v / (_norm(v) or 1.0)
    return _Pages(pages, vectors, [by_page[p] for p in pages], chunks)


@component
class PageRanker:
    """Fused hits + question in; hits re-ranked by their page's rank among the documents in play out."""

    def __init__(self, *, document_store: ChunkStore, page_weight: float = 0.5, statement_boost: float = 0.3,
                 top_pages: int = 5, max_documents: int = 5, page_vector: str = "head") -> None:
        self.page_vector = PageVector.from_str(page_vector)
        if page_weight < 0 or statement_boost < 0 or top_pages < 0 or max_documents < 1:
            raise ValueError("page_weight, statement_boost and top_pages must be >= 0, max_documents >= 1")
        self.document_store = document_store
        self.page_weight = page_weight
        self.statement_boost = statement_boost
        self.top_pages = top_pages
        self.max_documents = max_documents
        self._cache: OrderedDict[tuple[str, str], tuple[float, _Pages]] = OrderedDict()
        self._lock = threading.Lock()

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, document_store=self.document_store.to_dict(), page_weight=self.page_weight,
                               statement_boost=self.statement_boost, top_pages=self.top_pages,
                               max_documents=self.max_documents, page_vector=self.page_vector.value)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PageRanker:
        params = data.get("init_parameters", {})
        if isinstance(params.get("document_store"), dict):
            params["document_store"] = store_from_dict(params["document_store"])
        return default_from_dict(cls, data)

    def _pages(self, scope: str, doc_id: str) -> _Pages:
        key = (scope, doc_id)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and now - hit[0] < _CACHE_TTL_S:
                self._cache.move_to_end(key)
                return hit[1]
        pages = build_pages(self.document_store.document_vectors(doc_id, scope=scope, limit=_FETCH_LIMIT),
                            self.page_vector)
        with self._lock:
            self._cache[key] = (now, pages)
            while len(self._cache) > _CACHE_DOCS:
                self._cache.popitem(last=False)
        return pages

    @component.output_types(documents=list[Document], lead=list[str])
    def run(self, question: str, query_embedding: list[float], hits: list[Document], scopes: list[str],
            statements: list[str] | None = None) -> dict[str, Any]:
        """Re-rank the fused hits by their page's rank among the documents in play.

        :param question: the question.
        :param query_embedding: its embedding, compared with each page's vector.
        :param hits: the fused chunk hits, best first.
        :param scopes: where the asker may read (the pages ranked are in these scopes only).
        :param statements: the statements the asker said to read from (``Instructions.statements``), lifted
            with those the question's own words need.
        :returns: ``documents``, the lead chunks (scored by their page) then the other hits (their fused score);
            ``lead``, the ids of the lead chunks, so a caller can say which score each passage was ranked by.
        """
        scopes = require_scopes(scopes)
        if not hits or self.page_weight == 0 and self.statement_boost == 0:
            return {"documents": hits, "lead": []}
        docs: list[tuple[str, str]] = []
        for h in hits:
            meta = h.meta or {}
            key = (str(meta.get("scope", "")), str(meta.get("doc_id", "")))
            if key[0] in scopes and key not in docs:
                docs.append(key)
        docs = docs[: self.max_documents]
        q = np.asarray(query_embedding, dtype=np.float32)
        q = q / (np.linalg.norm(q) or 1.0)
        wanted = set(wanted_statements(question)) | set(statements or ())
        evidence: dict[tuple[str, int], float] = {}
        for h in hits:
            k = (str((h.meta or {}).get("doc_id", "")), _page_of(h))
            evidence[k] = max(evidence.get(k, 0.0), float(h.score or 0.0))
        top_evidence = max(evidence.values(), default=1.0) or 1.0
        scored: list[tuple[float, _Pages, int]] = []
        for scope, doc_id in docs:
            pages = self._pages(scope, doc_id)
            if not pages.pages:
                continue
            cos = pages.vectors @ q if pages.vectors.shape[1] == q.shape[0] else np.zeros(len(pages.pages))
            for i, p in enumerate(pages.pages):
                s = self.page_weight * float(cos[i]) + evidence.get((doc_id, p), 0.0) / top_evidence
                if wanted and pages.kinds[i] in wanted:
                    s += self.statement_boost
                scored.append((s, pages, i))
        scored.sort(key=lambda t: t[0], reverse=True)
        lead: list[Document] = []
        seen: set[str] = set()
        for s, pages, i in scored[: self.top_pages]:
            best = pages.chunks.document(pages.best_chunk(i, q))
            lead.append(replace(best, score=s))
            seen.add(best.id)
        return {"documents": lead + [h for h in hits if h.id not in seen], "lead": [d.id for d in lead]}
