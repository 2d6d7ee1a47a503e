"""Connections (one per thread), write transactions and read snapshots, and the embedding dimension."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from connectors.log import get_logger
from connectors.store_api import StoreError

if TYPE_CHECKING:
    from connectors.sqlite_store.vectors import _ScopeMatrix

log = get_logger("connectors.sqlite_store")


class _Connections:
    """The state every part of the store shares; ``SQLiteDocumentStore.__init__`` sets it."""

    path: Path
    embedding_dim: int | None
    bm25_max_postings: int
    _local: threading.local
    _conns: list[sqlite3.Connection]
    _conns_lock: threading.Lock
    _write_lock: threading.Lock
    _cache_lock: threading.RLock
    _matrices: dict[str, _ScopeMatrix]
    _gen: int
    _dim: int | None
    _count_cache: tuple[int, int, dict[str, int]] | None
    _df: dict[str, int]
    _df_total: int

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

    def _after_write(self) -> None:
        # Our own writes reach the matrices through the changes table, like anyone else's; only the
        # dimension recorded by a first embedding is picked up here.
        if self._dim is None:
            self._check_dim(self._conn())
