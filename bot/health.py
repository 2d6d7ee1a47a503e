"""Liveness and readiness, the same for both bots: ``GET /healthz`` and ``GET /readyz``.

* ``/healthz`` answers 200 ``{"status": "ok", "platform": ..., "ready": ..., "version": ...}`` while the process
  serves at all (a liveness probe: restart the container when it stops answering).
* ``/readyz`` answers 200 ``{"status": "ready", ...}`` once the embedding model is loaded and the pipelines are
  built on the store, else 503 ``{"status": "starting", ...}`` (a readiness probe: send no traffic before).

Slack's HTTP server and the Teams aiohttp app serve both paths on their own port; Slack in Socket Mode has no
HTTP server of its own, so :func:`serve_health` gives it one (``citebot serve slack --health-port``).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bot.version import version

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"


class Health:
    """Whether the bot is ready; thread-safe."""

    def __init__(self, platform: str, *, ready: bool = False) -> None:
        self.platform = platform
        self._ready = threading.Event()
        if ready:
            self._ready.set()

    def set_ready(self) -> None:
        self._ready.set()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def _body(self, status: str) -> dict[str, Any]:
        return {"status": status, "platform": self.platform, "ready": self.ready, "version": version()}

    def live(self) -> tuple[int, dict[str, Any]]:
        return 200, self._body("ok")

    def readiness(self) -> tuple[int, dict[str, Any]]:
        return (200, self._body("ready")) if self.ready else (503, self._body("starting"))

    def respond(self, path: str) -> tuple[int, bytes] | None:
        """(status, JSON body) for a health path, None for any other path."""
        path = path.partition("?")[0]
        if path == HEALTH_PATH:
            status, body = self.live()
        elif path == READY_PATH:
            status, body = self.readiness()
        else:
            return None
        return status, json.dumps(body).encode()


def serve_health(health: Health, host: str, port: int) -> ThreadingHTTPServer:
    """A small HTTP server with only the two health paths (``port=0`` picks a free one); call ``serve_forever``."""

    class Handler(BaseHTTPRequestHandler):
        timeout = 10

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - probes every few seconds: no log
            return

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            found = health.respond(self.path)
            status, body = found if found is not None else (404, b"")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

    return Server((host, port), Handler)
