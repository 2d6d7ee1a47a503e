"""``@citebot help``, ``@citebot docs``, ``@citebot stats`` and ``@citebot forget FILE`` in a channel run the
command, as ``/citebot`` does and as a mention does in Teams, answered in the thread; anything else after the mention
is a question. Through the real Bolt app (:class:`SlackHarness`) and the fake Slack."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.core import ChatContext, ChatCore
from bot.slack.render import plain
from bot.texts import SLACK_HELP_TEXT
from eval.fakes.slack_api import TEAM, FakeSlack, mention
from pipelines.models import slack_scope
from tests.helpers.pdfs import LEAVE_PAGES, make_pdf
from tests.helpers.slack import SlackHarness

pytestmark = pytest.mark.slow

CHANNEL, MEMBER = "C0CMDS", "U0MEMBER"


@pytest.fixture(scope="module")
def slack(tmp_path_factory: pytest.TempPathFactory, shared_models_dir: Path) -> Iterator[SlackHarness]:
    data_dir: Path = tmp_path_factory.mktemp("slack-commands")
    fake = FakeSlack().start()
    fake.memberships = {MEMBER: [CHANNEL]}
    settings = SlackHarness.settings(data_dir, fake, slack_workers=1, models_dir=shared_models_dir)
    core = ChatCore.from_settings(settings)
    for name in ("leave_policy.pdf", "old_policy.pdf"):
        result = core.upload(ChatContext("slack", slack_scope(TEAM, CHANNEL), MEMBER), file_name=name,
                             data=make_pdf(LEAVE_PAGES if name == "leave_policy.pdf" else [["Old policy", "Gone."]]))
        assert result.status == "indexed", result
    with SlackHarness.serving(settings, core, fake) as harness:
        yield harness
    fake.stop()


def _reply(slack: SlackHarness, text: str, ts: str) -> str:
    assert slack.send(mention(CHANNEL, MEMBER, text, ts)) == 200
    return str(slack.fake.wait_for("chat.postMessage", channel=CHANNEL, thread_ts=ts)[0].params["text"])


def test_mention_help_is_the_help(slack: SlackHarness) -> None:
    assert _reply(slack, "help", "300.000001") == plain(SLACK_HELP_TEXT)


def test_mention_docs_and_stats_list_the_channel(slack: SlackHarness) -> None:
    docs = _reply(slack, "docs", "300.000002")
    assert docs.startswith("2 PDFs indexed here") and "leave_policy.pdf" in docs
    stats = _reply(slack, "Stats", "300.000003")
    assert "2" in stats and "quote" not in stats.lower()


def test_mention_forget_removes_the_file_and_a_question_is_still_answered(slack: SlackHarness) -> None:
    forgot = _reply(slack, "forget old_policy.pdf", "300.000004")
    assert "old_policy.pdf" in forgot
    assert [d.file for d in slack.core.documents([slack_scope(TEAM, CHANNEL)])] == ["leave_policy.pdf"]
    answer = _reply(slack, "How many weeks of parental leave do employees get?", "300.000005")
    assert "eighteen weeks" in answer
    slack.idle()
