"""Follow-up rewriting: carried-over terms without an LLM, a condensing prompt with one."""

from __future__ import annotations

import json

import pytest

from connectors.llm import LLMClient
from eval.fakes.openai_api import FakeOpenAI
from pipelines.components.query_rewriter import QueryRewriter, looks_like_follow_up
from pipelines.models import Turn

HISTORY = [
    Turn(role="user", text="What was the revenue in 2020?"),
    Turn(role="assistant", text="Here is what the PDFs say [1]:"),
]


class TestQueryRewriter:
    def test_init_validates(self):
        with pytest.raises(ValueError, match="mode"):
            QueryRewriter(mode="magic")
        with pytest.raises(ValueError, match="max_turns"):
            QueryRewriter(max_turns=0)

    def test_to_dict(self):
        assert QueryRewriter(mode="llm", max_turns=4).to_dict() == {
            "type": "pipelines.components.query_rewriter.QueryRewriter",
            "init_parameters": {"mode": "llm", "max_turns": 4},
        }

    def test_from_dict(self):
        r = QueryRewriter.from_dict(QueryRewriter(mode="terms", max_turns=3).to_dict())
        assert (r.mode, r.max_turns) == ("terms", 3)

    @pytest.mark.parametrize(
        ("question", "history", "query"),
        [
            ("and in 2019?", HISTORY, "and in 2019? (revenue)"),
            ("What about the headcount?", HISTORY, "What about the headcount? (revenue 2020)"),
            (
                "How many days of annual leave do new staff get?",
                HISTORY,
                "How many days of annual leave do new staff get?",
            ),
            ("and in 2019?", [], "and in 2019?"),
            ("and in 2019?", [Turn(role="assistant", text="Hello")], "and in 2019?"),
        ],
    )
    def test_run_terms(self, question, history, query):
        out = QueryRewriter().run(question=question, history=history)
        assert out["query"] == query
        assert out["rewritten"] is (query != question)

    def test_run_llm_condenses_and_falls_back(self):
        with FakeOpenAI() as fake:
            fake.push_json({"question": "What was the revenue in 2019?"})
            fake.push(status=500)
            r = QueryRewriter(mode="llm")
            r.set_client(LLMClient(model="m", base_url=fake.base_url, max_retries=0, sleep=lambda s: None))
            assert r.run(question="and in 2019?", history=HISTORY)["query"] == "What was the revenue in 2019?"
            assert "and in 2019?" in fake.requests[0]["messages"][-1]["content"]
            # the endpoint fails: term carry-over instead
            assert r.run(question="and in 2019?", history=HISTORY)["query"] == "and in 2019? (revenue)"
            assert json.dumps(fake.requests[0]).count("revenue in 2020") == 1


@pytest.mark.parametrize(
    ("question", "follow_up"),
    [("and in 2019?", True), ("what about it?", True), ("How long is the notice period after two years?", False)],
)
def test_looks_like_follow_up(question, follow_up):
    assert looks_like_follow_up(question) is follow_up
