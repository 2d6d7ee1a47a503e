"""An LLM answer shown while the model writes it, one checked sentence at a time.

The model is asked for ``{"answerable": ..., "citations": [...], "answer": "..."}``, the citations first, and
its reply is streamed (:meth:`connectors.llm.LLMClient.chat`). :class:`SentencePreview` reads the reply as it
grows (a partial JSON object): once the citations are complete it checks them (:class:`CitationValidator`, as the
answer policy does), then hands each finished sentence of the answer that :func:`keep_supported` keeps to
``show``, as text to append. The rule is the policy's own, applied to the finished sentences only, so what was
shown is always the start of the answer the policy decides, word for word, and a sentence whose citation fails is
never shown:

* the first draft is shown only when every one of its citations holds: a failure makes the policy ask again with
  a stricter prompt, and it is that second draft which streams (its failing sentences left out, as
  :func:`keep_supported` leaves them out);
* a draft that says the passages don't answer shows nothing.

The chat adapters put the final answer in place of what was streamed when the policy is done (its citations,
note and feedback buttons), whatever the preview showed; if the model's reply breaks off, the extractive answer
replaces the sentences shown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from haystack import Document

from connectors.log import get_logger
from pipelines.components.citation_validator import CitationValidator
from pipelines.components.llm_answerer import claim_sentences, keep_supported
from pipelines.models import Citation, printable

log = get_logger(__name__)

ShowText = Callable[[str], None]
"""Receives the next piece of a streamed answer's text (checked sentences, each after a space but the first)."""

_MARKERS_ONLY = re.compile(r"\s*(?:\[\d*\]?\s*)+")
_FENCE = re.compile(r"^\s*```(?:json)?\s*")


class SentencePreview:
    """``on_text`` for :meth:`pipelines.components.llm_answerer.LLMAnswerer.run`: the reply's raw text so far in,
    checked sentences out to ``show``.

    :param whole: the first draft: shown only if every citation validates (else the policy retries)."""

    def __init__(
        self, *, validator: CitationValidator, documents: Sequence[Document], show: ShowText, whole: bool
    ) -> None:
        self.validator = validator
        self.documents = list(documents)
        self.show = show
        self.whole = whole
        self.text = ""  # what was shown so far
        self._valid: list[Citation] | None = None
        self._finished = 0  # finished sentences already judged
        self._off = False

    def __call__(self, raw: str) -> None:
        if self._off:
            return
        obj = _partial_object(raw)
        if obj is None:
            return
        if obj.get("answerable") is False:
            self._off = True
            return
        keys = list(obj)
        done = _partial_object(raw, partial=False) is not None
        if obj.get("answerable") is not True or "citations" not in keys or (keys[-1] == "citations" and not done):
            return  # the citations are not all there yet
        if self._valid is None and not self._check(obj["citations"]):
            return
        answer = obj.get("answer")
        if not isinstance(answer, str):
            return
        sentences = claim_sentences(answer)
        if keys[-1] == "answer" and not done:  # still being written
            last = sentences.pop() if sentences else ""
            if sentences and _MARKERS_ONLY.fullmatch(last):  # "… pay. [1][2" : more markers may follow "pay."
                sentences.pop()
        if len(sentences) <= self._finished:
            return
        self._finished = len(sentences)
        assert self._valid is not None
        shown = keep_supported(answer, self._valid, self.documents, upto=len(sentences)).text
        if not shown.startswith(self.text) or len(shown) == len(self.text):
            return
        piece, self.text = shown[len(self.text) :], shown
        try:
            self.show(printable(piece))
        except Exception as e:  # noqa: BLE001 - a chat platform failing to show a preview must not fail the answer
            log.warning("stream_show_failed", error=type(e).__name__)
            self._off = True

    def _check(self, raw_citations: Any) -> bool:
        if not isinstance(raw_citations, list):
            self._off = True
            return False
        v = self.validator.run(citations=[c for c in raw_citations if isinstance(c, dict)], documents=self.documents)
        if self.whole and v["failures"]:  # the policy will ask again: nothing of this draft is shown
            self._off = True
            return False
        self._valid = v["citations"]
        return True


def preview(
    validator: CitationValidator, documents: Sequence[Document], show: ShowText | None, *, whole: bool
) -> SentencePreview | None:
    """A :class:`SentencePreview`, or None when nothing is to be shown while the model writes."""
    if show is None:
        return None
    return SentencePreview(validator=validator, documents=documents, show=show, whole=whole)


def _partial_object(raw: str, *, partial: bool = True) -> dict[str, Any] | None:
    """The JSON object ``raw`` starts (a ```json fence tolerated); with ``partial``, as far as it goes."""
    import jiter

    text = _FENCE.sub("", raw, count=1)
    start = text.find("{")
    if start < 0:
        return None
    body = text[start:].rstrip().removesuffix("```").rstrip()
    try:
        value = jiter.from_json(body.encode(), partial_mode="trailing-strings" if partial else "off")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
