"""Defect 9 of the security review: work claimed by a process that crashed is done when Slack re-sends it.

Before the fix the durable claim was final the moment it was taken: after kill -9 (or the OOM killer) mid-
upload, Slack's retry of the event was dropped as a duplicate and the "Indexing…" message was never updated.
Here a real bot process is killed with SIGKILL while it holds the claim, and the retry goes to a new one. Since
the work journal (issue 30) the retry is not even needed: the new bot takes the work over once the killed one's
lease runs out, and the retries find it journaled and do nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.core import ChatCore
from connectors.settings import Settings
from eval.fakes.slack_api import BOT_TOKEN, SIGNING_SECRET, TEAM, FakeSlack, event_callback, post_signed
from pipelines.models import slack_scope
from tests.helpers.pdfs import sections_pdf
from tests.helpers.slack import SlackHarness

REPO = Path(__file__).resolve().parents[2]
CHANNEL, USER, FILE_ID = "C0CRASH", "U0UPLOADER", "F0EXPENSES"

BOT_PROCESS = textwrap.dedent(
    """
    import json, sys
    import bot
    from bot.core import ChatCore
    from bot.slack.app import build_bot
    from bot.slack.server import make_http_server
    from connectors.settings import Settings

    settings = Settings(_env_file=None, **json.loads(sys.argv[1]))
    server = make_http_server(build_bot(settings, ChatCore.from_settings(settings)).app, "127.0.0.1", 0)
    print(json.dumps({"port": server.server_address[1], "code": bot.__file__}), flush=True)
    server.serve_forever()
    """
)


class _FirstDownloadHangs(dict):  # type: ignore[type-arg]
    """FakeSlack's hosted files; the first download waits (the bot is then mid-work) until ``release``."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self._first = True

    def get(self, key: Any, default: Any = None) -> Any:
        if self._first:
            self._first = False
            self.release.wait(60)
        return super().get(key, default)


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack() as f:
        f.files = _FirstDownloadHangs()
        yield f
        f.files.release.set()


def _settings(data_dir: Path, fake: FakeSlack) -> dict[str, Any]:
    return {
        "data_dir": str(data_dir),
        "slack_bot_token": BOT_TOKEN,
        "slack_signing_secret": SIGNING_SECRET,
        "slack_api_url": fake.url,
        "ocr_enabled": False,
        "work_lease_s": 3.0,  # the killed process's lease runs out quickly
        "work_scan_s": 0.5,
    }


@pytest.mark.slow
def test_an_upload_claimed_by_a_killed_process_is_indexed_on_slacks_retry(tmp_path: Path, fake: FakeSlack) -> None:
    cfg = _settings(tmp_path / "data", fake)
    policy = sections_pdf([("3 Travel", "Hotels are reimbursed up to 120 pounds a night.")])
    fake.add_file(FILE_ID, "expenses.pdf", policy)
    delivery = event_callback(
        {"type": "file_shared", "file_id": FILE_ID, "user_id": USER, "file": {"id": FILE_ID}, "channel_id": CHANNEL},
        event_id="Ev0CRASH0001",
    )

    env = {**os.environ, "PYTHONPATH": str(REPO), "HAYSTACK_TELEMETRY_ENABLED": "False"}
    first = subprocess.Popen(
        [sys.executable, "-c", BOT_PROCESS, json.dumps(cfg)], stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path
    )
    try:
        assert first.stdout is not None
        started = json.loads(first.stdout.readline())
        assert started["code"].startswith(str(REPO))  # the code under test, not another checkout
        status, _ = post_signed(f"http://127.0.0.1:{started['port']}/slack/events", delivery)
        assert status == 200
        fake.wait_for("file.download", timeout=120)  # claimed, "Indexing…" posted, downloading
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    [indexing] = fake.calls_to("chat.postMessage", channel=CHANNEL)
    assert indexing.params["text"] == "Indexing expenses.pdf…"
    fake.files.release.set()

    # Slack re-sends the event to the restarted bot
    settings = Settings(_env_file=None, **cfg)  # type: ignore[call-arg]
    core = ChatCore.from_settings(settings)
    with SlackHarness.serving(settings, core, fake) as restarted:
        assert post_signed(restarted.url, delivery, retry_num=1)[0] == 200
        assert restarted.bot.wait_idle(180)
        # a second retry (Slack sends up to three) finds the work done and does nothing
        assert post_signed(restarted.url, delivery, retry_num=2)[0] == 200
        assert restarted.bot.wait_idle(60)

    updates = [c.params for c in fake.calls_to("chat.update", channel=CHANNEL)]
    assert updates and all(u["ts"] == indexing.reply["ts"] for u in updates)  # the status message it left
    assert updates[-1]["text"].startswith("Indexed expenses.pdf: 1 pages")
    assert len(fake.calls_to("chat.postMessage", channel=CHANNEL)) == 1
    assert [d.file for d in core.documents([slack_scope(TEAM, CHANNEL)])] == ["expenses.pdf"]
