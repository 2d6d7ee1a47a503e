"""Embeds the question with the shared sentence-transformers model (:mod:`connectors.embedding`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from haystack import component, default_from_dict, default_to_dict


@component
class QueryEmbedder:
    """Text in, a unit-normalised embedding out. The model is loaded once per process in ``warm_up``."""

    def __init__(self, *, model_path: str, threads: int = 1) -> None:
        if not model_path:
            raise ValueError("model_path is required (settings.resolved_model_path)")
        if threads < 1:
            raise ValueError("threads must be >= 1")
        self.model_path = str(model_path)
        self.threads = threads
        self._ready = False

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, model_path=self.model_path, threads=self.threads)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QueryEmbedder:
        return default_from_dict(cls, data)

    def warm_up(self) -> None:
        if not self._ready:
            from connectors.embedding import get_model

            get_model(Path(self.model_path), self.threads)
            self._ready = True

    def embed_many(self, texts: list[str]) -> list[list[float]]:
        """Embeddings of several texts (used by the extractive answerer for sentences)."""
        from connectors.embedding import embed

        self.warm_up()
        return embed(texts, path=Path(self.model_path), threads=self.threads, batch_size=64)

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, Any]:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("QueryEmbedder needs a non-empty text")
        return {"embedding": self.embed_many([text])[0]}
