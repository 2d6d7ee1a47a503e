"""DocumentCatalogue: one listing of a scope's documents, shared by the status line and the answer, never mixing
scopes, and following uploads."""

from __future__ import annotations

from pathlib import Path

import pytest
from haystack import Document

from connectors.sqlite_store import SQLiteDocumentStore
from connectors.store_api import ScopeRequiredError
from pipelines.catalogue import DocumentCatalogue
from tests.helpers.stores import count_calls

A, B = "slack:T1:CA", "slack:T1:CB"
LONG = 3600.0  # a count or listing this young is always fresh enough: these tests never depend on the clock


def _doc(doc_id: str, file: str, n: int, scope: str) -> list[Document]:
    meta = {"scope": scope, "doc_id": doc_id, "file_name": file, "page_start": 1, "page_end": 1}
    return [Document(id=f"{doc_id}:{i:05d}", content=f"{file} part {i}", meta={**meta, "chunk_index": i})
            for i in range(n)]


@pytest.fixture
def store(tmp_path: Path) -> SQLiteDocumentStore:
    s = SQLiteDocumentStore(tmp_path / "chunks.sqlite3")
    s.write_documents(_doc("a", "a.pdf", 3, A) + _doc("b", "b.pdf", 2, B))
    return s


class TestDocumentCatalogue:
    def test_init_needs_a_store(self) -> None:
        with pytest.raises(ValueError, match="store"):
            DocumentCatalogue(None)  # type: ignore[arg-type]

    def test_the_status_line_and_the_answer_share_one_listing(self, store: SQLiteDocumentStore) -> None:
        calls = count_calls(store)
        catalogue = DocumentCatalogue(store)
        status = catalogue.documents([A], max_age_s=30.0)  # the status line: lists (nothing to count against)
        router = catalogue.documents([A], max_age_s=LONG, count_every_s=LONG)  # the answer, a moment later
        assert [d.file for d in status] == [d.file for d in router] == ["a.pdf"]
        assert calls == ["list_documents"]
        catalogue.documents([A], max_age_s=30.0)  # the next question's status line: counted, not listed
        assert calls == ["list_documents", "count_in_scopes"]

    def test_scopes_never_share_a_listing(self, store: SQLiteDocumentStore) -> None:
        catalogue = DocumentCatalogue(store)
        assert [d.file for d in catalogue.documents([A], max_age_s=LONG, count_every_s=LONG)] == ["a.pdf"]
        assert [d.file for d in catalogue.documents([B], max_age_s=LONG, count_every_s=LONG)] == ["b.pdf"]
        both = catalogue.documents([B, A], max_age_s=LONG, count_every_s=LONG)
        assert sorted(d.file for d in both) == ["a.pdf", "b.pdf"]
        assert catalogue.documents([A, B, A], max_age_s=LONG, count_every_s=LONG) is both
        assert [d.scope for d in catalogue.documents([A], max_age_s=LONG, count_every_s=LONG)] == [A]
        with pytest.raises(ScopeRequiredError):
            catalogue.documents([], max_age_s=LONG)

    def test_a_counted_upload_or_removal_is_listed(self, store: SQLiteDocumentStore) -> None:
        catalogue = DocumentCatalogue(store)
        assert len(catalogue.documents([A], max_age_s=LONG)) == 1
        store.write_documents(_doc("c", "c.pdf", 1, A))
        assert [d.file for d in catalogue.documents([A], max_age_s=LONG)] == ["a.pdf", "c.pdf"]
        store.delete_document("a", scopes=[A])
        assert [d.file for d in catalogue.documents([A], max_age_s=LONG)] == ["c.pdf"]

    def test_a_listing_past_the_callers_age_is_listed_again(self, store: SQLiteDocumentStore) -> None:
        calls = count_calls(store)
        catalogue = DocumentCatalogue(store)
        catalogue.documents([A], max_age_s=LONG)
        catalogue.documents([A], max_age_s=0.0)  # a store that does not count (Elasticsearch) relies on the age
        assert calls == ["list_documents", "count_in_scopes", "list_documents"]

    def test_a_count_other_than_the_listings_chunks_lists_once_more_then_holds(
        self, store: SQLiteDocumentStore
    ) -> None:
        """A chunk without a document (listed by no document, counted all the same): the first listing's own count
        is one short, so the next count lists again, and that listing keeps the count it was checked at."""
        store.write_documents([Document(id="orphan", content="no document", meta={"scope": A})])
        calls = count_calls(store)
        catalogue = DocumentCatalogue(store)
        for _ in range(3):
            assert [d.file for d in catalogue.documents([A], max_age_s=LONG)] == ["a.pdf"]
        assert calls == ["list_documents", "count_in_scopes", "list_documents", "count_in_scopes"]

    def test_a_store_that_does_not_count_keeps_a_listing_while_it_is_young(
        self, store: SQLiteDocumentStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(store, "count_in_scopes", lambda scopes: None)  # as Elasticsearch's
        calls = count_calls(store)
        catalogue = DocumentCatalogue(store)
        first = catalogue.documents([A], max_age_s=LONG)
        assert catalogue.documents([A], max_age_s=LONG) is first
        catalogue.documents([A], max_age_s=0.0)
        assert calls.count("list_documents") == 2
