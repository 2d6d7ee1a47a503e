"""Full-text search: BM25 over the FTS5 index, scoped by a per-scope token, with cheap query terms.

Scores are ``-bm25()`` (positive, higher is better). ``fts5_query`` turns free text into a safe FTS5 query.
The chunk counts and term frequencies that keep it cheap are cached per generation of ``changes``, the one
:class:`.vectors.Vectors` refreshes for every search.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

from haystack import Document

from connectors.sqlite_store.connection import Connections
from connectors.sqlite_store.filters import filters_to_sql
from connectors.sqlite_store.schema import _scope_tag
from connectors.sqlite_store.vectors import Vectors, hits_by_rid
from connectors.store_api import StoreError, require_scopes

# Terms of a BM25 query beyond this are dropped (a pasted paragraph is not a better question).
_MAX_QUERY_TERMS = 64
_TOKEN_RE = re.compile(r"[^\W_]+", re.UNICODE)


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


def fts5_query(text: str, max_terms: int = _MAX_QUERY_TERMS) -> str:
    """Turn free text into a safe FTS5 query: each word a quoted term, OR-ed so partial matches rank.

    Returns "" when the text has no searchable word. Quotes, operators (AND/OR/NOT/NEAR), column
    filters (``x:``), prefixes (``*``), parentheses and hyphens in the text lose their FTS5 meaning.
    """
    return " OR ".join(_quote(t) for t in fts5_terms(text, max_terms))


class FullText:
    """BM25 over the chunks of the given scopes, with the counts and term statistics that keep it cheap.

    Its state, behind its own lock: ``_count_cache`` (generation, all chunks, chunks per scope), ``_df`` (a
    term's document frequency, forgotten when the store's size drifts by a tenth from ``_df_total``)."""

    def __init__(self, conns: Connections, vectors: Vectors, *, bm25_max_postings: int) -> None:
        self._conns = conns
        self._vectors = vectors
        self.bm25_max_postings = bm25_max_postings
        self._cache_lock = threading.RLock()
        self._count_cache: tuple[int, int, dict[str, int]] | None = None
        self._df: dict[str, int] = {}
        self._df_total = 0

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
        with self._conns.read() as conn:
            match = self._match(conn, query, scopes)
            if match is None:
                return []
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
            return hits_by_rid(conn, [h[0] for h in hits], [-float(h[1]) for h in hits], return_embedding, scopes)

    def bm25_matches(self, query: str, *, scopes: Sequence[str], filters: dict[str, Any] | None = None) -> bool:
        """Whether :meth:`bm25_search` would find anything (same terms, same scopes and filters), without ranking:
        the first matching row ends the look-up, where ``ORDER BY bm25`` scores every chunk holding a term."""
        scopes = require_scopes(scopes)
        with self._conns.read() as conn:
            match = self._match(conn, query, scopes)
            if match is None:
                return False
            try:
                if filters:
                    where, params = filters_to_sql(filters)
                    row = conn.execute(
                        "SELECT 1 FROM chunks_fts f JOIN chunks c ON c.rid = f.rowid "
                        f"WHERE chunks_fts MATCH ? AND coalesce({where}, 0) LIMIT 1",
                        [match, *params],
                    ).fetchone()
                else:
                    row = conn.execute("SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT 1", (match,)).fetchone()
            except sqlite3.OperationalError as e:
                raise StoreError(f"BM25 search failed: {e}") from e
            return row is not None

    def bm25_matches_each(
        self, queries: Sequence[str], *, scopes: Sequence[str], filters: dict[str, Any] | None = None
    ) -> dict[str, bool]:
        """:meth:`bm25_matches` of each of ``queries`` (the same pruned terms, scopes and filters), in one SQL
        statement: one ``EXISTS`` over FTS5 per query, read in one snapshot."""
        scopes = require_scopes(scopes)
        queries = list(dict.fromkeys(queries))
        found = dict.fromkeys(queries, False)
        with self._conns.read() as conn:
            sizes = self._sizes(conn, scopes)
            matches = {q: m for q in queries if (m := self._match(conn, q, scopes, sizes)) is not None}
            if not matches:
                return found
            if filters:
                where, wparams = filters_to_sql(filters)
                one = ("EXISTS(SELECT 1 FROM chunks_fts f JOIN chunks c ON c.rid = f.rowid "
                       f"WHERE chunks_fts MATCH ? AND coalesce({where}, 0))")
            else:
                one, wparams = "EXISTS(SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ?)", []
            params: list[Any] = []
            for m in matches.values():
                params += [m, *wparams]
            try:
                row = conn.execute("SELECT " + ", ".join([one] * len(matches)), params).fetchone()
            except sqlite3.OperationalError as e:
                raise StoreError(f"BM25 search failed: {e}") from e
        found.update({q: bool(hit) for q, hit in zip(matches, row, strict=True)})
        return found

    def _sizes(self, conn: sqlite3.Connection, scopes: Sequence[str]) -> tuple[int, int]:
        """(all chunks, chunks of ``scopes``) in this read's snapshot."""
        gen = self._vectors.refresh(conn)
        total, per_scope = self._counts(conn, gen)
        return total, sum(per_scope.get(s, 0) for s in set(scopes))

    def _match(
        self, conn: sqlite3.Connection, query: str, scopes: Sequence[str], sizes: tuple[int, int] | None = None
    ) -> str | None:
        """The FTS5 MATCH expression of a BM25 search for ``query`` in ``scopes`` (None: nothing can match);
        ``sizes``: :meth:`_sizes` of this read, when already asked."""
        terms = fts5_terms(query)
        if not terms:
            return None
        total, in_scope = sizes or self._sizes(conn, scopes)
        if in_scope == 0:
            return None
        terms = self._prune_terms(conn, terms, total, in_scope)
        if not terms:
            return None
        match = "content : (" + " OR ".join(_quote(t) for t in terms) + ")"
        if in_scope < total:  # else every chunk is in the asked scopes
            tags = " OR ".join(_quote(_scope_tag(s)) for s in dict.fromkeys(scopes))
            match = f"scope_tag : ({tags}) AND {match}"
        return match

    def _counts(self, conn: sqlite3.Connection, gen: int) -> tuple[int, dict[str, int]]:
        """(all chunks, chunks per scope) in the snapshot of generation ``gen``, cached until the next write."""
        with self._cache_lock:
            if self._count_cache is not None and self._count_cache[0] == self._vectors.generation:
                return self._count_cache[1], self._count_cache[2]
            per_scope = {r[0]: int(r[1]) for r in conn.execute("SELECT scope, count(*) FROM chunks GROUP BY scope")}
            total = sum(per_scope.values())
            if gen != self._vectors.generation:
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
