"""The service layer: ingest a file into a scope, answer a question over scopes. No chat platform here.

Both the CLI and the chat core hold one :class:`CitebotService` per process; the embedding model
and the pipelines inside are built once and shared (the service is safe to call from threads).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from connectors.settings import Settings
from connectors.store_api import ChunkStore, require_scopes
from pipelines.models import Answer, DocInfo, IngestProgress, IngestResult, RetrievalMode, Turn

if TYPE_CHECKING:
    from pipelines.indexing import Indexer
    from pipelines.query import QueryEngine

ProgressCallback = Callable[[IngestProgress], None]


class CitebotService:
    def __init__(self, settings: Settings, store: ChunkStore | None = None) -> None:
        from connectors.stores import open_store

        self.settings = settings
        self.store: ChunkStore = store if store is not None else open_store(settings)
        self._lock = threading.Lock()
        self._indexer: Indexer | None = None
        self._query: QueryEngine | None = None

    # --- lazily built, shared pipelines ----------------------------------------------------------
    @property
    def indexer(self) -> Indexer:
        with self._lock:
            if self._indexer is None:
                from pipelines.indexing import Indexer

                self._indexer = Indexer(self.settings, self.store)
            return self._indexer

    @property
    def query(self) -> QueryEngine:
        with self._lock:
            if self._query is None:
                from pipelines.query import QueryEngine

                self._query = QueryEngine(self.settings, self.store)
            return self._query

    def warm_up(self) -> None:
        """Load the model and build the pipelines now rather than on the first request."""
        self.query.warm_up()
        self.indexer.warm_up()

    # --- operations ------------------------------------------------------------------------------
    def ingest(
        self,
        data: bytes,
        *,
        file_name: str,
        scope: str,
        uploaded_by: str = "",
        source_url: str = "",
        progress: ProgressCallback | None = None,
    ) -> IngestResult:
        require_scopes(scope)
        return self.indexer.ingest(
            data, file_name=file_name, scope=scope, uploaded_by=uploaded_by, source_url=source_url, progress=progress
        )

    def answer(
        self,
        question: str,
        scopes: str | Sequence[str],
        history: Sequence[Turn] = (),
        *,
        mode: RetrievalMode = "hybrid",
        k: int | None = None,
    ) -> Answer:
        return self.query.answer(question, require_scopes(scopes), history, mode=mode, k=k)

    def list_documents(self, scopes: str | Sequence[str]) -> list[DocInfo]:
        return self.store.list_documents(scopes=require_scopes(scopes))

    def find_documents(self, file_name_or_id: str, scopes: str | Sequence[str]) -> list[DocInfo]:
        """Documents in ``scopes`` whose doc_id or file name (case-insensitive) is ``file_name_or_id``."""
        key = file_name_or_id.strip().lower()
        return [
            d for d in self.list_documents(scopes) if d.doc_id == file_name_or_id or d.file.lower() == key
        ]

    def forget(self, doc_id: str, scopes: str | Sequence[str]) -> int:
        """Delete a document's chunks within ``scopes``; returns how many chunks were deleted."""
        return self.store.delete_document(doc_id, scopes=require_scopes(scopes))
