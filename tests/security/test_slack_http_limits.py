"""Defect 6 of the security review: Slack's HTTP mode read bodies without bounds.

``Content-Length: -1`` passed the size check and ``rfile.read(-1)`` read until the client hung up; there was
no timeout, and every connection got its own thread. These tests talk raw HTTP to the real server in front of
the real Bolt app, as a hostile client would. Limits are lowered through the module's constants so a test
takes seconds, not the production ten.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import bot.slack.server as slack_server
from bot.core import ChatCore
from bot.slack.app import SlackBot, build_bot
from bot.slack.server import make_http_server
from connectors.settings import Settings
from eval.fakes.slack_api import BOT_TOKEN, SIGNING_SECRET, FakeSlack, post_signed, sign

CHALLENGE = '{"token":"x","challenge":"c0ffee","type":"url_verification"}'


@pytest.fixture(scope="module")
def slack_bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlackBot]:
    data_dir: Path = tmp_path_factory.mktemp("slack-limits")
    fake = FakeSlack().start()
    settings = Settings(_env_file=None, data_dir=data_dir, slack_bot_token=BOT_TOKEN,  # type: ignore[call-arg]
                        slack_signing_secret=SIGNING_SECRET, slack_api_url=fake.url, slack_workers=1,
                        ocr_enabled=False)
    bot = build_bot(settings, ChatCore.from_settings(settings))
    yield bot
    bot.close()
    fake.stop()


@contextmanager
def _serving(slack_bot: SlackBot, monkeypatch: pytest.MonkeyPatch, *, timeout_s: float, per_client: int = 4,
             idle_s: float = 60.0, exempt: tuple[str, ...] = ()) -> Iterator[tuple[str, int]]:
    monkeypatch.setattr(slack_server, "REQUEST_TIMEOUT_S", timeout_s, raising=False)
    monkeypatch.setattr(slack_server, "MAX_CONNECTIONS", 4, raising=False)
    monkeypatch.setattr(slack_server, "MAX_CONNECTIONS_PER_CLIENT", per_client, raising=False)
    monkeypatch.setattr(slack_server, "IDLE_TIMEOUT_S", idle_s, raising=False)
    monkeypatch.setattr(slack_server, "PER_CLIENT_EXEMPT", exempt, raising=False)  # the test's clients are loopback
    srv = make_http_server(slack_bot.app, "127.0.0.1", 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield "127.0.0.1", srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def server(slack_bot: SlackBot, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, int]]:
    """Four connections at once, one second per request."""
    with _serving(slack_bot, monkeypatch, timeout_s=1.0) as addr:
        yield addr


def _connect(addr: tuple[str, int], source: str = "") -> socket.socket:
    sock = socket.create_connection(addr, timeout=5, source_address=(source, 0) if source else None)
    sock.settimeout(5)
    return sock


def _head(content_length: str | None, body: str = CHALLENGE) -> bytes:
    lines = ["POST /slack/events HTTP/1.1", "Host: bot.example", "Content-Type: application/json"]
    lines += [f"{k}: {v}" for k, v in sign(body).items()]
    if content_length is not None:
        lines.append(f"Content-Length: {content_length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answer(sock: socket.socket, within: float) -> tuple[bytes, bool]:
    """What the server sends before closing or ``within`` seconds pass, and whether the server ended it (an answer
    or a close) rather than the client's patience."""
    sock.settimeout(within)
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
            if b"\r\n\r\n" in got:
                break
    except TimeoutError:
        return got, False
    except ConnectionResetError:
        pass
    return got, True


@pytest.mark.parametrize(
    ("content_length", "status"),
    [("-1", b"413"), (str(slack_server.MAX_BODY_BYTES + 1), b"413"), (None, b"411"), ("12abc", b"400")],
)
def test_a_body_length_outside_the_limit_is_answered_at_once_without_reading(
    slack_bot: SlackBot, monkeypatch: pytest.MonkeyPatch, content_length: str | None, status: bytes
) -> None:
    """The client sends the head and part of a body, and keeps the connection open. The server's deadline is 60 s
    and the client waits 30: an answer at all means the server answered without waiting for the body."""
    with _serving(slack_bot, monkeypatch, timeout_s=60.0) as server, _connect(server) as sock:
        sock.sendall(_head(content_length) + CHALLENGE[:10].encode())
        got, _ = _answer(sock, within=30)
    assert got.startswith(b"HTTP/1.1 " + status), got[:80]


def test_a_signed_request_within_the_limits_is_still_served(server: tuple[str, int]) -> None:
    status, body = post_signed(f"http://{server[0]}:{server[1]}/slack/events",
                               {"token": "x", "challenge": "c0ffee", "type": "url_verification"})
    assert status == 200 and b"c0ffee" in body


@pytest.mark.parametrize("stage", ["headers", "body"])
def test_a_client_dripping_its_request_is_cut_off_by_the_deadline(server: tuple[str, int], stage: str) -> None:
    """A byte every 0.2 s: each read is quick, the request ends only after seconds. The deadline (1 s here) ends
    it first: the server hangs up (or answers 408) while the client is still dripping."""
    request = _head(str(len(CHALLENGE))) + CHALLENGE.encode()
    split = request.index(b"\r\n") + 2 if stage == "headers" else len(request) - len(CHALLENGE)
    stop, dripped_all = threading.Event(), threading.Event()
    with _connect(server) as sock:
        sock.sendall(request[:split])

        def drip() -> None:
            for b in request[split:]:
                if stop.wait(0.2):
                    return
                try:
                    sock.sendall(bytes([b]))
                except OSError:
                    return
            dripped_all.set()

        dripper = threading.Thread(target=drip, daemon=True)
        dripper.start()
        try:
            got, ended_by_server = _answer(sock, within=60)
            still_dripping = not dripped_all.is_set()
        finally:
            stop.set()
            dripper.join(5)
    assert ended_by_server and still_dripping, "the server read until the whole request had dripped in"
    assert got == b"" or got.startswith(b"HTTP/1.1 408"), got[:80]


def test_connections_beyond_the_limit_get_503_at_once(slack_bot: SlackBot, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four slow clients hold the four slots; the fifth is told to come back instead of queueing behind them (the
    slots free up only at the 60 s deadline, the fifth client waits 30), and once they are gone the server answers
    again."""
    with _serving(slack_bot, monkeypatch, timeout_s=60.0) as server:
        slow = [_connect(server) for _ in range(4)]
        try:
            for sock in slow:
                sock.sendall(b"POST /slack/events HTTP/1.1\r\nHost: bot.example\r\n")  # ...and nothing more
            with _connect(server) as probe:
                probe.sendall(b"GET /healthz HTTP/1.1\r\nHost: bot.example\r\n\r\n")
                got, _ = _answer(probe, within=30)
            assert got.startswith(b"HTTP/1.1 503"), got[:80]
        finally:
            for sock in slow:
                sock.close()
        deadline = time.monotonic() + 10
        while True:
            with _connect(server) as probe:
                probe.sendall(b"GET /healthz HTTP/1.1\r\nHost: bot.example\r\n\r\n")
                got, _ = _answer(probe, within=4)
            if got.startswith(b"HTTP/1.1 200") or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert got.startswith(b"HTTP/1.1 200"), got[:80]


def test_one_client_cannot_hold_every_slot(slack_bot: SlackBot, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40 row 7: one address holding idle connections took all the slots. Two per client here (of four):
    the client's third connection gets 503, while another address (127.0.0.2, loopback too) is still served."""
    with _serving(slack_bot, monkeypatch, timeout_s=60.0, per_client=2) as server:
        held = [_connect(server) for _ in range(2)]
        try:
            for sock in held:
                sock.sendall(b"POST /slack/events HTTP/1.1\r\nHost: bot.example\r\n")  # ...and nothing more
            with _connect(server) as third:
                third.sendall(b"GET /healthz HTTP/1.1\r\nHost: bot.example\r\n\r\n")
                got, _ = _answer(third, within=30)
            assert got.startswith(b"HTTP/1.1 503"), got[:80]
            with _connect(server, source="127.0.0.2") as other:
                other.sendall(b"GET /healthz HTTP/1.1\r\nHost: bot.example\r\n\r\n")
                got, _ = _answer(other, within=30)
            assert got.startswith(b"HTTP/1.1 200"), got[:80]
        finally:
            for sock in held:
                sock.close()


def test_loopback_clients_are_bounded_by_the_total_alone(slack_bot: SlackBot, monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy or a load test on the same host (``citebot bench slack`` sends 50 at once) is a loopback client: it
    may use every slot (here with loopback exempt, as by default)."""
    with _serving(slack_bot, monkeypatch, timeout_s=60.0, per_client=2, exempt=("127.0.0.0/8",)) as server:
        held = [_connect(server) for _ in range(3)]
        try:
            for sock in held:
                sock.sendall(b"POST /slack/events HTTP/1.1\r\nHost: bot.example\r\n")
            with _connect(server) as fourth:
                fourth.sendall(b"GET /healthz HTTP/1.1\r\nHost: bot.example\r\n\r\n")
                got, _ = _answer(fourth, within=30)
            assert got.startswith(b"HTTP/1.1 200"), got[:80]
        finally:
            for sock in held:
                sock.close()


def test_a_connection_that_sends_nothing_is_closed_after_the_idle_timeout(
    slack_bot: SlackBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40 row 7: an idle connection held its slot for the whole request deadline (60 s here); it is let go
    after the idle timeout (0.5 s here), and a request that has started still has its whole deadline."""
    with _serving(slack_bot, monkeypatch, timeout_s=60.0, idle_s=0.5) as server:
        with _connect(server) as idle:
            started = time.monotonic()
            got, ended_by_server = _answer(idle, within=30)
        assert ended_by_server and got == b"" and time.monotonic() - started < 10
        with _connect(server) as slow:  # the head in two parts, 1 s apart: past the idle timeout, still served
            slow.sendall(b"GET /healthz HTTP/1.1\r\n")
            time.sleep(1.0)
            slow.sendall(b"Host: bot.example\r\n\r\n")
            got, _ = _answer(slow, within=30)
        assert got.startswith(b"HTTP/1.1 200"), got[:80]
