"""Issue 40 row 9: a deeply nested JSON body, with no token or signature. Teams answered 500 with an error-level
log line; Slack dropped the connection and printed a raw traceback on stderr, outside the JSON log (Bolt parses the
body before it checks the signature). Both now answer 400 with one JSON log line and no traceback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from bot.core import ChatCore
from bot.teams.server import build_app
from connectors.log import configure_logging
from connectors.settings import Settings
from eval.fakes.microsoft import AppThread
from eval.fakes.slack_api import FakeSlack
from tests.helpers.slack import SlackHarness

DEPTH = 100_000
NESTED = '{"type": "message", "a": ' + "[" * DEPTH + "]" * DEPTH + "}"
FORM = "payload=" + "%5B" * DEPTH + "%5D" * DEPTH


@pytest.fixture
def slack(tmp_path: Path) -> Iterator[SlackHarness]:
    fake = FakeSlack().start()
    settings = SlackHarness.settings(tmp_path, fake, slack_workers=1)
    try:
        with SlackHarness.serving(settings, ChatCore.from_settings(settings), fake) as harness:
            yield harness
    finally:
        fake.stop()


def _lines(logged: str, event: str) -> list[str]:
    return [ln for ln in logged.splitlines() if event in ln]


@pytest.mark.parametrize(("body", "content_type"), [(NESTED, "application/json"),
                                                    (FORM, "application/x-www-form-urlencoded")])
def test_slack_answers_400_and_logs_one_json_line(
    slack: SlackHarness, capfd: pytest.CaptureFixture[str], body: str, content_type: str
) -> None:
    configure_logging("info", "json")
    capfd.readouterr()
    resp = requests.post(slack.url, data=body.encode(), headers={"Content-Type": content_type}, timeout=30)
    logged = "".join(capfd.readouterr())
    assert resp.status_code == 400
    assert "Traceback" not in logged
    (line,) = _lines(logged, "slack_bad_request")
    assert line.startswith("{") and '"error": "RecursionError"' in line


def test_teams_answers_400_and_logs_one_json_line(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    settings = Settings(_env_file=None, data_dir=tmp_path, ocr_enabled=False)  # type: ignore[call-arg]
    configure_logging("info", "json")
    with AppThread(build_app(settings, ChatCore.from_settings(settings), insecure_local=True)) as app:
        capfd.readouterr()
        resp = requests.post(f"{app.url}/api/messages", data=NESTED.encode(),
                             headers={"Content-Type": "application/json"}, timeout=30)
        logged = "".join(capfd.readouterr())
    assert resp.status_code == 400
    assert "Traceback" not in logged and '"level": "error"' not in logged
    (line,) = _lines(logged, "teams_bad_request")
    assert line.startswith("{")
