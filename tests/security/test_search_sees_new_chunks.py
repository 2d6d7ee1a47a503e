"""Defect 10 of the security review: a search racing a write must not leave the embedded store's caches stale.

Before the fix a search whose snapshot began before a write could cache what it read (the scope's dense
matrix, the chunk counts) after another thread had already seen that write: a new chunk was found by BM25
but not by dense search (or a new channel's first document not by BM25) until the next write. The tests
force that interleaving by pausing a search between taking its snapshot and filling the cache.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from connectors.sqlite_store import SQLiteDocumentStore
from tests.helpers.stores import DIM, chunk, unit

A, B = "slack:T1:CA", "slack:T1:CB"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteDocumentStore]:
    s = SQLiteDocumentStore(tmp_path / "chunks.sqlite3", embedding_dim=DIM)
    s.write_documents([chunk("old", i, f"old policy text {i}", scope=A, embedding=unit((i, 1.0))) for i in range(3)])
    yield s
    s.close()


def _search_paused_after_its_snapshot(
    store: SQLiteDocumentStore, search: Callable[[], Any], meanwhile: Callable[[], None]
) -> None:
    """Run ``search`` on a worker thread; once its snapshot is taken, run ``meanwhile`` here, then let it finish."""
    snapshot_taken, go_on = threading.Event(), threading.Event()
    refresh = store._vectors.refresh
    worker: list[threading.Thread] = []

    def paused_refresh(conn: Any) -> Any:
        out = refresh(conn)
        if threading.current_thread() is worker[0]:
            snapshot_taken.set()
            assert go_on.wait(30)
        return out

    store._vectors.refresh = paused_refresh  # type: ignore[method-assign]
    errors: list[BaseException] = []

    def run() -> None:
        try:
            search()
        except BaseException as e:  # noqa: BLE001 - re-raised on the test's thread
            errors.append(e)

    worker.append(threading.Thread(target=run))
    worker[0].start()
    try:
        assert snapshot_taken.wait(30)
        meanwhile()
    finally:
        go_on.set()
        worker[0].join(30)
        store._vectors.refresh = refresh  # type: ignore[method-assign]
    assert not errors, errors


def test_a_chunk_written_during_a_dense_search_is_found_by_the_next_one(store: SQLiteDocumentStore) -> None:
    new = chunk("new", 0, "zanzibar travel allowance", scope=A, embedding=unit((200, 1.0)))

    def write_and_search_again() -> None:
        store.write_documents([new])
        assert [d.id for d in store.bm25_search("zanzibar", scopes=[A], top_k=5)] == [new.id]

    _search_paused_after_its_snapshot(
        store, lambda: store.embedding_search(unit((0, 1.0)), scopes=[A], top_k=5), write_and_search_again
    )
    assert [d.id for d in store.embedding_search(unit((200, 1.0)), scopes=[A], top_k=1)] == [new.id]


def test_a_new_channels_first_document_is_found_by_keyword_search(store: SQLiteDocumentStore) -> None:
    new = chunk("first", 0, "zanzibar travel allowance", scope=B, embedding=unit((200, 1.0)))

    def write_and_search_again() -> None:
        store.write_documents([new])
        assert [d.id for d in store.embedding_search(unit((200, 1.0)), scopes=[B], top_k=1)] == [new.id]

    _search_paused_after_its_snapshot(
        store, lambda: store.bm25_search("policy", scopes=[A], top_k=5), write_and_search_again
    )
    assert [d.id for d in store.bm25_search("zanzibar", scopes=[B], top_k=5)] == [new.id]
