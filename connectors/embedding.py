"""The embedding model: all-MiniLM-L6-v2 (or another sentence-transformers folder), on ONNX Runtime or torch.

Backends (``CITEBOT_EMBEDDING_BACKEND``):

* ``onnx`` (default): the model exported once to ONNX from the local weights (at set-up with
  ``citebot models prepare``, or on first start) into ``DATA_DIR/models/<model fingerprint>/``, run by
  ONNX Runtime with the model's own fast tokenizer; mean pooling and normalisation in numpy. The export is
  checked against torch on probe texts before it is kept (cosine >= 0.9999), so its vectors are the torch
  vectors and share the torch fingerprint: a store indexed with one is searched with the other.
* ``onnx-int8``: the same export with dynamically quantised int8 weights: faster, vectors slightly
  different (its own fingerprint: a store must be re-indexed to switch to or from it).
* ``torch``: sentence-transformers on torch. Also the fallback when onnxruntime is not installed, or the
  model folder is not one the ONNX path reproduces (mean pooling then normalisation).

Neither torch nor transformers is imported on the ONNX path (once the export exists): that is most of a
cold start. Haystack imports torch eagerly when it is installed, only for its device helpers, which
Citebot does not use: :func:`defer_torch_imports` makes that import fail softly (Haystack expects that)
until something here actually needs torch.

Concurrent callers (chat workers) can share one encoder call: :class:`BatchingEncoder` gathers requests
that arrive within a few milliseconds of one another and encodes them as one batch.

One thread measured fastest on these machines (2 vCPUs shared with other work) for both backends.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.abc
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from connectors.log import get_logger

Backend = Literal["onnx", "onnx-int8", "torch"]
Progress = Callable[[int, int], None]
BACKENDS: tuple[str, ...] = ("onnx", "onnx-int8", "torch")
# The export must reproduce the torch vectors this closely to share their fingerprint.
EXPORT_MIN_COSINE = 0.9999
_PROBES = (
    "What are the core working hours?",
    "x",
    "Table 2: revenue by segment, 2023 and 2024 (in $ millions) | 1,234.5 | 987.0",
    "4 Leave > 4.2 Parental leave\nEmployees who have completed one year of service are entitled to "
    "eighteen weeks of parental leave, which may be taken in blocks of at least one week. " * 6,
)

log = get_logger("citebot.embedding")
_lock = threading.RLock()
_encoders: dict[tuple[str, int, str, str], Encoder] = {}


class EmbeddingModelError(Exception):
    """The embedding model could not be loaded."""


class OnnxExportError(EmbeddingModelError):
    """The ONNX export could not be made, or did not reproduce the torch vectors."""


class Encoder(Protocol):
    backend: str  # the backend actually running (``torch`` after a fallback)
    fingerprint: str  # what the vectors are comparable by: stores record it

    def encode(self, texts: Sequence[str], batch_size: int = 32, on_progress: Progress | None = None) -> np.ndarray:
        """Unit-normalised float32 embeddings, one row per text; ``on_progress(done, total)`` after each batch."""
        ...


# --------------------------------------------------------------------------------------------------
# torch, only when needed
# --------------------------------------------------------------------------------------------------
_HEAVY = ("torch", "transformers", "sentence_transformers")
_IMPORT_MACHINERY = ("importlib", "_frozen_importlib")


class _DeferTorch(importlib.abc.MetaPathFinder):
    """Fails ``import torch`` (and transformers) *when Haystack itself asks*, as if torch were not installed.

    Haystack wraps those imports in ``LazyImport`` (which, despite its name, imports at once and only defers
    an ImportError), for device helpers and Hugging Face components Citebot does not use. Any other importer
    (sentence-transformers, a test, this module's torch backend) gets torch as usual.
    """

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname.split(".")[0] not in _HEAVY:
            return
        frame = sys._getframe(1)
        while frame is not None:
            name = str(frame.f_globals.get("__name__", ""))
            if not name.startswith(_IMPORT_MACHINERY):
                if name == "haystack" or name.startswith("haystack."):
                    raise ModuleNotFoundError(f"No module named {fullname!r} (deferred by Citebot)", name=fullname)
                return
            frame = frame.f_back  # type: ignore[assignment]
        return


def defer_torch_imports() -> None:
    """Keep Haystack's eager optional ``import torch`` out of this process (idempotent). Call before the first
    Haystack import; the command line does."""
    with _lock:
        if not any(isinstance(f, _DeferTorch) for f in sys.meta_path):
            sys.meta_path.insert(0, _DeferTorch())


def heavy_modules_loaded() -> list[str]:
    """Which of torch / transformers / sentence-transformers this process has imported (for tests and benches)."""
    return [m for m in _HEAVY if m in sys.modules]


# --------------------------------------------------------------------------------------------------
# fingerprints
# --------------------------------------------------------------------------------------------------
_MODEL_FILES = ("*.safetensors", "*.bin", "*.onnx", "*.json", "*.txt", "*.model", "1_Pooling/*.json")


def model_fingerprint(path: Path, dim: int) -> str:
    """Changes when any file that makes the vectors changes (the weights and the tokenizer by their content, the
    configs) or the configured dimension does; the folder's name and where it lives do not count. The ONNX export
    is kept under it, so new weights are exported anew and the store's recorded fingerprint flags a reindex.
    Hashing the ~90 MB of weights takes ~0.2 s; it is done once per process and set of files (by their stat)."""
    files = sorted({f for pattern in _MODEL_FILES for f in path.glob(pattern) if f.is_file()})
    stats = tuple((f.relative_to(path).as_posix(), *_stat_key(f)) for f in files)
    return _content_fingerprint(str(path), stats, dim)


def _stat_key(f: Path) -> tuple[int, int, int, int]:
    st = f.stat()
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


@functools.lru_cache(maxsize=16)
def _content_fingerprint(folder: str, stats: tuple[tuple[Any, ...], ...], dim: int) -> str:
    h = hashlib.sha256(f"v2:{dim}".encode())
    for rel, size, *_ in stats:
        h.update(f"{rel}:{size}:".encode())
        with (Path(folder) / rel).open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def previous_embedding_fingerprint(path: Path, dim: int, backend: str) -> str:
    """The fingerprint earlier versions recorded (folder name, configs, the weights' sizes only): a store that
    holds it for the configured model is taken, once, as holding this model's vectors and re-recorded."""
    h = hashlib.sha256(str(dim).encode())
    h.update(path.name.encode())
    for name in ("config.json", "modules.json", "config_sentence_transformers.json"):
        f = path / name
        if f.exists():
            h.update(f.read_bytes())
    for f in sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin")):
        h.update(f"{f.name}:{f.stat().st_size}".encode())
    base = h.hexdigest()[:16]
    return f"{base}-int8" if backend == "onnx-int8" else base


def embedding_fingerprint(path: Path, dim: int, backend: str) -> str:
    """What a store records about its vectors. torch and fp32 ONNX share one (the export is verified to match)."""
    base = model_fingerprint(path, dim)
    return f"{base}-int8" if backend == "onnx-int8" else base


# --------------------------------------------------------------------------------------------------
# backends
# --------------------------------------------------------------------------------------------------
class TorchEncoder:
    backend = "torch"

    def __init__(self, path: Path, threads: int, fingerprint: str) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        if not (path / "modules.json").exists() and not (path / "config.json").exists():
            raise EmbeddingModelError(
                f"no sentence-transformers model at {path}: set CITEBOT_MODEL_PATH to a model folder"
            )
        import torch
        import transformers
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        transformers.logging.disable_progress_bar()  # a "Loading weights" bar on every start is noise
        try:
            self.model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        except Exception as e:  # noqa: BLE001 - any loader failure means the same thing to the user
            raise EmbeddingModelError(f"could not load the embedding model at {path}: {e}") from e
        self.fingerprint = fingerprint

    def encode(self, texts: Sequence[str], batch_size: int = 32, on_progress: Progress | None = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), np.float32)
        if on_progress is None:  # sentence-transformers sorts the whole call by length itself
            vecs = self.model.encode(
                list(texts), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
                show_progress_bar=False,
            )
            return np.asarray(vecs, dtype=np.float32)
        # with progress: longest first, a few batches a call, so batches stay as evenly long as in one call
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out: np.ndarray | None = None
        step = batch_size * 4
        for start in range(0, len(order), step):
            idx = order[start:start + step]
            part = np.asarray(self.model.encode(
                [texts[i] for i in idx], batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
                show_progress_bar=False,
            ), dtype=np.float32)
            if out is None:
                out = np.empty((len(texts), part.shape[1]), dtype=np.float32)
            out[idx] = part
            on_progress(min(start + step, len(order)), len(order))
        assert out is not None
        return out


def _st_config(path: Path) -> tuple[int, str | None]:
    """(max_seq_length, why the ONNX path cannot reproduce this model or None)."""
    max_len = 256
    cfg = path / "sentence_bert_config.json"
    if cfg.exists():
        max_len = int(json.loads(cfg.read_text(encoding="utf-8")).get("max_seq_length") or max_len)
    if not (path / "tokenizer.json").exists():
        return max_len, "the model folder has no tokenizer.json"
    modules_file = path / "modules.json"
    if not modules_file.exists():
        return max_len, "the model folder has no modules.json"
    types = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in json.loads(modules_file.read_text(encoding="utf-8"))]
    if types != ["Transformer", "Pooling", "Normalize"]:
        return max_len, f"its modules are {types}, not Transformer, Pooling, Normalize"
    pooling = path / "1_Pooling" / "config.json"
    if pooling.exists():
        p = json.loads(pooling.read_text(encoding="utf-8"))
        modes = [k for k, v in p.items() if k.startswith("pooling_mode") and v]
        if modes != ["pooling_mode_mean_tokens"]:
            return max_len, f"its pooling is {modes}, not mean"
    return max_len, None


class OnnxEncoder:
    """tokenizers + ONNX Runtime + numpy mean pooling: what sentence-transformers computes, without torch."""

    def __init__(self, path: Path, onnx_file: Path, threads: int, backend: str, fingerprint: str) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        max_len, _ = _st_config(path)
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=max_len)
        self.tokenizer.no_padding()
        self.pad_id = self.tokenizer.token_to_id("[PAD]") or 0
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        # a spinning worker thread burns a core that the other half of the machine needs
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(str(onnx_file), opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001 - a broken or truncated file: the caller re-exports or falls back
            raise EmbeddingModelError(f"could not load {onnx_file}: {type(e).__name__}") from e
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.backend = backend
        self.fingerprint = fingerprint

    def encode(self, texts: Sequence[str], batch_size: int = 32, on_progress: Progress | None = None) -> np.ndarray:
        """All of ``texts`` sorted by token count, longest first, then cut into batches: padding is what a batch
        computes for nothing, and sorting a whole document's chunks at once (not a few batches at a time) cut the
        tokens computed for a 99-page 10-K from 109k to 84k. A text that occurs twice is embedded once."""
        if not texts:
            return np.zeros((0, 0), np.float32)
        if self.backend == "onnx-int8":
            # dynamic quantization scales the activations of the whole batch at once, so a text's int8 vector would
            # depend on the texts beside it (cosine 0.99 to itself alone): a question asked in a busy channel could
            # then quote other passages than asked alone. One text a run is no slower here: sorted batches of 32
            # took 10.6 CPU-s for 176 README passages, one at a time 8.2.
            batch_size = 1
        unique = list(dict.fromkeys(texts))
        encodings = self.tokenizer.encode_batch(unique)
        order = sorted(range(len(encodings)), key=lambda i: -len(encodings[i].ids))  # little padding per batch
        vecs: np.ndarray | None = None
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            width = max(len(encodings[i].ids) for i in idx)
            ids = np.full((len(idx), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.input_names:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = self.session.run(None, feed)[0]
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            if vecs is None:
                vecs = np.empty((len(unique), pooled.shape[1]), dtype=np.float32)
            vecs[idx] = pooled
            if on_progress is not None:
                on_progress(round(len(texts) * min(start + batch_size, len(order)) / len(order)), len(texts))
        assert vecs is not None
        if len(unique) == len(texts):
            return vecs
        position = {t: i for i, t in enumerate(unique)}
        return vecs[[position[t] for t in texts]]


# --------------------------------------------------------------------------------------------------
# the export (needs torch and transformers: once, at set-up or first start)
# --------------------------------------------------------------------------------------------------
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
    max_len, unsupported = _st_config(path)
    if unsupported:
        raise OnnxExportError(f"the ONNX backend cannot run the model at {path}: {unsupported}")
    target.parent.mkdir(parents=True, exist_ok=True)
    if int8:
        fp32 = target.with_name("model.onnx")
        stats = {} if fp32.exists() else export_onnx(path, fp32, dim=dim)
        import logging

        from onnxruntime.quantization import QuantType, quantize_dynamic

        tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # the quantiser's advice to pre-process (for image models) is noise here
        try:
            quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8, per_channel=True)
        finally:
            root.setLevel(level)
        tmp.replace(target)
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


# --------------------------------------------------------------------------------------------------
# the shared encoder
# --------------------------------------------------------------------------------------------------
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
        why = why or _st_config(path)[1]
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
        log.warning("embedding_backend_fallback", requested=backend, using="torch", reason=why)
    return TorchEncoder(path, threads, embedding_fingerprint(path, dim, "torch"))


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


# --------------------------------------------------------------------------------------------------
# batching concurrent requests
# --------------------------------------------------------------------------------------------------
class _Request:
    __slots__ = ("done", "error", "result", "texts")

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = texts
        self.result: np.ndarray | None = None
        self.error: BaseException | None = None
        self.done = False


class BatchingEncoder:
    """Encodes concurrent requests together: the first caller waits ``window_s`` for others (only when another
    thread asked very recently, so a lone caller never waits), then encodes every pending text in one call and
    hands each caller its rows. Callers arriving meanwhile form the next batch."""

    def __init__(self, encoder: Encoder, *, window_s: float = 0.004, max_texts: int = 256,
                 batch_size: int = 64) -> None:
        if window_s < 0:
            raise ValueError("window_s must be >= 0")
        self.encoder = encoder
        self.backend = encoder.backend
        self.fingerprint = encoder.fingerprint
        self.window_s = window_s
        self.max_texts = max_texts
        self.batch_size = batch_size
        self._cv = threading.Condition()
        self._pending: list[_Request] = []
        self._busy = False
        self._last: tuple[int, float] = (0, 0.0)  # (thread id, time) of the latest request
        self.batches = 0  # how many encoder calls served how many requests: for tests and benchmarks
        self.requests = 0

    def encode(
        self, texts: Sequence[str], batch_size: int | None = None, on_progress: Progress | None = None
    ) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), np.float32)
        vecs = self._encode(texts)
        if on_progress is not None:
            on_progress(len(texts), len(texts))
        return vecs

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        req = _Request(texts)
        me = threading.get_ident()
        with self._cv:
            last_thread, last_at = self._last
            now = time.monotonic()
            crowded = bool(self._pending) or self._busy or (last_thread != me and now - last_at < 0.05)
            self._last = (me, now)
            self._pending.append(req)
        while True:
            with self._cv:
                while not req.done and self._busy:
                    self._cv.wait()
                if req.done:
                    return self._result(req)
                self._busy = True  # this caller leads the next batch
            try:
                if crowded and self.window_s:
                    time.sleep(self.window_s)
                with self._cv:
                    batch: list[_Request] = []
                    n = 0
                    while self._pending and (not batch or n + len(self._pending[0].texts) <= self.max_texts):
                        r = self._pending.pop(0)
                        batch.append(r)
                        n += len(r.texts)
                self._run(batch)
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()
            # more than max_texts were waiting ahead of this caller: its request is still pending; lead again

    def _run(self, batch: list[_Request]) -> None:
        texts = [t for r in batch for t in r.texts]
        try:
            vecs = self.encoder.encode(texts, self.batch_size)
        except BaseException as e:  # noqa: BLE001 - every caller of the batch sees the failure
            for r in batch:
                r.error, r.done = e, True
            return
        pos = 0
        for r in batch:
            r.result = vecs[pos:pos + len(r.texts)]
            pos += len(r.texts)
            r.done = True
        self.batches += 1
        self.requests += len(batch)

    @staticmethod
    def _result(req: _Request) -> np.ndarray:
        if req.error is not None:
            raise req.error
        assert req.result is not None
        return req.result


_batchers: dict[int, BatchingEncoder] = {}


def shared_batcher(encoder: Encoder, window_s: float) -> BatchingEncoder:
    """One batcher per encoder, so the query embedder and the answerer's sentences share batches."""
    with _lock:
        b = _batchers.get(id(encoder))
        if b is None or b.encoder is not encoder:
            b = BatchingEncoder(encoder, window_s=window_s)
            _batchers[id(encoder)] = b
        return b
