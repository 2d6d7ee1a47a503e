"""The embedded document store: SQLite (WAL, FTS5 BM25) plus in-memory sign-bit codes for dense search.

One SQLite file holds everything: ``chunks`` (id, scope, doc_id, file_name, chunk_index, content, meta JSON),
``embeddings`` (float32 blobs, kept apart so BM25 and listings never read them), ``vector_codes`` (each
embedding's signs, 48 bytes at 384 dimensions: what dense search scans in memory before it rescores the nearest
by their float32 vectors; :mod:`.vectors`), the FTS5 index
``chunks_fts`` (contentless, written by the store itself in the same transaction as the chunks; no
triggers) and ``changes`` (one row per scope touched by each write transaction).

* Every write is one ``BEGIN IMMEDIATE`` transaction: all chunks of a document or none.
* Readers in other processes see only committed states (WAL snapshots). The dense matrices are cached per
  scope and refreshed lazily: each search reads the newest ``changes.gen`` and drops the cached matrices
  of the scopes written since, by this process or another one.
* Every search takes its scopes and filters by them in SQL or by scope-partitioned matrices: a chunk of
  another scope is never scored, returned, counted or listed.

Scores: BM25 is ``-bm25()`` (positive, higher is better); dense is the cosine similarity in [-1, 1].

The package, by what each file holds: :mod:`.schema` (tables, migrations), :mod:`.filters` (Haystack filters
to SQL), :mod:`.fulltext` (BM25), :mod:`.vectors` (the matrix cache and its generations), :mod:`.rows`
(inserts, deletes, rows to Documents), :mod:`.connection` (connections and transactions) and :mod:`.store`
(the ``DocumentStore`` API on top, composed of one object of each of those parts).
"""

from __future__ import annotations

from haystack import component

from connectors.scoped_retrievers import ScopedBM25Retriever, ScopedEmbeddingRetriever
from connectors.sqlite_store.store import SQLiteDocumentStore
from connectors.sqlite_store.vectors import VECTOR_FORMATS

__all__ = ["VECTOR_FORMATS", "SQLiteBM25Retriever", "SQLiteDocumentStore", "SQLiteEmbeddingRetriever",
           "set_vector_format"]


def set_vector_format(store: SQLiteDocumentStore, vector_format: str) -> None:
    """Keep the store's dense matrices as ``binary`` (sign bits, a 32nd of the memory, candidates rescored by their
    exact vectors: the default), ``float32`` (exact) or ``int8`` (a quarter, rescored; :mod:`.vectors`). A benchmark
    option (``citebot bench retrieval --vectors``): what is stored does not change. Here, not on the store, because
    the store's file is hashed into the eval index keys (``eval/index.py``) and this reads the index only."""
    store._vectors.set_format(vector_format)  # noqa: SLF001 - the package's own part


# The retrievers are defined here, not in a module of their own: saved pipelines name them by this path
# (``connectors.sqlite_store.SQLiteBM25Retriever``) and Haystack looks components up by that name.
@component
class SQLiteBM25Retriever(ScopedBM25Retriever):
    """BM25 over the SQLite store's chunks of the given scopes."""

    store_class = SQLiteDocumentStore


@component
class SQLiteEmbeddingRetriever(ScopedEmbeddingRetriever):
    """Cosine kNN over the SQLite store's chunks of the given scopes."""

    store_class = SQLiteDocumentStore
