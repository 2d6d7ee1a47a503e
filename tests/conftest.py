"""Shared fixtures. No test reaches the network: sockets may connect to loopback only."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_loopback(address: object) -> bool:
    if isinstance(address, tuple) and address:
        host = address[0]
        if host in ("localhost", ""):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return isinstance(address, (str, bytes))  # AF_UNIX paths


class NetworkBlockedError(RuntimeError):
    pass


def _guarded_connect(self: socket.socket, address: object) -> None:
    if not _is_loopback(address):
        raise NetworkBlockedError(f"test tried to reach {address!r}; only 127.0.0.1 is allowed")
    return _real_connect(self, address)  # type: ignore[arg-type]


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    if not _is_loopback(address):
        raise NetworkBlockedError(f"test tried to reach {address!r}; only 127.0.0.1 is allowed")
    return _real_connect_ex(self, address)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _block_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    yield


@pytest.fixture(scope="session")
def shared_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ONNX export of the packaged model for the whole run (each test's data dir would make its own)."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shared_models_dir: Path) -> None:
    """Tests never see the developer's credentials or data dir."""
    for var in list(os.environ):
        vendor = var.startswith(("CITEBOT_", "SLACK_", "TEAMS_", "OPENAI_", "MicrosoftApp"))
        if vendor and var != "CITEBOT_TEST_ELASTICSEARCH_URL":
            monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CITEBOT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CITEBOT_MODELS_DIR", str(shared_models_dir))
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Tests that run ``citebot`` in-process (``main([...])``) point structlog and the root logger at that
    test's captured stderr; restore them afterwards, or a later test logs into a closed stream."""
    import logging

    import structlog

    saved = structlog.get_config()
    handlers = list(logging.getLogger().handlers)
    yield
    structlog.configure(**saved)
    root = logging.getLogger()
    for h in root.handlers[:]:
        if h not in handlers:
            root.removeHandler(h)
