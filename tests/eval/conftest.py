"""Fixtures for the eval tests."""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from connectors.settings import Settings

RunCli = Callable[[list[str], Settings], int]


@pytest.fixture
def run_cli() -> RunCli:
    """Run ``citebot`` eval/feedback/reindex commands in-process with the given settings."""

    def run(argv: list[str], settings: Settings) -> int:
        from bot.cli import eval_cmds

        parser = argparse.ArgumentParser(prog="citebot")
        eval_cmds.register(parser.add_subparsers(dest="command", required=True))
        args = parser.parse_args(argv)
        return int(args.func(args, settings) or 0)

    return run


class FakeJudge:
    """Replies from a queue of message contents; records every request body."""

    def __init__(self) -> None:
        self.replies: list[str] = []
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                content = fake.replies.pop(0) if fake.replies else '{"score": 1, "explanation": "ok"}'
                data = json.dumps({
                    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()


@pytest.fixture
def fake() -> Iterator[FakeJudge]:
    f = FakeJudge()
    yield f
    f.server.shutdown()


@pytest.fixture
def fake_judge() -> Iterator[FakeJudge]:
    """A fake OpenAI chat-completions server on 127.0.0.1 (the real wire format, driven by the openai client)."""
    f = FakeJudge()
    yield f
    f.server.shutdown()
    f.server.server_close()
