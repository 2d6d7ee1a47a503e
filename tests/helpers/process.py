"""``citebot serve slack`` / ``citebot serve teams`` run as people run them: the command line in a process group of
its own, on one data directory, killed as the OOM killer or a node failure would."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from tests.helpers import REPO

# The caller's own settings never reach the bot: only what a test passes does.
_NOT_INHERITED = ("CITEBOT_", "SLACK_", "TEAMS_", "Microsoft", "OPENAI_")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class CitebotProcess:
    """``citebot ARGS --host 127.0.0.1 --port N`` in its own process group, its output in ``log``."""

    def __init__(self, args: list[str], data_dir: Path, log: Path, env: dict[str, str], *,
                 launcher: Sequence[str] = ()) -> None:
        """``launcher``: a command the bot's command line is handed to (``tests.helpers.mounts.DataDisk``)."""
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        full_env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(_NOT_INHERITED)},
            "CITEBOT_MODELS_DIR": os.environ.get("CITEBOT_MODELS_DIR", str(data_dir / "models")),  # one export
            "PYTHONPATH": str(REPO), "HAYSTACK_TELEMETRY_ENABLED": "False",
            "CITEBOT_DATA_DIR": str(data_dir), "CITEBOT_OCR_ENABLED": "false", "CITEBOT_LOG_FORMAT": "json",
            **env,
        }
        self.log = log
        with log.open("a") as out:
            self.proc = subprocess.Popen(
                [*launcher, sys.executable, "-m", "bot.cli.main", *args,
                 "--host", "127.0.0.1", "--port", str(self.port)],
                stdout=out, stderr=subprocess.STDOUT, env=full_env, cwd=data_dir.parent, start_new_session=True,
            )

    def wait_ready(self, timeout: float = 600.0) -> float:
        """Until ``/readyz`` says 200; when it did (``time.monotonic()``). The first bot of a test run exports the
        embedding model (into the run's shared models directory) before it is ready: minutes on a loaded machine."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the bot exited: {self.log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"{self.base}/readyz", timeout=10) as resp:  # noqa: S310 - loopback
                    if resp.status == 200:
                        return time.monotonic()
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"not ready in {timeout} s: {self.log.read_text()[-3000:]}")

    def logged(self, event: str) -> int:
        """How many JSON log lines name ``event``."""
        return self.log.read_text().count(f'"event": "{event}"')

    def kill(self) -> None:
        """SIGKILL to the whole process group (the OOM killer, a node failure, an eviction past its grace)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        """SIGTERM, as a rolling update sends it; SIGKILL if it has not ended 30 s later."""
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
