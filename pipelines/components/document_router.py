"""DocumentRouter: in a channel holding many PDFs, the documents a question names before the passages.

A finance team's channel holds every filing; "What was 3M's capital expenditure in FY2018?" is about one of
them, and passages of the other filings about capital expenditure compete with its right page. Questions
name the document by its specific terms: the company, product or title, and the period. A document's card
is its file name and the text of its first page (where filings, reports and manuals say who, what and when).
The documents whose cards hold the most of the question's specific terms (weighted by how few cards hold
each term) are routed to, when at most ``max_docs`` share the best score; the query engine then searches them
as well as the whole scope and fuses both rankings, so a wrong guess costs little.
"""

from __future__ import annotations

import math
import re
import threading
import time
from typing import Any

from haystack import component, default_from_dict, default_to_dict

from connectors.store_api import ChunkStore, require_scopes

_CARD_CHARS = 3000
_CACHE_TTL_S = 60.0
_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower().replace("_", " ")))


def route(anchors: list[str], cards: dict[str, set[str]], max_docs: int) -> list[str]:
    """The doc ids whose cards hold the most of ``anchors`` (IDF-weighted), if at most ``max_docs`` tie."""
    if len(cards) < 2 or not anchors:
        return []
    n = len(cards)
    scores = dict.fromkeys(cards, 0.0)
    for anchor in anchors:
        parts = _WORD.findall(anchor.lower())
        if not parts:
            continue
        holders = [doc for doc, words in cards.items() if all(p in words for p in parts)]
        if not holders or len(holders) == n:
            continue  # in no card, or in every card: says nothing about which document
        idf = math.log((n + 1) / (len(holders) + 0.5))
        for doc in holders:
            scores[doc] += idf
    best = max(scores.values())
    if best <= 0:
        return []
    chosen = sorted(doc for doc, s in scores.items() if s >= best - 1e-9)
    return chosen if len(chosen) <= max_docs else []


@component
class DocumentRouter:
    """Question anchors and scopes in; ``doc_ids`` (the documents the question names, or none) out."""

    def __init__(self, *, document_store: ChunkStore, max_docs: int = 3) -> None:
        if document_store is None:
            raise ValueError("DocumentRouter needs a document_store")
        if not 1 <= max_docs <= 20:
            raise ValueError("max_docs must be between 1 and 20")
        self.document_store = document_store
        self.max_docs = max_docs
        self._lock = threading.Lock()
        self._cards: dict[tuple[str, ...], tuple[float, int | None, dict[str, set[str]]]] = {}

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, document_store=self.document_store.to_dict(), max_docs=self.max_docs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DocumentRouter:
        from pipelines.components.structure_router import _store_from_dict

        params = data.get("init_parameters", {})
        if isinstance(params.get("document_store"), dict):
            params["document_store"] = _store_from_dict(params["document_store"])
        return default_from_dict(cls, data)

    def cards(self, scopes: list[str]) -> dict[str, set[str]]:
        """doc_id -> the words of its file name and first page, cached until the scopes' chunk count changes."""
        key = tuple(sorted(scopes))
        now = time.monotonic()
        counter = getattr(self.document_store, "count_in_scopes", None)
        version = counter(scopes) if callable(counter) else None
        with self._lock:
            hit = self._cards.get(key)
        if hit and hit[1] == version and now - hit[0] < _CACHE_TTL_S:
            return hit[2]
        first_pages = self.document_store.fetch(
            scopes=scopes, filters={"field": "meta.page_start", "operator": "<=", "value": 1}, limit=100_000
        )
        text: dict[str, str] = {}
        for d in first_pages:
            meta = d.meta or {}
            doc = str(meta.get("doc_id", ""))
            if doc and len(text.get(doc, "")) < _CARD_CHARS:
                text[doc] = text.get(doc, str(meta.get("file_name", ""))) + " " + (d.content or "")
        cards = {doc: _words(t[:_CARD_CHARS]) for doc, t in text.items()}
        with self._lock:
            self._cards[key] = (now, version, cards)
        return cards

    @component.output_types(doc_ids=list[str])
    def run(self, anchors: list[str], scopes: list[str]) -> dict[str, list[str]]:
        scopes = require_scopes(scopes)
        if not anchors:
            return {"doc_ids": []}
        return {"doc_ids": route(anchors, self.cards(scopes), self.max_docs)}
