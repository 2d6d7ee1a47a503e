"""The documents of each set of scopes, listed once and shared by everyone who asks during a question.

Listing documents reads every chunk's metadata of the scopes (0.7 s at 50,000 chunks). A first question after an
upload used to list them twice: once for the status line's count ("Searching 3 PDFs…",
:meth:`pipelines.service.CitebotService.document_count`) and once for the structure router's file names, each
behind its own cache. :class:`DocumentCatalogue` is the one cache: each caller says how fresh a listing it needs
(``max_age_s``) and how recently the chunk count must have been checked (``count_every_s``); a listing is reused
while the scopes' chunk count (:meth:`ChunkStore.count_in_scopes`, an index look-up) has not changed. The first
listing of a set of scopes is not counted first: with nothing to keep, its documents' chunks are its count, so a
first question after an upload makes one trip for its documents.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from connectors.store_api import ChunkStore, DocInfo, require_scopes

# entries kept before the cache starts over (one per distinct set of scopes asked about)
_MAX_ENTRIES = 10_000


@dataclass(frozen=True)
class _Listing:
    listed_at: float
    version: int | None  # the chunk count it was listed at (None: the store does not count)
    docs: list[DocInfo]


class DocumentCatalogue:
    """The documents of ``scopes``, cached per set of scopes until their chunk count changes or the caller's
    ``max_age_s`` passes. One listing at a time per set of scopes: a caller that finds another listing them waits
    for that listing rather than making its own.

    Usage::

        catalogue = DocumentCatalogue(store)
        docs = catalogue.documents(["slack:T1:C1"], max_age_s=30.0)  # lists (its chunks are its count)
        docs = catalogue.documents(["slack:T1:C1"], max_age_s=600.0, count_every_s=2.0)  # neither, a moment later
    """

    def __init__(self, store: ChunkStore) -> None:
        if store is None:
            raise ValueError("DocumentCatalogue needs a store")
        self.store = store
        self._lock = threading.Lock()
        self._listings: dict[tuple[str, ...], _Listing] = {}
        self._counted: dict[tuple[str, ...], float] = {}
        self._listing_locks: dict[tuple[str, ...], threading.Lock] = {}

    def documents(self, scopes: Sequence[str], *, max_age_s: float, count_every_s: float = 0.0) -> list[DocInfo]:
        """The documents in ``scopes`` (as :meth:`ChunkStore.list_documents` lists them; the list is shared: do not
        change it), listed at most ``max_age_s`` ago at the scopes' present chunk count. The count is skipped when
        it was checked less than ``count_every_s`` ago (0: always counted).

        :param scopes: the scopes whose documents are wanted; at least one.
        :param max_age_s: the oldest listing the caller accepts.
        :param count_every_s: how long a chunk count stands for the present one.
        :returns: the documents, in the store's order.
        """
        key = tuple(sorted(set(require_scopes(scopes))))
        hit = self._fresh(key, max_age_s, count_every_s, time.monotonic())
        if hit is not None:
            return hit.docs
        with self._lock:
            listing_lock = self._listing_locks.setdefault(key, threading.Lock())
        with listing_lock:  # whoever waited here finds what the one before listed
            now = time.monotonic()
            hit = self._fresh(key, max_age_s, count_every_s, now)
            if hit is not None:
                return hit.docs
            with self._lock:
                hit = self._listings.get(key)
            version: int | None = None
            if hit is not None:  # a listing to keep while the count has not changed (an index look-up)
                version = self.store.count_in_scopes(list(key))
                if (version is None or version == hit.version) and now - hit.listed_at < max_age_s:
                    with self._lock:
                        self._counted[key] = now
                    return hit.docs
            docs = self.store.list_documents(scopes=list(key))
            if hit is None:  # nothing to keep: no count first, the listing's chunks are its count
                version = sum(d.chunks for d in docs)
            with self._lock:
                self._counted[key] = now
                if len(self._listings) >= _MAX_ENTRIES:  # start over (a waiter on an old lock lists once more)
                    self._listings.clear()
                    self._counted = {key: now}
                    self._listing_locks = {key: listing_lock}
                self._listings[key] = _Listing(now, version, docs)
            return docs

    def _fresh(self, key: tuple[str, ...], max_age_s: float, count_every_s: float, now: float) -> _Listing | None:
        """The listing of ``key`` when it is young enough and its count was checked recently enough to skip one."""
        with self._lock:
            hit = self._listings.get(key)
            counted = self._counted.get(key, float("-inf"))
        if hit is not None and now - hit.listed_at < max_age_s and now - counted < count_every_s:
            return hit
        return None
