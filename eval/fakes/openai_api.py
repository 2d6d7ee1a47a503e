"""A local fake of the OpenAI chat-completions endpoint, for tests and offline demos of the LLM path.

It listens on 127.0.0.1, speaks the real wire format (``POST /v1/chat/completions``, JSON bodies,
``Retry-After`` on 429), and is driven by the real ``openai`` client pointed at :attr:`base_url`.
Replies come from a script of queued responses, else from ``responder(request_json) -> content`` (or a
:class:`Scripted` reply). The default responder behaves like a careful model: it quotes the first sentence of the
first passage in the prompt, citing its chunk id; a passage a tool returned comes first. :func:`careful_responder`
also does what a comparison or a section-by-section summary asks for (one cited sentence per document, per
passage), in words no PDF holds.

Tool calls (``tools`` / ``tool_calls``, as the triage loop of ``pipelines.triage`` sends them): a reply can be
scripted to call tools (:meth:`FakeOpenAI.push_tool_calls`, or a responder returning ``Scripted(tool_calls=...)``),
and the next request carries what the bot sent back (:func:`tool_results`). ``FakeOpenAI(tools_unsupported=True)``
answers a request offering tools with HTTP 400, as vLLM does without ``--enable-auto-tool-choice``.

A request with ``"stream": true`` is answered as the real endpoint streams: server-sent events of
``chat.completion.chunk`` objects, the content a few characters at a time, then ``data: [DONE]``.
:meth:`FakeOpenAI.hold_stream` stops a stream after a given piece of its content until the test releases it,
so a test can see what reached people while the model was still writing, without timing anything.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_PASSAGE = re.compile(
    r"\[chunk_id: ([^\]]+)\][^\n]*\n(.+?)(?=\n\n\[chunk_id: |\n\n(?:Earlier in this thread|Question):)", re.S
)


def passages_in(request: dict[str, Any]) -> list[tuple[str, str]]:
    """``(chunk_id, text)`` of the passages in a request built by ``pipelines.components.llm_answerer``."""
    user = "\n".join(m.get("content", "") for m in request.get("messages", []) if m.get("role") == "user")
    return [(m.group(1), m.group(2)) for m in _PASSAGE.finditer(user)]


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results the bot sent back in ``request``: ``{"tool_call_id", "name", "arguments", "content"}`` each,
    the name and arguments from the assistant message that asked for it."""
    asked: dict[str, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    for m in request.get("messages", []):
        for c in m.get("tool_calls") or []:
            asked[c.get("id", "")] = c.get("function", {})
        if m.get("role") == "tool":
            fn = asked.get(m.get("tool_call_id", ""), {})
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except json.JSONDecodeError:
                args = {}
            out.append({"tool_call_id": m.get("tool_call_id"), "name": fn.get("name"), "arguments": args,
                        "content": m.get("content") or ""})
    return out


def fetched_passages(request: dict[str, Any]) -> list[tuple[str, str]]:
    """``(chunk_id, text)`` of the passages the bot's tool results in ``request`` hold, latest result first."""
    found: list[tuple[str, str]] = []
    for r in reversed(tool_results(request)):
        text = r["content"] + "\n\nQuestion:"  # the passage pattern ends at the next header or a question
        found += [(m.group(1), m.group(2)) for m in _PASSAGE.finditer(text)]
    return found


def quoting_responder(request: dict[str, Any]) -> str:
    """Answer with the first sentence of the first passage (one a tool fetched first), quoted exactly."""
    found = fetched_passages(request) + passages_in(request)
    if not found:
        return json.dumps({"answerable": False, "answer": "", "citations": []})
    chunk_id, text = found[0]
    lines = [ln for ln in text.split("\n") if ln.strip()]
    body = " ".join(lines[1:] if len(lines) > 1 else lines)
    sentence = re.split(r"(?<=[.!?])\s", body, maxsplit=1)[0][:300]
    return json.dumps(
        {
            "answerable": True,
            "citations": [{"n": 1, "chunk_id": chunk_id, "quote": sentence}],
            "answer": "The document says so [1].",
        }
    )


_HEADER = re.compile(r"\[chunk_id: ([^\]]+)\] (.+?), pp?\. ")


def careful_responder(request: dict[str, Any]) -> str:
    """A model that does what the prompt asks: asked to compare, one sentence per document whose passages it was
    given; asked for a section-by-section summary, one per passage; else one, from the first passage. Each names
    the passage's file and quotes its first sentence exactly. Its words ("The model read <file>") are never in a
    PDF, so a test sees whose text reached the asker."""
    user = "\n".join(m.get("content", "") for m in request["messages"] if m.get("role") == "user")
    files = dict(_HEADER.findall(user))
    for chunk_id, _ in fetched_passages(request):  # what the model asked a tool for first
        files.setdefault(chunk_id, _fetched_file(request, chunk_id))
    picked: list[tuple[str, str]] = []
    seen: set[str] = set()
    for chunk_id, text in fetched_passages(request) + passages_in(request):
        doc = chunk_id.rsplit(":", 1)[0]
        if picked and "Compare what each document says" not in user and "section by section" not in user:
            break
        if doc in seen and "section by section" not in user:
            continue
        seen.add(doc)
        lines = [ln for ln in text.split("\n") if ln.strip()]
        body = " ".join(lines[1:] if len(lines) > 1 else lines)
        quote = re.split(r"(?<=[.!?])\s", body, maxsplit=1)[0][:300]
        picked.append((chunk_id, quote))
    if not picked:
        return json.dumps({"answerable": False, "answer": "", "citations": []})
    return json.dumps({  # the citations first, as the prompt's example has them (they are what a stream waits for)
        "answerable": True,
        "citations": [{"n": n, "chunk_id": c, "quote": q} for n, (c, q) in enumerate(picked, 1)],
        "answer": " ".join(f"The model read {files.get(c, 'a PDF')} [{n}]." for n, (c, _) in enumerate(picked, 1)),
    })


def _fetched_file(request: dict[str, Any], chunk_id: str) -> str:
    for r in tool_results(request):
        m = re.search(rf"\[chunk_id: {re.escape(chunk_id)}\] (.+?), pp?\. ", r["content"])
        if m:
            return m.group(1)
    return "a PDF"


def fetching_responder(*calls: dict[str, Any], then: Callable[[dict[str, Any]], str] = quoting_responder
                       ) -> Callable[[dict[str, Any]], str | Scripted]:
    """A model that, offered tools, first calls ``calls`` (each ``{"name": ..., "arguments": {...}}``, all in one
    reply), then answers with ``then`` (by default quoting the first passage a tool returned)."""

    def respond(request: dict[str, Any]) -> str | Scripted:
        if request.get("tools") and not tool_results(request) and request.get("tool_choice") != "none":
            return Scripted(tool_calls=list(calls))
        return then(request)

    return respond


def looping_responder(call: dict[str, Any]) -> Callable[[dict[str, Any]], Scripted]:
    """A model that calls ``call`` in every reply, forever, whatever it is told (``tool_choice`` included)."""
    return lambda request: Scripted(tool_calls=[call])


@dataclass
class Scripted:
    """One queued reply: an HTTP status, headers, a message ``content`` (or a raw ``body``), ``tool_calls``
    (``{"name": ..., "arguments": {...}}`` each) and a delay."""

    content: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    delay_s: float = 0.0
    tool_calls: list[dict[str, Any]] | None = None


class FakeOpenAI:
    """``with FakeOpenAI() as fake: ... fake.base_url ...``; ``fake.requests`` holds every request JSON."""

    def __init__(self, responder: Callable[[dict[str, Any]], Any] = quoting_responder, *,
                 tools_unsupported: bool = False) -> None:
        self.responder = responder
        self.tools_unsupported = tools_unsupported
        self.script: deque[Scripted] = deque()
        self.requests: list[dict[str, Any]] = []
        self.streams_ended = 0  # streamed replies sent to their end ([DONE])
        self.chunk_chars = 12  # characters of content per streamed chunk
        self._hold: tuple[str, threading.Event] | None = None
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- script ----------------------------------------------------------------------------------
    def push(self, content: str | None = None, **kwargs: Any) -> None:
        self.script.append(Scripted(content=content, **kwargs))

    def push_json(self, obj: Any, **kwargs: Any) -> None:
        self.push(json.dumps(obj), **kwargs)

    def push_tool_calls(self, *calls: dict[str, Any]) -> None:
        """Queue a reply asking for ``calls`` (``{"name": "fetch_page", "arguments": {...}}`` each)."""
        self.script.append(Scripted(tool_calls=list(calls)))

    def tools_requests(self) -> list[dict[str, Any]]:
        """The requests that offered tools."""
        return [r for r in self.requests if r.get("tools")]

    def hold_stream(self, after: str) -> threading.Event:
        """Stop the next streamed reply whose content holds ``after`` right after the chunk that completes it,
        until the returned event is set (at most 60 s)."""
        gate = threading.Event()
        self._hold = (after, gate)
        return gate

    # --- server ----------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the fake first"
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}/v1"

    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    req = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    req = {}
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {}, json.dumps({"error": {"message": "not found"}}).encode())
                    return
                with fake._lock:
                    fake.requests.append(req)
                    step = fake.script.popleft() if fake.script else None
                if fake.tools_unsupported and req.get("tools"):
                    step = Scripted(status=400, body=json.dumps({"error": {
                        "message": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
                                   "to be set", "type": "BadRequestError", "param": None, "code": 400}}).encode())
                if step is None:
                    reply = fake.responder(req)
                    step = reply if isinstance(reply, Scripted) else Scripted(content=reply)
                if step.delay_s:
                    time.sleep(step.delay_s)
                if step.body is not None:
                    body = step.body
                elif step.status != 200:
                    body = json.dumps({"error": {"message": "scripted error", "type": "server_error"}}).encode()
                elif req.get("stream"):
                    self._stream(req, step.content or "")
                    return
                else:
                    body = json.dumps(_completion(req, step.content or "", step.tool_calls)).encode()
                self._send(step.status, step.headers, body)

            def _stream(self, req: dict[str, Any], content: str) -> None:
                """The reply as server-sent events, ``chunk_chars`` characters of content per chunk."""
                hold = fake._hold if fake._hold and fake._hold[0] in content else None
                if hold is not None:
                    fake._hold = None
                    release_at = content.index(hold[0]) + len(hold[0])
                try:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("cache-control", "no-cache")
                    self.end_headers()
                    step = max(1, fake.chunk_chars)
                    for start in range(0, len(content), step):
                        piece = content[start : start + step]
                        delta = {"role": "assistant", "content": piece} if start == 0 else {"content": piece}
                        self._event(_chunk(req, delta, None))
                        if hold is not None and start < release_at <= start + step:
                            hold[1].wait(60)
                    self._event(_chunk(req, {}, "stop"))
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return
                with fake._lock:
                    fake.streams_ended += 1

            def _event(self, obj: dict[str, Any]) -> None:
                self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
                self.wfile.flush()

            def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_call_ids = itertools.count(1)


def _completion(req: dict[str, Any], content: str, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{next(_call_ids)}", "type": "function",
             "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))}}
            for c in tool_calls]}
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": req.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _chunk(req: dict[str, Any], delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": req.get("model", "fake"),
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
