"""The OpenAI-compatible client against a local fake speaking the chat-completions wire format."""

from __future__ import annotations

import json

import pytest

from connectors.llm import (
    LLMClient,
    LLMResponseError,
    LLMTimeoutError,
    LLMUnavailableError,
    client_from_settings,
    parse_json_object,
)
from connectors.settings import Settings
from eval.fakes.openai_api import FakeOpenAI

MSGS = [{"role": "user", "content": "hi"}]


@pytest.fixture
def fake():
    with FakeOpenAI(responder=lambda req: json.dumps({"ok": True})) as f:
        yield f


def _client(fake: FakeOpenAI, **kw) -> tuple[LLMClient, list[float]]:
    waits: list[float] = []
    defaults = {"model": "m", "base_url": fake.base_url, "timeout_s": 5.0, "max_retries": 2, "sleep": waits.append}
    return LLMClient(**{**defaults, **kw}), waits


class TestLLMClient:
    def test_init_needs_model_and_endpoint(self):
        with pytest.raises(ValueError, match="OPENAI_API_KEY or OPENAI_BASE_URL"):
            LLMClient(model="m")
        with pytest.raises(ValueError, match="model"):
            LLMClient(model="", base_url="http://127.0.0.1:1/v1")

    def test_sends_temperature_zero_json_mode_and_parses(self, fake):
        client, _ = _client(fake)
        assert client.chat_json(MSGS) == {"ok": True}
        req = fake.requests[0]
        assert req["temperature"] == 0
        assert req["response_format"] == {"type": "json_object"}
        assert req["model"] == "m"

    def test_base_url_alone_uses_placeholder_key(self, fake):
        s = Settings(openai_base_url=fake.base_url, llm_model="local-model")
        assert client_from_settings(s).chat_json(MSGS) == {"ok": True}

    def test_429_honours_retry_after(self, fake):
        fake.push(status=429, headers={"Retry-After": "3"})
        client, waits = _client(fake)
        assert client.chat_json(MSGS) == {"ok": True}
        assert waits == [3.0]
        assert len(fake.requests) == 2

    def test_5xx_backs_off_then_gives_up_with_typed_error(self, fake):
        for _ in range(3):
            fake.push(status=503)
        client, waits = _client(fake, max_retries=2)
        with pytest.raises(LLMUnavailableError):
            client.chat_json(MSGS)
        assert len(fake.requests) == 3
        assert len(waits) == 2 and waits[1] > waits[0]

    def test_timeout_is_not_retried(self, fake):
        fake.push(json.dumps({"ok": True}), delay_s=1.5)
        client, waits = _client(fake, timeout_s=0.3)
        with pytest.raises(LLMTimeoutError):
            client.chat_json(MSGS)
        assert waits == []

    def test_malformed_json_is_asked_for_once_more(self, fake):
        fake.push("Sure! Here is the answer: {oops")
        fake.push(json.dumps({"fixed": 1}))
        client, _ = _client(fake)
        assert client.chat_json(MSGS) == {"fixed": 1}
        assert "not a valid JSON" in fake.requests[1]["messages"][-1]["content"]

    def test_malformed_json_twice_raises(self, fake):
        fake.push("nope")
        fake.push("still nope")
        client, _ = _client(fake)
        with pytest.raises(LLMResponseError):
            client.chat_json(MSGS)

    def test_unreachable_endpoint_is_unavailable(self):
        client = LLMClient(model="m", base_url="http://127.0.0.1:9/v1", timeout_s=1.0, max_retries=0)
        with pytest.raises(LLMUnavailableError):
            client.chat_json(MSGS)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('Here you go: {"a": 1} hope it helps', {"a": 1}),
        ("[1, 2]", None),
        ("no json", None),
    ],
)
def test_parse_json_object(content, expected):
    assert parse_json_object(content) == expected
