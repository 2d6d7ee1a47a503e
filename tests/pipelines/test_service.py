"""CitebotService: the document count a status line shows follows uploads and removals."""

from __future__ import annotations

from pathlib import Path

from haystack import Document

from connectors.settings import Settings
from connectors.sqlite_store import SQLiteDocumentStore
from pipelines.service import CitebotService


def _doc(doc_id: str, file: str, n: int, scope: str = "slack:T1:C1") -> list[Document]:
    meta = {"scope": scope, "doc_id": doc_id, "file_name": file, "page_start": 1, "page_end": 1}
    return [Document(id=f"{doc_id}:{i:05d}", content=f"{file} part {i}", meta={**meta, "chunk_index": i},
                     embedding=[1.0, 0.0, 0.0, 0.0]) for i in range(n)]


class TestDocumentCount:
    def test_follows_uploads_and_removals_in_the_asked_scopes(self, tmp_path: Path) -> None:
        store = SQLiteDocumentStore(tmp_path / "chunks.sqlite3")
        service = CitebotService(Settings(data_dir=tmp_path), store=store)
        scope, other = "slack:T1:C1", "slack:T1:C2"
        assert service.document_count([scope]) == 0
        store.write_documents(_doc("a", "a.pdf", 3))
        assert service.document_count([scope]) == 1
        assert service.document_count([scope]) == 1  # asked again: the same answer
        store.write_documents(_doc("b", "b.pdf", 2) + _doc("c", "c.pdf", 4, scope=other))
        assert service.document_count([scope]) == 2
        assert service.document_count([scope, other]) == 3
        assert service.document_count([other]) == 1
        store.delete_document("a", scopes=[scope])
        assert service.document_count([scope]) == 1
        assert service.document_count([scope]) == len(service.list_documents([scope]))
