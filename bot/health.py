"""Liveness and readiness, the same for both bots: ``GET /healthz`` and ``GET /readyz``.

* ``/healthz`` answers 200 ``{"status": "ok", "platform": ..., "ready": ..., "version": ...}`` while the process
  serves at all (a liveness probe: restart the container when it stops answering).
* ``/readyz`` answers 200 ``{"status": "ready", ...}`` once the embedding model is loaded and the pipelines are
  built on the store, else 503 ``{"status": "starting", ...}`` (a readiness probe: send no traffic before); and
  while one of its requirements fails (the work journal cannot take writes, Socket Mode's link is down), 503
  ``{"status": "not_ready", "waiting_for": [...]}``, back to 200 by itself once they hold again.

* ``/metrics`` answers the Prometheus metrics (:mod:`connectors.metrics`) in Prometheus' text format.

Slack's HTTP server and the Teams aiohttp app serve the health paths on their own port, never ``/metrics``: that
port faces the internet. The metrics are served by :func:`serve_health` only: on ``citebot serve ...
--metrics-port P``, or on Slack's Socket Mode health port (``--health-port``, which takes no events); a bot port
is given ``Health.metrics_elsewhere()``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bot.version import version

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
METRICS_PATH = "/metrics"
JSON = "application/json"


class Health:
    """Whether the bot is ready; thread-safe."""

    def __init__(self, platform: str, *, ready: bool = False, metrics: bool = True) -> None:
        self.platform = platform
        self.metrics = metrics  # whether /metrics is served beside the health paths
        self._ready = threading.Event()
        if ready:
            self._ready.set()
        self._requires: list[tuple[str, Callable[[], bool]]] = []

    def metrics_elsewhere(self) -> Health:
        """This health on a port without /metrics (the bot's own, when metrics have a port of their own)."""
        view = Health(self.platform, metrics=False)
        view._ready = self._ready
        view._requires = self._requires
        return view

    def require(self, name: str, holds: Callable[[], bool]) -> None:
        """Ready only while ``holds()`` (cheap: read on every probe and every HTTP event), e.g. the journal."""
        self._requires.append((name, holds))

    def waiting_for(self) -> list[str]:
        """The requirements that do not hold now."""
        return [name for name, holds in self._requires if not holds()]

    def set_ready(self) -> None:
        self._ready.set()

    def set_not_ready(self) -> None:
        """Stopping (SIGTERM): probes and load balancers send nothing new here."""
        self._ready.clear()

    @property
    def ready(self) -> bool:
        return self._ready.is_set() and not self.waiting_for()

    def _body(self, status: str) -> dict[str, Any]:
        return {"status": status, "platform": self.platform, "ready": self.ready, "version": version()}

    def live(self) -> tuple[int, dict[str, Any]]:
        return 200, self._body("ok")

    def readiness(self) -> tuple[int, dict[str, Any]]:
        if not self._ready.is_set():
            return 503, self._body("starting")
        waiting = self.waiting_for()
        if waiting:
            return 503, {**self._body("not_ready"), "waiting_for": waiting}
        return 200, self._body("ready")

    def respond(self, path: str) -> tuple[int, bytes, str] | None:
        """(status, body, content type) for a health path or /metrics, None for any other path."""
        path = path.partition("?")[0]
        if path == METRICS_PATH and self.metrics:
            from connectors.metrics import exposition

            return 200, *exposition()
        if path == HEALTH_PATH:
            status, body = self.live()
        elif path == READY_PATH:
            status, body = self.readiness()
        else:
            return None
        return status, json.dumps(body).encode(), JSON


def serve_health(health: Health, host: str, port: int) -> ThreadingHTTPServer:
    """A small HTTP server with only the health paths and /metrics (``port=0`` picks a free one); call
    ``serve_forever``."""

    class Handler(BaseHTTPRequestHandler):
        timeout = 10

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - probes every few seconds: no log
            return

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            found = health.respond(self.path)
            status, body, content_type = found if found is not None else (404, b"", JSON)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

    return Server((host, port), Handler)
