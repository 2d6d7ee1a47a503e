"""The two retriever components both stores share: BM25 and embedding search over the given scopes.

Each store subclasses them naming its own store class (``SQLiteBM25Retriever``,
``ScopedElasticsearchBM25Retriever``...), so a pipeline saved with one store loads it back, and the
scope check and argument validation live in one place.
"""

from __future__ import annotations

from typing import Any, ClassVar

from haystack import Document, component, default_from_dict, default_to_dict

from connectors.store_api import require_scopes


def check_top_k(top_k: int) -> None:
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k <= 0:
        raise ValueError(f"top_k must be a positive integer, got {top_k!r}")


class _ScopedRetriever:
    store_class: ClassVar[type[Any]]

    def __init__(self, document_store: Any, *, top_k: int = 20, return_embedding: bool = False) -> None:
        if not isinstance(document_store, self.store_class):
            raise ValueError(f"document_store must be a {self.store_class.__name__}")  # noqa: TRY004
        check_top_k(top_k)
        self.document_store: Any = document_store
        self.top_k = top_k
        self.return_embedding = return_embedding

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self, document_store=self.document_store.to_dict(), top_k=self.top_k, return_embedding=self.return_embedding
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        params = dict(data.get("init_parameters", {}))
        params["document_store"] = cls.store_class.from_dict(params["document_store"])
        return default_from_dict(cls, {**data, "init_parameters": params})

    def _k(self, top_k: int | None) -> int:
        k = self.top_k if top_k is None else top_k
        check_top_k(k)
        return k


class ScopedBM25Retriever(_ScopedRetriever):
    """BM25 over the chunks of the given scopes (always filtered by scope, at run time)."""

    @component.output_types(documents=list[Document])
    def run(
        self, query: str, scopes: list[str], filters: dict[str, Any] | None = None, top_k: int | None = None
    ) -> dict[str, list[Document]]:
        scopes = require_scopes(scopes)
        docs = self.document_store.bm25_search(
            query, scopes=scopes, top_k=self._k(top_k), filters=filters, return_embedding=self.return_embedding
        )
        return {"documents": docs}


class ScopedEmbeddingRetriever(_ScopedRetriever):
    """Cosine kNN over the chunks of the given scopes (always filtered by scope, at run time)."""

    @component.output_types(documents=list[Document])
    def run(
        self,
        query_embedding: list[float],
        scopes: list[str],
        filters: dict[str, Any] | None = None,
        top_k: int | None = None,
    ) -> dict[str, list[Document]]:
        scopes = require_scopes(scopes)
        docs = self.document_store.embedding_search(
            query_embedding,
            scopes=scopes,
            top_k=self._k(top_k),
            filters=filters,
            return_embedding=self.return_embedding,
        )
        return {"documents": docs}
