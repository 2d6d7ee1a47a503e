"""Handler logic through a recording adapter (:class:`tests.helpers.teams.RecordingAdapter`: the Agents SDK's
``ChannelServiceAdapter`` with its posting replaced by a list): which messages are answered, what the core sees,
what goes out in the turn and what is delivered later with ``continue_conversation``.

The real CitebotService and SQLite store answer; a PDF is put into the channel's scope first.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from microsoft_agents.activity import Activity, ActivityTypes

from bot.core import ChatContext, ChatCore, ClaimKey
from bot.teams.activity import parse_turn
from bot.teams.bot import CitebotTeamsBot
from bot.texts import APOLOGY, GRAPH_NOT_CONFIGURED, SYNC_ONLY_IN_CHANNELS, docs_text
from bot.texts import TEAMS_HELP_TEXT as HELP_TEXT
from connectors.settings import Settings
from tests.helpers.pdfs import make_pdf
from tests.helpers.teams import TeamsHarness as Harness
from tests.helpers.teams import wire

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def _log_to_live_streams() -> None:
    """A CLI test run earlier may have bound structlog to a captured stream pytest has since closed."""
    structlog.reset_defaults()

BOT = {"id": "28:citebot", "name": "Citebot"}
TENANT = "tenant-flows"
CHANNEL = "19:handbook@thread.tacv2"
SCOPE = f"teams:{TENANT}:{CHANNEL}"
FILE = "meadowlark_policy.pdf"
LINES = [
    "Meadowlark Office Policy",
    "1 Plants",
    "Office plants on the Meadowlark floor are watered every Thursday by the facilities team.",
    "2 Lockers",
    "Each Meadowlark employee may rent one locker for 12 euros per year.",
]

_ids = itertools.count(1)


def channel_activity(text: str, *, mention: bool = True) -> Activity:
    activity_id = f"170000000{next(_ids):04d}"
    return Activity.model_validate(
        {
            "type": "message",
            "id": activity_id,
            "channelId": "msteams",
            "serviceUrl": "https://smba.invalid/teams/",  # never contacted: the adapter records replies
            "from": {"id": "29:alice"},
            "recipient": BOT,
            "conversation": {
                "id": f"{CHANNEL};messageid={activity_id}",
                "conversationType": "channel",
                "tenantId": TENANT,
            },
            "channelData": {"channel": {"id": CHANNEL}, "team": {"id": "19:t@thread.tacv2"}, "tenant": {"id": TENANT}},
            "text": f"<at>Citebot</at> {text}" if mention else text,
            "entities": [{"type": "mention", "text": "<at>Citebot</at>", "mentioned": BOT}] if mention else [],
        }
    )


def chat_activity(text: str, *, chat: str = "a:1chat-flows", **extra: Any) -> Activity:
    data = {
        "type": "message",
        "id": f"chat-{next(_ids)}",
        "channelId": "msteams",
        "serviceUrl": "https://smba.invalid/teams/",
        "from": {"id": "29:alice"},
        "recipient": BOT,
        "conversation": {"id": chat, "conversationType": "personal", "tenantId": TENANT},
        "channelData": {"tenant": {"id": TENANT}},
        "text": text,
        **extra,
    }
    return Activity.model_validate(data)


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("teams-flows"))
    core = ChatCore.from_settings(settings)
    ctx = ChatContext(platform="teams", scope=SCOPE, user="29:alice")
    # one page, 12 pt lines 24 pt apart, none of them bold
    result = core.upload(ctx, file_name=FILE, data=make_pdf([LINES], size=12, leading=24, top=800, bold=None))
    assert result.status == "indexed"
    bot = CitebotTeamsBot(core, settings, workers=2)
    yield Harness(core, settings, bot=bot)
    bot.close()


def test_mention_is_stripped_before_the_core_sees_it(harness: Harness) -> None:
    activity = channel_activity("When are the Meadowlark office plants watered?")
    turn = harness.run(activity)
    assert [a.type for a in turn.in_turn] == [ActivityTypes.typing]
    (answer,) = turn.later
    assert "[1]" in answer.text
    assert "watered every Thursday" in str(wire(answer)["attachments"])  # the quote card
    assert answer.reply_to_id == activity.id, "the proactive answer goes into the user's thread"
    history = harness.core.history("teams", activity.conversation.id)
    assert [t.text for t in history if t.role == "user"] == ["When are the Meadowlark office plants watered?"]


def test_unmentioned_channel_message_gets_nothing(harness: Harness) -> None:
    turn = harness.run(channel_activity("When are the plants watered?", mention=False))
    assert turn.in_turn == [] and turn.later == []


def test_personal_chat_answers_without_mention_in_its_own_scope(harness: Harness) -> None:
    turn = harness.run(chat_activity("When are the Meadowlark office plants watered?"))
    (answer,) = turn.later
    # the chat is another scope: the channel's PDF is not quoted here
    assert "Thursday" not in answer.text
    assert FILE not in str(wire(answer))


def test_quick_commands_reply_inside_the_turn(harness: Harness) -> None:
    turn = harness.run(channel_activity("docs"))
    (reply,) = turn.in_turn
    assert FILE in reply.text and turn.later == []
    turn = harness.run(chat_activity(""))
    assert [a.text for a in turn.in_turn] == [HELP_TEXT]
    turn = harness.run(chat_activity("sync"))
    assert [a.text for a in turn.in_turn] == [SYNC_ONLY_IN_CHANNELS]
    turn = harness.run(channel_activity("sync"))
    assert [a.text for a in turn.in_turn] == [GRAPH_NOT_CONFIGURED]


def test_a_quick_reply_delivered_twice_is_answered_once(harness: Harness) -> None:
    activity = channel_activity("docs")
    (reply,) = harness.run(activity).in_turn
    assert FILE in reply.text
    again = harness.run(activity)  # the Bot Framework re-sends an activity whose 200 it did not see
    assert again.in_turn == [] and again.later == []


def test_a_quick_reply_whose_bot_died_mid_turn_is_posted_after_the_restart(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, work_lease_s=1.0, work_scan_s=0.1)
    core = ChatCore.from_settings(settings)
    activity = chat_activity("docs")
    turn = parse_turn(activity)
    killed = CitebotTeamsBot(core, settings, workers=1)
    key = str(ClaimKey.teams_message(turn.conversation_id, activity.id or ""))
    assert killed.work.hold(key, turn, activity.get_conversation_reference(), activity.id or "", command="docs")
    killed.close()  # died with the reply journaled, before sending it: nothing renews its lease
    restarted = CitebotTeamsBot(core, settings, workers=1)
    try:
        again = Harness(core, settings, bot=restarted).run(activity)  # re-sent: its 200 never left
    finally:
        restarted.close()
    assert again.in_turn == []  # answered once: by the restarted bot's worker, once the lease ran out
    assert [a.text for a in again.later] == [docs_text([])]


def test_exception_in_a_turn_becomes_an_apology(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("database is locked at /secret/path")

    monkeypatch.setattr(harness.core, "documents", broken)
    turn = harness.run(channel_activity("docs"))
    assert [a.text for a in turn.in_turn] == [APOLOGY]
    monkeypatch.undo()
    turn = harness.run(channel_activity("docs"))
    assert FILE in turn.in_turn[0].text


def test_feedback_invoke_always_answers_200(harness: Harness) -> None:
    """Teams shows an error to the user unless the invoke gets a 200, even for a message we don't know."""
    question = channel_activity("How much is a Meadowlark locker per year?")
    answer = harness.run(question).later[0]
    assert "12 euros" in str(wire(answer))
    invoke = Activity.model_validate(
        {
            **wire(question),
            "type": "invoke",
            "name": "message/submitAction",
            "id": "invoke-1",
            "replyToId": "unknown-message",
            "value": {"actionName": "feedback", "actionValue": {"reaction": "like", "feedback": ""}},
        }
    )
    turn = harness.run(invoke)
    (response,) = [a for a in turn.in_turn if a.type == ActivityTypes.invoke_response]
    assert response.value["status"] == 200


def test_teams_questions_are_counted_in_metrics_answered_or_failed(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prometheus_client import REGISTRY

    def count(outcome: str) -> float:
        labels = {"platform": "teams", "mode": "extractive", "outcome": outcome}
        return REGISTRY.get_sample_value("citebot_questions_total", labels) or 0.0

    answered, failed = count("answered"), count("failed")
    turn = harness.run(channel_activity("When are the Meadowlark office plants watered?"))
    assert "Thursday" in str(wire(turn.later[0]))
    assert (count("answered"), count("failed")) == (answered + 1, failed)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the store went away")

    monkeypatch.setattr(harness.core.service, "answer", broken)
    turn = harness.run(channel_activity("How much is a Meadowlark locker per year?"))
    assert [a.text for a in turn.later] == [APOLOGY]
    assert (count("answered"), count("failed")) == (answered + 1, failed + 1)
    assert REGISTRY.get_sample_value("citebot_queue_depth", {"platform": "teams"}) == 0  # every job ended
