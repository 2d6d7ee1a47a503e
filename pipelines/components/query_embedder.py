"""Embeds the question with the shared embedding model (:mod:`connectors.embedding`).

Concurrent questions (chat workers) are embedded together: calls that arrive within ``batch_window_ms`` of
one another share one model call (:class:`connectors.embedding.BatchingEncoder`); a lone caller never waits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from haystack import component, default_from_dict, default_to_dict

BACKENDS = ("onnx", "onnx-int8", "torch")


def check_embedding_args(
    model_path: str, threads: int, backend: str, models_dir: str, batch_window_ms: float = 0.0
) -> None:
    """The embedding settings every component that embeds takes (``Settings.embedding_args``), checked in one
    place: its constructor calls this with them."""
    if not model_path:
        raise ValueError("model_path is required (settings.resolved_model_path)")
    if threads < 1:
        raise ValueError("threads must be >= 1")
    if not 0.0 <= batch_window_ms <= 100.0:
        raise ValueError("batch_window_ms must be between 0 and 100")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}")
    if backend != "torch" and not models_dir:
        raise ValueError("the ONNX backends need models_dir (settings.resolved_models_dir)")


def shared_encoder(model_path: str, threads: int, backend: str, models_dir: str, window_ms: float = 0.0) -> Any:
    """The process's encoder for these settings; behind the shared batcher when ``window_ms`` > 0 and the encoder
    computes a batch at once. An encoder that runs one text at a time (``onnx-int8``) gains nothing from a shared
    batch, which would only queue every worker's texts on one thread: called directly, each worker's run leaves the
    interpreter to the others and the runs share the cores (``bench slack``: 50 mentions at once answered at
    14-18/s against 10-11/s behind the batcher, same load)."""
    from connectors.embedding import get_encoder, shared_batcher

    enc = get_encoder(Path(model_path), threads, backend=backend, models_dir=Path(models_dir) if models_dir else None)
    return shared_batcher(enc, window_ms / 1000) if window_ms > 0 and not enc.one_text_a_run else enc


@component
class QueryEmbedder:
    """Text in, a unit-normalised embedding out. The model is loaded once per process in ``warm_up``."""

    def __init__(
        self,
        *,
        model_path: str,
        threads: int = 1,
        backend: str = "torch",
        models_dir: str = "",
        batch_window_ms: float = 0.0,
    ) -> None:
        check_embedding_args(model_path, threads, backend, str(models_dir or ""), batch_window_ms)
        self.model_path = str(model_path)
        self.threads = threads
        self.backend = backend
        self.models_dir = str(models_dir or "")
        self.batch_window_ms = batch_window_ms
        self._encoder: Any = None

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self, model_path=self.model_path, threads=self.threads, backend=self.backend,
            models_dir=self.models_dir, batch_window_ms=self.batch_window_ms,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QueryEmbedder:
        return default_from_dict(cls, data)

    def warm_up(self) -> None:
        if self._encoder is None:
            self._encoder = shared_encoder(
                self.model_path, self.threads, self.backend, self.models_dir, self.batch_window_ms
            )

    @property
    def fingerprint(self) -> str:
        """The fingerprint of the vectors this embedder makes (after a torch fallback, torch's)."""
        self.warm_up()
        return str(self._encoder.fingerprint)

    def embed_many(self, texts: list[str]) -> list[list[float]]:
        """Embeddings of several texts."""
        self.warm_up()
        return [v.tolist() for v in self._encoder.encode(texts, 64)]

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, Any]:
        """Embed one query.

        :param text: the query (not empty).
        :returns: ``embedding``, its unit-normalised vector.
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError("QueryEmbedder needs a non-empty text")
        return {"embedding": self.embed_many([text])[0]}
