"""The store's file: tables, the full-text index, the columns mirrored from metadata, and migrations.

``chunks`` (id, scope, doc_id, file_name, chunk_index, content, meta JSON and the routing columns),
``embeddings`` (float32 blobs, kept apart so BM25 and listings never read them), the FTS5 index ``chunks_fts``
(contentless; the store writes it in the same transaction as the chunks, see :mod:`.rows`), ``changes`` (one
row per scope touched by each write transaction, see :mod:`.vectors`) and ``store_info`` (schema version,
embedding dimension and fingerprint).
"""

from __future__ import annotations

import sqlite3
import threading

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
            if row is None or row[0] != _SCHEMA_VERSION:
                _add_routing_columns(conn)
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
