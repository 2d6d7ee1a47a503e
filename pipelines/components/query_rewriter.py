"""Follow-up rewriting: "and in 2019?" after "What was the revenue in 2020?" becomes a standalone query.

* ``terms`` mode (extractive answers): a question that looks like a follow-up (short, opens with
  "and"/"what about"/"how about", or leans on a pronoun) gets the content terms of the last user
  turn appended, except terms of the same kind the follow-up replaces (a new year replaces the old
  year, a new number the old number).
* ``llm`` mode: a condensing prompt asks the model for the standalone question; any LLM failure
  falls back to ``terms`` mode.

The rewritten text is used for retrieval and for scoring quotes; the user's own words are what the
answer is about.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from haystack import component, default_from_dict, default_to_dict

from pipelines.components._text import STOPWORDS, terms
from pipelines.models import Turn

CONDENSE_PROMPT = (
    "Rewrite the user's last message as one standalone question that can be understood without the "
    "conversation. Keep every name, number and date. Do not answer it. Reply with JSON: "
    '{"question": "..."}'
)
_FOLLOW_OPENERS = re.compile(
    r"^\s*(and|also|what about|how about|and what about|what of|same for|then|or|but|so|ok(ay)?|in|for)\b", re.I
)
_PRONOUNS = re.compile(r"\b(it|its|that|this|those|these|they|them|their|there|he|she|his|her|the same)\b", re.I)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-.,%]*")


def looks_like_follow_up(question: str) -> bool:
    words = _WORD.findall(question)
    content = terms(question)
    if _FOLLOW_OPENERS.match(question):
        return True
    if len(content) <= 1:
        return True
    return bool(_PRONOUNS.search(question)) and len(content) <= 3 and len(words) <= 8


def _kind(token: str) -> str:
    t = token.strip(".,%")
    if re.fullmatch(r"(19|20)\d\d", t):
        return "year"
    if re.fullmatch(r"[\d.,]+%?", token):
        return "number"
    return "word"


def carry_over(question: str, history: Sequence[Turn]) -> str:
    """``question`` plus the previous user question's content words it does not replace."""
    previous = next((t.text for t in reversed(history) if t.role == "user" and t.text.strip()), "")
    if not previous or not looks_like_follow_up(question):
        return question
    q_kinds = {_kind(w) for w in _WORD.findall(question)} - {"word"}
    q_low = {w.lower().strip(".,?") for w in _WORD.findall(question)}
    carried: list[str] = []
    for w in _WORD.findall(previous):
        w = w.strip(".,?")
        low = w.lower()
        if not w or low in STOPWORDS or low in q_low or len(low) < 2:
            continue
        if _kind(w) in q_kinds:
            continue
        if low not in (c.lower() for c in carried):
            carried.append(w)
    if not carried:
        return question
    return f"{question.strip()} ({' '.join(carried)})"


@component
class QueryRewriter:
    """Question + history in, the retrieval ``query`` out (the question itself when it is not a follow-up)."""

    def __init__(self, *, mode: str = "terms", max_turns: int = 6) -> None:
        if mode not in ("terms", "llm"):
            raise ValueError("mode must be 'terms' or 'llm'")
        if not 1 <= max_turns <= 50:
            raise ValueError("max_turns must be between 1 and 50")
        self.mode = mode
        self.max_turns = max_turns
        self._client: Any = None

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, mode=self.mode, max_turns=self.max_turns)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QueryRewriter:
        return default_from_dict(cls, data)

    def set_client(self, client: Any) -> None:
        """The :class:`connectors.llm.LLMClient` used in ``llm`` mode (built from settings by the engine)."""
        self._client = client

    @component.output_types(query=str, rewritten=bool)
    def run(self, question: str, history: list[Turn] | None = None) -> dict[str, Any]:
        """Rewrite a follow-up into a question that stands on its own.

        :param question: the question as asked.
        :param history: the thread's earlier turns (the last ``max_turns`` are read).
        :returns: ``query``, what retrieval searches for, and ``rewritten``, whether it differs from ``question``.
        """
        turns = list(history or [])[-self.max_turns :]
        if not turns or not any(t.role == "user" for t in turns):
            return {"query": question, "rewritten": False}
        if self.mode == "llm" and self._client is not None:
            from connectors.llm import LLMError

            convo = "\n".join(f"{t.role}: {t.text[:1000]}" for t in turns)
            try:
                out = self._client.chat_json(
                    [
                        {"role": "system", "content": CONDENSE_PROMPT},
                        {"role": "user", "content": f"Conversation:\n{convo}\n\nLast message: {question}"},
                    ],
                    max_tokens=200,
                )
                q = str(out.get("question", "")).strip()
                if q:
                    return {"query": q, "rewritten": q != question}
            except LLMError:
                pass
        query = carry_over(question, turns)
        return {"query": query, "rewritten": query != question}
