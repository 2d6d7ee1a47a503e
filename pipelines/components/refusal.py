"""Refusal: when retrieval is weak, or the LLM says the passages don't answer, say so and point at the
closest passages instead of guessing."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict

REFUSAL_TEXT = "The PDFs in this channel don't seem to answer that."
# what introduces a refusal's list of closest passages (a chat adapter that draws its own list drops the text's)
CLOSEST_PASSAGES = " The closest passages, if you want to check:\n"
# How much a missing term lowers confidence. A specific term (year, number, name) the scope never mentions is strong
# evidence the PDFs don't answer; so is a number the question gives ("in 2001", "15th", "Q3 2015") that none of the
# passages the answer is built from holds, though the scope may hold it elsewhere. Measured on both development sets
# (eval/README.md, "Refusal"): with the number check, refusal F1 on MMLongBench-Doc went from 0.39 to 0.50 while more
# answerable questions of both sets were answered. An ordinary content word the scope never uses weighs little
# (it may be a synonym or a typo), but enough that a question on a topic the PDFs never touch ("the dress code")
# is refused: at its old weight, 1.0, it refused answerable questions of both sets and caught few unanswerable ones.
ANCHOR_PENALTY = 2.0
NUMBER_PENALTY = 2.0
WORD_PENALTY = 0.5
# how many of the passages, best first, must hold the question's numbers
NUMBER_PASSAGES = 5
# a number as written, with what joins it to the next one: "2013-2022" is a range, not the year 2022
_NUMBER_TOKEN = re.compile(r"(?<![\w.,-])\d[\d.,%-]*")


def confidence(max_cosine: float, anchor_support: float, word_support: float, number_support: float) -> float:
    """The number the refusal threshold applies to: the best cosine similarity between the question and a
    sentence or table row of the passages, lowered by the share of the question's specific terms
    (``anchor_support``) and content words (``word_support``) that occur nowhere in the scope, and by the share
    of its numbers that none of the top passages holds (``number_support``, see :func:`numbers_held`).

    Calibrated on MMLongBench-Doc's development half (real reports, papers, manuals, decks) and FinanceBench's
    together with the demo set: cosine alone could not tell an unanswerable question from an answerable one
    there (answerable questions about charts and tables often score lower than near-miss unanswerable ones); a
    year or name the documents never mention could, and so could a year the best passages don't hold.
    """
    return (max_cosine - ANCHOR_PENALTY * (1.0 - anchor_support) - WORD_PENALTY * (1.0 - word_support)
            - NUMBER_PENALTY * (1.0 - number_support))


def _numbers(text: str) -> set[str]:
    return {m.group(0).rstrip(".,%-").replace(",", "") for m in _NUMBER_TOKEN.finditer(text)}


def numbers_held(anchors: Sequence[str], passages: Sequence[str]) -> tuple[float, list[str]]:
    """The share of the numbers among ``anchors`` ("2001", "15", "3.5") that occur in ``passages``, and the
    numbers that don't, in question order. 1.0 and none when the question gives no number. Digits are
    compared as numbers are written (``2,285`` holds ``2285``, ``18%`` holds ``18``); a number inside a longer
    one or a range does not count (``150th`` does not hold ``15``, ``2013-2022`` not ``2022``)."""
    wanted = [a for a in anchors if a[:1].isdigit()]
    if not wanted:
        return 1.0, []
    held: set[str] = set()
    for p in passages:
        held |= _numbers(p)
    missing = [a for a in wanted if not (_numbers(a) <= held)]
    return 1.0 - len(missing) / len(wanted), missing


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
        if documents and answerable and relevance >= self.threshold:
            return {"refused": False, "text": "", "reason": ""}
        reason = "no_passages" if not documents else ("not_answerable" if not answerable else "weak_retrieval")
        return {"refused": True, "text": refusal_text(documents, max_pointers=self.max_pointers), "reason": reason}


def refusal_text(documents: list[Document], *, max_pointers: int = 3, unmentioned: Sequence[str] = ()) -> str:
    """What a refusal says: :data:`REFUSAL_TEXT`, why when a term of the question is missing (``unmentioned``:
    terms the PDFs or their closest passages never mention), and up to ``max_pointers`` closest passages (one
    per page)."""
    pointers: list[str] = []
    for d in documents:
        w = _where(d)
        if w not in pointers:
            pointers.append(w)
        if len(pointers) >= max_pointers:
            break
    text = REFUSAL_TEXT
    if unmentioned:
        text += " " + why_text(unmentioned)
    if pointers:
        text += CLOSEST_PASSAGES + "\n".join(f"• {p}" for p in pointers)
    elif not documents:
        text += " I found no passages about it here."
    return text


def why_text(unmentioned: Sequence[str]) -> str:
    """"Nothing I found mentions “2001”.": the refusal's reason, terms quoted as the question wrote them."""
    terms = [f"“{t}”" for t in list(dict.fromkeys(unmentioned))[:3]]
    listed = terms[0] if len(terms) == 1 else ", ".join(terms[:-1]) + " or " + terms[-1]
    return f"Nothing I found about it mentions {listed}."
