"""The runtime image carries no torch: the bots run the embedding model on ONNX Runtime, and torch is needed only
to make the ONNX export, at build time.

No Docker daemon runs where the tests do, so the Dockerfile is read (torch leaves the venv the runtime stage copies,
after the export, and the build checks the exports encode without it), and what the image runs is run here with
``import torch`` failing, as it fails in the image: an ingest, a question, and a bot until it is ready.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli.main import main
from tests.helpers.pdfs import LEAVE_PAGES, make_pdf

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "deploy" / "Dockerfile"

# `citebot ARGS...` in a process where torch cannot be imported; with a URL first, the process ends (exit 0) once
# that URL answers 200, for a server.
WITHOUT_TORCH = """
import importlib.abc, os, sys, threading, time, urllib.request

class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] == "torch":
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)

sys.meta_path.insert(0, NoTorch())
args = sys.argv[1:]
if args[0].startswith("http://"):
    url, args = args[0], args[1:]

    def watch():
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        print("READY", flush=True)
                        os._exit(0)
            except OSError:
                time.sleep(0.2)
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()
from bot.cli.main import main
sys.exit(main(args))
"""


def _stages(text: str) -> dict[str, str]:
    """Each ``FROM … AS name`` stage's instructions, continuation lines joined, comments dropped."""
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    joined = re.sub(r"\\\n\s*", " ", code)
    parts = re.split(r"^FROM\s+\S+\s+AS\s+(\w+)\s*$", joined, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_torch_leaves_the_venv_the_runtime_stage_copies_after_the_export() -> None:
    stages = _stages(DOCKERFILE.read_text(encoding="utf-8"))
    build, runtime = stages["build"], stages["runtime"]
    runs = re.findall(r"^RUN (.*)$", build, re.MULTILINE)
    export = next(i for i, r in enumerate(runs) if "citebot models prepare" in r)
    uninstall = next(i for i, r in enumerate(runs) if re.search(r"pip uninstall -y torch\b", r))
    assert uninstall > export  # the export needs torch
    assert not any("pip install" in r for r in runs[uninstall:])  # nothing puts it (or a package needing it) back
    check = runs[uninstall]
    assert '! python -c "import torch"' in check  # the build fails if torch is still importable
    assert "embed(['offline check']" in check and "'onnx-int8', 'onnx'" in check  # both exports encode without it
    assert "COPY --from=build /opt/citebot /opt/citebot" in runtime
    assert "pip install" not in runtime and "torch" not in runtime


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _without_torch(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CITEBOT_LOG_LEVEL": "warning"}
    return subprocess.run([sys.executable, "-c", WITHOUT_TORCH, *args], capture_output=True, text=True, env=env,
                          timeout=180, check=False)


@pytest.mark.slow
def test_ingest_ask_and_a_bot_run_with_torch_not_importable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITEBOT_OCR_ENABLED", "false")
    # set-up (the image's build stage): the ONNX exports, made where torch is installed
    assert main(["models", "prepare", "--backend", "onnx-int8"]) == 0
    (tmp_path / "handbook.pdf").write_bytes(make_pdf(LEAVE_PAGES))

    ingest = _without_torch("ingest", "handbook.pdf")
    assert ingest.returncode == 0, ingest.stderr[-2000:]
    assert "handbook.pdf: indexed" in ingest.stdout

    ask = _without_torch("ask", "How many weeks of parental leave?")
    assert ask.returncode == 0, ask.stderr[-2000:]
    assert "eighteen weeks of paid parental leave" in ask.stdout and "[1] │" in ask.stdout
    assert ask.stderr == ""

    port = _free_port()
    serve = _without_torch(f"http://127.0.0.1:{port}/readyz", "serve", "teams", "--insecure-local", "--port",
                           str(port))
    assert serve.returncode == 0 and "READY" in serve.stdout, serve.stdout[-500:] + serve.stderr[-2000:]


def test_the_torch_backend_without_torch_says_what_to_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """CITEBOT_EMBEDDING_BACKEND=torch in the image: a sentence naming the backends it has, not an import error."""
    monkeypatch.setenv("CITEBOT_EMBEDDING_BACKEND", "torch")
    monkeypatch.setenv("CITEBOT_OCR_ENABLED", "false")
    Path("report.pdf").write_bytes(make_pdf([["1 Notice", "The notice period is ninety days for every employee."]]))
    proc = _without_torch("ingest", "report.pdf")
    assert proc.returncode != 0
    assert "the torch embedding backend needs torch, which is not installed here" in proc.stdout + proc.stderr
    assert "CITEBOT_EMBEDDING_BACKEND=onnx-int8" in proc.stdout + proc.stderr
    assert "ModuleNotFoundError" not in proc.stdout + proc.stderr
