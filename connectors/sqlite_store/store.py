"""``SQLiteDocumentStore``: Haystack's ``DocumentStore`` protocol and Citebot's ``ChunkStore`` on one SQLite file.

Every write is one ``BEGIN IMMEDIATE`` transaction: all chunks of a document or none. Readers in other
processes see only committed states (WAL snapshots). Every search takes its scopes and filters by them in
SQL or by scope-partitioned matrices: a chunk of another scope is never scored, returned, counted or listed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any

from haystack import Document, default_from_dict, default_to_dict
from haystack.core.serialization import generate_qualified_class_name
from haystack.document_stores.types import DuplicatePolicy

from connectors.private_files import private_sqlite_file
from connectors.sqlite_store.connection import Connections, log
from connectors.sqlite_store.filters import create_filter_indexes, filters_to_sql
from connectors.sqlite_store.fulltext import FullText
from connectors.sqlite_store.rows import Rows, batches
from connectors.sqlite_store.schema import create_schema
from connectors.sqlite_store.vectors import Vectors
from connectors.store_api import DocInfo, DocumentVectors, StoreError, require_scopes

# Pipelines saved before the store became a package name it by this path; they still load.
_PATH_BEFORE_THE_PACKAGE = "connectors.sqlite_store.SQLiteDocumentStore"


class SQLiteDocumentStore:
    """Haystack ``DocumentStore`` + Citebot ``ChunkStore`` on one SQLite file. Safe across threads and processes.

    Its parts, one object and one file each, each setting up its own state: the connections and transactions
    (:class:`.connection.Connections`), writing and reading rows (:class:`.rows.Rows`), dense search with its
    matrix cache and the store's dimension (:class:`.vectors.Vectors`), and BM25 with its cached counts
    (:class:`.fulltext.FullText`). This class is the API over them."""

    def __init__(self, path: str | Path, *, embedding_dim: int | None = None, bm25_max_postings: int = 8000) -> None:
        if embedding_dim is not None and embedding_dim <= 0:
            raise ValueError("embedding_dim must be positive")
        if bm25_max_postings < 100:
            raise ValueError("bm25_max_postings must be at least 100")
        self.path = Path(path)
        self.embedding_dim = embedding_dim
        self.bm25_max_postings = bm25_max_postings
        private_sqlite_file(self.path)
        self._conns = Connections(self.path)
        self._rows = Rows(embedding_dim)
        self._vectors = Vectors(self._conns, embedding_dim)
        self._fulltext = FullText(self._conns, self._vectors, bm25_max_postings=bm25_max_postings)
        conn = self._conns.conn()
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            create_schema(conn, self._conns.write_lock)
            create_filter_indexes(conn, self._conns.write_lock)
        except sqlite3.Error as e:
            if isinstance(e, sqlite3.OperationalError) and "full" in str(e):  # SQLITE_FULL: no space left
                raise StoreError(f"the disk holding the store {self.path} is full ({e}): free space there, then "
                                 "start again") from e
            raise StoreError(f"cannot open the store at {self.path}: {e}; check the path and its permissions") from e
        self._vectors.check_dim(conn)

    def close(self) -> None:
        """Close every connection this store opened (any thread's). The store reopens lazily if used again."""
        self._conns.close()

    def _conn(self) -> sqlite3.Connection:
        return self._conns.conn()

    def _read(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._conns.read()

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._conns.write()

    # --- serialisation -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self, path=str(self.path), embedding_dim=self.embedding_dim, bm25_max_postings=self.bm25_max_postings
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SQLiteDocumentStore:
        if data.get("type") == _PATH_BEFORE_THE_PACKAGE:
            data = {**data, "type": generate_qualified_class_name(cls)}
        return default_from_dict(cls, data)

    # --- Haystack DocumentStore protocol -----------------------------------------------------------
    def count_documents(self) -> int:
        return int(self._conn().execute("SELECT count(*) FROM chunks").fetchone()[0])

    def filter_documents(self, filters: dict[str, Any] | None = None) -> list[Document]:
        where, params = filters_to_sql(filters)
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT c.rid, c.id, c.content, c.meta, c.extra, e.embedding FROM chunks c "
                f"LEFT JOIN embeddings e ON e.rid = c.rid WHERE {where} ORDER BY c.rid",
                params,
            ).fetchall()
        return [self._rows.row_to_doc(r[1], r[2], r[3], r[4], r[5], None) for r in rows]

    def write_documents(self, documents: list[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE) -> int:
        docs = self._rows.validate_docs(documents)
        with self._write() as conn:
            n = self._rows.insert(conn, docs, policy)
            self._rows.log_changes(conn, {self._rows.scope_of(d) for d in docs})
        self._vectors.after_write()
        return n

    def delete_documents(self, document_ids: list[str]) -> None:
        if not document_ids:
            return
        with self._write() as conn:
            scopes: set[str] = set()
            for batch in batches(list(document_ids), 500):
                marks = ",".join("?" * len(batch))
                scopes.update(
                    r[0] for r in conn.execute(f"SELECT DISTINCT scope FROM chunks WHERE id IN ({marks})", batch)
                )
                self._rows.delete_chunks(conn, f"id IN ({marks})", batch)
            self._rows.log_changes(conn, scopes)
        self._vectors.after_write()

    # --- ChunkStore ----------------------------------------------------------------------------------
    def replace_document(
        self, documents: list[Document], *, scope: str, replaces: Sequence[str] = ()
    ) -> list[str]:
        (scope,) = require_scopes([scope])
        docs = self._rows.validate_docs(documents)
        new_ids: set[str] = set()
        for d in docs:
            if d.meta.get("scope", scope) != scope:
                raise ValueError(f"chunk {d.id} has scope {d.meta.get('scope')!r}, expected {scope!r}")
            if d.meta.get("doc_id"):
                new_ids.add(str(d.meta["doc_id"]))
        docs = [d if d.meta.get("scope") == scope else replace(d, meta={**d.meta, "scope": scope}) for d in docs]
        # the versions the service decided this one replaces (store_api), and earlier chunks of this doc_id
        old: set[str] = set()
        with self._write() as conn:
            for batch in batches(sorted(set(replaces) - new_ids), 500):
                marks = ",".join("?" * len(batch))
                old.update(r[0] for r in conn.execute(
                    f"SELECT DISTINCT doc_id FROM chunks WHERE scope=? AND doc_id IN ({marks})", [scope, *batch]
                ))
            for batch in batches(sorted(new_ids | old), 500):
                marks = ",".join("?" * len(batch))
                self._rows.delete_chunks(conn, f"scope=? AND doc_id IN ({marks})", [scope, *batch])
            self._rows.insert(conn, docs, DuplicatePolicy.FAIL)
            self._rows.log_changes(conn, {scope})
        self._vectors.after_write()
        replaced = [d for d in dict.fromkeys(replaces) if d in old]
        log.debug("store_replace_document", scope=scope, chunks=len(docs), replaced=len(replaced))
        return replaced

    def has_document(self, doc_id: str, *, scope: str) -> bool:
        (scope,) = require_scopes([scope])
        row = self._conn().execute("SELECT 1 FROM chunks WHERE scope=? AND doc_id=? LIMIT 1", (scope, doc_id))
        return row.fetchone() is not None

    def delete_document(self, doc_id: str, *, scopes: Sequence[str]) -> int:
        scopes = require_scopes(scopes)
        marks = ",".join("?" * len(scopes))
        with self._write() as conn:
            touched = [
                r[0]
                for r in conn.execute(
                    f"SELECT DISTINCT scope FROM chunks WHERE doc_id=? AND scope IN ({marks})", [doc_id, *scopes]
                )
            ]
            n = self._rows.delete_chunks(conn, f"doc_id=? AND scope IN ({marks})", [doc_id, *scopes])
            self._rows.log_changes(conn, set(touched))
        self._vectors.after_write()
        return int(n)

    def list_documents(self, *, scopes: Sequence[str]) -> list[DocInfo]:
        scopes = require_scopes(scopes)
        marks = ",".join("?" * len(scopes))
        rows = (
            self._conn()
            .execute(
                f"""SELECT doc_id, scope, max(file_name),
                       max(coalesce(json_extract(meta, '$.page_end'), json_extract(meta, '$.page_start'), 0)),
                       count(*), max(coalesce(json_extract(meta, '$.uploaded_at'), '')),
                       max(coalesce(json_extract(meta, '$.uploaded_by'), '')),
                       max(coalesce(json_extract(meta, '$.sha256'), '')),
                       max(coalesce(json_extract(meta, '$.source_url'), '')),
                       max(coalesce(json_extract(meta, '$.doc_issuer'), '')),
                       max(coalesce(json_extract(meta, '$.doc_form'), '')),
                       max(coalesce(json_extract(meta, '$.doc_period'), '')),
                       max(json_extract(meta, '$.doc_year')), max(json_extract(meta, '$.doc_quarter')),
                       max(coalesce(json_extract(meta, '$.doc_title'), ''))
                FROM chunks WHERE scope IN ({marks}) AND doc_id IS NOT NULL
                GROUP BY scope, doc_id""",
                scopes,
            )
            .fetchall()
        )
        docs = [
            DocInfo(
                doc_id=r[0],
                scope=r[1],
                file=r[2] or "",
                pages=int(r[3] or 0),
                chunks=int(r[4]),
                uploaded_at=str(r[5] or ""),
                uploaded_by=str(r[6] or ""),
                sha256=str(r[7] or ""),
                source_url=str(r[8] or ""),
                issuer=str(r[9] or ""),
                form=str(r[10] or ""),
                period=str(r[11] or ""),
                year=int(r[12]) if r[12] is not None else None,
                quarter=int(r[13]) if r[13] is not None else None,
                title=str(r[14] or ""),
            )
            for r in rows
        ]
        docs.sort(key=lambda d: (d.file.lower(), d.uploaded_at, d.doc_id))
        return docs

    def fetch(
        self,
        *,
        scopes: Sequence[str],
        filters: dict[str, Any] | None = None,
        limit: int = 200,
        return_embedding: bool = False,
    ) -> list[Document]:
        # imported here: fetch is the query side; the rest of this file is hashed into eval index keys (eval/runner.py)
        from connectors.sqlite_store.filters import index_terms

        scopes = require_scopes(scopes)
        where, params = filters_to_sql(filters)
        narrow, narrow_params, scope = index_terms(filters)  # one document's (page's, section's) rows, not the scope's
        # with such terms, "+" keeps SQLite from reading the whole scope in chunks_scope_doc's order to save a sort
        plus = "+" if narrow else ""
        marks = ",".join("?" * len(scopes))
        emb_col = "e.embedding" if return_embedding else "NULL"
        join = "LEFT JOIN embeddings e ON e.rid = c.rid" if return_embedding else ""
        rows = (
            self._conn()
            .execute(
                f"SELECT c.id, c.content, c.meta, c.extra, {emb_col} FROM chunks c {join} "
                f"WHERE {scope} IN ({marks}){narrow} AND coalesce({where}, 0) "
                f"ORDER BY {plus}c.doc_id, {plus}c.chunk_index, {plus}c.id LIMIT ?",
                [*scopes, *narrow_params, *params, int(limit)],
            )
            .fetchall()
        )
        return [self._rows.row_to_doc(r[0], r[1], r[2], r[3], r[4], None) for r in rows]

    def document_vectors(self, doc_id: str, *, scope: str, limit: int = 20_000) -> DocumentVectors:
        """One document's chunks with their vectors as one matrix, for page ranking
        (:meth:`.Vectors.document_vectors`)."""
        (scope,) = require_scopes([scope])
        return self._vectors.document_vectors(doc_id, scope=scope, limit=limit)

    # --- search ---------------------------------------------------------------------------------------
    def embedding_search(
        self,
        embedding: Sequence[float],
        *,
        scopes: Sequence[str],
        top_k: int,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]:
        """Cosine kNN over the chunks of ``scopes`` (:mod:`.vectors`)."""
        return self._vectors.embedding_search(
            embedding, scopes=scopes, top_k=top_k, filters=filters, return_embedding=return_embedding
        )

    def bm25_search(
        self,
        query: str,
        *,
        scopes: Sequence[str],
        top_k: int,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]:
        """BM25 over the chunks of ``scopes`` (:mod:`.fulltext`)."""
        return self._fulltext.bm25_search(
            query, scopes=scopes, top_k=top_k, filters=filters, return_embedding=return_embedding
        )

    def bm25_matches(self, query: str, *, scopes: Sequence[str], filters: dict[str, Any] | None = None) -> bool:
        """Whether :meth:`bm25_search` would find anything, without ranking (:mod:`.fulltext`)."""
        return self._fulltext.bm25_matches(query, scopes=scopes, filters=filters)

    def bm25_matches_each(
        self, queries: Sequence[str], *, scopes: Sequence[str], filters: dict[str, Any] | None = None
    ) -> dict[str, bool]:
        """:meth:`bm25_matches` of each query, in one SQL statement (:mod:`.fulltext`)."""
        return self._fulltext.bm25_matches_each(queries, scopes=scopes, filters=filters)

    def all_scopes(self) -> list[str]:
        rows = self._conn().execute("SELECT DISTINCT scope FROM chunks WHERE scope != '' ORDER BY scope").fetchall()
        return [r[0] for r in rows]

    def embedding_fingerprint(self) -> str | None:
        """The fingerprint of the model and backend the stored vectors were made with (None: not recorded)."""
        row = self._conn().execute("SELECT value FROM store_info WHERE key='embedding_fingerprint'").fetchone()
        return str(row[0]) if row else None

    def set_embedding_fingerprint(self, fingerprint: str) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO store_info(key, value) VALUES ('embedding_fingerprint', ?)", (fingerprint,)
            )

    def count_in_scopes(self, scopes: Sequence[str]) -> int:
        """How many chunks the scopes hold."""
        scopes = require_scopes(scopes)
        marks = ",".join("?" * len(scopes))
        return int(self._conn().execute(f"SELECT count(*) FROM chunks WHERE scope IN ({marks})", scopes).fetchone()[0])
