"""The embedding model: all-MiniLM-L6-v2 (or another sentence-transformers folder), on ONNX Runtime or torch.

Backends (``CITEBOT_EMBEDDING_BACKEND``):

* ``onnx`` (default): the model exported once to ONNX from the local weights (at set-up with
  ``citebot models prepare``, or on first start) into ``MODELS_DIR/<model fingerprint>/``, run by
  ONNX Runtime with the model's own fast tokenizer; mean pooling and normalisation in numpy. The export is
  checked against torch on probe texts before it is kept (cosine >= 0.9999), so its vectors are the torch
  vectors and share the torch fingerprint: a store indexed with one is searched with the other.
* ``onnx-int8``: the same export with dynamically quantised int8 weights: faster, vectors slightly
  different (its own fingerprint: a store must be re-indexed to switch to or from it).
* ``torch``: sentence-transformers on torch. Also the fallback when onnxruntime is not installed, or the
  model folder is not one the ONNX path reproduces (mean pooling then normalisation).

This module picks the backend and keeps one encoder per process (:func:`get_encoder`); the rest lives one concern a
module, and every public name is also here:

* :mod:`connectors.embedding_backends`: the two encoders (and this package's errors);
* :mod:`connectors.onnx_export`: the export, its probe check against torch and its lock across processes;
* :mod:`connectors.embedding_fingerprints`: what vectors are comparable by (stores record it);
* :mod:`connectors.embedding_batching`: concurrent callers (chat workers) sharing one encoder call;
* :mod:`connectors.torch_imports`: Haystack's eager ``import torch`` kept out of the ONNX path (most of a cold
  start) until something actually needs torch.

One thread measured fastest on these machines (2 vCPUs shared with other work) for both backends.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from connectors.embedding_backends import (
    EmbeddingModelError,
    Encoder,
    OnnxEncoder,
    OnnxExportError,
    Progress,
    TorchEncoder,
    sentence_transformer_config,
)
from connectors.embedding_batching import BatchingEncoder, shared_batcher
from connectors.embedding_fingerprints import embedding_fingerprint, model_fingerprint, previous_embedding_fingerprint
from connectors.log import get_logger
from connectors.onnx_export import EXPORT_MIN_COSINE, export_onnx, onnx_available, onnx_file, prepare_onnx
from connectors.torch_imports import defer_torch_imports, heavy_modules_loaded

__all__ = [
    "BACKENDS",
    "EXPORT_MIN_COSINE",
    "Backend",
    "BatchingEncoder",
    "EmbeddingModelError",
    "Encoder",
    "OnnxEncoder",
    "OnnxExportError",
    "Progress",
    "TorchEncoder",
    "defer_torch_imports",
    "embed",
    "embed_array",
    "embedding_fingerprint",
    "export_onnx",
    "get_encoder",
    "heavy_modules_loaded",
    "model_fingerprint",
    "onnx_available",
    "onnx_file",
    "prepare_onnx",
    "previous_embedding_fingerprint",
    "require_model",
    "shared_batcher",
]

Backend = Literal["onnx", "onnx-int8", "torch"]
BACKENDS: tuple[str, ...] = ("onnx", "onnx-int8", "torch")

log = get_logger(__name__)
_lock = threading.RLock()
_encoders: dict[tuple[str, int, str, str], Encoder] = {}


def get_encoder(
    path: Path, threads: int = 1, *, backend: str = "torch", models_dir: Path | None = None, dim: int = 384
) -> Encoder:
    """The process's encoder for this model and backend (loaded once). ``onnx``/``onnx-int8`` fall back to torch,
    with a warning, when onnxruntime is missing or the model is not one the ONNX path reproduces."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}")
    if backend != "torch" and models_dir is None:
        raise ValueError("the ONNX backends need models_dir (settings.resolved_models_dir) to keep their export in")
    key = (str(path), threads, backend, str(models_dir or ""))
    with _lock:
        enc = _encoders.get(key)
        if enc is None:
            enc = _load(path, threads, backend, models_dir, dim)
            _encoders[key] = enc
        return enc


def require_model(path: Path) -> None:
    """Raise :class:`EmbeddingModelError` naming the setting and the path when ``path`` holds no model."""
    if not path.is_dir():
        raise EmbeddingModelError(f"no embedding model at {path} (no such folder): set CITEBOT_MODEL_PATH to a "
                                  "sentence-transformers model folder, or unset it for the packaged model")
    if not (path / "modules.json").exists() and not (path / "config.json").exists():
        raise EmbeddingModelError(f"no sentence-transformers model at {path}: set CITEBOT_MODEL_PATH to a model "
                                  "folder, or unset it for the packaged model")


def _load(path: Path, threads: int, backend: str, models_dir: Path | None, dim: int) -> Encoder:
    require_model(path)  # before any fallback: a missing model is missing for every backend
    if backend != "torch":
        assert models_dir is not None
        why = None if onnx_available() else "onnxruntime is not installed"
        why = why or sentence_transformer_config(path)[1]
        if why is None:
            try:
                target = prepare_onnx(path, models_dir, backend=backend, dim=dim)
                return OnnxEncoder(path, target, threads, backend, embedding_fingerprint(path, dim, backend))
            except (OnnxExportError, ImportError) as e:
                why = f"{type(e).__name__}: {e}"
            except EmbeddingModelError:  # a damaged file: export it again, once
                onnx_file(models_dir, path, dim, backend).unlink(missing_ok=True)
                target = prepare_onnx(path, models_dir, backend=backend, dim=dim)
                return OnnxEncoder(path, target, threads, backend, embedding_fingerprint(path, dim, backend))
        if not torch_installed():  # nothing to fall back to: say what is missing and where it is made
            raise EmbeddingModelError(
                f"the {backend} model for {path} is not ready in {models_dir} ({why}), and making it needs torch, "
                "which is not installed here (the Docker image makes it at build time): run `citebot models prepare "
                f"--backend {backend}` where torch is installed and point CITEBOT_MODELS_DIR at its folder"
            )
        log.warning("embedding_backend_fallback", requested=backend, using="torch", reason=why)
    return TorchEncoder(path, threads, embedding_fingerprint(path, dim, "torch"))


def torch_installed() -> bool:
    """Whether torch can be imported here, without importing it."""
    import importlib.util

    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def embed_array(
    texts: Sequence[str], *, path: Path, threads: int = 1, batch_size: int = 32, backend: str = "torch",
    models_dir: Path | None = None,
) -> np.ndarray:
    return get_encoder(path, threads, backend=backend, models_dir=models_dir).encode(texts, batch_size)


def embed(
    texts: list[str], *, path: Path, threads: int = 1, batch_size: int = 32, backend: str = "torch",
    models_dir: Path | None = None,
) -> list[list[float]]:
    """Unit-normalised float32 embeddings, one per text."""
    if not texts:
        return []
    vecs = embed_array(texts, path=path, threads=threads, batch_size=batch_size, backend=backend,
                       models_dir=models_dir)
    return [v.tolist() for v in vecs]
