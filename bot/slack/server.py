"""``citebot serve slack``: Socket Mode when ``SLACK_APP_TOKEN`` is set, else the Events API over HTTP.

HTTP mode is a small threaded ``http.server`` in front of ``App.dispatch`` (Bolt's own development
server is single-threaded and has no health route): ``POST /slack/events`` for events, slash
commands and interactivity; ``GET /healthz`` for load balancers. Each request gets its own thread,
and listeners only acknowledge and hand work to the bot's pool, so acks stay fast under load.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import structlog
from slack_bolt import App, BoltRequest

from connectors.settings import Settings

log = structlog.get_logger("citebot.slack.server")

EVENTS_PATH = "/slack/events"
HEALTH_PATH = "/healthz"
MAX_BODY_BYTES = 1_000_000  # Slack payloads are a few kB; refuse anything absurd before reading it


def make_http_server(app: App, host: str, port: int) -> ThreadingHTTPServer:
    """A threaded HTTP server dispatching ``/slack/events`` to ``app``; ``port=0`` picks a free one."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - no access log with query strings
            return

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path.partition("?")[0] == HEALTH_PATH:
                self._send(200, b'{"ok":true}', {"Content-Type": "application/json"})
            else:
                self._send(404, b"", {})

        def do_POST(self) -> None:  # noqa: N802
            path, _, query = self.path.partition("?")
            if path != EVENTS_PATH:
                self._send(404, b"", {})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                self._send(413, b"", {})
                return
            body = self.rfile.read(length).decode("utf-8")
            headers: dict[str, str | Sequence[str]] = {}
            for key in set(self.headers.keys()):
                headers[key.lower()] = self.headers.get_all(key) or []
            resp = app.dispatch(BoltRequest(body=body, query=query, headers=headers))
            out = resp.body.encode("utf-8") if isinstance(resp.body, str) else json.dumps(resp.body).encode()
            self._send(resp.status, out, {k: v[0] for k, v in resp.headers.items() if v})

        def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for key, value in headers.items():
                if key.lower() not in ("content-length", "connection"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 256  # Slack delivers bursts; the default backlog of 5 resets connections

    return Server((host, port), Handler)


def socket_mode_handler(app: App, settings: Settings) -> Any:
    """Bolt's Socket Mode adapter (slack_sdk's built-in WebSocket client) for ``app``."""
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    if settings.slack_app_token is None:
        raise ValueError("SLACK_APP_TOKEN (xapp-...) is needed for Socket Mode")
    return SocketModeHandler(app, settings.slack_app_token.get_secret_value())


def serve(settings: Settings, *, http: bool, host: str, port: int) -> int:
    """Run the Slack bot until interrupted; returns the exit status."""
    from bot.core import ChatCore
    from bot.slack.app import SlackConfigError, build_bot

    socket_mode = settings.slack_app_token is not None and not http
    if not socket_mode and settings.slack_signing_secret is None:
        print(
            "citebot: set SLACK_SIGNING_SECRET for HTTP mode, or SLACK_APP_TOKEN (xapp-...) for Socket Mode",
            file=sys.stderr,
        )
        return 2
    try:
        core = ChatCore.from_settings(settings)
        bot = build_bot(settings, core)
    except SlackConfigError as e:
        print(f"citebot: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - Bolt raises BoltError on a rejected token at start-up
        print(f"citebot: could not start the Slack app ({type(e).__name__}); check SLACK_BOT_TOKEN", file=sys.stderr)
        return 2
    log.info("warming_up")
    core.service.warm_up()
    try:
        if socket_mode:
            log.info("slack_socket_mode_started", workers=settings.slack_workers)
            socket_mode_handler(bot.app, settings).start()
            return 0
        server = make_http_server(bot.app, host, port)
        stop = threading.Event()

        def _stop(*_: object) -> None:
            if not stop.is_set():
                stop.set()
                threading.Thread(target=server.shutdown, daemon=True).start()

        signal.signal(signal.SIGTERM, _stop)
        log.info("slack_http_started", host=host, port=server.server_address[1], workers=settings.slack_workers)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
        return 0
    finally:
        bot.close()
