"""The two embedding backends: sentence-transformers on torch, and the ONNX export run by ONNX Runtime.

Both give unit-normalised float32 vectors, one row per text; :func:`sentence_transformer_config` says whether the
ONNX path can reproduce a model folder (mean pooling, then normalisation) and how long a text it reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

Progress = Callable[[int, int], None]


# The errors' public home is connectors.embedding (the command line shows them by that name: bot/cli/main.py).
class EmbeddingModelError(Exception):
    """The embedding model could not be loaded."""


class OnnxExportError(EmbeddingModelError):
    """The ONNX export could not be made, or did not reproduce the torch vectors."""


EmbeddingModelError.__module__ = OnnxExportError.__module__ = "connectors.embedding"


class Encoder(Protocol):
    backend: str  # the backend actually running (``torch`` after a fallback)
    fingerprint: str  # what the vectors are comparable by: stores record it
    one_text_a_run: bool  # every text is run on its own, whatever the batch size asked (``onnx-int8``)

    def encode(self, texts: Sequence[str], batch_size: int = 32, on_progress: Progress | None = None) -> np.ndarray:
        """Unit-normalised float32 embeddings, one row per text; ``on_progress(done, total)`` after each batch."""
        ...


class TorchEncoder:
    backend = "torch"
    one_text_a_run = False

    def __init__(self, path: Path, threads: int, fingerprint: str) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        if not (path / "modules.json").exists() and not (path / "config.json").exists():
            raise EmbeddingModelError(
                f"no sentence-transformers model at {path}: set CITEBOT_MODEL_PATH to a model folder"
            )
        try:
            import torch
        except ImportError as e:  # the runtime image carries no torch: the bots run on ONNX Runtime
            raise EmbeddingModelError(
                "the torch embedding backend needs torch, which is not installed here (the Docker image runs the "
                "model on ONNX Runtime): use CITEBOT_EMBEDDING_BACKEND=onnx-int8 or onnx, or install torch"
            ) from e
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


def sentence_transformer_config(path: Path) -> tuple[int, str | None]:
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

        max_len, _ = sentence_transformer_config(path)
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
        # dynamic quantization scales the activations of the whole batch at once, so a text's int8 vector would
        # depend on the texts beside it (cosine 0.99 to itself alone): a question asked in a busy channel could
        # then quote other passages than asked alone. One text a run is no slower here: sorted batches of 32
        # took 10.6 CPU-s for 176 README passages, one at a time 8.2.
        self.one_text_a_run = backend == "onnx-int8"
        self.fingerprint = fingerprint

    def encode(self, texts: Sequence[str], batch_size: int = 32, on_progress: Progress | None = None) -> np.ndarray:
        """All of ``texts`` sorted by token count, longest first, then cut into batches: padding is what a batch
        computes for nothing, and sorting a whole document's chunks at once (not a few batches at a time) cut the
        tokens computed for a 99-page 10-K from 109k to 84k. A text that occurs twice is embedded once."""
        if not texts:
            return np.zeros((0, 0), np.float32)
        if self.one_text_a_run:
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
