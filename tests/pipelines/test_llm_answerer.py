"""The LLM answerer's prompt, JSON contract and the claim-dropping step after validation."""

from __future__ import annotations

import pytest
from haystack import Document
from haystack.utils import Secret

from connectors.llm import LLMClient, LLMResponseError
from eval.fakes.openai_api import FakeOpenAI
from pipelines.components.llm_answerer import PROMPT_VERSION, LLMAnswerer, build_messages, keep_supported
from pipelines.models import Citation

DOC = Document(
    id="hb:00001",
    content="The primary carer receives 26 weeks of parental leave on full pay.",
    meta={
        "doc_id": "hb",
        "chunk_index": 1,
        "file_name": "hb.pdf",
        "page_start": 5,
        "page_end": 5,
        "section": "4 Leave > 4.2 Parental leave",
    },
)


def _cit(n: int) -> Citation:
    return Citation(n=n, chunk_id="hb:00001", doc_id="hb", file="hb.pdf", page_start=5, page_end=5, quote="q")


class TestLLMAnswerer:
    def test_init_validates(self):
        with pytest.raises(ValueError, match="model"):
            LLMAnswerer(model="")
        with pytest.raises(ValueError, match="timeout_s"):
            LLMAnswerer(model="m", timeout_s=0)

    def test_to_dict_keeps_secrets_out(self):
        d = LLMAnswerer(model="m", base_url="http://127.0.0.1:1/v1").to_dict()
        assert d == {
            "type": "pipelines.components.llm_answerer.LLMAnswerer",
            "init_parameters": {
                "model": "m",
                "base_url": "http://127.0.0.1:1/v1",
                "api_key": {
                    "type": "env_var",
                    "env_vars": ["OPENAI_API_KEY", "CITEBOT_OPENAI_API_KEY"],
                    "strict": False,
                },
                "timeout_s": 30.0,
                "max_retries": 3,
                "max_passage_chars": 2500,
            },
        }

    def test_from_dict(self):
        a = LLMAnswerer.from_dict(LLMAnswerer(model="m", max_retries=1).to_dict())
        assert (a.model, a.max_retries) == ("m", 1)
        assert isinstance(a.api_key, Secret)

    def test_run_returns_the_models_structured_answer(self):
        with FakeOpenAI() as fake:
            a = LLMAnswerer(model="m")
            a.set_client(LLMClient(model="m", base_url=fake.base_url))
            out = a.run(question="How long is parental leave?", documents=[DOC])
        assert out == {
            "text": "The document says so [1].",
            "citations": [{"n": 1, "chunk_id": "hb:00001", "quote": DOC.content}],
            "answerable": True,
        }
        prompt = fake.requests[0]["messages"][1]["content"]
        assert "[chunk_id: hb:00001] hb.pdf, p. 5" in prompt and "Question: How long is parental leave?" in prompt

    def test_run_wrong_shape_is_an_error(self):
        with FakeOpenAI() as fake:
            fake.push_json({"answerable": "maybe", "answer": 3, "citations": "none"})
            a = LLMAnswerer(model="m")
            a.set_client(LLMClient(model="m", base_url=fake.base_url))
            with pytest.raises(LLMResponseError):
                a.run(question="q?", documents=[DOC])


def test_stricter_prompt_names_failures():
    msgs = build_messages(
        "q?",
        [DOC],
        failures=[
            {"n": 2, "chunk_id": "zz:1", "quote": "x", "reason": "unknown_chunk"},
            {"n": 3, "chunk_id": "hb:00001", "quote": "made up words", "reason": "unmatched"},
        ],
    )
    assert "'zz:1' is not one of the passages" in msgs[-1]["content"]
    assert "'made up words' is not in chunk 'hb:00001'" in msgs[-1]["content"]
    assert PROMPT_VERSION


@pytest.mark.parametrize(
    ("text", "valid", "expected_text", "expected_ns"),
    [
        ("Leave is 26 weeks [1]. Pay is full [2].", [1, 2], "Leave is 26 weeks [1]. Pay is full [2].", [1, 2]),
        ("Leave is 26 weeks [1]. Staff get a car [2].", [1], "Leave is 26 weeks [1].", [1]),
        ("Staff get a car [1]. Leave is 26 weeks [2].", [2], "Leave is 26 weeks [1].", [1]),
        ("Leave is 26 weeks [1][2].", [2], "Leave is 26 weeks [1].", [1]),
        ("Staff get a car [1].", [], "", []),
    ],
)
def test_keep_supported(text, valid, expected_text, expected_ns):
    kept = keep_supported(text, [_cit(n) for n in valid])
    assert kept.text == expected_text
    assert [c.n for c in kept.citations] == expected_ns
