"""The embedding backends: the ONNX export against torch, fingerprints, the fallback, batching, no torch on start."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from connectors import embedding as E
from connectors.settings import Settings

MODEL = Settings().resolved_model_path
REPO = Path(__file__).resolve().parents[2]
TEXTS = [
    "What are the core working hours?",
    "Employees may carry over up to five days of annual leave into the next year.",
    "Table 3 | 2023 | 2024\nRevenue | 1,204.5 | 1,388.0",
    "ok",
    "The Supplier shall indemnify the Client against all losses arising from a breach of clause 9. " * 12,
]


class TestFingerprints:
    def test_fp32_onnx_shares_torch_and_int8_has_its_own(self):
        torch_fp = E.embedding_fingerprint(MODEL, 384, "torch")
        assert E.embedding_fingerprint(MODEL, 384, "onnx") == torch_fp
        assert E.embedding_fingerprint(MODEL, 384, "onnx-int8") == torch_fp + "-int8"
        assert E.embedding_fingerprint(MODEL, 512, "torch") != torch_fp

    def test_settings_fingerprint_follows_the_backend(self):
        assert Settings(embedding_backend="onnx").embedding_fingerprint == Settings(
            embedding_backend="torch").embedding_fingerprint
        assert Settings(embedding_backend="onnx-int8").embedding_fingerprint.endswith("-int8")

    def test_export_goes_under_the_model_fingerprint(self, tmp_path):
        fp = E.model_fingerprint(MODEL, 384)
        assert E.onnx_file(tmp_path, MODEL, 384, "onnx") == tmp_path / fp / "model.onnx"
        assert E.onnx_file(tmp_path, MODEL, 384, "onnx-int8") == tmp_path / fp / "model-int8.onnx"


class TestGetEncoder:
    @pytest.mark.parametrize(("kwargs", "match"), [({"backend": "tf"}, "backend"), ({"backend": "onnx"}, "models_dir")])
    def test_validates(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            E.get_encoder(MODEL, 1, **kwargs)

    def test_model_the_onnx_path_cannot_reproduce_is_refused(self, tmp_path):
        folder = tmp_path / "m"
        folder.mkdir()
        (folder / "tokenizer.json").write_text("{}")
        (folder / "modules.json").write_text(json.dumps([{"type": "sentence_transformers.models.Transformer"},
                                                         {"type": "sentence_transformers.models.Pooling"}]))
        with pytest.raises(E.OnnxExportError, match="Normalize"):
            E.export_onnx(folder, tmp_path / "out" / "model.onnx")

    @pytest.mark.slow
    def test_falls_back_to_torch_without_onnxruntime(self, monkeypatch, tmp_path):
        monkeypatch.setattr(E, "onnx_available", lambda: False)
        monkeypatch.setattr(E, "_encoders", {})
        enc = E.get_encoder(MODEL, 1, backend="onnx", models_dir=tmp_path)
        assert enc.backend == "torch"
        assert enc.fingerprint == E.embedding_fingerprint(MODEL, 384, "onnx")  # same vectors: no reindex
        assert not any(tmp_path.iterdir())  # no export attempted


@pytest.mark.slow
class TestOnnxExport:
    def test_fp32_vectors_match_torch(self, shared_models_dir):
        onnx = E.get_encoder(MODEL, 1, backend="onnx", models_dir=shared_models_dir)
        torch_enc = E.get_encoder(MODEL, 1, backend="torch")
        assert onnx.backend == "onnx" and onnx.fingerprint == torch_enc.fingerprint
        a, b = onnx.encode(TEXTS, batch_size=2), torch_enc.encode(TEXTS, batch_size=2)
        assert a.shape == b.shape == (len(TEXTS), 384) and a.dtype == np.float32
        assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
        assert float((a * b).sum(axis=1).min()) > 0.9999
        assert np.abs(a - b).max() < 1e-4
        # the export is made once and reused
        assert E.prepare_onnx(MODEL, shared_models_dir, backend="onnx") == E.onnx_file(
            shared_models_dir, MODEL, 384, "onnx")

    @pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
    def test_batching_does_not_change_vectors(self, shared_models_dir, backend):
        """A text's vector never depends on the texts embedded beside it (a question asked in a busy channel
        finds what it finds asked alone); int8's dynamic quantization would, batched."""
        onnx = E.get_encoder(MODEL, 1, backend=backend, models_dir=shared_models_dir)
        one_by_one = np.stack([onnx.encode([t])[0] for t in TEXTS])
        assert np.abs(onnx.encode(TEXTS, batch_size=64) - one_by_one).max() < 1e-5

    @pytest.mark.parametrize("backend", ["onnx", "torch"])
    def test_a_whole_document_at_once_gives_each_text_its_vector_and_reports_progress(self, shared_models_dir,
                                                                                       backend):
        enc = E.get_encoder(MODEL, 1, backend=backend, models_dir=shared_models_dir)
        texts = [*TEXTS, TEXTS[1], *(f"Note {i}. Revenue by segment {i}" for i in range(9)), TEXTS[4]]
        alone = {t: enc.encode([t])[0] for t in texts}
        seen: list[tuple[int, int]] = []
        vecs = enc.encode(texts, batch_size=3, on_progress=lambda done, total: seen.append((done, total)))
        assert vecs.shape == (len(texts), 384)
        assert max(float(np.abs(v - alone[t]).max()) for t, v in zip(texts, vecs, strict=True)) < 1e-5
        assert seen[-1] == (len(texts), len(texts)) and len(seen) >= 2
        assert [d for d, _ in seen] == sorted(d for d, _ in seen)

    def test_int8_is_close_but_its_own(self, shared_models_dir):
        q = E.get_encoder(MODEL, 1, backend="onnx-int8", models_dir=shared_models_dir)
        fp32 = E.get_encoder(MODEL, 1, backend="onnx", models_dir=shared_models_dir)
        assert q.backend == "onnx-int8" and q.fingerprint.endswith("-int8")
        cos = (q.encode(TEXTS) * fp32.encode(TEXTS)).sum(axis=1)
        assert float(cos.min()) > 0.8  # quantised: near, not equal (hence its own fingerprint)

    def test_a_damaged_export_is_made_again(self, tmp_path):
        target = E.onnx_file(tmp_path, MODEL, 384, "onnx")
        target.parent.mkdir(parents=True)
        target.write_bytes(b"not an onnx file")
        enc = E._load(MODEL, 1, "onnx", tmp_path, 384)
        assert enc.backend == "onnx" and target.stat().st_size > 1_000_000


_PREPARE = (
    "import json, sys; from pathlib import Path; from connectors.embedding import prepare_onnx; "
    "from connectors.settings import Settings; "
    "t = prepare_onnx(Settings().resolved_model_path, Path(sys.argv[1]), backend='onnx-int8'); "
    "print(json.dumps([str(t), t.stat().st_ino]))"
)


@pytest.mark.slow
def test_two_starts_on_a_new_machine_prepare_int8_once_with_the_vectors_of_the_fp32_export_beside_it(
    tmp_path, shared_models_dir
):
    """The shared cache: two processes starting at once export once (one waits for the other), leave the int8
    file alone (no 90 MB fp32 copy, no temporary files), and its vectors are byte for byte those of the int8
    quantised from an fp32 export kept beside it (how every earlier version made it)."""
    import os
    import shutil

    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(REPO), "CITEBOT_LOG_LEVEL": "warning"}
    procs = [subprocess.Popen([sys.executable, "-c", _PREPARE, str(cache)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    (path_a, inode_a), (path_b, inode_b) = (json.loads(out.strip().splitlines()[-1]) for out, _ in outs)
    target = E.onnx_file(cache, MODEL, 384, "onnx-int8")
    assert path_a == path_b == str(target) and inode_a == inode_b == target.stat().st_ino  # made once
    assert sorted(p.name for p in target.parent.iterdir()) == ["model-int8.onnx"]

    beside = tmp_path / "beside"
    fp32 = E.onnx_file(beside, MODEL, 384, "onnx")
    fp32.parent.mkdir(parents=True)
    shutil.copyfile(E.prepare_onnx(MODEL, shared_models_dir, backend="onnx"), fp32)
    old_way = E.prepare_onnx(MODEL, beside, backend="onnx-int8")  # quantised from the fp32 file beside it
    cached = E.OnnxEncoder(MODEL, target, 1, "onnx-int8", "").encode(TEXTS)
    before = E.OnnxEncoder(MODEL, old_way, 1, "onnx-int8", "").encode(TEXTS)
    assert cached.tobytes() == before.tobytes()
    assert target.read_bytes() == old_way.read_bytes()


class _Fake:
    backend = "fake"
    fingerprint = "fake"
    one_text_a_run = False

    def __init__(self, delay: float = 0.02, fail: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.delay = delay
        self.fail = fail
        self.lock = threading.Lock()

    def encode(self, texts, batch_size=32):
        with self.lock:
            self.calls.append(list(texts))
        time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("model broke")
        return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)


class TestBatchingEncoder:
    def test_init_validates(self):
        with pytest.raises(ValueError, match="window_s"):
            E.BatchingEncoder(_Fake(), window_s=-1)

    def test_a_lone_caller_is_not_held_back(self):
        fake = _Fake(delay=0)
        b = E.BatchingEncoder(fake, window_s=60.0)
        t0 = time.perf_counter()
        for _ in range(3):
            assert b.encode(["abc", "de"]).tolist() == [[3.0, 1.0], [2.0, 1.0]]
        # three calls from one thread never wait the window: one wait would take 60 s, the bound holds under load
        assert time.perf_counter() - t0 < 30
        assert len(fake.calls) == 3

    def test_concurrent_callers_share_batches_and_get_their_own_rows(self):
        fake = _Fake(delay=0.03)
        b = E.BatchingEncoder(fake, window_s=0.01)
        n = 24
        barrier = threading.Barrier(n)
        results: dict[int, list[list[float]]] = {}

        def ask(i: int) -> None:
            texts = ["x" * (i + 1)] * (1 + i % 3)
            barrier.wait()
            results[i] = b.encode(texts).tolist()

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert all(results[i] == [[float(i + 1), 1.0]] * (1 + i % 3) for i in range(n))
        assert len(fake.calls) < n / 2  # batched: far fewer model calls than questions
        assert b.requests == n

    def test_more_waiting_than_one_batch_holds_encodes_each_text_once(self):
        fake = _Fake(delay=0.03)
        b = E.BatchingEncoder(fake, window_s=0.01, max_texts=4)
        n = 12
        barrier = threading.Barrier(n)
        results: dict[int, list[list[float]]] = {}

        def ask(i: int) -> None:
            barrier.wait()
            results[i] = b.encode(["y" * (i + 1), "z"]).tolist()

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert all(results[i] == [[float(i + 1), 1.0], [1.0, 1.0]] for i in range(n))
        assert all(len(call) <= 4 for call in fake.calls)
        assert sum(len(call) for call in fake.calls) == 2 * n  # no request encoded twice
        assert b.requests == n

    def test_a_failure_reaches_every_caller_of_the_batch(self):
        b = E.BatchingEncoder(_Fake(delay=0.02, fail=True), window_s=0.01)
        errors: list[BaseException] = []

        def ask() -> None:
            try:
                b.encode(["q"])
            except RuntimeError as e:
                errors.append(e)

        threads = [threading.Thread(target=ask) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert len(errors) == 4


@pytest.mark.slow
def test_ask_on_the_onnx_path_imports_no_torch(tmp_path, shared_models_dir):
    """`citebot ask` in a fresh process: the answer, and neither torch nor transformers loaded."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("CITEBOT_")}
    env.update({"CITEBOT_DATA_DIR": str(tmp_path / "data"), "CITEBOT_MODELS_DIR": str(shared_models_dir),
                "CITEBOT_LOG_LEVEL": "warning", "PYTHONPATH": str(REPO)})
    E.prepare_onnx(MODEL, shared_models_dir, backend="onnx")
    from connectors.stores import open_store
    from eval.sample_pdfs import HANDBOOK, sample_bytes
    from pipelines.service import CitebotService

    settings = Settings(data_dir=tmp_path / "data", models_dir=shared_models_dir)
    assert CitebotService(settings, open_store(settings)).ingest(
        sample_bytes(HANDBOOK), file_name=HANDBOOK, scope="local").status == "indexed"
    code = (
        "import sys; from bot.cli.main import main; rc = main(['ask', 'How many days of annual leave?']); "
        "from connectors.embedding import heavy_modules_loaded; print('HEAVY', heavy_modules_loaded()); sys.exit(rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "HEAVY []" in proc.stdout
    assert "annual leave" in proc.stdout.lower()
