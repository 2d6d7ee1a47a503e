"""Chunks in and out: validating and inserting documents (with their FTS entries and embeddings), deleting
them, logging the scopes each write touched, and turning rows back into Haystack ``Document``s."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
from haystack import Document
from haystack.dataclasses import ByteStream, SparseEmbedding
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy

from connectors.sqlite_store.schema import _ROUTING_COLUMNS, _ROUTING_SQL, _SCOPE_TAG_SQL, _scope_tag, sign_codes

# How many change rows to keep; a reader further behind than this reloads every matrix.
_KEEP_CHANGES = 5000


class Rows:
    """Writing chunks (with their FTS entries and embeddings) inside a caller's write transaction, and turning
    rows back into Documents. Holds only the configured embedding dimension: the one a new store records with
    its first embedding (a store that recorded one keeps it)."""

    def __init__(self, embedding_dim: int | None) -> None:
        self.embedding_dim = embedding_dim

    @staticmethod
    def validate_docs(documents: Any) -> list[Document]:
        if not isinstance(documents, list):
            raise ValueError("write_documents expects a list of Documents")  # noqa: TRY004 (Haystack protocol)
        for d in documents:
            if not isinstance(d, Document):
                raise ValueError(f"write_documents expects Documents, got {type(d).__name__}")  # noqa: TRY004
        return documents

    @staticmethod
    def scope_of(doc: Document) -> str:
        scope = doc.meta.get("scope")
        return scope if isinstance(scope, str) else ""

    def _embedding_vec(self, doc: Document, dim: int) -> np.ndarray | None:
        if doc.embedding is None:
            return None
        try:
            vec = np.asarray(doc.embedding, dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise ValueError(f"document {doc.id} has an embedding that is not a list of numbers") from e
        if vec.ndim != 1 or vec.shape[0] == 0:
            raise ValueError(f"document {doc.id} has an embedding that is not a flat list of numbers")
        if not np.all(np.isfinite(vec)):
            raise ValueError(f"document {doc.id} has an embedding with NaN or infinity")
        if vec.shape[0] != dim:
            raise ValueError(f"document {doc.id} has a {vec.shape[0]}-dimensional embedding; the store holds {dim}")
        return vec

    def _tx_dim(self, conn: sqlite3.Connection, docs: Iterable[Document]) -> int:
        """The store's embedding dimension inside a write transaction, recorded by the first embedding."""
        row = conn.execute("SELECT value FROM store_info WHERE key='embedding_dim'").fetchone()
        if row is not None:
            return int(row[0])
        dim = self.embedding_dim
        if dim is None:
            first = next((d.embedding for d in docs if d.embedding is not None), None)
            if first is None:
                return 0
            dim = len(first)
        conn.execute("INSERT INTO store_info(key, value) VALUES ('embedding_dim', ?)", (str(dim),))
        return dim

    def insert(self, conn: sqlite3.Connection, docs: list[Document], policy: DuplicatePolicy) -> int:
        if policy == DuplicatePolicy.NONE:
            policy = DuplicatePolicy.FAIL
        # Resolve duplicates inside the batch the way the policy says.
        batch: dict[str, Document] = {}
        for d in docs:
            if d.id in batch:
                if policy == DuplicatePolicy.FAIL:
                    raise DuplicateDocumentError(f"document id {d.id} appears twice in the batch")
                if policy == DuplicatePolicy.SKIP:
                    continue
            batch[d.id] = d
        ids = list(batch)
        existing: set[str] = set()
        for part in batches(ids, 500):
            marks = ",".join("?" * len(part))
            existing.update(r[0] for r in conn.execute(f"SELECT id FROM chunks WHERE id IN ({marks})", part))
        if existing:
            if policy == DuplicatePolicy.FAIL:
                raise DuplicateDocumentError(f"{len(existing)} document id(s) already exist, e.g. {min(existing)}")
            if policy == DuplicatePolicy.SKIP:
                ids = [i for i in ids if i not in existing]
            else:  # OVERWRITE
                for part in batches(sorted(existing), 500):
                    marks = ",".join("?" * len(part))
                    self.delete_chunks(conn, f"id IN ({marks})", part)
        chunk_rows = []
        emb_rows: list[tuple[int, str, np.ndarray]] = []  # (position in chunk_rows, scope, float32 vector)
        dim = self._tx_dim(conn, (batch[i] for i in ids))
        for i in ids:
            d = batch[i]
            meta = d.meta or {}
            extra = None
            if d.blob is not None or d.sparse_embedding is not None:
                extra = json.dumps(
                    {
                        "blob": d.blob.to_dict() if d.blob is not None else None,
                        "sparse_embedding": d.sparse_embedding.to_dict() if d.sparse_embedding is not None else None,
                    }
                )
            ci = meta.get("chunk_index")
            try:
                meta_json = json.dumps(meta, ensure_ascii=False)
            except (TypeError, ValueError) as e:
                raise ValueError(f"document {d.id} has metadata that is not JSON-serialisable: {e}") from e
            chunk_rows.append(
                (
                    d.id,
                    self.scope_of(d),
                    _str_or_none(meta.get("doc_id")),
                    _str_or_none(meta.get("file_name")),
                    ci if isinstance(ci, int) and not isinstance(ci, bool) else None,
                    d.content,
                    meta_json,
                    extra,
                )
            )
            vec = self._embedding_vec(d, dim)
            if vec is not None:
                emb_rows.append((len(chunk_rows) - 1, self.scope_of(d), vec))
        # explicit row ids, so the FTS index and the embeddings are written without looking them up
        base = conn.execute(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name='chunks'), 0), "
            "coalesce((SELECT max(rid) FROM chunks), 0))"
        ).fetchone()[0]
        try:
            conn.executemany(
                "INSERT INTO chunks(rid, id, scope, doc_id, file_name, chunk_index, content, meta, extra, "
                f"{', '.join(_ROUTING_COLUMNS)}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9, {_ROUTING_SQL})",
                [(base + 1 + n, *row) for n, row in enumerate(chunk_rows)],
            )
        except sqlite3.IntegrityError as e:
            raise DuplicateDocumentError(f"duplicate document id: {e}") from e
        conn.executemany(
            "INSERT INTO chunks_fts(rowid, content, scope_tag) VALUES (?,?,?)",
            [(base + 1 + n, row[5], _scope_tag(row[1])) for n, row in enumerate(chunk_rows)],
        )
        if emb_rows:
            conn.executemany(
                "INSERT INTO embeddings(rid, scope, embedding) VALUES (?,?,?)",
                [(base + 1 + n, scope, vec.tobytes()) for n, scope, vec in emb_rows],
            )
            codes = sign_codes(np.stack([vec for _, _, vec in emb_rows]))
            conn.executemany(
                "INSERT INTO vector_codes(scope, rid, code) VALUES (?,?,?)",
                [(scope, base + 1 + n, codes[i].tobytes()) for i, (n, scope, _) in enumerate(emb_rows)],
            )
        return len(chunk_rows)

    @staticmethod
    def delete_chunks(conn: sqlite3.Connection, where: str, params: Sequence[Any]) -> int:
        """Delete the chunks matching ``where`` with their index entries and embeddings; returns how many."""
        conn.execute(
            "INSERT INTO chunks_fts(chunks_fts, rowid, content, scope_tag) "
            f"SELECT 'delete', rid, content, {_SCOPE_TAG_SQL.format('scope')} FROM chunks WHERE {where}",
            params,
        )
        conn.execute(f"DELETE FROM embeddings WHERE rid IN (SELECT rid FROM chunks WHERE {where})", params)
        conn.execute(f"DELETE FROM vector_codes WHERE (scope, rid) IN (SELECT scope, rid FROM chunks WHERE {where})",
                     params)
        return int(conn.execute(f"DELETE FROM chunks WHERE {where}", params).rowcount)

    def log_changes(self, conn: sqlite3.Connection, scopes: Iterable[str]) -> None:
        scopes = sorted(set(scopes)) or [""]
        conn.executemany("INSERT INTO changes(scope) VALUES (?)", [(s,) for s in scopes])
        lo, hi = conn.execute("SELECT min(gen), max(gen) FROM changes").fetchone()
        if lo is not None and hi - lo > 2 * _KEEP_CHANGES:
            conn.execute("DELETE FROM changes WHERE gen < ?", (int(hi) - _KEEP_CHANGES,))

    @staticmethod
    def row_to_doc(
        doc_id: str, content: str | None, meta: str, extra: str | None, emb: bytes | None, score: float | None
    ) -> Document:
        blob = sparse = None
        if extra:
            ex = json.loads(extra)
            if ex.get("blob"):
                blob = ByteStream.from_dict(ex["blob"])
            if ex.get("sparse_embedding"):
                sparse = SparseEmbedding.from_dict(ex["sparse_embedding"])
        embedding = np.frombuffer(emb, dtype=np.float32).tolist() if emb is not None else None
        return Document(
            id=doc_id,
            content=content,
            meta=json.loads(meta) if meta else {},
            blob=blob,
            sparse_embedding=sparse,
            embedding=embedding,
            score=score,
        )


def _str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
