"""ScoreFusion: one ranking from the BM25 and dense rankings, by weighted scores or by reciprocal rank.

Two ways to fuse, chosen by ``fusion`` (``CITEBOT_FUSION``; the default is ``weighted``):

* ``weighted``: each list's scores are rescaled as in distribution-based score fusion (mean ± 3 standard
  deviations map to 0..1, so BM25's unbounded scores and cosine similarities become comparable), weighted, and
  summed for a chunk both retrievers found. Measured on real PDFs (MMLongBench-Doc, development half) this beat
  reciprocal rank fusion, which throws away how far apart the scores are: BM25 is the stronger retriever on long
  reports and papers, and a chunk dense retrieval ranks 3rd by a hair should not outrank BM25's clear first.
* ``rrf``: reciprocal rank fusion as Haystack's ``DocumentJoiner(join_mode="reciprocal_rank_fusion")`` computes
  it (its own code does the sum: each list adds ``weight / (61 + rank)``); only ranks count. Kept selectable so
  the eval measures both on every set (``citebot eval run --mode all`` runs the one not configured as
  ``hybrid-rrf`` or ``hybrid-weighted``).

Either way, the first ``diverse_top`` results hold at most one chunk per page span; the chunks that give way
follow right after them. A page matched by several chunks then leaves room for other candidate pages among the
passages an answer is built from, and every chunk still reaches the answerer's wider context.

Usage::

    fusion = ScoreFusion(weights=[0.5, 1.0], diverse_top=5, fusion="rrf")
    fused = fusion.run(documents=[dense_hits, bm25_hits])["documents"]
"""

from __future__ import annotations

from dataclasses import replace
from enum import Enum
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.components.joiners import DocumentJoiner


class FusionMode(Enum):
    """How the retrievers' rankings are fused (``CITEBOT_FUSION``)."""

    WEIGHTED = "weighted"
    RRF = "rrf"

    def __str__(self) -> str:
        return self.value

    @staticmethod
    def from_str(string: str) -> FusionMode:
        try:
            return FusionMode(string)
        except ValueError:
            names = ", ".join(m.value for m in FusionMode)
            raise ValueError(f"fusion must be one of {names}, not {string!r}") from None


def _rescaled(documents: list[Document]) -> dict[str, float]:
    scores = [float(d.score or 0.0) for d in documents]
    if not scores:
        return {}
    mean = sum(scores) / len(scores)
    std = (sum((s - mean) ** 2 for s in scores) / len(scores)) ** 0.5
    if std == 0.0:
        return {d.id: 1.0 for d in documents}
    low, span = mean - 3 * std, 6 * std
    return {d.id: (float(d.score or 0.0) - low) / span for d in documents}


def page_diverse(documents: list[Document], top: int) -> list[Document]:
    """``documents`` reordered so that the first ``top`` hold one chunk per (file, page span)."""
    first: list[Document] = []
    rest: list[Document] = []
    seen: set[tuple[Any, Any, Any]] = set()
    for d in documents:
        meta = d.meta or {}
        key = (meta.get("doc_id"), meta.get("page_start"), meta.get("page_end"))
        if len(first) < top and key not in seen:
            first.append(d)
            seen.add(key)
        else:
            rest.append(d)
    return first + rest


@component
class ScoreFusion:
    """Ranked lists in (one per retriever, in ``weights`` order); one fused, page-diverse ranking out."""

    def __init__(self, *, weights: list[float] | None = None, diverse_top: int = 5,
                 fusion: str | FusionMode = FusionMode.WEIGHTED) -> None:
        if weights is not None and (not weights or any(w < 0 for w in weights)):
            raise ValueError("weights must be non-negative, one per input list")
        if diverse_top < 0:
            raise ValueError("diverse_top must be >= 0")
        self.weights = list(weights) if weights is not None else None
        self.diverse_top = diverse_top
        self.fusion = fusion if isinstance(fusion, FusionMode) else FusionMode.from_str(fusion)
        self._rrf: DocumentJoiner | None = None
        if self.fusion is FusionMode.RRF:
            if self.weights is not None and sum(self.weights) == 0:
                raise ValueError("rrf fusion needs weights that do not sum to zero")
            self._rrf = DocumentJoiner(join_mode="reciprocal_rank_fusion", weights=self.weights)

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, weights=self.weights, diverse_top=self.diverse_top, fusion=str(self.fusion))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScoreFusion:
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[list[Document]]) -> dict[str, list[Document]]:
        """
        :param documents: one ranked list per retriever, in ``weights`` order.
        :returns: ``documents``: every chunk once, best first, the first ``diverse_top`` on distinct page spans.
        """
        weights = self.weights or [1.0] * len(documents)
        if len(weights) != len(documents):
            raise ValueError(f"ScoreFusion got {len(documents)} lists for {len(weights)} weights")
        if self._rrf is not None:
            out = self._rrf.run(documents=documents)["documents"]
            return {"documents": page_diverse(out, self.diverse_top) if self.diverse_top else out}
        fused: dict[str, float] = {}
        first_seen: dict[str, Document] = {}
        for docs, w in zip(documents, weights, strict=True):
            for doc_id, s in _rescaled(docs).items():
                fused[doc_id] = fused.get(doc_id, 0.0) + w * s
            for d in docs:
                first_seen.setdefault(d.id, d)
        ranked = sorted(first_seen.values(), key=lambda d: fused[d.id], reverse=True)
        out = [replace(d, score=fused[d.id]) for d in ranked]
        return {"documents": page_diverse(out, self.diverse_top) if self.diverse_top else out}
