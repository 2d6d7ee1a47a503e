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


QUESTION = "What are the core working hours?"


def _quotes(answer: Any) -> list[tuple[str, int, str]]:
    return [(c.file, c.page_start, c.quote) for c in answer.citations]


def test_a_store_keeps_the_backend_its_vectors_were_made_with_until_reindex(
    tmp_path: Path, run_cli: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipelines.service import CitebotService

    unset = Settings(data_dir=tmp_path / "data")  # CITEBOT_EMBEDDING_BACKEND not set (the suite clears it)
    assert not unset.embedding_backend_chosen
    other = "onnx" if unset.embedding_backend == "onnx-int8" else "onnx-int8"  # a backend that is not the default
    made = CitebotService(_settings(tmp_path, other))
    assert made.ingest(sample_bytes(HANDBOOK), file_name=HANDBOOK, scope="local").status == "indexed"
    alone = made.answer(QUESTION, ["local"])
    recorded = made.store.embedding_fingerprint()

    service = CitebotService(unset)
    assert service.embedding_backend == other
    again = service.answer(QUESTION, ["local"])
    assert not again.refused and _quotes(again) == _quotes(alone)
    assert service.query.embedding_mismatch is None
    # it adds to the store with the same vectors
    assert service.ingest(sample_bytes(CONTRACT), file_name=CONTRACT, scope="local").status == "indexed"
    assert service.store.embedding_fingerprint() == recorded

    assert run_cli(["reindex", "--check"], unset) == 0
    out = capsys.readouterr().out
    assert f"made with {other}" in out and f"moves it to {unset.embedding_backend}" in out
    assert run_cli(["reindex"], unset) == 0
    assert f"with {unset.embedding_backend}" in capsys.readouterr().out
    moved = CitebotService(unset)
    assert moved.embedding_backend == unset.embedding_backend
    assert moved.store.embedding_fingerprint() == unset.embedding_fingerprint
    assert not moved.answer(QUESTION, ["local"]).refused
    assert moved.query.embedding_mismatch is None
    assert run_cli(["reindex", "--check"], unset) == 0
    assert "no reindex needed" in capsys.readouterr().out


def test_a_new_store_gets_the_default_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from connectors.settings import DEFAULT_EMBEDDING_BACKEND
    from pipelines.service import CitebotService

    unset = Settings(data_dir=tmp_path / "data")
    service = CitebotService(unset)
    assert service.embedding_backend == DEFAULT_EMBEDDING_BACKEND
    assert service.ingest(sample_bytes(HANDBOOK), file_name=HANDBOOK, scope="local").status == "indexed"
    assert service.store.embedding_fingerprint() == embedding_fingerprint(
        unset.resolved_model_path, 384, DEFAULT_EMBEDDING_BACKEND)
    from bot.cli.main import main

    assert main(["docs", "--stats"]) == 0  # the suite's CITEBOT_DATA_DIR is this data dir
    row = next(line for line in capsys.readouterr().out.splitlines() if "embedding backend" in line)
    assert DEFAULT_EMBEDDING_BACKEND in row
    assert "onnx-int8" in row  # int8 for new stores: 1.5x the pages per CPU-second, the same page hits (README)


def test_a_configured_backend_holds_over_the_store(tmp_path: Path) -> None:
    """CITEBOT_EMBEDDING_BACKEND set: the store does not choose (a mismatch is reported, as before)."""
    from pipelines.service import CitebotService

    fp32 = CitebotService(_settings(tmp_path, "onnx"))
    assert fp32.ingest(sample_bytes(HANDBOOK), file_name=HANDBOOK, scope="local").status == "indexed"
    int8 = CitebotService(_settings(tmp_path, "onnx-int8"))
    assert int8.embedding_backend == "onnx-int8"
    res = int8.ingest(sample_bytes(CONTRACT), file_name=CONTRACT, scope="local")
    assert res.error == FAILED_REINDEX

