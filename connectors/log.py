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
import re
import sys
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any

import structlog

from connectors.platforms import SDK_PACKAGES

_SECRET_KEYS = ("token", "secret", "password", "api_key", "authorization")
# Secrets by their look, wherever they stand in a value: Slack tokens, bearer credentials, OpenAI-style keys, the
# signature or token parameter of a signed URL, and the password in a URL's user part.
_SECRET_VALUES = [
    (re.compile(r"\bxox[abposre]-[A-Za-z0-9-]+|\bxapp-[A-Za-z0-9-]+"), "[redacted]"),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+"), r"\1 [redacted]"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{12,}"), "[redacted]"),
    (re.compile(r"(?i)([?&](?:sig|signature|x-amz-signature|x-goog-signature|token|access_token|code|key|"
                r"api_key|tempauth|se)=)[^&\s\"']+"), r"\1[redacted]"),
    (re.compile(r"(://[^/\s:@]+:)[^@\s/]+@"), r"\1[redacted]@"),
]
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


_HANDLER_MARK = "_citebot_handler"


def redact(value: Any) -> Any:
    """``value`` with anything that looks like a credential replaced by ``[redacted]`` (strings, and the strings
    inside lists, tuples and dicts)."""
    if isinstance(value, str):
        for pattern, replacement in _SECRET_VALUES:
            value = pattern.sub(replacement, value)
        return value
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v) for v in value)
    return value


def _drop_secrets(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    for key in list(event):
        if key.startswith("_"):  # structlog's own bookkeeping (the stdlib record)
            continue
        if any(s in key.lower() for s in _SECRET_KEYS):
            event[key] = "[redacted]"
        else:
            event[key] = redact(event[key])
    return event


def _library_record(_logger: Any, _name: str, event: Any) -> Any:
    """A record another library logged through the standard library: name its logger, as our lines name their
    event."""
    record = event.get("_record")
    if record is not None:
        event.setdefault("logger", record.name)
    return event


def _stderr_logger(*_args: Any) -> structlog.PrintLogger:
    """Resolve ``sys.stderr`` when a logger is made, not once at set-up (tests swap the stream)."""
    return structlog.PrintLogger(sys.stderr)


def configure_logging(level: str = "info", fmt: str = "auto", *, stdlib: bool = True) -> None:
    """Configure structlog and the standard library loggers (other libraries' records go through the same
    redaction and renderer: every line JSON in JSON mode). Safe to call again: the last call wins."""
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
    renderer: Any = (structlog.processors.JSONRenderer() if json_out
                     else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()))
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
    if not stdlib:  # the standard library's logging is someone else's (a library user set it up)
        return
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[_library_record, *processors],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    ))
    setattr(handler, _HANDLER_MARK, True)
    root.addHandler(handler)
    root.setLevel(max(lvl, logging.WARNING))
    # third-party chatter that can carry URLs with tokens or whole payloads
    for noisy in ("httpx", "urllib3", "elastic_transport", *SDK_PACKAGES):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def is_configured() -> bool:
    """Whether :func:`configure_logging` ran in this process (a library user may never call it)."""
    return any(getattr(h, _HANDLER_MARK, False) for h in logging.getLogger().handlers)


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
