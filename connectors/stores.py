"""Pick the document store and the chat state from the settings, and the matching pair of scoped retrievers.

``open_store`` returns Elasticsearch when ``CITEBOT_ELASTICSEARCH_URL`` is set, else the embedded SQLite
store in ``CITEBOT_DATA_DIR``; ``open_state`` likewise returns the chat state on Elasticsearch
(``citebot-state-*`` indices, shared by every replica) or the SQLite state log in ``CITEBOT_DATA_DIR``.
``make_retrievers`` returns ``(bm25, embedding)`` Haystack components whose ``run`` takes ``scopes``
(mandatory) and ``filters``/``top_k`` (optional); the query pipeline fuses their outputs with
``pipelines/components/score_fusion.py`` (weighted scores, or Haystack's reciprocal rank fusion: ``CITEBOT_FUSION``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from connectors.elasticsearch_state import ElasticsearchState
from connectors.elasticsearch_store import (
    CitebotElasticsearchStore,
    ScopedElasticsearchBM25Retriever,
    ScopedElasticsearchEmbeddingRetriever,
)
from connectors.private_files import private_dir
from connectors.settings import Settings
from connectors.sqlite_store import (
    SQLiteBM25Retriever,
    SQLiteDocumentStore,
    SQLiteEmbeddingRetriever,
    set_vector_format,
)
from connectors.state_api import ChatState
from connectors.state_log import StateLog
from connectors.store_api import ChunkStore, StoreError


def open_store(settings: Settings) -> ChunkStore:
    if settings.elasticsearch_url:
        return CitebotElasticsearchStore.from_settings(settings)
    try:
        private_dir(settings.data_dir)
        store = SQLiteDocumentStore(settings.sqlite_path, embedding_dim=settings.embedding_dim)
    except (OSError, sqlite3.Error) as e:
        raise StoreError(unusable_data_dir(settings, e)) from e
    set_vector_format(store, settings.vectors)
    return store


def unusable_data_dir(settings: Settings, error: BaseException) -> str:
    """What to tell a person whose data directory cannot be made or written (the path, and the setting)."""
    why = error.strerror if isinstance(error, OSError) and error.strerror else type(error).__name__
    return (f"the data directory {settings.data_dir.resolve()} cannot be used ({why}); set CITEBOT_DATA_DIR to a "
            "folder you can write to")


def open_state(settings: Settings) -> ChatState:
    if settings.elasticsearch_url:
        return ElasticsearchState.from_settings(settings)
    try:
        private_dir(settings.data_dir)
        return StateLog(settings.state_path, retention_days=settings.retention_days)
    except (OSError, sqlite3.Error) as e:
        raise StoreError(unusable_data_dir(settings, e)) from e


def stored_backend(store: ChunkStore) -> str | None:
    """The embedding backend a store's vectors were made with, as its recorded fingerprint says: ``onnx-int8``, or
    ``onnx`` for fp32 vectors (torch and fp32 ONNX make the same ones; a store from before fingerprints were
    recorded was made by torch). ``None``: the store holds no vectors yet."""
    if not store.count_documents():
        return None
    fingerprint = store.embedding_fingerprint()
    return "onnx-int8" if fingerprint is not None and fingerprint.endswith("-int8") else "onnx"


def settings_for_store(settings: Settings, store: ChunkStore) -> Settings:
    """The settings to index into and search ``store`` with. Unless ``CITEBOT_EMBEDDING_BACKEND`` is set, a store
    that holds vectors keeps the backend that made them (an fp32 store keeps answering after the default changed,
    until ``citebot reindex`` moves it), and a new one gets the default."""
    if settings.embedding_backend_chosen:
        return settings
    backend = stored_backend(store)
    if backend is None or backend == settings.embedding_backend:
        return settings
    return settings.model_copy(update={"embedding_backend": backend})


# Citebot's own document stores, each with its (BM25, dense) retrievers: the one list :func:`store_from_dict` and
# :func:`make_retrievers` read. A new store is an entry here and its branch in :func:`open_store`.
STORES: dict[type[Any], tuple[type[Any], type[Any]]] = {
    SQLiteDocumentStore: (SQLiteBM25Retriever, SQLiteEmbeddingRetriever),
    CitebotElasticsearchStore: (ScopedElasticsearchBM25Retriever, ScopedElasticsearchEmbeddingRetriever),
}


def store_from_dict(data: dict[str, Any]) -> ChunkStore:
    """Rebuild one of Citebot's own stores from its ``to_dict`` (an explicit list, :data:`STORES`: a saved
    pipeline never names a class to import)."""
    kind = str(data.get("type", ""))
    for cls in STORES:
        if kind.endswith(f".{cls.__name__}"):
            store: ChunkStore = cls.from_dict(data)
            return store
    raise ValueError(f"unknown document store type {kind!r}")


def make_retrievers(store: ChunkStore, top_k: int = 20) -> tuple[Any, Any]:
    """``(bm25_retriever, embedding_retriever)`` components for ``store``, each returning ``top_k`` documents."""
    for cls, (bm25, dense) in STORES.items():
        if isinstance(store, cls):
            return bm25(store, top_k=top_k), dense(store, top_k=top_k)
    raise TypeError(f"no retrievers for a {type(store).__name__}; use open_store() to get a store")
