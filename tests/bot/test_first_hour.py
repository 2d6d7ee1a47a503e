"""A new user's first hour (issue 29, and issue 27's quiet terminal): each command run as people run it, through
the real ``citebot`` entry point in a fresh interpreter (a pseudo-terminal where what a terminal shows matters),
and what they see on stdout and stderr checked."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.pdfs import Line, make_pdf

REPO = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
LOG_LINE = re.compile(r"\[(debug|info|warning)\s*\]|\"level\": \"(debug|info)\"|\b(info|debug)\s+\]")


def write_report(path: Path, title: str, pages: int = 1) -> Path:
    """A report of ``pages`` pages at ``path``: each a bold heading over 36 numbered lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(make_pdf([
        [Line(f"{title} section {p + 1}", bold=True, size=12)]
        + [Line(f"{title}: line {i} of page {p + 1}; the notice period is {i + p} days.", size=10,
                gap=30 if i == 0 else None) for i in range(36)]
        for p in range(pages)
    ], leading=18, top=790))
    return path


def env(data_dir: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CITEBOT_", "SLACK_", "TEAMS_", "OPENAI_"))}
    return {**base, "CITEBOT_DATA_DIR": str(data_dir), "CITEBOT_OCR_ENABLED": "false", "PYTHONPATH": str(REPO),
            "CITEBOT_MODELS_DIR": os.environ["CITEBOT_MODELS_DIR"], **extra}


def citebot(*args: str, cwd: Path, data_dir: Path, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], cwd=cwd, env=env(data_dir, **extra),
                          capture_output=True, text=True, timeout=timeout, check=False)


def in_terminal(*args: str, cwd: Path, data_dir: Path, timeout: float = 300) -> tuple[int, str]:
    """Run ``citebot ARGS`` with stdout and stderr on a pseudo-terminal; everything it showed, and its status."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli.main", *args], cwd=cwd,
                            env={**env(data_dir), "COLUMNS": "120", "TERM": "xterm"},
                            stdin=follower, stdout=follower, stderr=follower, close_fds=True)
    os.close(follower)
    shown = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the other side closed: the process is done
                break
            if not chunk:
                break
            shown += chunk
        elif proc.poll() is not None:
            break
    os.close(leader)
    status = proc.wait(timeout=30)
    return status, ANSI.sub("", shown.decode("utf-8", "replace"))


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    write_report(tmp_path / "a" / "report.pdf", "Alpha")
    write_report(tmp_path / "b" / "report.pdf", "Beta")
    return tmp_path


# --- issue 27 item 1: a quiet terminal ----------------------------------------------------------------------------


@pytest.mark.slow
def test_ingest_ask_and_eval_show_no_log_lines_in_a_terminal(workdir: Path) -> None:
    data = workdir / "data"
    status, shown = in_terminal("ingest", "a", cwd=workdir, data_dir=data)
    assert status == 0, shown
    assert "a/report.pdf: indexed" in shown and "(1 page," in shown  # "1 page", not "1 pages"
    assert not LOG_LINE.search(shown), shown

    status, shown = in_terminal("ask", "What is the notice period on line 3 of page 1?", cwd=workdir, data_dir=data)
    assert status == 0, shown
    assert "Alpha" in shown and "a/report.pdf" in shown
    assert not LOG_LINE.search(shown) and "confidence" not in shown, shown

    cases = [{"id": f"c{i}", "question": f"What is the notice period on line {i}?", "category": "lookup",
              "sources": [{"doc": "report.pdf", "pages": [1]}]} for i in range(3)]
    (workdir / "set.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    status, shown = in_terminal("eval", "run", "--set", "set.jsonl", "--docs", "a", "--mode", "bm25", "--out",
                                str(workdir / "run"), cwd=workdir, data_dir=data)
    assert status == 0, shown
    assert not LOG_LINE.search(shown), shown
    assert "bm25 cases 3/3" in shown  # the progress line, drawn in place

    # -v brings the log back, for whoever wants it
    status, shown = in_terminal("ask", "What is the notice period?", "-v", cwd=workdir, data_dir=data)
    assert status == 0 and re.search(r"\[info\s*\] answer", shown), shown


def test_help_starts_with_what_people_do_first(tmp_path: Path) -> None:
    proc = citebot("--help", cwd=tmp_path, data_dir=tmp_path / "data")
    assert proc.returncode == 0
    assert "``" not in proc.stdout  # no raw docstring
    commands = re.findall(r"^    (\w+) ", proc.stdout, flags=re.M)
    assert commands[:4] == ["demo", "ingest", "ask", "docs"]
    assert "examples" in proc.stdout and 'citebot ask "' in proc.stdout


# --- issue 29 -----------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_script_without_a_main_guard_ingests_once_and_logs_at_its_level(tmp_path: Path) -> None:
    """Rows 1 and 14: the library from a plain script. The reader's child never imports the script, so it runs
    once and the PDF is read; the configured level (info) holds, no debug lines."""
    pdf = write_report(tmp_path / "policy.pdf", "Policy")
    script = tmp_path / "use_citebot.py"
    script.write_text(
        "from pathlib import Path\n"
        "from connectors.settings import Settings\n"
        "from pipelines.service import CitebotService\n"
        "print('top-level code ran', flush=True)\n"
        "service = CitebotService(Settings(data_dir=Path('data')))\n"
        f"result = service.ingest(Path({str(pdf)!r}).read_bytes(), file_name='policy.pdf', scope='local')\n"
        "print('result:', result.status, result.error, flush=True)\n",
        encoding="utf-8",
    )
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=env(tmp_path / "data", CITEBOT_LOG_LEVEL="info", CITEBOT_LOG_FORMAT="json"),
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("top-level code ran") == 1
    assert "result: indexed None" in proc.stdout
    levels = {json.loads(line)["level"] for line in proc.stderr.splitlines() if line.startswith("{")}
    assert "debug" not in levels and "info" in levels
    assert "posthog" not in proc.stderr  # no telemetry from a library user's script either


def test_ask_json_on_an_empty_scope_prints_json(tmp_path: Path) -> None:
    """Row 2: a script reading stdout gets an object; the hint names the command that fills that scope."""
    proc = citebot("ask", "anything?", "--scope", "empty", "--json", cwd=tmp_path, data_dir=tmp_path / "data")
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["error"] == "no_documents" and out["scopes"] == ["empty"]
    assert "citebot ingest PATH --scope empty" in out["message"] and "demo" not in out["message"]


@pytest.mark.slow
def test_two_files_of_one_name_are_both_kept_and_forget_takes_the_path(workdir: Path) -> None:
    """Rows 3 and 6: a/report.pdf and b/report.pdf are different files; both stay, the second under a free name
    said out loud and in JSON; the same path again replaces its own earlier version; forget takes the path."""
    data = workdir / "data"
    first = citebot("ingest", "a/report.pdf", cwd=workdir, data_dir=data)
    assert first.returncode == 0 and "a/report.pdf: indexed" in first.stdout
    second = citebot("ingest", "b/report.pdf", "--json", cwd=workdir, data_dir=data)
    row = json.loads(second.stdout)
    assert row["status"] == "indexed" and row["indexed_as"] == "report (2).pdf" and row["renamed_from"] == "report.pdf"
    listed = json.loads(citebot("docs", "--json", cwd=workdir, data_dir=data).stdout)
    assert sorted(d["file"] for d in listed) == ["report (2).pdf", "report.pdf"]

    write_report(workdir / "b" / "report.pdf", "Beta, second edition")
    again = citebot("ingest", ".", cwd=workdir, data_dir=data)
    assert again.returncode == 0, again.stderr
    assert "a/report.pdf: unchanged" in again.stdout
    assert "b/report.pdf: indexed" in again.stdout and "report (2).pdf" in again.stdout
    listed = json.loads(citebot("docs", "--json", cwd=workdir, data_dir=data).stdout)
    assert sorted(d["file"] for d in listed) == ["report (2).pdf", "report.pdf"]  # replaced its own, kept a's

    gone = citebot("forget", "b/report.pdf", cwd=workdir, data_dir=data)
    assert gone.returncode == 0 and "Deleted report (2).pdf" in gone.stdout
    listed = json.loads(citebot("docs", "--json", cwd=workdir, data_dir=data).stdout)
    assert [d["file"] for d in listed] == ["report.pdf"]
    assert "a/report.pdf" in listed[0]["source_url"]


@pytest.mark.parametrize("command", [["docs"], ["forget", "x.pdf"], ["ask", "q?"], ["ingest", "."]])
@pytest.mark.parametrize("scope", ["", " "])
def test_blank_scopes_are_refused_with_one_friendly_line(tmp_path: Path, command: list[str], scope: str) -> None:
    """Row 4."""
    proc = citebot(*command, "--scope", scope, cwd=tmp_path, data_dir=tmp_path / "data")
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith("a scope is required: --scope must name one (e.g. 'local'), not be blank")
    assert "Error" not in proc.stderr and not proc.stdout


@pytest.mark.slow
def test_ctrl_c_during_ingest_says_one_line_and_keeps_what_was_indexed(tmp_path: Path) -> None:
    """Row 5: a real SIGINT to the process group, as a terminal's Ctrl-C sends it."""
    write_report(tmp_path / "small.pdf", "Small")
    write_report(tmp_path / "large.pdf", "Large", pages=60)
    data = tmp_path / "data"
    # Ctrl-C reaches a command in the foreground; the suite itself may run where SIGINT is ignored (a job started
    # with `&` from a script), which the child would inherit and then never see the Ctrl-C
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli.main", "ingest", "small.pdf", "large.pdf"], cwd=tmp_path,
                            env=env(data), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("small.pdf: indexed"), first
    time.sleep(1.0)  # into the large file
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert err.strip() == "citebot ingest: interrupted; the file listed above is done, nothing of large.pdf (in " \
                          "progress) is kept"
    listed = json.loads(citebot("docs", "--json", cwd=tmp_path, data_dir=data).stdout)
    assert [d["file"] for d in listed] == ["small.pdf"]


@pytest.mark.slow
def test_ctrl_c_with_two_files_in_progress_keeps_neither(tmp_path: Path) -> None:
    """Two workers, each in the middle of a file, when Ctrl-C comes: one line naming both, and neither is kept."""
    write_report(tmp_path / "north.pdf", "North", pages=60)
    write_report(tmp_path / "south.pdf", "South", pages=60)
    data = tmp_path / "data"
    command = [sys.executable, "-m", "bot.cli.main", "ingest", "north.pdf", "south.pdf", "--workers", "2"]
    proc = subprocess.Popen(command, cwd=tmp_path, env=env(data), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while len(_reading_children(proc.pid)) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(_reading_children(proc.pid)) == 2, "the two files were never read at once"
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip() == "citebot ingest: interrupted; nothing was indexed (nothing of north.pdf, south.pdf, in " \
                          "progress, is kept)"
    assert out == ""
    assert json.loads(citebot("docs", "--json", cwd=tmp_path, data_dir=data).stdout) == []


def _fork_server_of(pgid: int) -> int | None:
    """The pid of multiprocessing's fork server in process group ``pgid`` (the reader's), if it has started."""
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmdline = (p / "cmdline").read_bytes()
            stat = (p / "stat").read_text()
        except OSError:
            continue
        if b"multiprocessing.forkserver import main" in cmdline and int(stat.rsplit(")", 1)[1].split()[2]) == pgid:
            return int(p.name)
    return None


def _reading_children(pgid: int) -> list[int]:
    """The reading children of the fork server in process group ``pgid``: one per file being read."""
    server = _fork_server_of(pgid)
    children = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
        except OSError:
            continue
        if server is not None and int(stat.rsplit(")", 1)[1].split()[1]) == server:
            children.append(int(p.name))
    return children


@pytest.mark.slow
def test_ctrl_c_while_the_reader_process_starts_says_one_line(tmp_path: Path) -> None:
    """Ctrl-C pressed early, while the fork server that starts the reading child is still importing: the terminal
    sends SIGINT to the whole process group, and only the command may answer it, with its one line (the server
    printed a KeyboardInterrupt traceback of its own under it)."""
    write_report(tmp_path / "large.pdf", "Large", pages=20)
    data = tmp_path / "data"
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli.main", "ingest", "large.pdf"], cwd=tmp_path,
                            env=env(data), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while _fork_server_of(proc.pid) is None and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _fork_server_of(proc.pid) is not None, "the fork server never started"
    os.killpg(proc.pid, signal.SIGINT)  # at once: the server takes about a second to import its preload
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().startswith("citebot ingest: interrupted; nothing was indexed")  # none was listed
    assert out == ""
    assert json.loads(citebot("docs", "--json", cwd=tmp_path, data_dir=data).stdout) == []


@pytest.mark.slow
def test_a_wrong_model_path_is_named_with_its_setting(tmp_path: Path) -> None:
    """Row 12: our own error's text, not `failed with EmbeddingModelError at ...`; reindex --check says the
    model is missing rather than that a reindex is needed."""
    write_report(tmp_path / "policy.pdf", "Policy")
    assert citebot("ingest", "policy.pdf", cwd=tmp_path, data_dir=tmp_path / "data").returncode == 0
    for args in (["ask", "what?"], ["reindex", "--check"]):
        proc = citebot(*args, cwd=tmp_path, data_dir=tmp_path / "data", CITEBOT_MODEL_PATH=str(tmp_path / "wrong"))
        assert proc.returncode == 1
        assert f"no embedding model at {tmp_path / 'wrong'}" in proc.stderr and "CITEBOT_MODEL_PATH" in proc.stderr
        assert "failed with" not in proc.stderr and "Reindex needed" not in proc.stdout


def test_an_unusable_data_directory_is_named(tmp_path: Path) -> None:
    """Issue 27 item 7: the path and the setting, not `FileNotFoundError at connectors/stores.py`."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    proc = citebot("docs", cwd=tmp_path, data_dir=blocker / "data")
    assert proc.returncode == 1
    assert f"the data directory {blocker / 'data'} cannot be used" in proc.stderr
    assert "CITEBOT_DATA_DIR" in proc.stderr and "failed with" not in proc.stderr
