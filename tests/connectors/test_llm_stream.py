"""The LLM client streams a reply (``stream=True``, server-sent events) from the local OpenAI-format server: the text
so far reaches ``on_delta`` as it grows, the reply returned is the one a plain call returns, and a model that stops
writing mid-reply is a timeout like any other (the caller falls back)."""

from __future__ import annotations

import json

import pytest

from connectors.llm import LLMClient, LLMTimeoutError
from eval.fakes.openai_api import FakeOpenAI

REPLY = {"answerable": True, "citations": [], "answer": "Carers get 26 weeks. Notice is four weeks."}
MESSAGES = [{"role": "user", "content": "How long is parental leave?"}]


def test_a_streamed_reply_grows_in_order_and_ends_as_the_plain_reply() -> None:
    with FakeOpenAI(lambda req: json.dumps(REPLY)) as fake:
        client = LLMClient(model="fake-model", base_url=fake.base_url)
        seen: list[str] = []
        assert client.chat_json(MESSAGES, on_delta=seen.append) == REPLY
        assert client.chat_json(MESSAGES) == REPLY
        assert [r.get("stream") for r in fake.requests] == [True, None]
    assert len(seen) > 3 and seen[-1] == json.dumps(REPLY)
    assert all(b.startswith(a) for a, b in zip(seen, seen[1:], strict=False))  # each holds the one before


def test_a_model_that_stops_writing_mid_reply_times_out() -> None:
    with FakeOpenAI(lambda req: json.dumps(REPLY)) as fake:
        gate = fake.hold_stream("Carers")
        client = LLMClient(model="fake-model", base_url=fake.base_url, timeout_s=1.0, max_retries=0)
        seen: list[str] = []
        try:
            with pytest.raises(LLMTimeoutError):
                client.chat_json(MESSAGES, on_delta=seen.append)
        finally:
            gate.set()
    assert seen and "Carers" in seen[-1] and "Notice" not in seen[-1]
