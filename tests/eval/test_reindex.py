"""``citebot reindex`` on the real SQLite store, with a stand-in embedding model (a function of the text)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from haystack import Document

from connectors.settings import Settings
from connectors.sqlite_store import SQLiteDocumentStore
from eval.reindex import ReindexError, reindex

DIM = 8


def _vec(text: str, salt: int) -> list[float]:
    rng = np.random.default_rng(abs(hash((text, salt))) % 2**32)
    v = rng.normal(size=DIM)
    return list(v / np.linalg.norm(v))


class Model:
    """A deterministic 'model'; ``salt`` stands for the model version."""

    def __init__(self, salt: int, fail_after: int | None = None) -> None:
        self.salt = salt
        self.fail_after = fail_after
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise KeyboardInterrupt
        self.calls.append(texts)
        return [_vec(t, self.salt) for t in texts]


def _chunks(scope: str, doc_id: str, n: int) -> list[Document]:
    return [
        Document(id=f"{doc_id}:{i:05d}", content=f"{doc_id} chunk {i} text", embedding=_vec(f"{doc_id}{i}", 0),
                 meta={"scope": scope, "doc_id": doc_id, "file_name": f"{doc_id}.pdf", "chunk_index": i,
                       "page_start": i + 1, "page_end": i + 1})
        for i in range(n)
    ]


@pytest.fixture
def store_and_settings(tmp_path: Path) -> tuple[SQLiteDocumentStore, Settings]:
    settings = Settings(data_dir=tmp_path / "data", embedding_dim=DIM)
    store = SQLiteDocumentStore(settings.sqlite_path, embedding_dim=DIM)
    store.write_documents(_chunks("slack:T:A", "d1", 3) + _chunks("slack:T:A", "d2", 2) + _chunks("slack:T:B", "d3", 4))
    return store, settings


def _embeddings(store: SQLiteDocumentStore, scope: str) -> dict[str, list[float]]:
    return {d.id: list(d.embedding or []) for d in store.fetch(scopes=[scope], return_embedding=True, limit=100)}


def _quiet(_m: str) -> None:
    pass


def test_reembeds_every_chunk_keeping_text_and_metadata(store_and_settings: Any) -> None:
    store, settings = store_and_settings
    before = {d.id: (d.content, d.meta) for s in ("slack:T:A", "slack:T:B") for d in store.fetch(scopes=[s])}
    model = Model(salt=1)
    res = reindex(settings, store, embedder=model, log=_quiet)
    assert (res.scopes, res.documents, res.chunks) == (2, 3, 9)
    after = {d.id: (d.content, d.meta) for s in ("slack:T:A", "slack:T:B") for d in store.fetch(scopes=[s])}
    assert after == before
    emb = _embeddings(store, "slack:T:B")
    assert np.allclose(emb["d3:00002"], _vec("d3 chunk 2 text", 1))
    # retrieval with the new model finds the chunk by its new vector, still only within its scope
    hits = store.embedding_search(_vec("d3 chunk 2 text", 1), scopes=["slack:T:B"], top_k=1)
    assert hits[0].id == "d3:00002"
    assert store.embedding_search(_vec("d3 chunk 2 text", 1), scopes=["slack:T:A"], top_k=1)[0].id != "d3:00002"


def test_interrupted_reindex_resumes_and_a_rerun_does_nothing(store_and_settings: Any) -> None:
    store, settings = store_and_settings
    with pytest.raises(KeyboardInterrupt):
        reindex(settings, store, embedder=Model(salt=2, fail_after=1), log=_quiet)
    model = Model(salt=2)
    res = reindex(settings, store, embedder=model, log=_quiet)
    assert res.skipped == 1 and res.documents == 2
    assert len(model.calls) == 2
    again = Model(salt=2)
    assert reindex(settings, store, embedder=again, log=_quiet).documents == 0 and again.calls == []
    assert reindex(settings, store, embedder=again, restart=True, log=_quiet).documents == 3


def test_one_scope_only(store_and_settings: Any) -> None:
    store, settings = store_and_settings
    res = reindex(settings, store, scopes=["slack:T:B"], embedder=Model(salt=3), log=_quiet)
    assert res.per_scope == {"slack:T:B": 1}
    assert np.allclose(_embeddings(store, "slack:T:A")["d1:00000"], _vec("d10", 0))  # untouched


def test_dimension_change_is_refused_with_instructions(store_and_settings: Any) -> None:
    store, settings = store_and_settings
    with pytest.raises(ReindexError, match="CITEBOT_EMBEDDING_DIM"):
        reindex(settings, store, embedder=lambda texts: [[0.1] * 16 for _ in texts], log=_quiet)


@pytest.mark.slow
def test_cli_reindex_with_the_real_model(store_and_settings: Any, run_cli: Any,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    store, settings = store_and_settings
    # this store was built with 8-dim vectors; the packaged model gives 384: the command refuses and says why
    assert run_cli(["reindex", "--scope", "slack:T:B"], settings) == 1
    assert "CITEBOT_EMBEDDING_DIM" in capsys.readouterr().err
    assert run_cli(["reindex", "--scope", "slack:T:none"], settings) == 0
    assert "Re-embedded 0 document(s)" in capsys.readouterr().out


class _Terminal:
    """stderr as a terminal (a progress line is drawn only there)."""

    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass


def test_cli_reindex_shows_progress_on_a_terminal(
    store_and_settings: Any, run_cli: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    import connectors.embedding

    _store, settings = store_and_settings
    monkeypatch.setattr(connectors.embedding, "embed", lambda texts, **_kw: [_vec(t, 7) for t in texts])
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert run_cli(["reindex"], settings) == 0
    # each distinct line drawn, in order (a log line makes the progress line be drawn again)
    frames = list(dict.fromkeys(f.strip() for f in terminal.text.replace("\n", "\r").split("\r") if f.strip()))
    assert frames[0] == "re-embedding documents 0/3"
    assert frames[1].startswith("re-embedding documents 1/3 · ") and frames[1].endswith(" left")
    assert frames[-1] == "re-embedding documents 3/3 · done"
    assert "Re-embedded 3 document(s)" in capsys.readouterr().out
    # not on a terminal (a log file, CI): no progress line at all
    monkeypatch.setattr(sys, "stderr", __import__("io").StringIO())
    assert run_cli(["reindex", "--restart"], settings) == 0
    assert "re-embedding documents" not in sys.stderr.getvalue()  # type: ignore[attr-defined]


def test_from_another_store_copies_each_document_whole_in_its_scope_with_its_vectors(
    store_and_settings: Any, tmp_path: Path
) -> None:
    """``citebot reindex --from``: moving an embedded store into the configured one (Elasticsearch in production;
    a second SQLite file here). Vectors made with the configured model are kept, not recomputed."""
    source, settings = store_and_settings
    source.set_embedding_fingerprint(settings.embedding_fingerprint)
    target_settings = Settings(data_dir=tmp_path / "target", embedding_dim=DIM)
    target = SQLiteDocumentStore(target_settings.sqlite_path, embedding_dim=DIM)
    res = reindex(target_settings, target, source=source, log=_quiet)
    assert (res.scopes, res.documents, res.chunks) == (2, 3, 9)
    for scope in ("slack:T:A", "slack:T:B"):
        got = {d.id: (d.content, d.meta, d.embedding) for d in target.fetch(scopes=[scope], return_embedding=True)}
        assert got == {d.id: (d.content, d.meta, d.embedding)
                       for d in source.fetch(scopes=[scope], return_embedding=True)}
    assert target.embedding_fingerprint() == settings.embedding_fingerprint
    assert all(d.meta["scope"] == "slack:T:A" for d in target.embedding_search(
        _vec("d30", 0), scopes=["slack:T:A"], top_k=10))
    again = reindex(target_settings, target, source=source, log=_quiet)
    assert (again.documents, again.skipped) == (0, 3)


def test_from_a_store_of_another_model_reembeds_what_it_copies(store_and_settings: Any, tmp_path: Path) -> None:
    source, _settings = store_and_settings
    source.set_embedding_fingerprint("another-model")
    target_settings = Settings(data_dir=tmp_path / "target", embedding_dim=DIM)
    target = SQLiteDocumentStore(target_settings.sqlite_path, embedding_dim=DIM)
    model = Model(salt=2)
    assert reindex(target_settings, target, source=source, embedder=model, log=_quiet).chunks == 9
    emb = _embeddings(target, "slack:T:B")
    assert np.allclose(emb["d3:00001"], _vec("d3 chunk 1 text", 2)) and len(emb) == 4
