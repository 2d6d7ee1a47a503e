"""The command line as an admin uses it: version, tables, forgetting by name, local paths in citations,
refusals worded for the terminal, quiet ends when the reader goes away, one clear line when the store is down."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli.main import main
from tests.helpers.pdfs import make_pdf

REPO = Path(__file__).resolve().parents[2]
LEAVE_LINES = [
    "Harbourside Staff Handbook",
    "4 Leave",
    "4.2 Parental leave",
    "Employees may take eighteen weeks of paid parental leave after the birth or adoption of a child.",
    "Parental leave must be requested from the people team at least four weeks in advance.",
]


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEBOT_", "SLACK_", "TEAMS_", "OPENAI_"))}
    return {**env, "CITEBOT_DATA_DIR": str(data_dir), "CITEBOT_OCR_ENABLED": "false", "PYTHONPATH": str(REPO),
            "CITEBOT_LOG_LEVEL": "warning"}  # so stderr holds only what went wrong


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("citebot ") and out.split()[1][0].isdigit()


@pytest.mark.slow
def test_docs_table_local_paths_terminal_refusal_and_forget_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CITEBOT_OCR_ENABLED", "false")
    (tmp_path / "pdfs").mkdir()
    (tmp_path / "pdfs" / "leave policy.pdf").write_bytes(make_pdf([LEAVE_LINES]))
    assert main(["ingest", "pdfs"]) == 0
    capsys.readouterr()

    # docs: a table, not Python reprs; --stats adds a second table
    assert main(["docs", "--stats"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["file", "pages", "chunks", "added", "doc", "id"]
    assert lines[2].startswith("leave policy.pdf")
    assert "chunk statistic" in out and "tokens per chunk" in out and "min " in out
    assert "{" not in out and "'" not in out

    # ask: the citation names the local file the answer came from (relative to here), the quote verbatim
    assert main(["ask", "How many weeks of parental leave do employees get?"]) == 0
    out = capsys.readouterr().out
    assert "eighteen weeks" in out
    assert "— pdfs/leave policy.pdf · p. 1" in out

    # a question the PDFs don't answer: the refusal speaks of the indexed PDFs, not of a chat channel
    assert main(["ask", "Which football club won the cup final on penalties?"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("The indexed PDFs don't seem to answer that.") and "channel" not in out
    assert main(["ask", "Which football club won the cup final on penalties?", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["text"].startswith("The indexed PDFs don't seem to answer that.")

    # forget takes the file name docs shows (the doc id still works too)
    assert main(["forget", "Leave Policy.pdf"]) == 0
    assert capsys.readouterr().out.startswith("Deleted leave policy.pdf (")
    assert main(["forget", "leave policy.pdf"]) == 1
    assert "No document “leave policy.pdf” in scope local" in capsys.readouterr().out
    assert main(["docs"]) == 0
    assert capsys.readouterr().out.startswith("No documents in local, in ")


def test_the_chat_refusal_text_is_the_one_the_cli_rewords() -> None:
    from bot.cli.ask_cmd import CHANNEL_REFUSAL
    from pipelines.components.refusal import REFUSAL_TEXT

    assert REFUSAL_TEXT.startswith(CHANNEL_REFUSAL)


@pytest.mark.slow
def test_quotes_never_show_control_characters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An index built before the parser dropped control characters still holds them (one shared PDF's font
    turned a glyph into \\x04): the answer shows the quote without them, on the terminal and in JSON."""
    from haystack import Document

    from connectors.embedding import embed
    from connectors.settings import load_settings
    from connectors.stores import open_store

    settings = load_settings()
    text = "Section 4.2: employees may take eighteen weeks\x04 of paid parental\x07 leave."
    meta = {"scope": "local", "doc_id": "d1", "file_name": "scan\x04ned.pdf", "page_start": 3, "page_end": 3,
            "section": "4 Leave", "section_id": "4", "element_type": "text", "label": "", "chunk_index": 0,
            "sha256": "x", "uploaded_by": "", "uploaded_at": "2026-01-01T00:00:00Z"}
    vector = embed([text], path=settings.resolved_model_path)[0]
    open_store(settings).write_documents([Document(id="d1:00000", content=text, meta=meta, embedding=vector)])

    assert main(["ask", "How many weeks of parental leave may employees take?"]) == 0
    out = capsys.readouterr().out
    assert "eighteen weeks of paid parental leave" in out and "scanned.pdf" in out
    assert not any(ord(ch) < 32 and ch not in "\n\t" for ch in out)
    assert main(["ask", "How many weeks of parental leave may employees take?", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    shown = json.dumps(answer, ensure_ascii=False)
    assert answer["citations"] and "\\u0004" not in shown and "\\u0007" not in shown


def _closed_reader(args: list[str], data_dir: Path, timeout: float = 300) -> subprocess.CompletedProcess[bytes]:
    """Run ``citebot ARGS | head -c 0``: the reader is gone before the command writes."""
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    try:
        return subprocess.run(
            [sys.executable, "-m", "bot.cli.main", *args], cwd=REPO, env=_env(data_dir), stdout=write_fd,
            stderr=subprocess.PIPE, timeout=timeout, check=False,
        )
    finally:
        os.close(write_fd)


def test_feedback_json_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    from connectors.state_log import StateLog
    from pipelines.models import Answer, Citation

    log = StateLog(tmp_path / "data" / "state.sqlite3")
    cite = Citation(n=1, chunk_id="d:00001", doc_id="d", file="a.pdf", page_start=1, page_end=1, quote="q " * 200)
    for i in range(200):  # far more than a pipe holds
        log.record_answer(platform="slack", message_ref=f"C1:{i}.1", thread_ref=f"C1:{i}.0", scope="slack:T:C1",
                          user="U1", question=f"question {i}?", answer_json=Answer(text="a " * 300,
                                                                       citations=[cite]).model_dump_json())
        log.add_feedback(platform="slack", message_ref=f"C1:{i}.1", user="U2", polarity="down", comment="no")
    done = _closed_reader(["feedback", "--json"], tmp_path / "data")
    assert (done.returncode, done.stderr.decode()) == (0, "")


@pytest.mark.slow
def test_ask_json_into_a_closed_pipe_ends_quietly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITEBOT_OCR_ENABLED", "false")
    pdf = tmp_path / "leave.pdf"
    pdf.write_bytes(make_pdf([LEAVE_LINES]))
    assert main(["ingest", str(pdf)]) == 0
    done = _closed_reader(["ask", "How many weeks of parental leave?", "--json"], tmp_path / "data")
    assert (done.returncode, done.stderr.decode()) == (0, "")


@pytest.mark.slow
def test_elasticsearch_down_is_one_line_naming_the_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("CITEBOT_ELASTICSEARCH_URL", f"http://elastic:hunter2@127.0.0.1:{port}")
    for args in (["docs"], ["ask", "How many weeks of parental leave?"]):
        assert main(args) == 1
        out, err = capsys.readouterr()
        assert out == ""
        (line,) = err.splitlines()
        assert line == (
            f"citebot {args[0]}: cannot reach Elasticsearch at http://127.0.0.1:{port}: check that it is running "
            "and that CITEBOT_ELASTICSEARCH_URL is right (host, port, http or https)"
        )
