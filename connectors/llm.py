"""An OpenAI-compatible chat client that returns parsed JSON, with timeouts and polite retries.

Any endpoint speaking the chat-completions wire format works (OpenAI, Azure-style proxies, vLLM,
Ollama, llama.cpp server): set ``OPENAI_BASE_URL`` and/or ``OPENAI_API_KEY``. Temperature is 0. With
``on_delta`` a reply is streamed (``stream=True``, server-sent events) and the text so far is handed over as it
grows; the reply returned is the same.
429 answers are retried after their ``Retry-After`` (capped), 5xx answers with exponential backoff,
both up to ``max_retries`` times; a timeout is not retried (the caller falls back instead of making a
chat user wait twice). Every failure ends as an :class:`LLMError` subclass.

:meth:`LLMClient.chat_tools` sends OpenAI ``tools`` and returns the reply's ``tool_calls`` beside its text (the
triage loop of :mod:`pipelines.triage`); an endpoint that refuses a request (HTTP 4xx) raises
:class:`LLMRejectedError`, which names its status.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connectors.log import get_logger

log = get_logger(__name__)

# A base URL without a key: local servers (vLLM, Ollama...) ignore the key but the client requires one.
PLACEHOLDER_KEY = "not-needed"  # noqa: S105 - not a secret
MAX_RETRY_AFTER_S = 20.0


class LLMError(Exception):
    """The language model could not give a usable reply."""


class LLMTimeoutError(LLMError):
    """The model did not answer within the timeout."""


class LLMUnavailableError(LLMError):
    """Rate limited or server errors after every retry, or the endpoint cannot be reached."""


class LLMResponseError(LLMError):
    """The model answered, but not with the JSON object that was asked for."""


class LLMRejectedError(LLMUnavailableError):
    """The endpoint refused the request (HTTP 4xx other than 429): a bad key, or a feature it lacks (tools)."""

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for: its id (echoed in the tool's reply), name and raw JSON arguments."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolReply:
    """A chat reply that may ask for tools: its text (often empty then) and the calls."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)

    def as_message(self) -> dict[str, Any]:
        """The assistant message to send back before the tools' results, in the wire format."""
        return {
            "role": "assistant",
            "content": self.content or None,
            "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                           for c in self.tool_calls],
        }


class LLMClient:
    """Chat completions returning a JSON object.

    ``sleep`` is injectable so tests can record waits instead of sleeping.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        max_retries: int = 3,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not model:
            raise ValueError("an LLM model name is required (CITEBOT_LLM_MODEL)")
        if not base_url and not api_key:
            raise ValueError("set OPENAI_API_KEY or OPENAI_BASE_URL to use an LLM")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.model = model
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._sleep = sleep
        import openai

        # the SDK's own retries are off: ours honour Retry-After with a cap and count attempts
        self._client = openai.OpenAI(
            api_key=api_key or PLACEHOLDER_KEY, base_url=base_url or None, timeout=timeout_s, max_retries=0
        )

    def chat_json(
        self, messages: list[dict[str, str]], *, max_tokens: int = 800, on_delta: Callable[[str], None] | None = None
    ) -> dict[str, Any]:
        """Send ``messages``; return the reply parsed as a JSON object (streamed to ``on_delta``, see :meth:`chat`).

        A reply that is not a JSON object is asked for once more (not streamed); then :class:`LLMResponseError`.
        """
        content = self.chat(messages, max_tokens=max_tokens, json_mode=True, on_delta=on_delta)
        parsed = parse_json_object(content)
        if parsed is not None:
            return parsed
        log.warning("llm_malformed_json", model=self.model, chars=len(content))
        retry = [
            *messages,
            {"role": "assistant", "content": content[:2000]},
            {"role": "user", "content": "That was not a valid JSON object. Reply with only the JSON object."},
        ]
        parsed = parse_json_object(self.chat(retry, max_tokens=max_tokens, json_mode=True))
        if parsed is None:
            raise LLMResponseError("the model's reply was not valid JSON twice in a row")
        return parsed

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int = 800,
        json_mode: bool = False,
        on_delta: Callable[[str], None] | None = None,
    ) -> str:
        """One chat completion (temperature 0) with retries on 429 and 5xx; returns the message text.

        With ``on_delta`` the reply is streamed and ``on_delta(text_so_far)`` is called as each piece arrives (a
        429 or 5xx comes before the first piece, so the retries are the same); a stream cut short is an
        :class:`LLMUnavailableError`."""
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": 0, "max_tokens": max_tokens}
        if json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        if on_delta is not None:
            kwargs["stream"] = True
            return str(self._complete(kwargs, on_delta))
        try:
            return self._complete(kwargs).choices[0].message.content or ""
        except (AttributeError, IndexError, TypeError) as e:
            raise LLMResponseError("the model endpoint returned no message") from e

    def chat_tools(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        tool_choice: str = "auto",
        max_tokens: int = 800,
    ) -> ToolReply:
        """One chat completion offering ``tools`` (OpenAI's ``tools`` / ``tool_calls`` wire format; ``tool_choice``
        "none" forbids further calls); returns the text and the calls asked for."""
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": 0, "max_tokens": max_tokens,
                                  "tools": tools, "tool_choice": tool_choice}
        try:
            message = self._complete(kwargs).choices[0].message
            calls = [ToolCall(str(c.id), str(c.function.name), str(c.function.arguments or ""))
                     for c in (message.tool_calls or []) if getattr(c, "function", None) is not None]
        except (AttributeError, IndexError, TypeError) as e:
            raise LLMResponseError("the model endpoint returned no message") from e
        return ToolReply(message.content or "", calls)

    def _complete(self, kwargs: dict[str, Any], on_delta: Callable[[str], None] | None = None) -> Any:
        """``chat.completions.create(**kwargs)`` with the retries and error mapping above; the SDK's response, or
        with ``on_delta`` (a streamed request) the streamed text."""
        import openai

        attempt = 0
        while True:
            t0 = time.perf_counter()
            try:
                resp = self._client.chat.completions.create(**kwargs)
            except openai.APITimeoutError as e:
                log.warning("llm_timeout", model=self.model, timeout_s=self.timeout_s)
                raise LLMTimeoutError(f"the model did not answer within {self.timeout_s:g} s") from e
            except openai.RateLimitError as e:
                if attempt >= self.max_retries:
                    raise LLMUnavailableError("rate limited by the model endpoint after retries") from e
                wait = _retry_after(e.response.headers if e.response is not None else {}, attempt)
                log.info("llm_retry", status=429, attempt=attempt + 1, wait_s=round(wait, 2))
            except openai.InternalServerError as e:
                if attempt >= self.max_retries:
                    raise LLMUnavailableError(f"the model endpoint failed with HTTP {e.status_code}") from e
                wait = _backoff(attempt)
                log.info("llm_retry", status=e.status_code, attempt=attempt + 1, wait_s=round(wait, 2))
            except openai.APIConnectionError as e:
                raise LLMUnavailableError("could not reach the model endpoint") from e
            except openai.APIStatusError as e:
                raise LLMRejectedError(f"the model endpoint refused the request (HTTP {e.status_code})",
                                       e.status_code) from e
            else:
                if on_delta is not None:
                    return self._read_stream(resp, on_delta, t0)
                log.info("llm_call", model=self.model, ms=round((time.perf_counter() - t0) * 1000, 1))
                return resp
            attempt += 1
            self._sleep(wait)

    def _read_stream(self, stream: Any, on_delta: Callable[[str], None], t0: float) -> str:
        """The streamed reply's text, handed to ``on_delta`` as it grows."""
        import openai

        parts: list[str] = []
        first_ms: float | None = None
        try:
            with stream:
                for chunk in stream:
                    choices = getattr(chunk, "choices", None) or []
                    piece = (getattr(choices[0].delta, "content", None) or "") if choices else ""
                    if not piece:
                        continue
                    if first_ms is None:
                        first_ms = round((time.perf_counter() - t0) * 1000, 1)
                    parts.append(piece)
                    on_delta("".join(parts))
        except openai.APITimeoutError as e:
            log.warning("llm_timeout", model=self.model, timeout_s=self.timeout_s, streamed=True)
            raise LLMTimeoutError(f"the model stopped answering for {self.timeout_s:g} s") from e
        except (openai.APIError, OSError) as e:
            raise LLMUnavailableError("the model's streamed reply broke off") from e
        log.info("llm_call", model=self.model, ms=round((time.perf_counter() - t0) * 1000, 1), first_ms=first_ms,
                 streamed=True)
        return "".join(parts)


def _backoff(attempt: int) -> float:
    return min(0.5 * 2**attempt, 8.0)


def _retry_after(headers: Any, attempt: int) -> float:
    """Seconds to wait: the ``Retry-After`` (or ``retry-after-ms``) header, capped; else backoff."""
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return min(max(float(ms) / 1000, 0.0), MAX_RETRY_AFTER_S)
        ra = headers.get("retry-after")
        if ra is not None:
            return min(max(float(ra), 0.0), MAX_RETRY_AFTER_S)
    except (TypeError, ValueError):
        pass
    return _backoff(attempt)


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


def parse_json_object(content: str) -> dict[str, Any] | None:
    """The JSON object in ``content`` (tolerating a ```json fence), or None."""
    text = content.strip()
    m = _FENCE.match(text)
    if m:
        text = m.group(1)
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            return None
        try:
            value = json.loads(text[start : end + 1])
        except json.JSONDecodeError:
            return None
    return value if isinstance(value, dict) else None


def client_from_settings(settings: Any, *, model: str | None = None, **kwargs: Any) -> LLMClient:
    """Build the client from :class:`connectors.settings.Settings` (``model``: another model on the same
    endpoint, e.g. the eval judge's; default ``CITEBOT_LLM_MODEL``)."""
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return LLMClient(
        model=model or settings.llm_model,
        base_url=settings.openai_base_url,
        api_key=key,
        timeout_s=settings.llm_timeout_s,
        max_retries=settings.llm_max_retries,
        **kwargs,
    )
