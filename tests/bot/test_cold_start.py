"""The bots on the ONNX path start without torch or transformers (most of a cold start otherwise).

Each bot runs for real (``citebot serve ...``) in a fresh process; a watcher thread in that process waits for
the health route, then prints which heavy modules the process has imported and ends it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from connectors import embedding as E
from connectors.settings import Settings

REPO = Path(__file__).resolve().parents[2]

WATCH_THEN_SERVE = """
import os, sys, threading, time, urllib.request
url = sys.argv[1]
def watch():
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    from connectors.embedding import heavy_modules_loaded
                    print('READY HEAVY', heavy_modules_loaded(), flush=True)
                    os._exit(0)
        except OSError:
            time.sleep(0.2)
    print('NOT READY', flush=True)
    os._exit(3)
threading.Thread(target=watch, daemon=True).start()
from bot.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_until_ready(tmp_path: Path, models_dir: Path, url: str, argv: list[str], **env_extra: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEBOT_", "SLACK_", "TEAMS_", "OPENAI_"))}
    env.update({"CITEBOT_DATA_DIR": str(tmp_path / "data"), "CITEBOT_MODELS_DIR": str(models_dir),
                "CITEBOT_LOG_LEVEL": "warning", "PYTHONPATH": str(REPO), **env_extra})
    settings = Settings(data_dir=tmp_path / "data", models_dir=models_dir)
    E.prepare_onnx(settings.resolved_model_path, models_dir, backend="onnx")  # the export is made at set-up
    proc = subprocess.run([sys.executable, "-c", WATCH_THEN_SERVE, url, *argv], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=180, check=False)
    assert "READY" in proc.stdout, proc.stdout[-1000:] + proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.slow
def test_serve_slack_on_the_onnx_path_imports_no_torch(tmp_path, shared_models_dir):
    from eval.fakes.slack_api import BOT_TOKEN, SIGNING_SECRET, FakeSlack

    port = _free_port()
    with FakeSlack() as fake:
        out = _serve_until_ready(
            tmp_path, shared_models_dir, f"http://127.0.0.1:{port}/readyz",
            ["serve", "slack", "--http", "--host", "127.0.0.1", "--port", str(port)],
            SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, CITEBOT_SLACK_API_URL=fake.url,
        )
    assert "READY HEAVY []" in out


@pytest.mark.slow
def test_serve_teams_on_the_onnx_path_imports_no_torch(tmp_path, shared_models_dir):
    port = _free_port()
    out = _serve_until_ready(
        tmp_path, shared_models_dir, f"http://127.0.0.1:{port}/readyz",
        ["serve", "teams", "--insecure-local", "--host", "127.0.0.1", "--port", str(port)],
    )
    assert "READY HEAVY []" in out
