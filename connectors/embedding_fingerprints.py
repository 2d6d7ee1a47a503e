"""What embedding vectors are comparable by: the fingerprint of the model files and the backend that made them.

A store records the fingerprint of its vectors; the ONNX export is kept in a folder named by the model's.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

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
