"""structlog set-up: readable on a terminal, JSON lines otherwise.

Log events carry ids, counts and timings only: never tokens, message text or document text.
Bind ``platform``, ``scope``, ``user``, ``event_id``, ``file_id`` per request with
``structlog.contextvars.bind_contextvars``.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog

_SECRET_KEYS = ("token", "secret", "password", "api_key", "authorization")


def _drop_secrets(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    for key in list(event):
        if any(s in key.lower() for s in _SECRET_KEYS):
            event[key] = "[redacted]"
    return event


def _stderr_logger(*_args: Any) -> structlog.PrintLogger:
    """Resolve ``sys.stderr`` when a logger is made, not once at set-up (tests swap the stream)."""
    return structlog.PrintLogger(sys.stderr)


def configure_logging(level: str = "info", fmt: str = "auto") -> None:
    """Configure structlog and the standard library loggers once per process."""
    os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
    json_out = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    lvl = getattr(logging, level.upper())
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _drop_secrets,
        structlog.processors.format_exc_info if json_out else structlog.dev.set_exc_info,
    ]
    # plain tracebacks: rich ones print local variables, which can hold tokens or document text
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json_out
        else structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback)
    )
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(lvl, logging.WARNING), stream=sys.stderr, format="%(name)s: %(message)s")
    # third-party chatter that can carry URLs with tokens or whole payloads
    for noisy in ("httpx", "urllib3", "elastic_transport", "slack_bolt", "slack_sdk", "botbuilder", "msrest"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
