"""The answer policy without an LLM: refuse below the threshold or without citations, else quote.
(The LLM branches, retry and fallbacks run against a fake OpenAI server in test_query_engine.py.)"""

from __future__ import annotations

import pytest
from haystack import Document

from pipelines.answer_policy import AnswerPolicy, Decision, Draft
from pipelines.components.citation_validator import CitationValidator
from pipelines.components.refusal import REFUSAL_TEXT, RefusalCheck, refusal_text

QUOTE = "The primary carer receives 26 weeks of parental leave on full pay."
DOC = Document(
    id="hb:00000", content=f"Leave. {QUOTE} Other text.",
    meta={"file_name": "hb.pdf", "page_start": 4, "page_end": 4, "section": "4 Leave", "chunk_id": "hb:00000"},
)
EXT = Draft(text="From hb.pdf [1]:", citations=[{"n": 1, "chunk_id": "hb:00000", "quote": QUOTE}])


def _policy() -> AnswerPolicy:
    return AnswerPolicy(refusal=RefusalCheck(threshold=0.5), validator=CitationValidator(), llm=None)


@pytest.mark.parametrize(
    ("confidence", "ext", "docs", "refused"),
    [
        (0.9, EXT, [DOC], False),
        (0.2, EXT, [DOC], True),
        (0.9, Draft(text=""), [DOC], True),
        (0.9, EXT, [], True),
    ],
)
def test_decide_without_llm(confidence, ext, docs, refused):
    answer = _policy().decide(Decision(question="How long is parental leave?", history=[], context=docs, draft=ext,
                                       confidence=confidence))
    assert answer.refused is refused
    assert answer.mode == "extractive"
    if refused:
        assert answer.text == refusal_text(docs) and answer.text.startswith(REFUSAL_TEXT)
        assert not answer.citations
    else:
        assert [c.quote for c in answer.citations] == [QUOTE]
