"""LLM answers stream into Slack and Teams (issue 24 item 8), through the real apps: a signed Slack event and a Bot
Framework activity in; the fake Slack Web API and the fake Bot Connector record what went out, and the local
OpenAI-format server streams the model's reply (server-sent events).

What a person would notice: the first checked sentence is in the thread while the model is still writing (the
fake model is held mid-reply by a gate, no timing involved); a sentence whose quote is not in its passage never
reaches any call; the message left in the thread is the one the non-streaming path posts, with its citation
blocks and feedback buttons; an extractive answer (no key) is posted at once, as before.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import structlog

from bot.core import ChatContext, ChatCore
from bot.slack.render import render_answer
from bot.teams import render as teams_render
from bot.teams import stream as teams_stream
from bot.teams.server import anonymous_authentication, build_app
from connectors.settings import Settings
from eval.fakes.microsoft import AppThread, FakeMicrosoft
from eval.fakes.openai_api import FakeOpenAI, passages_in
from eval.fakes.slack_api import BOT_TOKEN, SIGNING_SECRET, TEAM, FakeSlack, mention
from pipelines.models import for_people, slack_scope, teams_scope
from tests.helpers.pdfs import sections_pdf
from tests.helpers.slack import SlackHarness
from tests.helpers.teams import APP_ID, APP_PASSWORD, TeamsHarness

pytestmark = pytest.mark.slow

CHANNEL, MEMBER = "C0STREAM", "U0STREAM"
TENANT, CHAT, ALICE = "tenant-stream", "a:1personal-stream", "29:alice"
CHAT_2 = "a:1personal-stream-2"  # a chat of its own per test: a second question in a chat is a follow-up
CHAT_STOP = "a:1personal-stream-stop"
GROUP_CHAT = "19:group-stream@thread.v2"
LEAVE = "The primary carer receives 26 weeks of parental leave on full pay."
NOTICE = "Employees give four weeks of notice before parental leave starts."
QUESTION = "How many weeks of parental leave does the primary carer get?"
FIRST, SECOND = "Carers get 26 weeks on full pay [1].", "Notice is four weeks [2]."
FABRICATED = "Every employee receives a company car."


def _model(answer: str, quotes: list[str]) -> Any:
    """A model that answers ``answer``, citing ``quotes`` from the passage that holds the leave sentence."""
    def reply(req: dict[str, Any]) -> str:
        chunk = next((cid for cid, text in passages_in(req) if LEAVE in " ".join(text.split())), "none")
        cits = [{"n": n, "chunk_id": chunk, "quote": q} for n, q in enumerate(quotes, 1)]
        return json.dumps({"answerable": True, "citations": cits, "answer": answer})

    return reply


@dataclass
class World:
    """The Slack app and the Teams app over one core, in LLM mode (the local OpenAI-format server)."""

    slack: SlackHarness
    teams: TeamsHarness
    microsoft: FakeMicrosoft
    llm: FakeOpenAI
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def fake_slack(self) -> FakeSlack:
        return self.slack.fake

    def slack_ask(self, question: str) -> str:
        ts = f"{500 + next(self.ids)}.000001"
        assert self.slack.send(mention(CHANNEL, MEMBER, question, ts)) == 200
        return ts

    def slack_final(self, root: str) -> dict[str, Any]:
        self.slack.idle(120)
        (answer,) = self.fake_slack.thread(CHANNEL, root)
        return answer

    def teams_ask(self, question: str, *, chat: str = CHAT, kind: str = "personal") -> str:
        activity = self.teams.chat_message(question, chat=chat, tenant=TENANT, user=ALICE, kind=kind,
                                           activity_id=f"stream-{next(self.ids)}")
        activity["from"]["name"] = "Alice"
        assert self.teams.post(activity).status_code in (200, 201)
        return str(activity["id"])

    def teams_calls(self, activity_id: str) -> list[Any]:
        return [c for c in self.microsoft.connector_calls() if c.reply_to_id == activity_id]

    def non_streaming(self, scope: str, question: str = QUESTION) -> Any:
        """The answer the non-streaming path gives (the same model, no ``show``)."""
        return for_people(self.slack.core.service.answer(question, [scope]))


@pytest.fixture(scope="module", autouse=True)
def _log_to_live_streams() -> None:
    structlog.reset_defaults()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    data_dir: Path = tmp_path_factory.mktemp("stream")
    pdf = sections_pdf([("4.2 Parental leave", f"{LEAVE} {NOTICE}")])
    with FakeOpenAI() as llm, FakeSlack() as fake_slack, FakeMicrosoft(
        client_id=APP_ID, client_secret=APP_PASSWORD
    ) as microsoft:
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]
            data_dir=data_dir, ocr_enabled=False,
            slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET, slack_api_url=fake_slack.url,
            slack_workers=2, teams_app_id=APP_ID, teams_app_password=APP_PASSWORD,
            teams_graph_url=microsoft.graph_url, teams_token_url=microsoft.token_url,
            openai_base_url=llm.base_url, llm_model="fake-model",
        )
        core = ChatCore.from_settings(settings)
        for scope, user in [(slack_scope(TEAM, CHANNEL), MEMBER), (teams_scope(TENANT, CHAT), ALICE),
                            (teams_scope(TENANT, CHAT_2), ALICE), (teams_scope(TENANT, GROUP_CHAT), ALICE),
                            (teams_scope(TENANT, CHAT_STOP), ALICE)]:
            ctx = ChatContext(scope.split(":", 1)[0], scope, user)  # type: ignore[arg-type]
            assert core.upload(ctx, file_name="handbook.pdf", data=pdf).status == "indexed"
        with SlackHarness.serving(settings, core, fake_slack) as slack:
            app = build_app(settings, core, auth=anonymous_authentication())
            with AppThread(app) as teams:
                yield World(slack, TeamsHarness(core, settings, microsoft, teams), microsoft, llm)


@pytest.fixture(autouse=True)
def _fresh_model(world: World) -> Iterator[None]:
    world.llm.responder = _model(f"{FIRST} {SECOND}", [LEAVE, NOTICE])
    world.fake_slack.fail.clear()
    yield


# --- Slack ---------------------------------------------------------------------------------------


def test_slack_shows_the_first_sentence_while_the_model_writes_and_ends_with_the_full_answer(world: World) -> None:
    fake = world.fake_slack
    expected_text, expected_blocks = render_answer(world.non_streaming(slack_scope(TEAM, CHANNEL)))
    gate = world.llm.hold_stream("Notice is")
    ended_before = world.llm.streams_ended
    try:
        root = world.slack_ask(QUESTION)
        (start,) = fake.wait_for("chat.startStream", channel=CHANNEL, thread_ts=root, timeout=120)
        assert world.llm.streams_ended == ended_before  # the model is still writing
        assert start.params["markdown_text"] == r"Carers get 26 weeks on full pay \[1\]."
        assert start.params["recipient_user_id"] == MEMBER and start.params["recipient_team_id"] == TEAM
    finally:
        gate.set()
    final = world.slack_final(root)
    ts = final["ts"]
    (append,) = fake.calls_to("chat.appendStream", channel=CHANNEL, ts=ts)
    assert append.params["markdown_text"] == r" Notice is four weeks \[2\]."
    assert fake.calls_to("chat.stopStream", channel=CHANNEL, ts=ts)
    # the message left in the thread is the one the non-streaming path posts: text, quotes, buttons
    assert final["text"] == expected_text and final["blocks"] == expected_blocks
    assert any(b["type"] == "context_actions" for b in final["blocks"])
    assert [b for b in final["blocks"] if b["type"] == "rich_text"]  # the validated quotes
    assert not fake.calls_to("chat.postMessage", channel=CHANNEL, thread_ts=root)


def test_slack_never_shows_a_sentence_whose_quote_is_not_in_the_pdf(world: World) -> None:
    fake = world.fake_slack
    world.llm.responder = _model(f"{FIRST} Every employee gets a company car [2].", [LEAVE, FABRICATED])
    before = len(fake.calls)
    root = world.slack_ask(QUESTION)
    final = world.slack_final(root)
    sent = [c for c in fake.calls[before:] if "company car" in json.dumps(c.params)]
    assert not sent, [(c.method, c.params) for c in sent]
    assert "company car" not in json.dumps(final)
    assert final["text"].startswith("Carers get 26 weeks on full pay [1].")
    assert "left out" in json.dumps(final["blocks"])  # the note says a statement was left out, as without streaming


def test_slack_posts_then_edits_where_streaming_is_refused(world: World) -> None:
    fake = world.fake_slack
    fake.fail["chat.startStream"] = "not_allowed_token_type"
    expected_text, expected_blocks = render_answer(world.non_streaming(slack_scope(TEAM, CHANNEL)))
    gate = world.llm.hold_stream("Notice is")
    ended_before = world.llm.streams_ended
    try:
        root = world.slack_ask(QUESTION)
        (post,) = fake.wait_for("chat.postMessage", channel=CHANNEL, thread_ts=root, timeout=120)
        assert world.llm.streams_ended == ended_before
        assert post.params["text"] == "Carers get 26 weeks on full pay [1]." and not post.params.get("blocks")
    finally:
        gate.set()
    final = world.slack_final(root)
    assert final["ts"] == post.reply["ts"]
    assert final["text"] == expected_text and final["blocks"] == expected_blocks


def test_slack_posts_at_once_when_nothing_was_streamed(world: World) -> None:
    fake = world.fake_slack
    world.llm.responder = lambda req: "not json at all"  # the model fails: the extractive answer, posted at once
    root = world.slack_ask(QUESTION)
    final = world.slack_final(root)
    assert not fake.calls_to("chat.startStream", channel=CHANNEL, thread_ts=root)
    (post,) = fake.calls_to("chat.postMessage", channel=CHANNEL, thread_ts=root)
    assert post.params["blocks"] == final["blocks"] and LEAVE in json.dumps(final["blocks"])


# --- Teams ---------------------------------------------------------------------------------------


def _info(call: Any) -> dict[str, Any]:
    return next((e for e in call.body.get("entities") or [] if e.get("type") == "streaminfo"), {})


def _as_posted(activity: Any) -> dict[str, Any]:
    body = activity.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {k: body.get(k) for k in ("type", "text", "textFormat", "entities", "channelData", "attachments")}


@pytest.fixture
def _every_update(monkeypatch: pytest.MonkeyPatch) -> None:
    """Send every sentence as it comes (Teams is sent at most one update a second otherwise)."""
    monkeypatch.setattr(teams_stream, "UPDATE_INTERVAL_S", 0.0)


@pytest.mark.usefixtures("_every_update")
def test_teams_streams_in_a_personal_chat_and_ends_with_the_full_answer(world: World) -> None:
    ms = world.microsoft
    expected = _as_posted(teams_render.answer_activity(world.non_streaming(teams_scope(TENANT, CHAT)),
                                                       quote_card=False))
    gate = world.llm.hold_stream("Notice is")
    ended_before = world.llm.streams_ended
    try:
        aid = world.teams_ask(QUESTION)
        (first,) = ms.wait_for(lambda c: c.reply_to_id == aid and c.type == "typing" and bool(_info(c)), timeout=120)
        assert world.llm.streams_ended == ended_before  # the model is still writing
        assert _info(first) == {"type": "streaminfo", "streamType": "streaming", "streamSequence": 1}
        assert first.text == "Carers get 26 weeks on full pay [1]."
    finally:
        gate.set()
    (final,) = ms.wait_for(lambda c: c.reply_to_id == aid and c.type == "message", timeout=120)
    updates = [c for c in world.teams_calls(aid) if c.type == "typing" and _info(c)]
    assert [(c.text, _info(c).get("streamSequence")) for c in updates] == [
        ("Carers get 26 weeks on full pay [1].", 1), (f"{FIRST} {SECOND}", 2)]
    stream_id = first.response_id
    assert _info(updates[1])["streamId"] == stream_id
    assert _info(final) == {"type": "streaminfo", "streamType": "final", "streamId": stream_id}
    posted = {**final.body, "entities": [e for e in final.body["entities"] if e.get("type") != "streaminfo"]}
    assert {k: posted.get(k) for k in expected} == expected  # what the non-streaming path posts
    assert not [c for c in ms.calls if c.method == "POST#refused"]


@pytest.mark.usefixtures("_every_update")
def test_teams_never_shows_a_sentence_whose_quote_is_not_in_the_pdf(world: World) -> None:
    world.llm.responder = _model(f"{FIRST} Every employee gets a company car [2].", [LEAVE, FABRICATED])
    aid = world.teams_ask(QUESTION, chat=CHAT_2)
    (final,) = world.microsoft.wait_for(lambda c: c.reply_to_id == aid and c.type == "message", timeout=120)
    assert _info(final)["streamType"] == "final"
    assert not [c for c in world.microsoft.calls if "company car" in json.dumps(c.body)]
    assert final.text.startswith("Carers get 26 weeks on full pay [1].")


@pytest.mark.usefixtures("_every_update")
def test_teams_posts_at_once_outside_personal_chats(world: World) -> None:
    expected = _as_posted(teams_render.answer_activity(world.non_streaming(teams_scope(TENANT, GROUP_CHAT)),
                                                       quote_card=False))
    aid = world.teams_ask(QUESTION, chat=GROUP_CHAT, kind="groupChat")
    (final,) = world.microsoft.wait_for(lambda c: c.reply_to_id == aid and c.type == "message", timeout=120)
    assert not [c for c in world.teams_calls(aid) if _info(c)]
    assert {k: final.body.get(k) for k in expected} == expected


@pytest.mark.usefixtures("_every_update")
def test_teams_posts_the_answer_on_its_own_when_the_asker_stopped_the_stream(world: World) -> None:
    """The asker pressed Stop while the model was still writing: Teams refuses the stream's next update and its final
    (403), so the preview stops and the answer comes as a message of its own, once; no apology."""
    ms = world.microsoft
    gate = world.llm.hold_stream("Notice is")
    try:
        aid = world.teams_ask(QUESTION, chat=CHAT_STOP)
        (first,) = ms.wait_for(lambda c: c.reply_to_id == aid and c.type == "typing" and bool(_info(c)), timeout=120)
        ms.stop_stream(first.response_id)
    finally:
        gate.set()
    (final,) = ms.wait_for(lambda c: c.reply_to_id == aid and c.type == "message", timeout=120)
    time.sleep(1)  # room for a second message to show
    refused = [_info(c) for c in ms.calls if c.method == "POST#refused" and c.conversation_id == CHAT_STOP]
    assert [i["streamType"] for i in refused] == ["streaming", "final"]  # the next update, then the final, refused
    assert {i["streamId"] for i in refused} == {first.response_id}
    assert [c.body for c in world.teams_calls(aid) if c.type == "message"] == [final.body]
    assert not _info(final) and final.text.startswith("Carers get 26 weeks on full pay [1].")
