"""A local fake of Slack's Socket Mode WebSocket, for tests: the app connects, gets envelopes, and acks them.

The HTTP side of the fake (the Web API, signed event deliveries) is :mod:`eval.fakes.slack_api`.
"""

from __future__ import annotations

import json
import threading
from typing import Any


class FakeSocketMode:
    """Slack's Socket Mode WebSocket on loopback: hands the connected app envelopes, records its acks."""

    def __init__(self) -> None:
        import asyncio

        self.acks: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._loop = asyncio.new_event_loop()
        self._sockets: list[Any] = []
        self._transports: list[Any] = []
        self.connections = 0  # WebSocket connections opened so far
        self.close_codes: list[int | None] = []  # each link the app closed: its close frame's code (None: no frame)
        self.refuse = False  # True: new connections are turned away
        self.on_link: Any = None  # called with the link's number as each new link's request arrives (a test's probe)
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    def _run(self) -> None:
        import asyncio

        from aiohttp import WSMsgType, web

        async def ws_handler(request: web.Request) -> web.StreamResponse:
            if self.refuse:  # Slack unreachable: no new links
                return web.Response(status=503)
            if self.on_link is not None:
                self.on_link(self.connections + 1)
            ws = web.WebSocketResponse(autoping=True)
            await ws.prepare(request)
            await ws.send_str(json.dumps({"type": "hello", "num_connections": 1, "debug_info": {}}))
            with self._cond:
                self._sockets.append(ws)
                self._transports.append(request.transport)
                self.connections += 1
                self._cond.notify_all()
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    with self._cond:
                        self.acks.append(json.loads(msg.data))
                        self._cond.notify_all()
            with self._cond:
                self.close_codes.append(int(ws.close_code) if ws.close_code is not None else None)
                self._cond.notify_all()
            return ws

        async def start() -> None:
            app = web.Application()
            app.router.add_get("/link", ws_handler)
            runner = web.AppRunner(app)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self._ready.set()

        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(start())
        self._loop.run_forever()

    def start(self) -> FakeSocketMode:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        """Cut every link still open, let their handlers end, then stop the loop."""
        import asyncio

        async def cut_all() -> None:
            for transport in self._transports:
                transport.abort()
            await asyncio.sleep(0.1)  # the handlers see their link lost and return

        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(cut_all(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/link?ticket=fake"

    def wait_connected(self, timeout: float = 30.0) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._sockets), timeout):
                raise TimeoutError("the app never opened the Socket Mode connection")

    def deliver(self, body: Any, *, envelope_id: str, kind: str = "events_api") -> None:
        """Send a body as Slack's Socket Mode does (``kind``: ``events_api``, ``interactive``, ``slash_commands``);
        ``body`` may be anything, as a malformed envelope's payload may."""
        import asyncio

        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "accepts_response_payload": False,
            "retry_attempt": 0,
            "retry_reason": "",
            "payload": body,
        }
        ws = self._sockets[-1]
        asyncio.run_coroutine_threadsafe(ws.send_str(json.dumps(envelope)), self._loop).result(10)

    def drop(self, how: str) -> None:
        """Lose the newest link: ``close`` (a close frame), ``reset`` (the TCP connection cut, no handshake) or
        ``silent`` (the TCP connection stays open, but from now on nothing is read from it or sent on it: no frames,
        no pongs, as behind a stalled proxy or a peer that hangs)."""
        import asyncio

        ws, transport = self._sockets[-1], self._transports[-1]

        async def cut() -> None:
            if how == "close":
                await ws.close()
            elif how == "silent":
                transport.pause_reading()  # pings stay unread, so aiohttp's autoping never answers them
            else:
                transport.abort()

        asyncio.run_coroutine_threadsafe(cut(), self._loop).result(10)

    def wait_ack(self, envelope_id: str, timeout: float = 30.0) -> dict[str, Any]:
        with self._cond:
            found: list[dict[str, Any]] = []

            def acked() -> bool:
                found[:] = [a for a in self.acks if a.get("envelope_id") == envelope_id]
                return bool(found)

            if not self._cond.wait_for(acked, timeout):
                raise TimeoutError(f"no ack for envelope {envelope_id}")
            return found[0]
