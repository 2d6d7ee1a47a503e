"""Defect 12 of the security review: error logs carry an exception's type and place, never its text.

``log.exception`` in the Teams handler wrote an Elasticsearch URL with its password into the log. Here an
exception whose message holds such a URL goes through every adapter's error path, with logging set up as in
production (JSON lines on stderr), and the captured stderr is searched for the password.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from bot.core import ChatCore
from bot.teams.server import BOT_KEY, anonymous_authentication, build_app
from bot.texts import APOLOGY
from connectors.log import configure_logging
from connectors.settings import Settings
from eval.fakes.microsoft import AppThread, FakeMicrosoft
from eval.fakes.slack_api import FakeSlack, mention
from tests.helpers.slack import SlackHarness

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "hunter2"
SECRET_ERROR = f"http://elastic:{PASSWORD}@es:9200 refused"
BOT = {"id": "28:citebot", "name": "Citebot"}


def _boom(*_args: Any, **_kwargs: Any) -> Any:
    raise RuntimeError(SECRET_ERROR)


# --- Teams ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def teams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeMicrosoft, AppThread, ChatCore]]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("teams-logs"))
    core = ChatCore.from_settings(settings)
    with FakeMicrosoft() as fake, AppThread(build_app(settings, core, auth=anonymous_authentication())) as app:
        yield fake, app, core


def _chat(fake: FakeMicrosoft, chat: str, text: str) -> dict[str, Any]:
    return {
        "type": "message", "id": f"{chat}-1", "channelId": "msteams", "serviceUrl": fake.service_url,
        "from": {"id": "29:alice"}, "recipient": BOT,
        "conversation": {"id": chat, "conversationType": "personal", "tenantId": "tenant-logs"},
        "channelData": {"tenant": {"id": "tenant-logs"}}, "text": text,
    }


@pytest.mark.parametrize(
    ("path", "text", "event"),
    [
        ("answer_job", "what is the budget?", "teams_work_failed"),  # journaled work after the turn
        ("turn", "docs", "teams_turn_failed"),  # a command answered inside the turn
        ("adapter", "help", "teams_adapter_error"),  # escapes the bot: the adapter's on_turn_error
    ],
)
def test_a_failing_teams_turn_logs_no_exception_text(
    teams: tuple[FakeMicrosoft, AppThread, ChatCore], monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str], path: str, text: str, event: str,
) -> None:
    fake, app, core = teams
    bot = app.app[BOT_KEY]
    if path == "answer_job":
        monkeypatch.setattr(core.service, "answer", _boom)
    elif path == "turn":
        monkeypatch.setattr(core.service, "list_documents", _boom)
    else:
        monkeypatch.setattr(bot, "on_turn", _async(_boom))
    configure_logging("info", "json")
    chat = f"a:1logs-{path}"
    resp = requests.post(f"{app.url}/api/messages", json=_chat(fake, chat, text), timeout=60)
    assert resp.status_code in (200, 201, 500)
    fake.wait_for(lambda c: c.conversation_id == chat and APOLOGY in c.text)
    app.run(bot.drain())
    logged = "".join(capfd.readouterr())
    assert PASSWORD not in logged
    (line,) = [ln for ln in logged.splitlines() if event in ln]
    assert '"error": "RuntimeError"' in line and '"where": "' in line  # what failed, and where


def _async(fn: Callable[..., Any]) -> Callable[..., Any]:
    async def run(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return run


# --- Slack ------------------------------------------------------------------------------------------


def test_a_failing_slack_listener_logs_no_exception_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    fake = FakeSlack().start()
    settings = SlackHarness.settings(tmp_path, fake, slack_workers=1)
    try:
        with SlackHarness.serving(settings, ChatCore.from_settings(settings), fake) as slack:
            monkeypatch.setattr(slack.bot.core.service, "answer", _boom)
            configure_logging("info", "json")
            event = mention("C0LOGS", "U0MEMBER", "what is the budget?", "400.000001")
            assert slack.send(event, event_id="EvLOGS1") == 200
            fake.wait_for("chat.postMessage", channel="C0LOGS", text=APOLOGY)
            assert slack.bot.wait_idle(30)
    finally:
        fake.stop()
    logged = "".join(capfd.readouterr())
    assert PASSWORD not in logged
    (line,) = [ln for ln in logged.splitlines() if "slack_work_failed" in ln]
    assert '"error": "RuntimeError"' in line and "EvLOGS1" in line


# --- CLI and other libraries ------------------------------------------------------------------------


def test_a_failing_cli_command_prints_no_exception_text(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """An error nobody expected (here from the store) ends the command with its type and place, not a
    traceback whose last line is the store's URL."""
    from bot.cli.main import main
    from connectors.settings import Settings
    from connectors.stores import open_store
    from pipelines.service import CitebotService

    monkeypatch.setenv("CITEBOT_LOG_FORMAT", "json")
    open_store(Settings())  # a store to ask (read-only commands create none), whose listing then fails
    monkeypatch.setattr(CitebotService, "list_documents", _boom)
    try:
        status = main(["ask", "what is the budget?"])
    except RuntimeError:
        status = -1  # Python would print the traceback, message included
    logged = "".join(capfd.readouterr())
    assert status == 1
    assert PASSWORD not in logged
    assert "RuntimeError" in logged and "command_failed" in logged


def test_tracebacks_other_libraries_log_carry_no_exception_text(tmp_path: Path) -> None:
    """elastic_transport, aiohttp and the Agents SDK log through the standard library with ``exc_info``. Run in a
    fresh interpreter: pytest's own log handlers would hide what a real process prints."""
    script = (
        "import logging, sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from connectors.log import configure_logging\n"
        "configure_logging('info', 'json')\n"
        "try:\n"
        f"    raise RuntimeError({SECRET_ERROR!r})\n"
        "except RuntimeError as e:\n"
        "    logging.getLogger('elastic_transport.transport').warning('Retrying request after failure', exc_info=e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert PASSWORD not in proc.stderr
    assert "Retrying request after failure" in proc.stderr and "RuntimeError" in proc.stderr
