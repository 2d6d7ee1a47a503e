"""The embedded document store: SQLite (WAL, FTS5 BM25) plus an in-memory numpy matrix for dense search.

One file holds everything: ``chunks`` (id, scope, doc_id, file_name, chunk_index, content, meta JSON),
``embeddings`` (float32 blobs, kept apart so BM25 and listings never read them), the FTS5 index
``chunks_fts`` (external content, kept in sync by triggers inside the writing transaction) and
``changes`` (one row per scope touched by each write transaction).

* Every write is one ``BEGIN IMMEDIATE`` transaction: all chunks of a document or none.
* Readers in other processes see only committed states (WAL snapshots). The dense matrices are cached per
  scope and refreshed lazily: each search reads the newest ``changes.gen`` and drops the cached matrices
  of the scopes written since, by this process or another one.
* Every search takes its scopes and filters by them in SQL or by scope-partitioned matrices: a chunk of
  another scope is never scored, returned, counted or listed.

Scores: BM25 is ``-bm25()`` (positive, higher is better); dense is the cosine similarity in [-1, 1].
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from haystack import Document, component, default_from_dict, default_to_dict
from haystack.dataclasses import ByteStream, SparseEmbedding
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy
from haystack.errors import FilterError

from connectors.log import get_logger
from connectors.scoped_retrievers import ScopedBM25Retriever, ScopedEmbeddingRetriever
from connectors.store_api import StoreError, require_scopes
from pipelines.models import DocInfo

log = get_logger(__name__)

_SCHEMA_VERSION = "4"
_TABLES = """
CREATE TABLE IF NOT EXISTS chunks (
    rid INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    scope TEXT NOT NULL DEFAULT '',
    doc_id TEXT,
    file_name TEXT,
    chunk_index INTEGER,
    content TEXT,
    meta TEXT NOT NULL DEFAULT '{}',
    extra TEXT,
    page_start, page_end, section_id, label
);
CREATE INDEX IF NOT EXISTS chunks_scope_doc ON chunks(scope, doc_id, chunk_index);
CREATE INDEX IF NOT EXISTS chunks_scope_file ON chunks(scope, file_name);
CREATE TABLE IF NOT EXISTS embeddings (
    rid INTEGER PRIMARY KEY,
    scope TEXT NOT NULL,
    embedding BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS embeddings_scope ON embeddings(scope);
CREATE TABLE IF NOT EXISTS changes (
    gen INTEGER PRIMARY KEY AUTOINCREMENT,
    scope TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS store_info (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""
# The FTS5 index is contentless (the text lives in ``chunks``) and has a second column holding one token per
# chunk for its scope, so a scoped BM25 query intersects posting lists instead of checking every match.
_SCOPE_TAG_SQL = "'s' || lower(hex({}))"
# No triggers: an FTS5 insert from a trigger runs inside a statement savepoint, which makes FTS5 flush its
# pending terms for every row (measured 1.7x slower writes). The store keeps the index in sync itself, in the
# same transaction (``_insert`` and ``_delete_chunks``).
_FTS = """
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    content, scope_tag, content='', tokenize='unicode61 remove_diacritics 2'
);
"""
_DROP_FTS = """
DROP TRIGGER IF EXISTS chunks_ai;
DROP TRIGGER IF EXISTS chunks_ad;
DROP TRIGGER IF EXISTS chunks_au;
DROP TABLE IF EXISTS chunks_fts;
"""

# How many change rows to keep; a reader further behind than this reloads every matrix.
_KEEP_CHANGES = 5000
# Terms of a BM25 query beyond this are dropped (a pasted paragraph is not a better question).
_MAX_QUERY_TERMS = 64
# Meta keys the store mirrors in columns of ``chunks`` (written from the same meta, so the answers agree):
# structure routing filters on them ("pages 5-7", "section 4.2", "table 3"), and reading a column is ~10x
# cheaper than parsing every chunk's meta JSON (~110 ms a question at 50k chunks in one scope).
_META_COLUMNS = frozenset({"doc_id", "file_name"})
# Typeless columns filled with json_extract(meta, ...) itself, so a filter compares exactly what it did on meta.
_ROUTING_COLUMNS = ("page_start", "page_end", "section_id", "label")
_ROUTING_SQL = ", ".join(f"json_extract(?8, '$.{c}')" for c in _ROUTING_COLUMNS)
_ALL_META_COLUMNS = _META_COLUMNS | frozenset(_ROUTING_COLUMNS)
_TOKEN_RE = re.compile(r"[^\W_]+", re.UNICODE)


# --------------------------------------------------------------------------------------------------
# Haystack filters -> SQL
# --------------------------------------------------------------------------------------------------
def _looks_like_iso_date(value: Any) -> bool:
    return (
        isinstance(value, str)
        and len(value) >= 10
        and value[:4].isdigit()
        and value[4] == "-"
        and value[5:7].isdigit()
        and value[7] == "-"
        and value[8:10].isdigit()
        and (len(value) == 10 or value[10] in "Tt ")
    )


def _json_path(key: str) -> str:
    return "$" + "".join("." + json.dumps(part) for part in key.split("."))


def _field_sql(field: str, alias: str) -> tuple[str, str]:
    """SQL expression for a filter field, and its kind ("column" or "json")."""
    if field == "id":
        return f"{alias}.id", "column"
    if field == "content":
        return f"{alias}.content", "column"
    key = field[5:] if field.startswith("meta.") else field
    if not key or key.startswith(".") or key.endswith("."):
        raise FilterError(f"invalid filter field {field!r}")
    if key in _ALL_META_COLUMNS:
        # mirrored in indexed columns: a file-name filter then reads that file's rows, not the whole scope
        return f"{alias}.{key}", "column"
    return f"json_extract({alias}.meta, {_sql_literal(_json_path(key))})", "json"


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _json_type_sql(field: str, alias: str) -> str | None:
    if field in ("id", "content"):
        return None
    key = field[5:] if field.startswith("meta.") else field
    return f"json_type({alias}.meta, {_sql_literal(_json_path(key))})"


def _bind(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float, str)) or value is None:
        return value
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    raise FilterError(f"unsupported filter value of type {type(value).__name__}")


def _comparison_sql(cond: dict[str, Any], alias: str, params: list[Any]) -> str:
    for key in ("field", "operator", "value"):
        if key not in cond:
            raise FilterError(f"'{key}' key missing in {cond}")
    field, op, value = cond["field"], cond["operator"], cond["value"]
    if not isinstance(field, str):
        raise FilterError(f"filter field must be a string, got {field!r}")
    expr, _kind = _field_sql(field, alias)
    jtype = _json_type_sql(field, alias)

    if op in ("==", "!="):
        if value is None:
            return f"{expr} IS NULL" if op == "==" else f"{expr} IS NOT NULL"
        if isinstance(value, (list, dict)) and jtype is not None:
            # meta lists/objects compare as canonical JSON
            clause = f"({jtype} IN ('array','object') AND json({expr}) = json(?))"
            params.append(json.dumps(value))
        elif _looks_like_iso_date(value):
            clause = f"({expr} = ? OR (julianday({expr}) IS NOT NULL AND julianday({expr}) = julianday(?)))"
            params.extend([value, value])
        else:
            clause = f"{expr} IS ?"
            params.append(_bind(value))
        return clause if op == "==" else f"NOT coalesce({clause}, 0)"

    if op in (">", ">=", "<", "<="):
        if value is None:
            return "0"
        if isinstance(value, (list, dict, tuple, set)):
            raise FilterError(f"Filter value can't be of type {type(value).__name__} using operator '{op}'")
        if isinstance(value, str):
            if not _looks_like_iso_date(value):
                raise FilterError(
                    f"Can't compare strings using operator '{op}'; strings are only comparable as ISO dates"
                )
            params.append(value)
            return f"(julianday({expr}) {op} julianday(?))"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FilterError(f"unsupported value {value!r} for operator '{op}'")
        params.append(value)
        if jtype is None:
            return f"({expr} {op} ?)"
        return f"({jtype} IN ('integer','real') AND {expr} {op} ?)"

    if op in ("in", "not in"):
        if not isinstance(value, list):
            raise FilterError(f"Filter value must be a `list` when using operator '{op}', got {type(value).__name__}")
        # Plain values go into one ``IN (...)``: an OR chain per value is one level of SQLite's expression
        # tree each and fails past its depth limit (1,000) with "Expression tree is too large".
        plain: list[Any] = []
        parts = []
        for v in value:
            if v is None or isinstance(v, (list, dict)) or _looks_like_iso_date(v):
                parts.append(_comparison_sql({"field": field, "operator": "==", "value": v}, alias, params))
            else:
                plain.append(v)
        if plain:
            parts.append(f"coalesce({expr} IN ({','.join('?' * len(plain))}), 0)")
            params.extend(_bind(v) for v in plain)
        clause = "(" + " OR ".join(parts) + ")" if parts else "0"
        return clause if op == "in" else f"NOT coalesce({clause}, 0)"

    raise FilterError(f"Unknown comparison operator '{op}'")


def filters_to_sql(filters: dict[str, Any] | None, alias: str = "c") -> tuple[str, list[Any]]:
    """Translate Haystack's filter syntax to a SQL boolean expression over ``chunks`` (aliased ``alias``)."""
    params: list[Any] = []
    if not filters:
        return "1", params
    return _node_sql(filters, alias, params), params


def _node_sql(node: Any, alias: str, params: list[Any]) -> str:
    if not isinstance(node, dict):
        raise FilterError(f"a filter must be a dict, got {type(node).__name__}")
    if "field" in node:
        return _comparison_sql(node, alias, params)
    if "operator" not in node:
        raise FilterError(f"'operator' key missing in {node}")
    if "conditions" not in node:
        raise FilterError(f"'conditions' key missing in {node}")
    op, conditions = node["operator"], node["conditions"]
    if not isinstance(conditions, list):
        raise FilterError("'conditions' must be a list")
    if op not in ("AND", "OR", "NOT"):
        raise FilterError(f"Unknown logical operator '{op}'. Valid operators are: ['AND', 'NOT', 'OR']")
    parts = [f"coalesce({_node_sql(c, alias, params)}, 0)" for c in conditions]
    if op == "OR":
        return "(" + " OR ".join(parts) + ")" if parts else "0"
    joined = "(" + " AND ".join(parts) + ")" if parts else "1"
    return joined if op == "AND" else f"NOT {joined}"


# --------------------------------------------------------------------------------------------------
# FTS5 query sanitising
# --------------------------------------------------------------------------------------------------
def fts5_terms(text: str, max_terms: int = _MAX_QUERY_TERMS) -> list[str]:
    """The distinct lower-cased words of ``text`` as FTS5's unicode61 tokenizer would split them."""
    seen: dict[str, None] = {}
    for token in _TOKEN_RE.findall(text or ""):
        seen.setdefault(token.lower(), None)
        if len(seen) >= max_terms:
            break
    return list(seen)


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _scope_tag(scope: str) -> str:
    """The FTS5 token standing for a scope (same as ``_SCOPE_TAG_SQL``)."""
    return "s" + scope.encode("utf-8").hex()


def fts5_query(text: str, max_terms: int = _MAX_QUERY_TERMS) -> str:
    """Turn free text into a safe FTS5 query: each word a quoted term, OR-ed so partial matches rank.

    Returns "" when the text has no searchable word. Quotes, operators (AND/OR/NOT/NEAR), column
    filters (``x:``), prefixes (``*``), parentheses and hyphens in the text lose their FTS5 meaning.
    """
    return " OR ".join(_quote(t) for t in fts5_terms(text, max_terms))


# --------------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------------
@dataclass
class _ScopeMatrix:
    rids: np.ndarray  # int64, sorted
    mat: np.ndarray  # float32, rows unit-normalised
    gen: int  # the changes generation of the snapshot it was read from


class SQLiteDocumentStore:
    """Haystack ``DocumentStore`` + Citebot ``ChunkStore`` on one SQLite file. Safe across threads and processes."""

    def __init__(self, path: str | Path, *, embedding_dim: int | None = None, bm25_max_postings: int = 8000) -> None:
        if embedding_dim is not None and embedding_dim <= 0:
            raise ValueError("embedding_dim must be positive")
        if bm25_max_postings < 100:
            raise ValueError("bm25_max_postings must be at least 100")
        self.bm25_max_postings = bm25_max_postings
        self._count_cache: tuple[int, int, dict[str, int]] | None = None
        self._df: dict[str, int] = {}
        self._df_total = 0
        self.path = Path(path)
        self.embedding_dim = embedding_dim
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._cache_lock = threading.RLock()
        self._matrices: dict[str, _ScopeMatrix] = {}
        self._gen = -1
        self._dim: int | None = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._conn()
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            self._create_schema(conn)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open the store at {self.path}: {e}; check the path and its permissions") from e
        self._check_dim(conn)

    def _create_schema(self, conn: sqlite3.Connection) -> None:
        # Fast path without the write lock, so opening never waits for another process's write.
        try:
            row = conn.execute("SELECT value FROM store_info WHERE key='schema_version'").fetchone()
        except sqlite3.OperationalError:
            row = None  # a new file
        if row is not None and row[0] == _SCHEMA_VERSION:
            return
        with self._write_lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for stmt in _split_sql(_TABLES):
                    conn.execute(stmt)
                row = conn.execute("SELECT value FROM store_info WHERE key='schema_version'").fetchone()
                if row is None or row[0] != _SCHEMA_VERSION:
                    self._add_routing_columns(conn)
                    # new file, or an older FTS layout: (re)build the full-text index from the chunks
                    for stmt in _split_sql(_DROP_FTS):
                        conn.execute(stmt)
                    for stmt in _split_sql(_FTS):
                        conn.execute(stmt)
                    conn.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('automerge', 8)")
                    conn.execute(
                        "INSERT INTO chunks_fts(rowid, content, scope_tag) "
                        f"SELECT rid, content, {_SCOPE_TAG_SQL.format('scope')} FROM chunks"
                    )
                    conn.execute(
                        "INSERT OR REPLACE INTO store_info(key, value) VALUES ('schema_version', ?)", (_SCHEMA_VERSION,)
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @staticmethod
    def _add_routing_columns(conn: sqlite3.Connection) -> None:
        """Files from before schema 4 lack the routing columns: add them and fill them from meta."""
        have = {r[1] for r in conn.execute("PRAGMA table_info(chunks)")}
        missing = [c for c in _ROUTING_COLUMNS if c not in have]
        for c in missing:
            conn.execute(f"ALTER TABLE chunks ADD COLUMN {c}")
        if missing:
            sets = ", ".join(f"{c} = json_extract(meta, '$.{c}')" for c in missing)
            conn.execute(f"UPDATE chunks SET {sets}")  # noqa: S608 - column names are constants

    # --- connections ---------------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout=60000")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA temp_store=MEMORY")
            conn.execute("PRAGMA cache_size=-65536")
            conn.execute("PRAGMA mmap_size=268435456")
            self._local.conn = conn
            with self._conns_lock:
                self._conns.append(conn)
        return conn

    def close(self) -> None:
        """Close every connection this store opened (any thread's). The store reopens lazily if used again."""
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:
                log.debug("sqlite_close_failed")
        self._local = threading.local()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE ... COMMIT), rolled back on any exception."""
        conn = self._conn()
        with self._write_lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for several statements (nested calls reuse the outer one)."""
        conn = self._conn()
        if conn.in_transaction:
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def _check_dim(self, conn: sqlite3.Connection) -> None:
        row = conn.execute("SELECT value FROM store_info WHERE key='embedding_dim'").fetchone()
        stored = int(row[0]) if row else None
        if stored is not None and self.embedding_dim is not None and stored != self.embedding_dim:
            raise StoreError(
                f"the store at {self.path} holds {stored}-dimensional embeddings but the model makes "
                f"{self.embedding_dim}; use another CITEBOT_DATA_DIR or re-index with `citebot reindex`"
            )
        self._dim = stored if stored is not None else self.embedding_dim

    # --- serialisation -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self, path=str(self.path), embedding_dim=self.embedding_dim, bm25_max_postings=self.bm25_max_postings
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SQLiteDocumentStore:
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
        return [self._row_to_doc(r[1], r[2], r[3], r[4], r[5], None) for r in rows]

    def write_documents(self, documents: list[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE) -> int:
        docs = self._validate_docs(documents)
        with self._write() as conn:
            n = self._insert(conn, docs, policy)
            self._log_changes(conn, {self._scope_of(d) for d in docs})
        self._after_write()
        return n

    def delete_documents(self, document_ids: list[str]) -> None:
        if not document_ids:
            return
        with self._write() as conn:
            scopes: set[str] = set()
            for batch in _batches(list(document_ids), 500):
                marks = ",".join("?" * len(batch))
                scopes.update(
                    r[0] for r in conn.execute(f"SELECT DISTINCT scope FROM chunks WHERE id IN ({marks})", batch)
                )
                self._delete_chunks(conn, f"id IN ({marks})", batch)
            self._log_changes(conn, scopes)
        self._after_write()

    # --- ChunkStore ----------------------------------------------------------------------------------
    def replace_document(self, documents: list[Document], *, scope: str, file_name: str) -> list[str]:
        (scope,) = require_scopes([scope])
        docs = self._validate_docs(documents)
        new_ids: set[str] = set()
        for d in docs:
            if d.meta.get("scope", scope) != scope:
                raise ValueError(f"chunk {d.id} has scope {d.meta.get('scope')!r}, expected {scope!r}")
            if d.meta.get("doc_id"):
                new_ids.add(str(d.meta["doc_id"]))
        docs = [d if d.meta.get("scope") == scope else replace(d, meta={**d.meta, "scope": scope}) for d in docs]
        # only the uploader's own versions of the file are replaced; someone else's stay (see store_api)
        uploaders = sorted({str(d.meta.get("uploaded_by") or "") for d in docs}) or [""]
        owned = (
            f"scope=? AND file_name=? AND coalesce(json_extract(meta, '$.uploaded_by'), '') "
            f"IN ({','.join('?' * len(uploaders))})"
        )
        with self._write() as conn:
            old = {
                r[0]
                for r in conn.execute(
                    f"SELECT DISTINCT doc_id FROM chunks WHERE {owned} AND doc_id IS NOT NULL",
                    [scope, file_name, *uploaders],
                )
            }
            self._delete_chunks(conn, owned, [scope, file_name, *uploaders])
            for batch in _batches(sorted(new_ids), 500):
                marks = ",".join("?" * len(batch))
                self._delete_chunks(conn, f"scope=? AND doc_id IN ({marks})", [scope, *batch])
            self._insert(conn, docs, DuplicatePolicy.FAIL)
            self._log_changes(conn, {scope})
        self._after_write()
        replaced = sorted(old - new_ids)
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
            n = self._delete_chunks(conn, f"doc_id=? AND scope IN ({marks})", [doc_id, *scopes])
            self._log_changes(conn, set(touched))
        self._after_write()
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
                       max(coalesce(json_extract(meta, '$.source_url'), ''))
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
        scopes = require_scopes(scopes)
        where, params = filters_to_sql(filters)
        marks = ",".join("?" * len(scopes))
        emb_col = "e.embedding" if return_embedding else "NULL"
        join = "LEFT JOIN embeddings e ON e.rid = c.rid" if return_embedding else ""
        rows = (
            self._conn()
            .execute(
                f"SELECT c.id, c.content, c.meta, c.extra, {emb_col} FROM chunks c {join} "
                f"WHERE c.scope IN ({marks}) AND coalesce({where}, 0) "
                f"ORDER BY c.doc_id, c.chunk_index, c.id LIMIT ?",
                [*scopes, *params, int(limit)],
            )
            .fetchall()
        )
        return [self._row_to_doc(r[0], r[1], r[2], r[3], r[4], None) for r in rows]

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

    # --- search ----------------------------------------------------------------------------------------
    def bm25_search(
        self,
        query: str,
        *,
        scopes: Sequence[str],
        top_k: int,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]:
        scopes = require_scopes(scopes)
        if top_k <= 0:
            return []
        terms = fts5_terms(query)
        if not terms:
            return []
        with self._read() as conn:
            gen = self._refresh(conn)
            total, per_scope = self._counts(conn, gen)
            in_scope = sum(per_scope.get(s, 0) for s in set(scopes))
            if in_scope == 0:
                return []
            terms = self._prune_terms(conn, terms, total, in_scope)
            if not terms:
                return []
            match = "content : (" + " OR ".join(_quote(t) for t in terms) + ")"
            if in_scope < total:  # else every chunk is in the asked scopes
                tags = " OR ".join(_quote(_scope_tag(s)) for s in dict.fromkeys(scopes))
                match = f"scope_tag : ({tags}) AND {match}"
            try:
                if filters:
                    where, params = filters_to_sql(filters)
                    hits = conn.execute(
                        "SELECT f.rowid, bm25(chunks_fts, 1.0, 0.0) AS r FROM chunks_fts f "
                        "JOIN chunks c ON c.rid = f.rowid "
                        f"WHERE chunks_fts MATCH ? AND coalesce({where}, 0) ORDER BY r LIMIT ?",
                        [match, *params, int(top_k)],
                    ).fetchall()
                else:
                    hits = conn.execute(
                        "SELECT rowid, bm25(chunks_fts, 1.0, 0.0) AS r FROM chunks_fts "
                        "WHERE chunks_fts MATCH ? ORDER BY r LIMIT ?",
                        (match, int(top_k)),
                    ).fetchall()
            except sqlite3.OperationalError as e:
                raise StoreError(f"BM25 search failed: {e}") from e
            return self._fetch_rids(conn, [h[0] for h in hits], [-float(h[1]) for h in hits], return_embedding, scopes)

    def _counts(self, conn: sqlite3.Connection, gen: int) -> tuple[int, dict[str, int]]:
        """(all chunks, chunks per scope) in the snapshot of generation ``gen``, cached until the next write."""
        with self._cache_lock:
            if self._count_cache is not None and self._count_cache[0] == self._gen:
                return self._count_cache[1], self._count_cache[2]
            per_scope = {r[0]: int(r[1]) for r in conn.execute("SELECT scope, count(*) FROM chunks GROUP BY scope")}
            total = sum(per_scope.values())
            if gen != self._gen:
                # another thread saw a newer write since this snapshot began: these counts are already old
                return total, per_scope
            self._count_cache = (gen, total, per_scope)
            if abs(total - self._df_total) > 0.1 * max(self._df_total, 1):
                self._df.clear()  # document frequencies drifted: look them up again
                self._df_total = total
            return total, per_scope

    def _doc_freq(self, conn: sqlite3.Connection, term: str) -> int:
        with self._cache_lock:
            df = self._df.get(term)
        if df is None:
            df = int(
                conn.execute(
                    "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (f"content : {_quote(term)}",)
                ).fetchone()[0]
            )
            with self._cache_lock:
                if len(self._df) > 200_000:
                    self._df.clear()
                self._df[term] = df
        return df

    def _prune_terms(self, conn: sqlite3.Connection, terms: list[str], total: int, in_scope: int) -> list[str]:
        """Keep BM25 cheap on big stores without changing what ranks first.

        A word in more than half of the chunks (``the``, ``is``) gets a BM25 weight of ~0 from FTS5, yet it
        costs the most: FTS5 reads its whole posting list and scores every chunk holding it. Such words are
        dropped whenever an informative word remains. If the estimated work is still above
        ``bm25_max_postings`` (only on big stores), the most common remaining words go too, always keeping
        the rarest one.
        """
        dfs = {t: self._doc_freq(conn, t) for t in terms}
        terms = [t for t in terms if dfs[t] > 0]
        informative = [t for t in terms if dfs[t] <= total / 2]
        if informative:
            terms = informative
        frac = in_scope / max(total, 1)
        # scoring a match costs ~30x more than reading a posting of a word outside the scope
        unit = frac + 0.03

        if sum(dfs[t] for t in terms) * unit <= self.bm25_max_postings:
            return terms
        terms.sort(key=lambda t: dfs[t])
        kept: list[str] = []
        cost = 0.0
        for t in terms:
            c = dfs[t] * unit
            if kept and cost + c > self.bm25_max_postings:
                break
            kept.append(t)
            cost += c
        return kept

    def embedding_search(
        self,
        embedding: Sequence[float],
        *,
        scopes: Sequence[str],
        top_k: int,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]:
        scopes = require_scopes(scopes)
        if top_k <= 0:
            return []
        q = np.asarray(embedding, dtype=np.float32).ravel()
        with self._read() as conn:
            gen = self._refresh(conn)
            if self._dim is None:
                return []  # nothing embedded yet
            if q.shape[0] != self._dim:
                raise ValueError(f"query embedding has {q.shape[0]} dimensions, the store holds {self._dim}")
            if not np.all(np.isfinite(q)):
                raise ValueError("query embedding contains NaN or infinity")
            norm = float(np.linalg.norm(q))
            if norm > 0:
                q = q / norm
            allowed: np.ndarray | None = None
            if filters:
                where, params = filters_to_sql(filters)
                marks = ",".join("?" * len(scopes))
                allowed = np.fromiter(
                    (
                        r[0]
                        for r in conn.execute(
                            f"SELECT c.rid FROM chunks c WHERE c.scope IN ({marks}) AND coalesce({where}, 0)",
                            [*scopes, *params],
                        )
                    ),
                    dtype=np.int64,
                )
                if allowed.size == 0:
                    return []
            all_rids: list[np.ndarray] = []
            all_scores: list[np.ndarray] = []
            with _single_threaded_blas():
                for scope in dict.fromkeys(scopes):
                    sm = self._matrix(conn, scope, gen)
                    if sm is None or sm.rids.size == 0:
                        continue
                    if allowed is not None:
                        mask = np.isin(sm.rids, allowed, assume_unique=True)
                        if not mask.any():
                            continue
                        all_rids.append(sm.rids[mask])
                        all_scores.append(sm.mat[mask] @ q)
                    else:
                        all_rids.append(sm.rids)
                        all_scores.append(sm.mat @ q)
            if not all_rids:
                return []
            rids = np.concatenate(all_rids) if len(all_rids) > 1 else all_rids[0]
            scores = np.concatenate(all_scores) if len(all_scores) > 1 else all_scores[0]
            k = min(int(top_k), scores.shape[0])
            idx = np.argpartition(-scores, k - 1)[:k] if k < scores.shape[0] else np.arange(scores.shape[0])
            idx = idx[np.argsort(-scores[idx], kind="stable")]
            return self._fetch_rids(
                conn, [int(r) for r in rids[idx]], [float(s) for s in scores[idx]], return_embedding, scopes
            )

    # --- dense cache -----------------------------------------------------------------------------------
    def _refresh(self, conn: sqlite3.Connection) -> int:
        """Drop cached matrices of scopes written since we last looked (by any process); returns the
        generation of this read's snapshot. A snapshot older than what another thread already saw changes
        nothing: the caches never go back to an older generation."""
        row = conn.execute("SELECT max(gen), min(gen) FROM changes").fetchone()
        gen = int(row[0]) if row[0] is not None else 0
        with self._cache_lock:
            if gen <= self._gen:
                return gen
            if self._gen < 0 or row[1] is None or self._gen < int(row[1]) - 1:
                self._matrices.clear()
            else:
                for (scope,) in conn.execute("SELECT DISTINCT scope FROM changes WHERE gen > ?", (self._gen,)):
                    self._matrices.pop(scope, None)
            if self._dim is None:
                self._check_dim(conn)
            self._gen = gen
        return gen

    def _matrix(self, conn: sqlite3.Connection, scope: str, gen: int) -> _ScopeMatrix | None:
        """The scope's matrix: cached, else read from this snapshot (generation ``gen``) and cached only if no
        newer write has been seen since, so a matrix from an older snapshot never outlives a refresh."""
        with self._cache_lock:
            sm = self._matrices.get(scope)
            if sm is not None:
                return sm
            t0 = time.perf_counter()
            rows = conn.execute("SELECT rid, embedding FROM embeddings WHERE scope=? ORDER BY rid", (scope,)).fetchall()
            dim = self._dim or 0
            if not rows or not dim:
                sm = _ScopeMatrix(np.empty(0, dtype=np.int64), np.empty((0, dim), dtype=np.float32), gen)
            else:
                rids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                mat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), dim).copy()
                norms = np.linalg.norm(mat, axis=1)
                norms[norms == 0] = 1.0
                mat /= norms[:, None]
                sm = _ScopeMatrix(rids, mat, gen)
            if gen == self._gen:
                self._matrices[scope] = sm
            log.debug("store_matrix_loaded", rows=len(rows), ms=round((time.perf_counter() - t0) * 1000, 1))
            return sm

    def _after_write(self) -> None:
        # Our own writes reach the matrices through the changes table, like anyone else's; only the
        # dimension recorded by a first embedding is picked up here.
        if self._dim is None:
            self._check_dim(self._conn())

    # --- internals ---------------------------------------------------------------------------------------
    @staticmethod
    def _validate_docs(documents: Any) -> list[Document]:
        if not isinstance(documents, list):
            raise ValueError("write_documents expects a list of Documents")  # noqa: TRY004 (Haystack protocol)
        for d in documents:
            if not isinstance(d, Document):
                raise ValueError(f"write_documents expects Documents, got {type(d).__name__}")  # noqa: TRY004
        return documents

    @staticmethod
    def _scope_of(doc: Document) -> str:
        scope = doc.meta.get("scope")
        return scope if isinstance(scope, str) else ""

    def _embedding_blob(self, doc: Document, dim: int) -> bytes | None:
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
        return vec.tobytes()

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

    def _insert(self, conn: sqlite3.Connection, docs: list[Document], policy: DuplicatePolicy) -> int:
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
        for part in _batches(ids, 500):
            marks = ",".join("?" * len(part))
            existing.update(r[0] for r in conn.execute(f"SELECT id FROM chunks WHERE id IN ({marks})", part))
        if existing:
            if policy == DuplicatePolicy.FAIL:
                raise DuplicateDocumentError(f"{len(existing)} document id(s) already exist, e.g. {min(existing)}")
            if policy == DuplicatePolicy.SKIP:
                ids = [i for i in ids if i not in existing]
            else:  # OVERWRITE
                for part in _batches(sorted(existing), 500):
                    marks = ",".join("?" * len(part))
                    self._delete_chunks(conn, f"id IN ({marks})", part)
        chunk_rows = []
        emb_rows: list[tuple[int, str, bytes]] = []  # (position in chunk_rows, scope, float32 bytes)
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
                    self._scope_of(d),
                    _str_or_none(meta.get("doc_id")),
                    _str_or_none(meta.get("file_name")),
                    ci if isinstance(ci, int) and not isinstance(ci, bool) else None,
                    d.content,
                    meta_json,
                    extra,
                )
            )
            blob = self._embedding_blob(d, dim)
            if blob is not None:
                emb_rows.append((len(chunk_rows) - 1, self._scope_of(d), blob))
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
                [(base + 1 + n, scope, blob) for n, scope, blob in emb_rows],
            )
        return len(chunk_rows)

    @staticmethod
    def _delete_chunks(conn: sqlite3.Connection, where: str, params: Sequence[Any]) -> int:
        """Delete the chunks matching ``where`` with their index entries and embeddings; returns how many."""
        conn.execute(
            "INSERT INTO chunks_fts(chunks_fts, rowid, content, scope_tag) "
            f"SELECT 'delete', rid, content, {_SCOPE_TAG_SQL.format('scope')} FROM chunks WHERE {where}",
            params,
        )
        conn.execute(f"DELETE FROM embeddings WHERE rid IN (SELECT rid FROM chunks WHERE {where})", params)
        return int(conn.execute(f"DELETE FROM chunks WHERE {where}", params).rowcount)

    def _log_changes(self, conn: sqlite3.Connection, scopes: Iterable[str]) -> None:
        scopes = sorted(set(scopes)) or [""]
        conn.executemany("INSERT INTO changes(scope) VALUES (?)", [(s,) for s in scopes])
        lo, hi = conn.execute("SELECT min(gen), max(gen) FROM changes").fetchone()
        if lo is not None and hi - lo > 2 * _KEEP_CHANGES:
            conn.execute("DELETE FROM changes WHERE gen < ?", (int(hi) - _KEEP_CHANGES,))

    def _fetch_rids(
        self,
        conn: sqlite3.Connection,
        rids: list[int],
        scores: list[float],
        return_embedding: bool,
        scopes: Sequence[str],
    ) -> list[Document]:
        if not rids:
            return []
        marks = ",".join("?" * len(rids))
        smarks = ",".join("?" * len(scopes))
        emb_col = "e.embedding" if return_embedding else "NULL"
        join = "LEFT JOIN embeddings e ON e.rid = c.rid" if return_embedding else ""
        # the scope check again: a cached matrix row can never surface another scope's chunk
        rows = conn.execute(
            f"SELECT c.rid, c.id, c.content, c.meta, c.extra, {emb_col} FROM chunks c {join} "
            f"WHERE c.rid IN ({marks}) AND c.scope IN ({smarks})",
            [*rids, *scopes],
        ).fetchall()
        by_rid = {r[0]: r for r in rows}
        out = []
        for rid, score in zip(rids, scores, strict=True):
            r = by_rid.get(rid)
            if r is not None:  # deleted since it was scored
                out.append(self._row_to_doc(r[1], r[2], r[3], r[4], r[5], score))
        return out

    @staticmethod
    def _row_to_doc(
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


_BLAS: Any = None


@contextmanager
def _single_threaded_blas() -> Iterator[None]:
    """Run numpy's matrix products on one thread: on these 2-vCPU machines, under load, OpenBLAS's
    second thread makes a 50k x 384 search several times slower."""
    global _BLAS
    if _BLAS is None:
        try:
            from threadpoolctl import ThreadpoolController

            _BLAS = ThreadpoolController()
        except ImportError:  # pragma: no cover - threadpoolctl comes with the project's dependencies
            _BLAS = False
    if not _BLAS:
        yield
        return
    with _BLAS.limit(limits=1, user_api="blas"):
        yield


def _split_sql(script: str) -> list[str]:
    """Statements of a schema script (triggers keep their inner ``;``)."""
    out: list[str] = []
    buf = ""
    for line in script.strip().splitlines():
        buf += line + "\n"
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    return out


def _str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def _batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


# --------------------------------------------------------------------------------------------------
# Retrievers
# --------------------------------------------------------------------------------------------------
@component
class SQLiteBM25Retriever(ScopedBM25Retriever):
    """BM25 over the SQLite store's chunks of the given scopes."""

    store_class = SQLiteDocumentStore


@component
class SQLiteEmbeddingRetriever(ScopedEmbeddingRetriever):
    """Cosine kNN over the SQLite store's chunks of the given scopes."""

    store_class = SQLiteDocumentStore
