"""Defect 7 of the second security review: the ONNX export was keyed by the model folder's name, configs and the
weights' file sizes, so new weights of the same size reused the old export (the bot kept embedding with the old
model) and no reindex was flagged.

Now the fingerprint hashes the weights' (and the tokenizer's) content: the swapped model is exported anew, its
vectors are the new weights' own, and ``citebot reindex --check`` says the stored vectors are stale.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from haystack import Document
from haystack.document_stores.types import DuplicatePolicy

from bot.cli.main import main
from connectors import embedding as E
from connectors.settings import Settings
from connectors.stores import open_store

_EMBED = (
    "import sys, json\n"
    "from pathlib import Path\n"
    "from connectors.embedding import get_encoder\n"
    "model, models, backend = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]\n"
    "enc = get_encoder(model, 1, backend=backend, models_dir=models)\n"
    "print(json.dumps([float(x) for x in enc.encode(['Parental leave is sixteen weeks at full pay.'])[0]]))\n"
)


def _embed(model: Path, models: Path, backend: str) -> list[float]:
    """The vector a freshly started bot computes (a new process: no encoder cached from before)."""
    import json

    out = subprocess.run([sys.executable, "-c", _EMBED, str(model), str(models), backend],
                         capture_output=True, text=True, timeout=600, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-2000:]
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def _cos(a: list[float], b: list[float]) -> float:
    import numpy as np

    va, vb = np.asarray(a), np.asarray(b)
    return float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))


def _swap_weights_same_size(model: Path) -> None:
    """New weights in the same file, same size: every weight matrix of the last layer scaled (what a fine-tune or
    a substituted model looks like from outside)."""
    from safetensors.torch import load_file, save_file

    f = model / "model.safetensors"
    size = f.stat().st_size
    tensors = load_file(str(f))
    for name, t in tensors.items():
        if ".layer.5." in name and name.endswith("weight") and t.dim() == 2:
            tensors[name] = (t * 0.3).contiguous()
    save_file(tensors, str(f), metadata={"format": "pt"})
    assert f.stat().st_size == size  # what the old fingerprint looked at did not change


@pytest.mark.slow
def test_new_weights_of_the_same_size_get_their_own_export_and_flag_a_reindex(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "model"
    shutil.copytree(Settings().resolved_model_path, model)
    models = tmp_path / "models"
    settings = Settings(model_path=model, models_dir=models, data_dir=tmp_path / "data")
    store = open_store(settings)
    before = _embed(model, models, "onnx")
    # a store indexed with the old weights: it holds their vectors (an empty store has none to mismatch)
    store.write_documents([Document(id="hb:00000", content="Core hours are 10:00 to 15:00.", embedding=before, meta={
        "scope": "slack:T1:C1", "doc_id": "hb", "file_name": "hb.pdf", "page_start": 1, "page_end": 1,
        "chunk_index": 0, "sha256": "hb" * 32})], DuplicatePolicy.OVERWRITE)
    store.set_embedding_fingerprint(settings.embedding_fingerprint)
    old_fp = E.model_fingerprint(model, 384)

    _swap_weights_same_size(model)

    assert E.model_fingerprint(model, 384) != old_fp
    after = _embed(model, models, "onnx")
    torch_after = _embed(model, models, "torch")
    assert _cos(after, torch_after) > 0.999  # the ONNX path runs the new weights...
    assert _cos(after, before) < 0.99  # ...not the export of the old ones
    assert sorted(p.name for p in models.iterdir() if p.is_dir()) == sorted([old_fp, E.model_fingerprint(model, 384)])


    # the admin's check after the swap: the stored vectors are the old model's
    monkeypatch.setenv("CITEBOT_MODEL_PATH", str(model))
    monkeypatch.setenv("CITEBOT_MODELS_DIR", str(models))
    monkeypatch.setenv("CITEBOT_DATA_DIR", str(settings.data_dir))
    capsys.readouterr()
    assert main(["reindex", "--check"]) == 1
    assert "Reindex needed" in capsys.readouterr().out


def test_a_store_recorded_by_an_earlier_version_is_not_sent_to_reindex_for_nothing(tmp_path: Path) -> None:
    """The upgrade itself changes the fingerprint's form: a store that recorded the old form for this very model
    is re-recorded, not flagged (only new weights flag a reindex)."""
    from connectors.store_api import check_embeddings

    settings = Settings(data_dir=tmp_path / "data")
    store = open_store(settings)
    path, dim = settings.resolved_model_path, settings.embedding_dim
    store.set_embedding_fingerprint(E.previous_embedding_fingerprint(path, dim, "onnx"))
    current = settings.embedding_fingerprint
    previous = E.previous_embedding_fingerprint(path, dim, "onnx")
    assert check_embeddings(store, current, legacy=current, previous=previous) is None
    assert store.embedding_fingerprint() == current
