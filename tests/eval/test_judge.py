"""The LLM judge against a local fake OpenAI chat-completions server on 127.0.0.1 (``fake_judge`` in conftest),
via the real openai client."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr

from connectors.settings import Settings
from eval.cases import Source
from eval.judge import JudgeError, build_client, judge_case
from eval.records import CaseResult, CitedQuote


@pytest.fixture
def fake(fake_judge: Any) -> Any:
    return fake_judge


def _result(**kw: Any) -> CaseResult:
    base: dict[str, Any] = dict(
        id="a", question="How many days of leave?", expected_answer="25 days", answer="You get 25 days [1].",
        sources=[Source(doc="hb.pdf", pages=[4])],
        citations=[CitedQuote(n=1, chunk_id="d:1", file="hb.pdf", page_start=4, page_end=4,
                              quote="Employees get 25 days of annual leave.", verbatim=True)],
    )
    base.update(kw)
    return CaseResult.model_validate(base)


def _settings(fake: Any) -> Settings:
    return Settings(openai_base_url=fake.base_url, openai_api_key=SecretStr("sk-test"), llm_model="gen-model",
                    judge_model="judge-model", llm_max_retries=0)


def test_scores_each_criterion_with_the_judge_model_at_temperature_0(fake: Any) -> None:
    fake.replies = [
        '{"score": 1.0, "explanation": "The quote states 25 days."}',
        '{"score": 0.5, "explanation": "Carry-over not mentioned."}',
        '{"score": 1, "explanation": "Matches the expected 25 days."}',
    ]
    scores = judge_case(build_client(_settings(fake)), _result())
    assert {k: v.score for k, v in scores.items()} == {"groundedness": 1.0, "completeness": 0.5, "correctness": 1.0}
    assert scores["completeness"].explanation == "Carry-over not mentioned."
    assert [r["model"] for r in fake.requests] == ["judge-model"] * 3
    assert all(r["temperature"] == 0 for r in fake.requests)
    assert all(r["response_format"] == {"type": "json_object"} for r in fake.requests)
    grounded_prompt = fake.requests[0]["messages"][1]["content"]
    assert "Employees get 25 days of annual leave." in grounded_prompt and "GROUNDEDNESS" in grounded_prompt
    assert "EXPECTED ANSWER: 25 days" in fake.requests[2]["messages"][1]["content"]


def test_invalid_replies_are_asked_again_then_recorded_without_a_score(fake: Any) -> None:
    fake.replies = [
        '{"score": 7, "explanation": "out of range"}', '{"score": 0.9, "explanation": "fine now"}',  # retried
        "not json at all", "still not json",  # the client asks once more for JSON, then gives up
        '{"score": "high"}', '{"verdict": "good"}',  # wrong shape twice
    ]
    scores = judge_case(build_client(_settings(fake)), _result())
    assert scores["groundedness"].score == 0.9
    assert scores["completeness"].score is None and "judge failed" in scores["completeness"].explanation
    assert scores["correctness"].score is None and "twice" in scores["correctness"].explanation


def test_refusals_and_cases_without_expected_answer(fake: Any) -> None:
    client = build_client(_settings(fake))
    assert judge_case(client, _result(refused=True)) == {}
    assert set(judge_case(client, _result(expected_answer=None))) == {"groundedness", "completeness"}


def test_judge_needs_an_llm_and_a_separate_model(fake: Any) -> None:
    with pytest.raises(JudgeError, match="OPENAI"):
        build_client(Settings())
    with pytest.raises(JudgeError, match="CITEBOT_JUDGE_MODEL"):
        build_client(Settings(openai_base_url=fake.base_url))
