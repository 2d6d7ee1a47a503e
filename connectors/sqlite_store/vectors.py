"""Dense search: per-scope matrices of unit vectors cached in memory, and the generations that keep them fresh.

Each write transaction logs the scopes it touched in ``changes`` (:meth:`.rows.Rows.log_changes`); each search
reads the newest generation and drops the cached matrices of the scopes written since, by this process or another
one. A matrix is read from the ``embeddings`` table the first time a search needs its scope (:meth:`Vectors._matrix`).
Scores are cosine similarities in [-1, 1].

The matrices are ``binary`` by default (:data:`VECTOR_FORMATS`): each row's signs, one bit a dimension, read from
``vector_codes`` (written with the embedding, in the same transaction; :mod:`.schema`), 48 bytes a row at 384
dimensions instead of 1,536. A search ranks the scopes' rows by their Hamming distance to the query's signs, takes
the :data:`RESCORE_BINARY` (or :data:`RESCORE_PER_HIT` times ``top_k``) nearest and ranks those by their exact
float32 vectors, read from the store: the scores it returns are exact, and a scope of fewer rows than that is
searched exactly. ``float32`` keeps the unit vectors themselves (exact search over everything, 32 times the memory);
``int8`` (a benchmark option: ``citebot bench retrieval --vectors``) keeps each row as int8 with its own scale and
rescores :data:`RESCORE_MIN` (or four times ``top_k``) candidates.

:class:`Vectors` also keeps the store's embedding dimension (recorded by the first embedding written) and the
generation BM25's cached counts are keyed by (:mod:`.fulltext`).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from haystack import Document

from connectors.log import get_logger
from connectors.sqlite_store.connection import Connections
from connectors.sqlite_store.filters import filters_to_sql, index_terms
from connectors.sqlite_store.rows import Rows
from connectors.sqlite_store.schema import sign_codes
from connectors.store_api import DocumentVectors, StoreError, require_scopes

log = get_logger(__name__)

VECTOR_FORMATS = ("binary", "float32", "int8")
DEFAULT_VECTOR_FORMAT = "binary"
RESCORE_MIN = 100  # int8: candidates ranked again by their exact vectors
RESCORE_BINARY = 400  # binary: candidates (at least) ranked again by their exact vectors
RESCORE_PER_HIT = 20  # binary: candidates per hit asked for, when that is more
_BLOCK = 16_384  # int8: rows turned into float32 at a time for the scan
_HAMMING_BLOCK = 32_768  # binary: rows compared at a time (their words stay in the CPU's cache)


@dataclass
class _ScopeMatrix:
    rids: np.ndarray  # int64, sorted
    mat: np.ndarray  # float32, rows unit-normalised; int8 format: int8, each row over its own scale
    gen: int  # the changes generation of the snapshot it was read from
    scale: np.ndarray | None = None  # int8 format: float32, a row's value is mat[i] * scale[i]
    words: np.ndarray | None = None  # binary format: uint64 (words a row, rows), the codes column by column

    def distances(self, qwords: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        """Hamming distance of each (masked) row's code to the query's (binary format), as uint16."""
        assert self.words is not None  # noqa: S101 - only called in the binary format
        words = self.words if mask is None else self.words[:, mask]
        w, n = words.shape
        out = np.empty(n, dtype=np.uint16)
        size = min(n, _HAMMING_BLOCK)
        xor, bits = np.empty((w, size), dtype=np.uint64), np.empty((w, size), dtype=np.uint8)
        q = qwords[:, None]
        for i in range(0, n, _HAMMING_BLOCK):
            m = min(n - i, _HAMMING_BLOCK)
            np.bitwise_xor(words[:, i : i + m], q, out=xor[:, :m])
            np.bitwise_count(xor[:, :m], out=bits[:, :m])
            np.sum(bits[:, :m], axis=0, dtype=np.uint16, out=out[i : i + m])
        return out

    def scores(self, q: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        """Cosine similarity of each (masked) row with the unit vector ``q``; approximate in the int8 format."""
        mat = self.mat if mask is None else self.mat[mask]
        if self.scale is None:
            return mat @ q
        scale = self.scale if mask is None else self.scale[mask]
        out = np.empty(mat.shape[0], dtype=np.float32)
        for i in range(0, mat.shape[0], _BLOCK):
            out[i : i + _BLOCK] = mat[i : i + _BLOCK].astype(np.float32) @ q
        return out * scale


def _words(codes: np.ndarray) -> np.ndarray:
    """Packed codes (rows, bytes) as uint64 words, one row of the result per word position: (words, rows)."""
    pad = -codes.shape[1] % 8
    if pad:
        codes = np.pad(codes, ((0, 0), (0, pad)))
    return np.ascontiguousarray(np.ascontiguousarray(codes).view(np.uint64).T)


def _nearest(dist: np.ndarray, n: int) -> np.ndarray:
    """Positions of the ``n`` smallest of ``dist`` (small integers), ties by position: a histogram, not a sort."""
    if n >= dist.shape[0]:
        return np.arange(dist.shape[0])
    cum = np.cumsum(np.bincount(dist))
    t = int(np.searchsorted(cum, n))  # the distance at which n rows are reached
    near = np.flatnonzero(dist <= t)
    d = dist[near]
    below = near[d < t]
    return np.concatenate([below, near[d == t][: n - below.shape[0]]])


def _quantise(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row as int8 over its own scale (symmetric: the row's largest magnitude maps to 127)."""
    scale = np.abs(mat).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    return np.round(mat / scale[:, None]).astype(np.int8), scale.astype(np.float32)


class Vectors:
    """Cosine kNN over the scopes' cached matrices, and the generation bookkeeping that refreshes them.

    Its state, all behind one lock: ``_matrices`` (scope -> :class:`_ScopeMatrix`, filled by :meth:`_matrix`,
    emptied by :meth:`refresh`), ``_gen`` (the newest ``changes`` generation seen, -1 before the first look) and
    ``_dim`` (the store's embedding dimension: recorded in ``store_info``, else the configured one)."""

    def __init__(
        self, conns: Connections, embedding_dim: int | None, *, vector_format: str = DEFAULT_VECTOR_FORMAT
    ) -> None:
        self._conns = conns
        self.embedding_dim = embedding_dim
        self._cache_lock = threading.RLock()
        self._matrices: dict[str, _ScopeMatrix] = {}
        self._gen = -1
        self._dim: int | None = None
        self.vector_format = DEFAULT_VECTOR_FORMAT
        self.set_format(vector_format)

    def set_format(self, vector_format: str) -> None:
        """Keep the matrices as ``binary`` (rescored, the default), ``float32`` (exact) or ``int8`` (rescored); the
        cached ones are read again."""
        if vector_format not in VECTOR_FORMATS:
            raise ValueError(f"vector_format must be one of {', '.join(VECTOR_FORMATS)}")
        with self._cache_lock:
            self.vector_format = vector_format
            self._matrices.clear()

    @property
    def generation(self) -> int:
        """The newest generation of ``changes`` a search has seen (caches keyed by an older one are stale)."""
        return self._gen

    def check_dim(self, conn: sqlite3.Connection) -> None:
        """Take the dimension the store recorded; refuse a store whose vectors the configured model cannot search."""
        row = conn.execute("SELECT value FROM store_info WHERE key='embedding_dim'").fetchone()
        stored = int(row[0]) if row else None
        if stored is not None and self.embedding_dim is not None and stored != self.embedding_dim:
            raise StoreError(
                f"the store at {self._conns.path} holds {stored}-dimensional embeddings but the model makes "
                f"{self.embedding_dim}; use another CITEBOT_DATA_DIR or re-index with `citebot reindex`"
            )
        self._dim = stored if stored is not None else self.embedding_dim

    def after_write(self) -> None:
        # Our own writes reach the matrices through the changes table, like anyone else's; only the
        # dimension recorded by a first embedding is picked up here.
        if self._dim is None:
            self.check_dim(self._conns.conn())

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
        with self._conns.read() as conn:
            gen = self.refresh(conn)
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
                narrow, narrow_params, scope = index_terms(filters)
                marks = ",".join("?" * len(scopes))
                allowed = np.fromiter(
                    (
                        r[0]
                        for r in conn.execute(
                            f"SELECT c.rid FROM chunks c WHERE {scope} IN ({marks}){narrow} AND coalesce({where}, 0)",
                            [*scopes, *narrow_params, *params],
                        )
                    ),
                    dtype=np.int64,
                )
                if allowed.size == 0:
                    return []
            all_rids: list[np.ndarray] = []
            all_scores: list[np.ndarray] = []
            binary = self.vector_format == "binary"
            qwords = _words(sign_codes(q)[None, :])[:, 0] if binary else q
            pool = max(RESCORE_BINARY, RESCORE_PER_HIT * int(top_k))
            with _single_threaded_blas():
                for scope in dict.fromkeys(scopes):
                    sm = self._matrix(conn, scope, gen)
                    if sm is None or sm.rids.size == 0:
                        continue
                    mask = None
                    if allowed is not None:
                        mask = np.isin(sm.rids, allowed, assume_unique=True)
                        if not mask.any():
                            continue
                    rids = sm.rids if mask is None else sm.rids[mask]
                    if binary:  # each scope's nearest only: the pool is among them, and nothing big is copied
                        dist = sm.distances(qwords, mask)
                        near = _nearest(dist, pool)
                        all_rids.append(rids[near])
                        all_scores.append(dist[near])
                    else:
                        all_rids.append(rids)
                        all_scores.append(sm.scores(q, mask))
            if not all_rids:
                return []
            rids = np.concatenate(all_rids) if len(all_rids) > 1 else all_rids[0]
            scores = np.concatenate(all_scores) if len(all_scores) > 1 else all_scores[0]
            if binary:
                rids = rids[_nearest(scores, pool)]
                rids, scores = _exact(conn, rids, q)
            elif self.vector_format == "int8":
                rids, scores = _rescore(conn, rids, scores, q, max(RESCORE_MIN, 4 * int(top_k)))
            k = min(int(top_k), scores.shape[0])
            idx = np.argpartition(-scores, k - 1)[:k] if k < scores.shape[0] else np.arange(scores.shape[0])
            idx = idx[np.argsort(-scores[idx], kind="stable")]
            return hits_by_rid(
                conn, [int(r) for r in rids[idx]], [float(s) for s in scores[idx]], return_embedding, scopes
            )

    def document_vectors(self, doc_id: str, *, scope: str, limit: int) -> DocumentVectors:
        """One document's chunks with their stored vectors as one matrix of the store's dimension."""
        with self._conns.read() as conn:
            return _read_document_vectors(conn, doc_id, scope, limit, self._dim)

    # --- dense cache -----------------------------------------------------------------------------------
    def refresh(self, conn: sqlite3.Connection) -> int:
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
                self.check_dim(conn)
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
            dim = self._dim or 0
            if self.vector_format == "binary":
                sm = _read_codes(conn, scope, dim, gen)
                if gen == self._gen:
                    self._matrices[scope] = sm
                log.debug("store_codes_loaded", rows=sm.rids.shape[0], ms=round((time.perf_counter() - t0) * 1000, 1))
                return sm
            rows = conn.execute("SELECT rid, embedding FROM embeddings WHERE scope=? ORDER BY rid", (scope,)).fetchall()
            if not rows or not dim:
                sm = _ScopeMatrix(np.empty(0, dtype=np.int64), np.empty((0, dim), dtype=np.float32), gen)
            else:
                rids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                mat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), dim).copy()
                norms = np.linalg.norm(mat, axis=1)
                norms[norms == 0] = 1.0
                mat /= norms[:, None]
                sm = _ScopeMatrix(rids, mat, gen)
                if self.vector_format == "int8":
                    mat8, scale = _quantise(mat)
                    sm = _ScopeMatrix(rids, mat8, gen, scale)
            if gen == self._gen:
                self._matrices[scope] = sm
            log.debug("store_matrix_loaded", rows=len(rows), ms=round((time.perf_counter() - t0) * 1000, 1))
            return sm


def _read_codes(conn: sqlite3.Connection, scope: str, dim: int, gen: int) -> _ScopeMatrix:
    """The scope's codes (binary format), read a batch at a time: memory stays near the codes' own size."""
    words = (dim + 63) // 64  # uint64 words a row: the code's bytes padded to whole words
    rid_parts: list[np.ndarray] = [np.empty(0, dtype=np.int64)]
    word_parts: list[np.ndarray] = [np.empty((words, 0), dtype=np.uint64)]
    rows = conn.execute("SELECT rid, code FROM vector_codes WHERE scope=? ORDER BY rid", (scope,))
    while part := rows.fetchmany(65_536):
        rid_parts.append(np.fromiter((r[0] for r in part), dtype=np.int64, count=len(part)))
        codes = np.frombuffer(b"".join(r[1] for r in part), dtype=np.uint8).reshape(len(part), -1)
        word_parts.append(_words(codes))
    return _ScopeMatrix(np.concatenate(rid_parts), np.empty((0, dim), dtype=np.float32), gen,
                        words=np.concatenate(word_parts, axis=1))


def _rescore(
    conn: sqlite3.Connection, rids: np.ndarray, scores: np.ndarray, q: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` best of ``rids`` by their approximate ``scores``, with exact cosine scores from their stored
    float32 vectors."""
    if n < scores.shape[0]:
        keep = np.argpartition(-scores, n - 1)[:n]
        rids = rids[keep]
    return _exact(conn, rids, q)


def _exact(conn: sqlite3.Connection, rids: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``rids`` with their exact cosine scores from their stored float32 vectors (a row deleted since is left
    out)."""
    if rids.shape[0] == 0:
        return rids, np.empty(0, dtype=np.float32)
    wanted = np.sort(rids)  # the table's order: SQLite walks its b-tree once
    marks = ",".join("?" * wanted.shape[0])
    rows = conn.execute(f"SELECT rid, embedding FROM embeddings WHERE rid IN ({marks})", wanted.tolist()).fetchall()
    if not rows:
        return rids[:0], np.empty(0, dtype=np.float32)
    mat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    norms = np.linalg.norm(mat, axis=1)
    norms[norms == 0] = 1.0
    found = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    return found, (mat @ q) / norms


def _read_document_vectors(
    conn: sqlite3.Connection, doc_id: str, scope: str, limit: int, dim: int | None
) -> DocumentVectors:
    """One document's chunks in ``fetch``'s order, with their stored vectors as one matrix (``dim`` columns: the
    store's dimension, or the vectors' own). Reads the columns page ranking needs; the rest of each row is kept as
    read and turned into a ``Document`` only for the chunks asked for."""
    rows = conn.execute(
        "SELECT c.id, c.chunk_index, c.page_start, c.content, c.meta, c.extra, e.embedding FROM chunks c "
        "LEFT JOIN embeddings e ON e.rid = c.rid WHERE c.scope = ? AND c.doc_id = ? "
        "ORDER BY c.chunk_index, c.id LIMIT ?",
        (scope, doc_id, int(limit)),
    ).fetchall()
    blobs = [r[6] for r in rows if r[6] is not None]
    width = dim or (len(blobs[0]) // 4 if blobs else 0)
    vectors = np.zeros((len(rows), width), dtype=np.float32)
    has = np.fromiter((r[6] is not None for r in rows), dtype=bool, count=len(rows))
    if blobs:
        vectors[has] = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), width)

    kept = [(r[0], r[3], r[4], r[5]) for r in rows]  # id, content, meta, extra: the vectors are in the matrix

    def make(i: int) -> Document:
        return Rows.row_to_doc(*kept[i], None, None)

    return DocumentVectors(
        ids=[r[0] for r in rows],
        chunk_indexes=[int(r[1] or 0) for r in rows],
        pages=[int(r[2] or 0) for r in rows],
        contents=[r[3] or "" for r in rows],
        vectors=vectors,
        has_vector=has,
        make_document=make,
    )


def hits_by_rid(
    conn: sqlite3.Connection,
    rids: list[int],
    scores: list[float],
    return_embedding: bool,
    scopes: Sequence[str],
) -> list[Document]:
    """The ranked hits' rows, in ``rids`` order, each with its score (a row deleted since it was scored is
    left out). Looked up by rowid: the scope check is there again (a cached matrix row can never surface
    another scope's chunk), as ``+c.scope`` so SQLite does not search the scope's index instead and read every
    chunk of the scope (27 ms at 50,000 chunks, against 0.1 ms)."""
    if not rids:
        return []
    marks = ",".join("?" * len(rids))
    smarks = ",".join("?" * len(scopes))
    emb_col = "e.embedding" if return_embedding else "NULL"
    join = "LEFT JOIN embeddings e ON e.rid = c.rid" if return_embedding else ""
    rows = conn.execute(
        f"SELECT c.rid, c.id, c.content, c.meta, c.extra, {emb_col} FROM chunks c {join} "
        f"WHERE c.rid IN ({marks}) AND +c.scope IN ({smarks})",
        [*rids, *scopes],
    ).fetchall()
    by_rid = {r[0]: r for r in rows}
    return [Rows.row_to_doc(r[1], r[2], r[3], r[4], r[5], score)
            for rid, score in zip(rids, scores, strict=True) if (r := by_rid.get(rid)) is not None]


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
