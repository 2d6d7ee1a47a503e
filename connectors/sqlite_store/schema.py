"""The store's file: tables, the full-text index, the columns mirrored from metadata, and migrations.

``chunks`` (id, scope, doc_id, file_name, chunk_index, content, meta JSON and the routing columns),
``embeddings`` (float32 blobs, kept apart so BM25 and listings never read them), ``vector_codes`` (each
embedding's signs, one bit a dimension, by scope: what dense search scans before rescoring the best by their
float32 vectors), the FTS5 index ``chunks_fts``
(contentless; the store writes it in the same transaction as the chunks, see :mod:`.rows`), ``changes`` (one
row per scope touched by each write transaction, see :mod:`.vectors`) and ``store_info`` (schema version,
embedding dimension and fingerprint).
"""

from __future__ import annotations

import sqlite3
import threading
import time

import numpy as np

from connectors.log import get_logger

log = get_logger(__name__)

_SCHEMA_VERSION = "5"
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
CREATE TABLE IF NOT EXISTS vector_codes (
    scope TEXT NOT NULL,
    rid INTEGER NOT NULL,
    code BLOB NOT NULL,
    PRIMARY KEY (scope, rid)
) WITHOUT ROWID;
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
# same transaction (``_insert`` and ``_delete_chunks`` in :mod:`.rows`).
_FTS = """
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    content, scope_tag, content='', tokenize='unicode61 remove_diacritics 2'
);
"""
# Older files kept the index in sync with triggers; migrating drops them along with the old index.
_DROP_FTS = """
DROP TRIGGER IF EXISTS chunks_ai;
DROP TRIGGER IF EXISTS chunks_ad;
DROP TRIGGER IF EXISTS chunks_au;
DROP TABLE IF EXISTS chunks_fts;
"""

# Meta keys the store mirrors in columns of ``chunks`` (written from the same meta, so the answers agree):
# structure routing filters on them ("pages 5-7", "section 4.2", "table 3"), and reading a column is ~10x
# cheaper than parsing every chunk's meta JSON (~110 ms a question at 50k chunks in one scope).
_META_COLUMNS = frozenset({"doc_id", "file_name"})
# Typeless columns filled with json_extract(meta, ...) itself, so a filter compares exactly what it did on meta.
_ROUTING_COLUMNS = ("page_start", "page_end", "section_id", "label")
_ROUTING_SQL = ", ".join(f"json_extract(?8, '$.{c}')" for c in _ROUTING_COLUMNS)
_ALL_META_COLUMNS = _META_COLUMNS | frozenset(_ROUTING_COLUMNS)


def sign_codes(mat: np.ndarray) -> np.ndarray:
    """Each row's signs, one bit a dimension (set where the value is > 0), packed 8 to a byte: a row's
    ``vector_codes.code``. A vector and its unit-normalised self have the same code."""
    return np.packbits(np.asarray(mat) > 0, axis=-1)


def _scope_tag(scope: str) -> str:
    """The FTS5 token standing for a scope (same as ``_SCOPE_TAG_SQL``)."""
    return "s" + scope.encode("utf-8").hex()


def create_schema(conn: sqlite3.Connection, write_lock: threading.Lock) -> None:
    """Create the tables of a new file, or bring an older one to :data:`_SCHEMA_VERSION`."""
    # Fast path without the write lock, so opening never waits for another process's write.
    try:
        row = conn.execute("SELECT value FROM store_info WHERE key='schema_version'").fetchone()
    except sqlite3.OperationalError:
        row = None  # a new file
    if row is not None and row[0] == _SCHEMA_VERSION:
        return
    with write_lock:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in _split_sql(_TABLES):
                conn.execute(stmt)
            row = conn.execute("SELECT value FROM store_info WHERE key='schema_version'").fetchone()
            if row is not None and row[0] != _SCHEMA_VERSION and row[0].isdigit() and int(row[0]) >= 4:
                _fill_vector_codes(conn)  # schema 4: only the codes are new
                conn.execute("UPDATE store_info SET value=? WHERE key='schema_version'", (_SCHEMA_VERSION,))
            elif row is None or row[0] != _SCHEMA_VERSION:
                _add_routing_columns(conn)
                _fill_vector_codes(conn)
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

def _fill_vector_codes(conn: sqlite3.Connection, batch: int = 20_000) -> None:
    """Files from before schema 5 have no ``vector_codes``: make them from the stored embeddings, a batch at a
    time (bounded memory), inside the caller's transaction, so a failed migration leaves the file as it was."""
    n = int(conn.execute("SELECT count(*) FROM embeddings").fetchone()[0])
    if n == 0:
        return
    t0 = time.perf_counter()
    log.info("store_migrating", step="vector codes from the stored embeddings", chunks=n)
    rows = conn.execute(
        "SELECT rid, scope, embedding FROM embeddings WHERE rid NOT IN (SELECT rid FROM vector_codes)"
    )
    while part := rows.fetchmany(batch):
        width = len(part[0][2]) // 4
        mat = np.frombuffer(b"".join(r[2] for r in part), dtype=np.float32).reshape(len(part), width)
        codes = sign_codes(mat)
        conn.executemany(
            "INSERT INTO vector_codes(scope, rid, code) VALUES (?,?,?)",
            [(r[1], r[0], codes[i].tobytes()) for i, r in enumerate(part)],
        )
    log.info("store_migrated", step="vector codes", chunks=n, s=round(time.perf_counter() - t0, 1))


def _add_routing_columns(conn: sqlite3.Connection) -> None:
    """Files from before schema 4 lack the routing columns: add them and fill them from meta."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(chunks)")}
    missing = [c for c in _ROUTING_COLUMNS if c not in have]
    for c in missing:
        conn.execute(f"ALTER TABLE chunks ADD COLUMN {c}")
    if missing:
        sets = ", ".join(f"{c} = json_extract(meta, '$.{c}')" for c in missing)
        conn.execute(f"UPDATE chunks SET {sets}")  # noqa: S608 - column names are constants


def _split_sql(script: str) -> list[str]:
    """Statements of a schema script, split where SQLite sees a complete statement."""
    out: list[str] = []
    buf = ""
    for line in script.strip().splitlines():
        buf += line + "\n"
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    return out
