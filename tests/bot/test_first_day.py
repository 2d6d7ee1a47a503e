"""A new user's and an operator's first day, second round: each command run through the real ``citebot`` entry point
(``main([...])`` in-process where nothing heavy loads, a fresh interpreter where the terminal or the working
directory matters), and what it says checked."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli.main import main
from tests.helpers.pdfs import Line, make_pdf


def write_report(path: Path, title: str) -> Path:
    """A one-page report at ``path``: a bold heading over a few numbered lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(make_pdf([[Line(f"{title} handbook", bold=True, size=12)]
                               + [Line(f"{title}: line {i}; the notice period is {i} days.", size=10)
                                  for i in range(12)]]))
    return path


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


@pytest.mark.parametrize("command", [
    ["serve", "slack", "--http"],
    ["serve", "teams", "--insecure-local"],
])
def test_a_busy_port_is_named_before_anything_listens(
    command: list[str], busy_port: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "secret")
    assert main([*command, "--port", str(busy_port)]) == 2
    out, err = capsys.readouterr()
    assert f"port {busy_port} is already in use on 127.0.0.1" in err and "--port" in err
    assert "listening" not in out + err and "Error" not in err


@pytest.mark.parametrize("command", [["serve", "slack"], ["serve", "teams", "--insecure-local"]])
def test_a_busy_metrics_port_is_named(
    command: list[str], busy_port: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-test")
    assert main([*command, "--metrics-port", str(busy_port)]) == 2
    err = capsys.readouterr().err
    assert f"port {busy_port} is already in use" in err and "--metrics-port" in err


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_an_invalid_port_is_refused_by_the_parser(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["serve", "teams", "--insecure-local", "--port", port])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--port" in err and "is not a port number (0-65535)" in err


def test_serve_help_tells_host_and_port_and_their_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "slack", "--help"])
    out = capsys.readouterr().out
    assert "default: 127.0.0.1" in out and "default: 3000" in out


def test_the_slack_http_server_on_a_busy_port_fails_with_the_bind_error(busy_port: int) -> None:
    """Not an AttributeError from ``server_close`` touching what the failed constructor never set."""
    from unittest.mock import MagicMock

    from bot.slack.server import make_http_server

    with pytest.raises(OSError, match="in use"):
        make_http_server(MagicMock(), "127.0.0.1", busy_port)


def test_an_unexpected_error_says_its_message_with_credentials_redacted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import bot.cli.docs_cmds

    def broken(*_: object) -> int:
        raise ValueError("ocr language must look like eng or eng+deu; store at https://u:hunter2@es.example:9200")

    monkeypatch.setattr(bot.cli.docs_cmds, "run_docs", broken)
    assert main(["docs"]) == 1
    err = capsys.readouterr().err
    assert "failed with ValueError at " in err
    assert "ocr language must look like eng or eng+deu" in err and "hunter2" not in err


def _tesseract_has_eng() -> bool:
    from connectors.ocr import installed_languages

    return "eng" in (installed_languages() or [])


@pytest.mark.skipif(not _tesseract_has_eng(), reason="needs Tesseract with its English pack (tesseract-ocr)")
@pytest.mark.parametrize("command", [["ingest", "report.pdf"], ["serve", "teams", "--insecure-local", "--port", "0"]])
def test_an_ocr_language_tesseract_lacks_stops_start_up_naming_it(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_report(tmp_path / "report.pdf", "Alpha")
    monkeypatch.setenv("CITEBOT_OCR_LANGUAGE", "english")
    assert main(command) == 2
    err = capsys.readouterr().err
    assert "CITEBOT_OCR_LANGUAGE=english" in err and "installed: eng" in err
    assert not (tmp_path / "data" / "chunks.sqlite3").exists()


def test_an_ocr_language_of_the_wrong_form_stops_ingest_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_report(tmp_path / "report.pdf", "Alpha")
    monkeypatch.setenv("CITEBOT_OCR_LANGUAGE", "eng,fra")
    assert main(["ingest", "report.pdf"]) == 2
    assert "CITEBOT_OCR_LANGUAGE" in capsys.readouterr().err


@pytest.mark.parametrize(("command", "named", "not_named"), [
    (["serve", "slack"], ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET"], []),
    (["serve", "slack", "--http"], ["SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"], ["SLACK_APP_TOKEN"]),
])
def test_serve_slack_names_every_missing_variable(
    command: list[str], named: list[str], not_named: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(command) == 2
    err = capsys.readouterr().err
    assert all(var in err for var in named) and not any(var in err for var in not_named)
    assert err.count("\n") == 1


def test_serve_slack_with_only_the_bot_token_missing_names_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-test")
    assert main(["serve", "slack"]) == 2
    err = capsys.readouterr().err
    assert "SLACK_BOT_TOKEN" in err and "SLACK_APP_TOKEN" not in err


def test_ask_with_another_embedding_backend_than_the_store_refuses_and_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An int8 store asked with fp32 vectors: the dense search would rank by noise, so no answer (exit 2); words
    only (--mode bm25) still answers."""
    import json

    monkeypatch.setenv("CITEBOT_OCR_ENABLED", "false")
    write_report(tmp_path / "report.pdf", "Alpha")
    assert main(["ingest", "report.pdf"]) == 0
    monkeypatch.setenv("CITEBOT_EMBEDDING_BACKEND", "onnx")
    capsys.readouterr()
    assert main(["ask", "What is the notice period?"]) == 2
    err = capsys.readouterr().err
    assert "made with onnx-int8" in err and "CITEBOT_EMBEDDING_BACKEND=onnx" in err
    assert "citebot reindex" in err and "--mode bm25" in err
    assert err.count("\n") == 1  # that line only: no log line repeating it
    assert main(["ask", "What is the notice period?", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"] == "embedding_mismatch"
    assert main(["ask", "What is the notice period?", "--mode", "bm25"]) == 0
    assert "notice period" in capsys.readouterr().out


@pytest.mark.parametrize("command", [["ask", "What is the notice period?"], ["ask", "x", "--json"], ["docs"],
                                     ["docs", "--json"], ["forget", "report.pdf"]])
def test_read_only_commands_name_the_data_dir_and_never_create_it(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """After the quickstart, `cd ~ && citebot ask …`: the default ./.citebot is another folder here; say which."""
    monkeypatch.delenv("CITEBOT_DATA_DIR")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(home)
    main(command)
    out, err = capsys.readouterr()
    if command == ["docs", "--json"]:
        assert out.strip() == "[]"
    else:
        assert f"{home / '.citebot'} (CITEBOT_DATA_DIR)" in out + err
    assert not (home / ".citebot").exists()


@pytest.mark.parametrize(("command", "error"), [
    (["ingest", "empty", "--json"], "no_pdfs"),
    (["ask", "  ", "--json"], "invalid_arguments"),
    (["ask", "What?", "--k", "99", "--json"], "invalid_arguments"),
])
def test_json_errors_are_json(
    command: list[str], error: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    (tmp_path / "empty").mkdir()
    write_report(tmp_path / "report.pdf", "Alpha")
    assert main(command) != 0
    out = capsys.readouterr().out
    assert json.loads(out)["error"] == error


def test_a_limit_names_its_setting_and_no_chat_words_in_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_report(tmp_path / "report.pdf", "Alpha")
    (tmp_path / "cut.pdf").write_bytes((tmp_path / "report.pdf").read_bytes()[:-200])
    monkeypatch.setenv("CITEBOT_MAX_FILE_MB", "0.001")
    assert main(["ingest", "report.pdf"]) == 1
    assert "(the limit is set by CITEBOT_MAX_FILE_MB, now 0.001)." in capsys.readouterr().out
    monkeypatch.delenv("CITEBOT_MAX_FILE_MB")
    assert main(["ingest", "cut.pdf"]) == 1
    out = capsys.readouterr().out
    assert "cut.pdf: failed" in out and "upload" not in out and "please" not in out


def test_ingest_limit_wording_for_each_limit() -> None:
    from bot.cli.ingest_cmd import for_operator
    from connectors.settings import load_settings
    from pipelines.models import IngestResult
    from pipelines.reading.text import TIMEOUT

    settings = load_settings(max_pages=10)
    pages = IngestResult(file="a.pdf", scope="local", doc_id="", status="failed", error_code="too_many_pages",
                         error="The PDF has 12 pages, over the 10-page limit.")
    assert for_operator(pages, settings) == (
        "The PDF has 12 pages, over the 10-page limit (the limit is set by CITEBOT_MAX_PAGES, now 10).")
    slow = pages.model_copy(update={"error_code": "timeout", "error": TIMEOUT})
    assert "CITEBOT_INGEST_TIMEOUT_S, now 900 seconds" in for_operator(slow, settings)


def test_citebot_alone_prints_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: citebot") and "examples, in the order people use them" in out
    assert "answer four sample questions" in out


def test_quote_lines_stay_aligned_from_citation_ten_on() -> None:
    from bot.cli.ask_cmd import render_answer
    from pipelines.models import Answer, Citation

    quote = "first line of the quote\nsecond line of the quote"
    answer = Answer(text="An answer [10].", citations=[
        Citation(n=n, chunk_id="c", doc_id="d", file="a.pdf", page_start=1, page_end=1, quote=quote) for n in (9, 10)])
    lines = render_answer(answer, width=80).splitlines()
    for n in ("9", "10"):
        first = next(i for i, line in enumerate(lines) if line.startswith(f"  [{n}] │ "))
        bar = lines[first].index("│")
        assert lines[first + 1].index("│") == bar and lines[first + 2].index("—") == bar + 2


def test_a_long_file_name_is_shortened_in_the_docs_table() -> None:
    from bot.cli.docs_cmds import docs_table
    from connectors.store_api import DocInfo

    name = "q" * 246 + ".pdf"
    doc = DocInfo(doc_id="d1", file=name, scope="local", pages=1, chunks=1, uploaded_at="2026-01-01T10:00:00")
    lines = docs_table([doc], with_scope=True)
    assert max(len(line) for line in lines) < 120
    assert "…" in lines[2] and ".pdf" in lines[2]


def test_ingest_says_one_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CITEBOT_OCR_ENABLED", "false")
    path = tmp_path / "tiny.pdf"
    path.write_bytes(make_pdf([[Line("Tiny", bold=True, size=12), Line("The notice period is ten days.", size=10)]]))
    assert main(["ingest", "tiny.pdf"]) == 0
    out = capsys.readouterr().out
    assert "1 page, 1 chunk," in out


def test_ask_json_lists_passages_in_the_order_read_with_the_score_that_ranked_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`retrieved` is the order the answer read the passages in; each says which score placed it, and within each
    kind of score the scores fall (a 1.0 ahead of 1.7 is a passage the question named, and says so)."""
    import json

    from tests.helpers.pdfs import LEAVE_PAGES

    monkeypatch.setenv("CITEBOT_OCR_ENABLED", "false")
    (tmp_path / "handbook.pdf").write_bytes(make_pdf(LEAVE_PAGES))
    write_report(tmp_path / "alpha.pdf", "Alpha")
    write_report(tmp_path / "beta.pdf", "Beta")
    assert main(["ingest", "handbook.pdf", "alpha.pdf", "beta.pdf"]) == 0
    capsys.readouterr()
    assert main(["ask", "How long is parental leave?", "--json"]) == 0
    retrieved = json.loads(capsys.readouterr().out)["retrieved"]
    order = ["reference", "page", "retrieval"]
    kinds = [r["ranked_by"] for r in retrieved]
    assert len(set(kinds)) >= 2 and kinds == sorted(kinds, key=order.index), kinds
    for kind in set(kinds):
        scores = [r["score"] for r in retrieved if r["ranked_by"] == kind]
        assert scores == sorted(scores, reverse=True), (kind, scores)


def test_an_exact_one_line_match_is_quoted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A page that reads only "Hello, World!" (its one line is also its heading, and short) asked "Hello, World"."""
    monkeypatch.setenv("CITEBOT_OCR_ENABLED", "false")
    (tmp_path / "hello.pdf").write_bytes(make_pdf([["Hello, World!"]]))
    write_report(tmp_path / "alpha.pdf", "Alpha")
    assert main(["ingest", "hello.pdf", "alpha.pdf"]) == 0
    capsys.readouterr()
    assert main(["ask", "Hello, World"]) == 0
    out = capsys.readouterr().out
    assert "[1] │ Hello, World!\n" in out and "hello.pdf · p. 1" in out
    assert "don't seem to answer" not in out


@pytest.mark.slow
def test_bench_teams_prints_its_table_and_no_log_line(capsys: pytest.CaptureFixture[str]) -> None:
    """The bench runs its own unauthenticated app on loopback: no `--insecure-local` warning as JSON on stderr."""
    assert main(["bench", "teams", "--questions", "1"]) == 0
    out, err = capsys.readouterr()
    assert "chat_answer" in out and "channel_answer" in out
    assert err == ""


@pytest.mark.slow
def test_bench_query_warns_about_none_of_its_own_stores(capsys: pytest.CaptureFixture[str]) -> None:
    """One temporary store timed by two backends, then `citebot ask` on it per backend: no "run citebot reindex"."""
    assert main(["bench", "query", "--chunks", "200", "--queries", "2", "--skip-quality",
                 "--backends", "onnx,onnx-int8"]) == 0
    out, err = capsys.readouterr()
    assert "retrieval" in out and "cold start" in out and "onnx-int8" in out.split("cold start")[1]
    assert "embedding_mismatch" not in out + err and "reindex" not in out + err
    assert err == ""


@pytest.mark.slow
def test_bench_ingest_words_its_report_without_internal_references(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import re

    write_report(tmp_path / "report.pdf", "Alpha")
    assert main(["bench", "ingest", str(tmp_path / "report.pdf"), "--no-baseline", "--backends", "onnx-int8"]) == 0
    out, err = capsys.readouterr()
    assert "embedding chunks/s, unsorted batches" in out and "targets: >= 6 pages/s" in out
    assert not re.search(r"#\d|\bissue\b", out, re.I), out
    assert "reindex" not in err


APP_ID = "11111111-2222-3333-4444-555555555555"


def test_teams_package_names_the_publisher_given_by_options_and_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import zipfile

    monkeypatch.setenv("TEAMS_APP_ID", APP_ID)
    monkeypatch.setenv("CITEBOT_TEAMS_TERMS_URL", "https://example.org/terms")
    assert main(["teams", "package", "--out", "pkg.zip", "--developer-name", "Example Ltd",
                 "--website-url", "https://example.org", "--privacy-url", "https://example.org/privacy"]) == 0
    out, err = capsys.readouterr()
    assert "Wrote pkg.zip" in out and err == ""
    manifest = json.loads(zipfile.ZipFile(tmp_path / "pkg.zip").read("manifest.json"))
    assert manifest["developer"] == {"name": "Example Ltd", "websiteUrl": "https://example.org",
                                     "privacyUrl": "https://example.org/privacy",
                                     "termsOfUseUrl": "https://example.org/terms"}


def test_teams_package_says_which_publisher_fields_are_placeholders(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TEAMS_APP_ID", APP_ID)
    assert main(["teams", "package", "--out", "pkg.zip", "--developer-name", "Example Ltd"]) == 0
    err = capsys.readouterr().err
    assert "placeholder" in err and "--privacy-url (CITEBOT_TEAMS_PRIVACY_URL)" in err and "--terms-url" in err
    assert "--developer-name" not in err


def test_teams_package_refuses_a_privacy_url_teams_would_refuse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TEAMS_APP_ID", APP_ID)
    assert main(["teams", "package", "--out", "pkg.zip", "--privacy-url", "http://example.org/privacy"]) == 2
    err = capsys.readouterr().err
    assert "--privacy-url (CITEBOT_TEAMS_PRIVACY_URL) must be an https:// address" in err
    assert not (tmp_path / "pkg.zip").exists()
