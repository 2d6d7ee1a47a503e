"""Switching embedding backends never mixes vectors: the store records what made them, ingestion refuses to
add unlike vectors, the query side says so, and ``citebot reindex`` (``--check``) tells and fixes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from haystack import Document

from connectors.embedding import embedding_fingerprint
from connectors.settings import Settings
from connectors.sqlite_store import SQLiteDocumentStore
from eval.sample_pdfs import CONTRACT, HANDBOOK, sample_bytes
from pipelines.indexing import FAILED_REINDEX, Indexer
from pipelines.query import QueryEngine

pytestmark = pytest.mark.slow


def _settings(tmp_path: Path, backend: str) -> Settings:
    return Settings(data_dir=tmp_path / "data", embedding_backend=backend)  # type: ignore[arg-type]


def test_switching_to_int8_needs_a_reindex(tmp_path: Path, run_cli: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fp32 = _settings(tmp_path, "onnx")
    store = SQLiteDocumentStore(fp32.sqlite_path, embedding_dim=384)
    assert Indexer(fp32, store).ingest(sample_bytes(HANDBOOK), file_name=HANDBOOK, scope="local").status == "indexed"
    torch_fp = embedding_fingerprint(fp32.resolved_model_path, 384, "torch")
    assert store.embedding_fingerprint() == torch_fp  # fp32 ONNX vectors are torch's

    int8 = _settings(tmp_path, "onnx-int8")
    res = Indexer(int8, store).ingest(sample_bytes(CONTRACT), file_name=CONTRACT, scope="local")
    assert (res.status, res.error) == ("failed", FAILED_REINDEX)
    assert [d.file for d in store.list_documents(scopes=["local"])] == [HANDBOOK]  # nothing mixed in
    engine = QueryEngine(int8, store)
    engine.warm_up()
    assert engine.embedding_mismatch == torch_fp

    assert run_cli(["reindex", "--check"], int8) == 1
    assert "Reindex needed" in capsys.readouterr().out
    assert run_cli(["reindex"], int8) == 0
    assert store.embedding_fingerprint() == torch_fp + "-int8"
    assert run_cli(["reindex", "--check"], int8) == 0
    assert "no reindex needed" in capsys.readouterr().out
    assert Indexer(int8, store).ingest(sample_bytes(CONTRACT), file_name=CONTRACT, scope="local").status == "indexed"
    # and back: torch (or fp32 ONNX) may not add to an int8 store either
    back = Indexer(_settings(tmp_path, "torch"), store).ingest(b"%PDF-1.4 other", file_name="x.pdf", scope="local")
    assert back.error == FAILED_REINDEX
    assert run_cli(["reindex", "--check"], _settings(tmp_path, "torch")) == 1


def test_a_store_from_before_fingerprints_counts_as_torch(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "onnx-int8")
    store = SQLiteDocumentStore(settings.sqlite_path, embedding_dim=384)
    store.write_documents([Document(id="d:00000", content="text", embedding=[1.0] + [0.0] * 383,
                                    meta={"scope": "local", "doc_id": "d", "file_name": "d.pdf", "chunk_index": 0})])
    assert store.embedding_fingerprint() is None
    from eval.reindex import reindex_status

    stored, current = reindex_status(settings, store)
    assert stored == embedding_fingerprint(settings.resolved_model_path, 384, "torch") != current
    assert store.embedding_fingerprint() == stored
