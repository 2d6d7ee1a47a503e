"""PassageEmbedder: embed each chunk as "section path + newline + chunk text", in batches.

Uses the shared embedding model through :mod:`connectors.embedding` (ONNX Runtime by default, torch as
the fallback; loaded once per process, one thread: fastest measured on these machines). Returns new
Documents; inputs are never mutated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict

from pipelines.components.query_embedder import check_embedding_args, shared_encoder

# Passages embedded so far, of all the passages.
EmbedCallback = Callable[[int, int], None]


def passage_text(doc: Document) -> str:
    section = str(doc.meta.get("section") or "")
    content = doc.content or ""
    return f"{section}\n{content}" if section else content


@component
class PassageEmbedder:
    def __init__(
        self,
        *,
        model_path: str,
        threads: int = 1,
        batch_size: int = 32,
        backend: str = "torch",
        models_dir: str = "",
    ) -> None:
        check_embedding_args(model_path, threads, backend, str(models_dir or ""))
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.model_path = model_path
        self.threads = threads
        self.batch_size = batch_size
        self.backend = backend
        self.models_dir = str(models_dir or "")
        self._encoder: Any = None

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self, model_path=self.model_path, threads=self.threads, batch_size=self.batch_size,
            backend=self.backend, models_dir=self.models_dir,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PassageEmbedder:
        return default_from_dict(cls, data)

    def warm_up(self) -> None:
        if self._encoder is None:
            self._encoder = shared_encoder(self.model_path, self.threads, self.backend, self.models_dir)

    @property
    def fingerprint(self) -> str:
        """The fingerprint of the vectors this embedder makes (after a torch fallback, torch's)."""
        self.warm_up()
        return str(self._encoder.fingerprint)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document], on_progress: EmbedCallback | None = None) -> dict[str, Any]:
        """Embed each chunk's passage text (section path + newline + chunk text).

        :param documents: the chunks; never changed.
        :param on_progress: called with (chunks embedded, all chunks) as batches finish.
        :returns: ``documents``, new Documents carrying their embeddings, in the same order.
        """
        self.warm_up()
        if on_progress is not None:
            on_progress(0, len(documents))
        if not documents:
            return {"documents": []}
        # one call for the whole document: the encoder sorts every chunk by length before it cuts batches
        texts = [passage_text(d) for d in documents]
        vectors = self._encoder.encode(texts, self.batch_size, on_progress=on_progress)
        return {"documents": [dataclasses.replace(d, embedding=v.tolist())
                              for d, v in zip(documents, vectors, strict=True)]}
