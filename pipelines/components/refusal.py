"""Refusal: when retrieval is weak, or the LLM says the passages don't answer, say so and point at the
closest passages instead of guessing."""

from __future__ import annotations

from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict

REFUSAL_TEXT = "The PDFs in this channel don't seem to answer that."
# what introduces a refusal's list of closest passages (a chat adapter that draws its own list drops the text's)
CLOSEST_PASSAGES = " The closest passages, if you want to check:\n"
# How much a missing term lowers confidence: a specific term (year, number, name) the scope never mentions is
# strong evidence the PDFs don't answer; an ordinary content word less so (it may be a synonym or a typo).
ANCHOR_PENALTY = 2.0
WORD_PENALTY = 1.0
# A content word's share is counted out of at least this many words: with the company's name and period words no
# longer counted (they are on every page of the company's filings, so they only padded the share), a short
# question's one synonym ("city" for Leeds) would otherwise cost half its confidence.
WORDS_AT_LEAST = 4


def confidence(max_cosine: float, anchor_support: float, word_support: float) -> float:
    """The number the refusal threshold applies to: the best cosine similarity between the question and a
    sentence or table row of the passages, lowered by the share of the question's specific terms
    (``anchor_support``) and content words (``word_support``) that occur nowhere in the scope.

    Calibrated on MMLongBench-Doc's development half (real reports, papers, manuals, decks) together with
    the demo set: cosine alone could not tell an unanswerable question from an answerable one there
    (answerable questions about charts and tables often score lower than near-miss unanswerable ones);
    a year or name the documents never mention could.
    """
    return max_cosine - ANCHOR_PENALTY * (1.0 - anchor_support) - WORD_PENALTY * (1.0 - word_support)


def _where(doc: Document) -> str:
    meta = doc.meta or {}
    a, b = int(meta.get("page_start", 0) or 0), int(meta.get("page_end", 0) or 0)
    page = f"p. {a}" if not b or a == b else f"pp. {a}–{b}"
    section = str(meta.get("section", "") or "").split(" > ")[-1]
    name = str(meta.get("file_name", "") or "?")
    return f"{name} · {page}" + (f" · {section}" if section else "")


@component
class RefusalCheck:
    """Decides whether to refuse: ``relevance`` below ``threshold``, no passages, or ``answerable`` False.

    ``relevance`` is the best cosine similarity of the question to a sentence of the top passages
    (see :mod:`pipelines.components.extractive_answerer`). On refusal ``text`` names up to
    ``max_pointers`` closest passages (file, page, section; one per page).
    """

    def __init__(self, *, threshold: float, max_pointers: int = 3) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError("threshold must be between 0 and 1")
        if not 0 <= max_pointers <= 10:
            raise ValueError("max_pointers must be between 0 and 10")
        self.threshold = threshold
        self.max_pointers = max_pointers

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, threshold=self.threshold, max_pointers=self.max_pointers)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RefusalCheck:
        return default_from_dict(cls, data)

    @component.output_types(refused=bool, text=str, reason=str)
    def run(self, relevance: float, documents: list[Document], answerable: bool = True) -> dict[str, Any]:
        """Refuse, or let the answer through.

        :param relevance: the best question-sentence cosine of the top passages.
        :param documents: the passages retrieved.
        :param answerable: False when the LLM said the passages do not answer the question.
        :returns: ``refused``; on refusal ``text``, naming the closest passages, and ``reason`` (``no_passages``,
            ``not_answerable`` or ``weak_retrieval``); else both empty.
        """
        if documents and answerable and relevance >= self.threshold:
            return {"refused": False, "text": "", "reason": ""}
        reason = "no_passages" if not documents else ("not_answerable" if not answerable else "weak_retrieval")
        return {"refused": True, "text": refusal_text(documents, max_pointers=self.max_pointers), "reason": reason}


def refusal_text(documents: list[Document], *, max_pointers: int = 3) -> str:
    """What a refusal says: :data:`REFUSAL_TEXT` and up to ``max_pointers`` closest passages (one per page)."""
    pointers: list[str] = []
    for d in documents:
        w = _where(d)
        if w not in pointers:
            pointers.append(w)
        if len(pointers) >= max_pointers:
            break
    text = REFUSAL_TEXT
    if pointers:
        text += CLOSEST_PASSAGES + "\n".join(f"• {p}" for p in pointers)
    elif not documents:
        text += " I found no passages about it here."
    return text
