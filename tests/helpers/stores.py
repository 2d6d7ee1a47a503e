"""Both document stores for the contract and security suites: the embedded SQLite store always, Elasticsearch when
``CITEBOT_TEST_ELASTICSEARCH_URL`` points at a running Elasticsearch 8 (``deploy/docker-compose.yml`` starts one);
and the chunks and vectors those suites write."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from haystack import Document

ES_URL = os.environ.get("CITEBOT_TEST_ELASTICSEARCH_URL")
ES_SKIP_REASON = (
    "set CITEBOT_TEST_ELASTICSEARCH_URL to a running Elasticsearch 8 (deploy/docker-compose.yml starts one) "
    "to run the contract suite against it"
)
STORE_KINDS = [
    "sqlite",
    pytest.param(
        "elasticsearch", marks=[pytest.mark.integration, pytest.mark.skipif(not ES_URL, reason=ES_SKIP_REASON)]
    ),
]
DIM = 384


def store_settings(kind: str, tmp_path: Path, dim: int = DIM) -> dict[str, Any]:
    if kind == "sqlite":
        return {"data_dir": str(tmp_path / "data"), "embedding_dim": dim}
    return {
        "data_dir": str(tmp_path / "data"),
        "embedding_dim": dim,
        "elasticsearch_url": ES_URL,
        "elasticsearch_index": f"citebot-test-{uuid.uuid4().hex[:12]}",
    }


def drop_store(store: Any) -> None:
    drop = getattr(store, "drop_index", None)
    if drop is not None:
        drop()
    close = getattr(store, "close", None)
    if close is not None:
        close()


def unit(*weights: tuple[int, float], dim: int = DIM) -> list[float]:
    """A unit vector with the given (axis, weight) components."""
    v = np.zeros(dim, dtype=np.float64)
    for axis, w in weights:
        v[axis] += w
    return (v / np.linalg.norm(v)).tolist()


def chunk(
    doc_id: str,
    i: int,
    text: str,
    *,
    scope: str = "local",
    file: str = "a.pdf",
    embedding: list[float] | None = None,
    **meta: Any,
) -> Document:
    m = {
        "scope": scope,
        "doc_id": doc_id,
        "file_name": file,
        "page_start": meta.pop("page_start", i + 1),
        "page_end": meta.pop("page_end", i + 1),
        "section": meta.pop("section", ""),
        "section_id": "",
        "element_type": meta.pop("element_type", "text"),
        "label": meta.pop("label", ""),
        "chunk_index": i,
        "sha256": f"sha-{doc_id}",
        "uploaded_by": "U1",
        "uploaded_at": meta.pop("uploaded_at", "2026-01-01T10:00:00+00:00"),
        **meta,
    }
    return Document(id=f"{doc_id}:{i:05d}", content=text, meta=m, embedding=embedding or unit((i % DIM, 1.0)))


def damage_table(path: Path, table: str) -> None:
    """Overwrite the root page of ``table`` in the SQLite file at ``path`` (closed, checkpointed) with junk, the file
    header left intact: what a torn write or a bad sector does to one table."""
    import sqlite3

    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = int(db.execute("PRAGMA page_size").fetchone()[0])
    (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    db.close()
    with path.open("r+b") as f:
        f.seek((int(root) - 1) * page_size)
        f.write(b"\xa5" * page_size)


def count_calls(store: Any, protocol: type | None = None, *, polls: tuple[str, ...] = ()) -> list[str]:
    """Record the name of every call of ``protocol`` (default ``ChunkStore``; ``ChatState`` for the chat state) made
    on ``store`` from now on, one round trip each, in order: the list returned grows as the store is called. A call
    named in ``polls`` is recorded only when it returns something (a worker's poll that took no work is not part of
    any question's trips). Patches this instance only."""
    from connectors.store_api import ChunkStore

    calls: list[str] = []

    def counting(name: str, call: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if name not in polls:
                calls.append(name)
                return call(*args, **kwargs)
            out = call(*args, **kwargs)
            if out:
                calls.append(name)
            return out

        return counted

    for name in dir(protocol or ChunkStore):
        if not name.startswith("_") and name != "to_dict" and callable(getattr(store, name, None)):
            setattr(store, name, counting(name, getattr(store, name)))
    return calls
