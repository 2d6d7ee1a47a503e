"""Chunk diagnostics for ``citebot docs --stats``: sizes, page spans, tables, OCR, element types.

Token counts use the embedding model's tokenizer (the passage that is embedded: section path +
chunk text) when the model folder is available, else they are omitted and only characters shown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from connectors.store_api import ChunkStore, require_scopes

_MAX_CHUNKS = 2_000_000


def _distribution(values: list[int]) -> dict[str, float]:
    if not values:
        return {"min": 0, "p50": 0, "p90": 0, "max": 0, "mean": 0.0}
    v = sorted(values)

    def pct(q: float) -> int:
        return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]

    return {"min": v[0], "p50": pct(0.5), "p90": pct(0.9), "max": v[-1], "mean": round(sum(v) / len(v), 1)}


def chunk_stats(
    store: ChunkStore,
    scopes: str | Sequence[str],
    *,
    count_tokens: Callable[[str], int] | None = None,
) -> dict[str, Any]:
    """Diagnostics over every chunk in ``scopes`` (never another scope's)."""
    scopes = require_scopes(scopes)
    docs = store.fetch(scopes=scopes, limit=_MAX_CHUNKS)
    if count_tokens is None:
        count_tokens = _default_counter()
    chars = [len(d.content or "") for d in docs]
    tokens: list[int] = []
    if count_tokens is not None:
        for d in docs:
            section = str(d.meta.get("section") or "")
            tokens.append(count_tokens(f"{section}\n{d.content or ''}" if section else (d.content or "")))
    spanning = sum(1 for d in docs if int(d.meta.get("page_end") or 0) > int(d.meta.get("page_start") or 0))
    types = Counter(str(d.meta.get("element_type") or "text") for d in docs)
    tables = {
        (d.meta.get("doc_id"), d.meta.get("label") or f"p{d.meta.get('page_start')}")
        for d in docs
        if d.meta.get("element_type") == "table"
    }
    ocr_pages = {
        (d.meta.get("doc_id"), p)
        for d in docs
        if d.meta.get("element_type") == "ocr"
        for p in range(int(d.meta.get("page_start") or 0), int(d.meta.get("page_end") or 0) + 1)
    }
    confidences = [float(d.meta["ocr_confidence"]) for d in docs if d.meta.get("ocr_confidence") is not None]
    out: dict[str, Any] = {
        "chunks": len(docs),
        "documents": len({d.meta.get("doc_id") for d in docs}),
        "chars": _distribution(chars),
        "share_spanning_pages": round(spanning / len(docs), 3) if docs else 0.0,
        "tables_found": len(tables),
        "table_chunks": types.get("table", 0),
        "ocr_pages": len(ocr_pages),
        "ocr_mean_confidence": round(sum(confidences) / len(confidences), 1) if confidences else None,
        "element_types": dict(sorted(types.items())),
        "with_section": sum(1 for d in docs if d.meta.get("section")),
    }
    if tokens:
        out["tokens"] = _distribution(tokens)
    return out


def _default_counter() -> Callable[[str], int] | None:
    try:
        from pathlib import Path

        from connectors.settings import load_settings
        from pipelines.components.chunker import load_token_counter

        return load_token_counter(Path(load_settings().resolved_model_path))
    except Exception:  # noqa: BLE001 - diagnostics degrade to characters without the model
        return None
