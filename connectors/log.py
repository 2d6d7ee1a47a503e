"""structlog set-up: readable on a terminal, JSON lines otherwise.

Log events carry ids, counts and timings only: never tokens, message text or document text.
Bind ``platform``, ``scope``, ``user``, ``event_id``, ``file_id`` per request with
``structlog.contextvars.bind_contextvars``.

Exceptions are logged by type and place only (:func:`error_fields`), never by message: a message can hold
whatever the failing library put there, such as a URL with a password in it. That holds for our own
``log.error(..., **error_fields(e))``, for a stray ``log.exception(...)`` (the ``exc_info`` is replaced before
rendering) and for the tracebacks other libraries log through the standard ``logging`` module.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any

import structlog

_SECRET_KEYS = ("token", "secret", "password", "api_key", "authorization")
_ROOT = Path(__file__).resolve().parents[1]
_OUR_PACKAGES = tuple(str(_ROOT / p) + os.sep for p in ("bot", "pipelines", "connectors", "eval"))


def error_location(tb: TracebackType | None) -> str:
    """``file:line function`` of the innermost frame in our code (else the innermost frame), "" without one."""
    frames = traceback.extract_tb(tb)
    ours = [f for f in frames if f.filename.startswith(_OUR_PACKAGES)]
    if not frames:
        return ""
    frame = (ours or frames)[-1]
    path = Path(frame.filename)
    name = path.relative_to(_ROOT).as_posix() if frame.filename.startswith(_OUR_PACKAGES) else path.name
    return f"{name}:{frame.lineno} {frame.name}"


def error_fields(error: BaseException) -> dict[str, str]:
    """What a log line may say about an exception: its type and where it was raised, never its message."""
    return {"error": type(error).__name__, "where": error_location(error.__traceback__)}


def _exception(exc_info: Any) -> BaseException | None:
    if isinstance(exc_info, BaseException):
        return exc_info
    if isinstance(exc_info, tuple) and len(exc_info) == 3 and isinstance(exc_info[1], BaseException):
        return exc_info[1]
    if exc_info is True:
        return sys.exc_info()[1]
    return None


def _exc_info_to_location(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    """``log.exception(...)`` / ``exc_info=...``: keep the exception's type and place, drop its text."""
    exc_info = event.pop("exc_info", None)
    error = _exception(exc_info)
    if error is not None:
        for key, value in error_fields(error).items():
            event.setdefault(key, value)
    event.pop("stack_info", None)
    return event


class _NoExceptionTextFormatter(logging.Formatter):
    """Standard-library log records (other libraries' warnings and errors) without exception messages or
    tracebacks: the type and place only."""

    def format(self, record: logging.LogRecord) -> str:
        cached = record.exc_text  # another handler may have cached the full traceback on the record
        record.exc_text = None
        try:
            return super().format(record)
        finally:
            record.exc_text = cached

    def formatException(self, ei: Any) -> str:  # noqa: N802 - logging's naming
        error = _exception(ei)
        if error is None:
            return ""
        fields = error_fields(error)
        return f"[{fields['error']} at {fields['where']}]" if fields["where"] else f"[{fields['error']}]"

    def formatStack(self, stack_info: str) -> str:  # noqa: N802
        return ""


_HANDLER_MARK = "_citebot_handler"


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
        _exc_info_to_location,  # no traceback is rendered: its messages and locals can hold secrets
    ]
    renderer: Any = structlog.processors.JSONRenderer() if json_out else structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_NoExceptionTextFormatter("%(name)s: %(message)s"))
    setattr(handler, _HANDLER_MARK, True)
    root.addHandler(handler)
    root.setLevel(max(lvl, logging.WARNING))
    # third-party chatter that can carry URLs with tokens or whole payloads
    for noisy in ("httpx", "urllib3", "elastic_transport", "slack_bolt", "slack_sdk", "botbuilder", "msrest"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
