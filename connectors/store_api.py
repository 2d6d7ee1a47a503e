"""What Citebot needs from a document store, beyond Haystack's ``DocumentStore`` protocol.

Both stores implement it: the embedded :mod:`connectors.sqlite_store` and
:mod:`connectors.elasticsearch_store`. Every search and listing takes the scopes it may see and
raises :class:`ScopeRequiredError` when given none: no code path returns, counts or lists a chunk
of another scope.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np
from haystack import Document
from pydantic import BaseModel


class DocInfo(BaseModel):
    """One document of a scope, as the store lists it (from its chunks' metadata)."""

    doc_id: str
    scope: str
    file: str
    pages: int
    chunks: int
    uploaded_at: str
    uploaded_by: str = ""
    sha256: str = ""
    source_url: str = ""
    # What the document says it is, read from its first pages at ingest (chunk meta ``doc_*``,
    # pipelines/components/document_identity.py): "" / None when nothing was read.
    issuer: str = ""
    form: str = ""
    period: str = ""
    year: int | None = None
    quarter: int | None = None
    title: str = ""


@dataclass(frozen=True, eq=False)  # eq: numpy arrays have no one truth value
class DocumentVectors:
    """One document's chunks as page ranking reads them, without making a ``Document`` of each: per chunk, in
    :meth:`ChunkStore.fetch`'s order, its id, ``chunk_index`` and first page (``page_start``; 0 when missing), its
    text, and its stored vector as a row of ``vectors`` (float32, as written; a chunk without one has a row of
    zeros and ``has_vector`` False). :meth:`document` makes one chunk's ``Document`` (no embedding) when it is
    needed."""

    ids: list[str]
    chunk_indexes: list[int]
    pages: list[int]
    contents: list[str]
    vectors: np.ndarray
    has_vector: np.ndarray
    make_document: Callable[[int], Document]

    def __len__(self) -> int:
        return len(self.ids)

    def document(self, i: int) -> Document:
        """The ``i``-th chunk as :meth:`ChunkStore.fetch` returns it without embeddings."""
        return self.make_document(i)

    @classmethod
    def from_documents(cls, docs: Sequence[Document], dim: int = 0) -> DocumentVectors:
        """From chunks fetched with their embeddings (a store that has nothing cheaper)."""
        dim = next((len(d.embedding) for d in docs if d.embedding), dim)
        vectors = np.zeros((len(docs), dim), dtype=np.float32)
        has = np.zeros(len(docs), dtype=bool)
        for i, d in enumerate(docs):
            if d.embedding:
                vectors[i] = np.asarray(d.embedding, dtype=np.float32)
                has[i] = True
        kept = [replace(d, embedding=None) for d in docs]
        return cls(
            ids=[d.id for d in docs],
            chunk_indexes=[int((d.meta or {}).get("chunk_index", 0) or 0) for d in docs],
            pages=[int((d.meta or {}).get("page_start", 0) or 0) for d in docs],
            contents=[d.content or "" for d in docs],
            vectors=vectors,
            has_vector=has,
            make_document=kept.__getitem__,
        )


class StoreError(Exception):
    """The store could not do what was asked (server down, disk full...)."""


class ScopeRequiredError(ValueError):
    """A search or listing was asked for without a scope."""


def require_scopes(scopes: str | Sequence[str] | None) -> list[str]:
    """Normalise ``scopes`` to a non-empty list of non-blank strings, or raise (a blank scope is none)."""
    if isinstance(scopes, str):
        scopes = [scopes]
    out = [s for s in (scopes or []) if isinstance(s, str) and s.strip()]
    if not out:
        raise ScopeRequiredError("a scope is required: pass the channel's scope (e.g. 'local')")
    return out


def scope_filter(scopes: Sequence[str], filters: dict[str, Any] | None = None) -> dict[str, Any]:
    """Haystack filter for ``meta.scope in scopes``, AND-ed with ``filters``."""
    cond: dict[str, Any] = {"field": "meta.scope", "operator": "in", "value": list(require_scopes(scopes))}
    if not filters:
        return {"operator": "AND", "conditions": [cond]}
    return {"operator": "AND", "conditions": [cond, filters]}


@runtime_checkable
class ChunkStore(Protocol):
    # --- Haystack DocumentStore protocol -------------------------------------------------
    def to_dict(self) -> dict[str, Any]: ...
    def count_documents(self) -> int: ...
    def filter_documents(self, filters: dict[str, Any] | None = None) -> list[Document]: ...
    def write_documents(self, documents: list[Document], policy: Any = ...) -> int: ...
    def delete_documents(self, document_ids: list[str]) -> None: ...

    # --- Citebot ----------------------------------------------------------------------------
    def replace_document(
        self, documents: list[Document], *, scope: str, replaces: Sequence[str] = ()
    ) -> list[str]:
        """Write all chunks of one document and remove the documents of ``scope`` named in ``replaces``, all or
        nothing. Which earlier versions a new one replaces is the caller's decision
        (:meth:`pipelines.service.CitebotService.ingest`: who may replace what); the store only executes it.
        Earlier chunks of the new document's own doc_id go too (a re-index with fewer chunks leaves none
        behind). Returns the doc_ids of ``replaces`` that were there and are gone, in ``replaces``' order."""
        ...

    def has_document(self, doc_id: str, *, scope: str) -> bool: ...

    def delete_document(self, doc_id: str, *, scopes: Sequence[str]) -> int:
        """Delete every chunk of ``doc_id`` within ``scopes``; returns how many were deleted."""
        ...

    def list_documents(self, *, scopes: Sequence[str]) -> list[DocInfo]: ...

    def count_in_scopes(self, scopes: Sequence[str]) -> int | None:
        """How many chunks the scopes hold, when the store counts them cheaply; ``None`` when it does not (a
        cache keyed on it then falls back on its time to live)."""
        ...

    def bm25_search(
        self,
        query: str,
        *,
        scopes: Sequence[str],
        top_k: int,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]: ...

    def bm25_matches(self, query: str, *, scopes: Sequence[str], filters: dict[str, Any] | None = None) -> bool:
        """Whether ``bm25_search(query, scopes=scopes, filters=filters, top_k=1)`` would find anything (cheaper:
        nothing is ranked or fetched)."""
        ...

    def bm25_matches_each(
        self, queries: Sequence[str], *, scopes: Sequence[str], filters: dict[str, Any] | None = None
    ) -> dict[str, bool]:
        """:meth:`bm25_matches` of each of ``queries``, keyed by query, in one round trip (a question's term
        support asks up to twenty): the same scopes and filters bound every query."""
        ...

    def embedding_search(
        self,
        embedding: Sequence[float],
        *,
        scopes: Sequence[str],
        top_k: int,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]: ...

    def fetch(
        self,
        *,
        scopes: Sequence[str],
        filters: dict[str, Any] | None = None,
        limit: int = 200,
        return_embedding: bool = False,
    ) -> list[Document]:
        """Chunks by metadata (pages, section, label, file), ordered by doc and chunk_index."""
        ...

    def document_vectors(self, doc_id: str, *, scope: str, limit: int = 20_000) -> DocumentVectors:
        """Every chunk of ``doc_id`` in ``scope`` (up to ``limit``), as ``fetch`` with ``return_embedding=True``
        and a ``meta.doc_id`` filter returns them, but as :class:`DocumentVectors`: ids, pages, texts and one
        matrix of vectors, no ``Document`` made until asked for (page ranking reads a few per question)."""
        ...

    def all_scopes(self) -> list[str]:
        """Every scope holding chunks (admin CLI only: reindex, docs --all-scopes)."""
        ...

    def embedding_fingerprint(self) -> str | None:
        """What the stored vectors were made with (:func:`connectors.embedding.embedding_fingerprint`)."""
        ...

    def set_embedding_fingerprint(self, fingerprint: str) -> None: ...


class EmbeddingMismatchError(StoreError):
    """The store's vectors were made with another model or backend than the one configured."""

    def __init__(self, stored: str, current: str) -> None:
        super().__init__(
            f"the store's vectors were made with embedding {stored} but this process makes {current} "
            "(CITEBOT_EMBEDDING_BACKEND or CITEBOT_MODEL_PATH changed): run `citebot reindex`, or switch back"
        )
        self.stored = stored
        self.current = current


def check_embeddings(store: ChunkStore, current: str, *, legacy: str, previous: str = "") -> str | None:
    """``None`` when the store's vectors are comparable with ``current`` (recording it in a new store), else the
    fingerprint the store holds. A store without vectors takes ``current``; one from before fingerprints were
    recorded was made by torch: ``legacy``.
    ``previous``: the same configuration's fingerprint in the older form (weights by size, not content), which a
    store recorded before the upgrade; it is re-recorded as ``current``."""
    stored = store.embedding_fingerprint()
    if stored != current and not store.count_documents():  # no vectors (new, or every document forgotten)
        store.set_embedding_fingerprint(current)
        return None
    if stored is None:
        stored = legacy
        store.set_embedding_fingerprint(stored)
    elif previous and stored == previous:
        store.set_embedding_fingerprint(current)
        stored = current
    return None if stored == current else stored
