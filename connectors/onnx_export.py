"""The ONNX export of the embedding model: made once per machine (at set-up with ``citebot models prepare``, or on
first start) into a shared cache, ``MODELS_DIR/<model fingerprint>/`` (``CITEBOT_MODELS_DIR``, by default the user's
cache directory: :attr:`connectors.settings.Settings.resolved_models_dir`), so a new data dir finds it made. Kept
only when it reproduces the torch vectors on probe texts (cosine >= :data:`EXPORT_MIN_COSINE`). Needs torch and
transformers; the int8 variant is quantised from a verified fp32 export, made in a private folder and dropped
unless the fp32 one is there already (``onnx`` configured, or an earlier version's cache).

Safe under concurrent starts: one process exports at a time (a file lock), into a private temporary folder, and
the file is renamed into place, so a reader never sees half a file; a process that finds the file takes no lock
(a read-only image's cache).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from connectors.embedding_backends import OnnxEncoder, OnnxExportError, sentence_transformer_config
from connectors.embedding_fingerprints import model_fingerprint
from connectors.log import get_logger

# The export must reproduce the torch vectors this closely to share their fingerprint.
EXPORT_MIN_COSINE = 0.9999
_PROBES = (
    "What are the core working hours?",
    "x",
    "Table 2: revenue by segment, 2023 and 2024 (in $ millions) | 1,234.5 | 987.0",
    "4 Leave > 4.2 Parental leave\nEmployees who have completed one year of service are entitled to "
    "eighteen weeks of parental leave, which may be taken in blocks of at least one week. " * 6,
)

log = get_logger(__name__)


def onnx_available() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def onnx_file(models_dir: Path, path: Path, dim: int, backend: str) -> Path:
    folder = models_dir / model_fingerprint(path, dim)
    return folder / ("model-int8.onnx" if backend == "onnx-int8" else "model.onnx")


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock across processes (two bots starting at once export once)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def export_onnx(path: Path, target: Path, *, int8: bool = False, dim: int = 384) -> dict[str, float]:
    """Write the ONNX export of the model at ``path`` to ``target`` (atomically) and return how it compared with
    torch on probe texts: ``min_cosine`` (fp32 must reach :data:`EXPORT_MIN_COSINE`) and ``export_s``.
    ``int8`` writes the dynamically quantised variant, made from a verified fp32 export next to it."""
    t0 = time.perf_counter()
    max_len, unsupported = sentence_transformer_config(path)
    if unsupported:
        raise OnnxExportError(f"the ONNX backend cannot run the model at {path}: {unsupported}")
    target.parent.mkdir(parents=True, exist_ok=True)
    if int8:
        fp32 = target.with_name("model.onnx")
        # the fp32 export it is quantised from: one already beside it, else made in a private folder and dropped
        scratch = None if fp32.exists() else Path(tempfile.mkdtemp(prefix=".fp32-", dir=target.parent))
        try:
            stats: dict[str, float] = {}
            if scratch is not None:
                fp32 = scratch / "model.onnx"
                stats = export_onnx(path, fp32, dim=dim)
            _quantise(fp32, target)
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
        return {**stats, "export_s": round(time.perf_counter() - t0, 2)}

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import warnings

    import torch
    import transformers

    transformers.logging.disable_progress_bar()
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    # eager attention traces to plain MatMul/Softmax that ONNX Runtime fuses itself; SDPA traces to a mask
    # computation it cannot simplify
    model = transformers.AutoModel.from_pretrained(str(path), local_files_only=True, attn_implementation="eager")
    model.eval()

    class _Hidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    torch_vecs = _torch_reference(model, path, max_len)  # before the export, which leaves the model in train mode
    names = ["input_ids", "attention_mask", "token_type_ids"]
    sample = torch.ones(2, 8, dtype=torch.long)
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 5:] = 0
    tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer and deprecation warnings: the probe check below is the test
        torch.onnx.export(
            _Hidden(model), (sample, mask, torch.zeros_like(sample)), str(tmp), input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]},
            opset_version=17, dynamo=False,
        )
    try:
        onnx_vecs = OnnxEncoder(path, tmp, 1, "onnx", "").encode(_PROBES, batch_size=len(_PROBES))
        min_cos = float((onnx_vecs * torch_vecs).sum(axis=1).min())
        if min_cos < EXPORT_MIN_COSINE:
            raise OnnxExportError(f"the ONNX export gives vectors off the torch ones (min cosine {min_cos:.6f})")
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    return {"min_cosine": round(min_cos, 6), "export_s": round(time.perf_counter() - t0, 2)}


def _quantise(fp32: Path, target: Path) -> None:
    """Dynamically quantised int8 weights (per channel) of ``fp32``, written atomically to ``target``."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantiser's advice to pre-process (for image models) is noise here
    try:
        quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8, per_channel=True)
        tmp.replace(target)
    finally:
        root.setLevel(level)
        tmp.unlink(missing_ok=True)


def _torch_reference(model: Any, path: Path, max_len: int) -> np.ndarray:
    """What sentence-transformers computes for the probes (mean pooling, normalised), from the same HF model."""
    import torch
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    tok.enable_truncation(max_length=max_len)
    tok.no_padding()  # tokenizer.json may pad to a fixed length
    rows = []
    with torch.no_grad():
        for text in _PROBES:
            enc = tok.encode(text)
            ids = torch.tensor([enc.ids])
            mask = torch.ones_like(ids)
            hidden = model(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)).last_hidden_state
            v = hidden[0].mean(dim=0).numpy()
            rows.append(v / np.linalg.norm(v))
    return np.stack(rows).astype(np.float32)


def prepare_onnx(path: Path, models_dir: Path, *, backend: str, dim: int = 384) -> Path:
    """The ONNX file for ``backend``, exported first if it is not there yet (one process at a time)."""
    target = onnx_file(models_dir, path, dim, backend)
    if target.exists():
        return target
    with _file_lock(models_dir / ".export.lock"):
        if not target.exists():
            log.info("onnx_export_started", backend=backend, target=str(target))
            stats = export_onnx(path, target, int8=backend == "onnx-int8", dim=dim)
            log.info("onnx_export_done", backend=backend, **stats)
    return target
