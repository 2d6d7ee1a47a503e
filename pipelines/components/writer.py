"""ChunkWriter: all chunks of one document in one store transaction, replacing older versions.

``store.replace_document`` writes the new chunks and removes the versions the service decided this one
replaces (``replaces``), all or nothing; a failure leaves the store exactly as it was.
"""

from __future__ import annotations

from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict

from connectors.store_api import ChunkStore
from connectors.stores import store_from_dict
from pipelines.reading.layout import IngestFailure

NO_TEXT = IngestFailure(
    "No readable text was found in this PDF (it may be scanned pages that OCR could not read).", code="no_text"
)


@component
class ChunkWriter:
    def __init__(self, *, store: ChunkStore) -> None:
        if store is None or not hasattr(store, "replace_document"):
            raise ValueError("store must implement ChunkStore.replace_document")
        self.store = store

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, store=self.store.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChunkWriter:
        params = data.get("init_parameters", {})
        store_data = params.get("store")
        if isinstance(store_data, dict) and "type" in store_data:
            params["store"] = store_from_dict(store_data)
        return default_from_dict(cls, data)

    @component.output_types(written=int, replaced=list[str], failed=list[IngestFailure])
    def run(self, documents: list[Document], scope: str, replaces: list[str] | None = None) -> dict[str, Any]:
        """Write the file's chunks in ``scope``, removing the documents ``replaces`` names, in one transaction.

        :param documents: the embedded chunks of one document.
        :param scope: where they are written.
        :param replaces: the ids of the documents this one replaces.
        :returns: ``written``, how many chunks; ``replaced``, the documents removed; ``failed``, empty, or the file
            when it had no chunks (nothing is written then). A store that cannot write raises
            :class:`connectors.store_api.StoreError`.
        """
        if not documents:
            return {"written": 0, "replaced": [], "failed": [NO_TEXT]}
        replaced = self.store.replace_document(documents, scope=scope, replaces=replaces or [])
        return {"written": len(documents), "replaced": list(replaced), "failed": []}
