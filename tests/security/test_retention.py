"""Issue 40 row 11: the journal kept Slack's verification token in each payload, and answers (with their
questions), votes and assistant-pane threads were never forgotten. The token is left out of what is journaled, and
``CITEBOT_RETENTION_DAYS`` (90 by default) forgets the rest once older, on the chat state's own pruning."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.core import ChatCore
from connectors.settings import Settings
from connectors.state_log import StateLog
from connectors.stores import open_state
from eval.fakes.slack_api import FakeSlack
from pipelines.models import Answer
from tests.helpers.slack import SlackHarness

DAY = 86400.0
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def test_the_journal_keeps_no_verification_token(tmp_path: Path) -> None:
    fake = FakeSlack().start()
    settings = SlackHarness.settings(tmp_path, fake, slack_workers=1)
    try:
        with SlackHarness.serving(settings, ChatCore.from_settings(settings), fake) as slack:
            assert slack.command("docs", channel="C0RETAIN", user="U0MEMBER", name="docs")[0] == 200
            fake.wait_for("response_url", name="docs")
            slack.idle()
            items = slack.core.state.work_items()
    finally:
        fake.stop()
    assert items, "the command was journaled"
    for item in items:
        body = json.loads(item.payload)["body"]
        assert "token" not in body and body["command"] == "/citebot"


def _record(state: StateLog, n: int, days_ago: float) -> None:
    ref = f"C1:{n}.0"
    state.record_answer(platform="slack", message_ref=ref, thread_ref=ref, scope="slack:T1:C1", user="U1",
                        question=f"private question {n}?", answer_json=Answer(text="x").model_dump_json())
    state.add_feedback(platform="slack", message_ref=ref, user="U2", polarity="down", comment=f"comment {n}")
    state.save_thread_context(platform="slack", thread_ref=f"D1:{n}.0", user="U1", context_channel="C1")
    at = (NOW - timedelta(days=days_ago)).isoformat(timespec="seconds")
    with sqlite3.connect(state.path) as db:
        for table, key in (("answers", "message_ref"), ("feedback", "message_ref"),
                           ("assistant_threads", "thread_ref")):
            db.execute(f"UPDATE {table} SET at = ? WHERE {key} = ?",  # noqa: S608 - the test's own names
                       (at, ref if key == "message_ref" else f"D1:{n}.0"))


def test_answers_votes_and_threads_older_than_the_retention_are_forgotten(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, data_dir=tmp_path, retention_days=30)  # type: ignore[call-arg]
    state = open_state(settings)
    assert isinstance(state, StateLog) and state.retention_days == 30
    state._clock = NOW.timestamp  # noqa: SLF001 - the state's own clock, as its takeover tests set it
    _record(state, 1, days_ago=45)
    _record(state, 2, days_ago=5)
    assert state.add_work("Ev0RETAIN", kind="slack.answer", payload="{}")
    assert state.take_work(owner="w", lease_s=60, kinds=("slack.answer",))  # a take prunes, as every item does
    assert [a.message_ref for a in state.answers()] == ["C1:2.0"]
    assert [f.message_ref for f in state.feedback()] == ["C1:2.0"]
    assert state.thread_context(platform="slack", thread_ref="D1:1.0") is None
    assert state.thread_context(platform="slack", thread_ref="D1:2.0") is not None


def test_the_default_forgets_after_90_days_and_0_keeps_everything(tmp_path: Path) -> None:
    assert Settings(_env_file=None).retention_days == 90  # type: ignore[call-arg]
    state = StateLog(tmp_path / "state.sqlite3", clock=NOW.timestamp, retention_days=0)
    _record(state, 1, days_ago=4000)
    assert state.add_work("Ev0KEEP", kind="slack.answer", payload="{}")
    assert state.take_work(owner="w", lease_s=60, kinds=("slack.answer",))
    assert len(state.answers()) == 1
