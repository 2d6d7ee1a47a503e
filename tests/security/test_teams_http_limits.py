"""Issue 40 row 3: the Teams endpoint ran on aiohttp's defaults, with no deadline on a request (a connection
dripping its headers was kept for an hour) and no cap on connections (600 slow clients used up the process's file
descriptors), all before a token was looked at. These tests talk raw HTTP to the real app (``build_app``) behind
the real listener (``listen``, what ``citebot serve teams`` runs), as a hostile client would; the limits are
lowered through the module's constants so a test takes seconds."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from aiohttp import web

import bot.teams.server as teams_server
from bot.core import ChatCore
from bot.teams.server import build_app, listen
from connectors.settings import Settings


@contextmanager
def _serving(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, timeout_s: float) -> Iterator[tuple[str, int]]:
    monkeypatch.setattr(teams_server, "REQUEST_TIMEOUT_S", timeout_s, raising=False)
    monkeypatch.setattr(teams_server, "MAX_CONNECTIONS", 4, raising=False)
    settings = Settings(_env_file=None, data_dir=tmp_path, ocr_enabled=False)  # type: ignore[call-arg]
    app = build_app(settings, ChatCore.from_settings(settings), insecure_local=True)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runner = web.AppRunner(app)

    async def start() -> asyncio.Server:
        await runner.setup()
        return await listen(runner, "127.0.0.1", 0)

    server = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    try:
        yield "127.0.0.1", server.sockets[0].getsockname()[1]
    finally:
        async def stop() -> None:
            server.close()
            await runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _connect(addr: tuple[str, int]) -> socket.socket:
    sock = socket.create_connection(addr, timeout=5)
    sock.settimeout(5)
    return sock


def _answer(sock: socket.socket, within: float) -> tuple[bytes, bool]:
    """What the server sends before closing or ``within`` seconds pass, and whether the server ended it."""
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


BODY = b'{"type": "message", "channelId": "msteams", "conversation": {"id": "19:x"}}'
REQUEST = (b"POST /api/messages HTTP/1.1\r\nHost: bot.example\r\nContent-Type: application/json\r\n"
           b"X-Padding: " + b"p" * 40 + b"\r\n" + b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)


@pytest.mark.parametrize("stage", ["headers", "body"])
def test_a_client_dripping_its_request_is_cut_off_by_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    """A byte every 0.1 s: each read is quick, the request would end only after ~10 s. The deadline (1 s here)
    ends it first: the server hangs up (or answers 408) while the client is still dripping."""
    split = REQUEST.index(b"\r\n") + 2 if stage == "headers" else len(REQUEST) - len(BODY)
    stop, dripped_all = threading.Event(), threading.Event()
    with _serving(tmp_path, monkeypatch, timeout_s=1.0) as server, _connect(server) as sock:
        sock.sendall(REQUEST[:split])

        def drip() -> None:
            for b in REQUEST[split:]:
                if stop.wait(0.1):
                    return
                try:
                    sock.sendall(bytes([b]))
                except OSError:
                    return
            dripped_all.set()

        dripper = threading.Thread(target=drip, daemon=True)
        dripper.start()
        try:
            got, ended_by_server = _answer(sock, within=30)
            still_dripping = not dripped_all.is_set()
        finally:
            stop.set()
            dripper.join(5)
    assert ended_by_server and still_dripping, "the server read until the whole request had dripped in"
    assert got == b"" or got.startswith(b"HTTP/1.1 408"), got[:80]


def test_an_idle_connection_is_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _serving(tmp_path, monkeypatch, timeout_s=1.0) as server, _connect(server) as sock:
        started = time.monotonic()
        got, ended_by_server = _answer(sock, within=20)
    assert ended_by_server and got == b"" and time.monotonic() - started < 10


def test_connections_beyond_the_limit_get_503_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four slow clients hold the four slots; the fifth is told to come back at once (the slots free up only at
    the 60 s deadline, the fifth client waits 20), and once they are gone the server answers again."""
    with _serving(tmp_path, monkeypatch, timeout_s=60.0) as server:
        slow = [_connect(server) for _ in range(4)]
        try:
            for sock in slow:
                sock.sendall(b"POST /api/messages HTTP/1.1\r\nHost: bot.example\r\n")  # ...and nothing more
            time.sleep(0.5)
            with _connect(server) as probe:
                got, _ = _answer(probe, within=20)
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
