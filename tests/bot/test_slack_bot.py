"""The real Bolt app, end to end: signed HTTP deliveries in, Web API calls out to a local fake Slack.

The bot runs with the real ``CitebotService`` (SQLite store, embedding model, extractive answers)
over small PDFs generated here. Every wait is on something the fake Slack recorded or on the bot's
worker pool going idle — never a blind sleep.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.core import ChatContext, ChatCore
from bot.slack.app import build_bot
from bot.slack.server import make_http_server, socket_mode_handler
from bot.texts import APOLOGY
from bot.texts import SLACK_HELP_TEXT as HELP_TEXT
from connectors.settings import Settings
from eval.fakes.slack_api import (
    APP_TOKEN,
    BOT_ID,
    BOT_TOKEN,
    BOT_USER,
    SIGNING_SECRET,
    TEAM,
    FakeSlack,
    assistant_thread_event,
    button_click,
    event_callback,
    feedback_click,
    mention,
    message,
    post_interaction,
    post_signed,
    view_submission,
)
from eval.fakes.slack_socket_mode import FakeSocketMode
from pipelines.models import slack_scope
from tests.helpers.pdfs import LEAVE_PAGES, make_pdf
from tests.helpers.slack import SlackHarness as Harness

pytestmark = pytest.mark.slow

LEAVE_PDF = "leave_policy.pdf"
CONTRACT_PDF = "kestrel_contract.pdf"
OFFSITE_PDF = "offsite_notes.pdf"

CONTRACT_PAGES = [
    [
        "Article 7 Delivery",
        "7.1 The supplier shall deliver the turbines within ninety days of the purchase order.",
        "7.2 The penalty for late delivery is two percent of the order value for each week of delay.",
    ]
]
OFFSITE_PAGES = [["Offsite planning", "The quarterly offsite takes place in Tromso at the harbour conference centre."]]

C_LEAVE, C_CONTRACT, DM = "C0LEAVE", "C0CONTRACT", "D0ASKER"
MEMBER, OUTSIDER = "U0MEMBER", "U0OUTSIDER"  # MEMBER is in C_LEAVE only; OUTSIDER in C_CONTRACT only
ADMIN = "U0ADMIN"


@pytest.fixture(scope="module")
def slack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    data_dir: Path = tmp_path_factory.mktemp("slack-data")
    fake = FakeSlack().start()
    fake.memberships = {MEMBER: [C_LEAVE], OUTSIDER: [C_CONTRACT]}
    fake.admins = {ADMIN}
    settings = Harness.settings(data_dir, fake, slack_workers=2)
    core = ChatCore.from_settings(settings)
    for scope, name, pages in [
        (slack_scope(TEAM, C_LEAVE), LEAVE_PDF, LEAVE_PAGES),
        (slack_scope(TEAM, C_CONTRACT), CONTRACT_PDF, CONTRACT_PAGES),
        (slack_scope(TEAM, DM), OFFSITE_PDF, OFFSITE_PAGES),
    ]:
        result = core.upload(ChatContext("slack", scope, MEMBER), file_name=name, data=make_pdf(pages))
        assert result.status == "indexed", result
    with Harness.serving(settings, core, fake) as harness:  # the production Web API client, pointed at the fake
        yield harness
    fake.stop()


# --- questions ------------------------------------------------------------------------------------


def test_mention_gets_a_threaded_answer_with_quote_blocks(slack: Harness) -> None:
    status = slack.send(mention(C_LEAVE, MEMBER, "How many weeks of parental leave do employees get?", "100.000001"))
    assert status == 200
    answer_call = slack.fake.wait_for("chat.postMessage", channel=C_LEAVE, thread_ts="100.000001")[0]
    posted = answer_call.params
    # while it worked, the thread said what it was doing (Slack's AI status line, no 👀 needed)
    (status,) = slack.fake.calls_to("assistant.threads.setStatus", channel_id=C_LEAVE, thread_ts="100.000001")
    assert status.params["status"] == "Searching 1 PDF…" and status.at < answer_call.at
    assert slack.fake.calls_to("reactions.add", timestamp="100.000001") == []
    buttons = slack.feedback_buttons(posted)
    assert (buttons["positive_button"]["text"]["text"], buttons["negative_button"]["text"]["text"]) == ("👍", "👎")
    quotes = [b for b in posted["blocks"] if b["type"] == "rich_text"]
    assert quotes, posted["blocks"]
    quoted = " ".join(e["text"] for q in quotes for e in q["elements"][0]["elements"])
    assert "eighteen weeks" in quoted
    assert slack.files_cited(posted) == {LEAVE_PDF}
    locations = [b["elements"][0]["text"] for b in posted["blocks"] if b["type"] == "context"]
    assert any(loc.startswith(f"{LEAVE_PDF} · p. 2") for loc in locations), locations
    assert "eighteen weeks" in posted["text"]  # the plain-text fallback carries the quote too


def test_the_status_shows_while_every_worker_is_busy(slack: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """The asker sees a sign of life before any worker is free: every answer is held (a slow LLM, say) until the
    status line is posted, so a status that needed a worker would never come."""
    real_answer = slack.core.service.answer
    started, release = threading.Semaphore(0), threading.Event()

    def slow(*args: Any, **kw: Any) -> Any:
        started.release()
        release.wait(120)
        return real_answer(*args, **kw)

    monkeypatch.setattr(slack.core.service, "answer", slow)
    try:
        for i in range(slack.bot.settings.slack_workers):  # every worker is answering someone else
            slack.send(mention(C_LEAVE, MEMBER, "How many weeks of parental leave do employees get?",
                               f"102.00000{i}"))
        for _ in range(slack.bot.settings.slack_workers):
            assert started.acquire(timeout=60), "the workers never started answering"
        slack.send(mention(C_LEAVE, ADMIN, "How far in advance must parental leave be requested?", "102.000009"))
        (status,) = slack.fake.wait_for("assistant.threads.setStatus", channel_id=C_LEAVE,
                                        thread_ts="102.000009", timeout=60)
        assert not release.is_set()  # shown while every worker was still held
    finally:
        release.set()
    answer = slack.fake.wait_for("chat.postMessage", channel=C_LEAVE, thread_ts="102.000009", timeout=60)[0]
    assert answer.at > status.at
    slack.idle()


def test_where_slack_refuses_the_status_line_the_eyes_reaction_shows_work(
    slack: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(slack.fake.fail, "assistant.threads.setStatus", "missing_scope")  # an older workspace
    slack.send(mention(C_LEAVE, MEMBER, "How many weeks of parental leave do employees get?", "101.000001"))
    answer = slack.fake.wait_for("chat.postMessage", channel=C_LEAVE, thread_ts="101.000001")[0]
    (added,) = slack.fake.calls_to("reactions.add", channel=C_LEAVE, timestamp="101.000001", name="eyes")
    assert added.at < answer.at
    slack.fake.wait_for("reactions.remove", channel=C_LEAVE, timestamp="101.000001", name="eyes")


def test_follow_up_in_an_answered_thread_needs_no_mention_and_uses_history(
    slack: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen_history: list[list[Any]] = []
    real_answer = slack.core.service.answer

    def spy(question: str, scopes: Any, history: Any = (), **kw: Any) -> Any:
        seen_history.append(list(history))
        return real_answer(question, scopes, history, **kw)

    monkeypatch.setattr(slack.core.service, "answer", spy)
    root = "110.000001"
    slack.send(mention(C_LEAVE, MEMBER, "How many weeks of parental leave do employees get?", root))
    slack.fake.wait_for("chat.postMessage", channel=C_LEAVE, thread_ts=root)
    slack.idle()
    follow_up = "How far in advance must parental leave be requested?"
    slack.send(message(C_LEAVE, MEMBER, follow_up, "110.000002", thread_ts=root))
    posted = slack.fake.wait_for("chat.postMessage", 2, channel=C_LEAVE, thread_ts=root)
    assert "four weeks" in posted[1].params["text"]
    assert seen_history[0] == []
    assert [t.role for t in seen_history[1]] == ["user", "assistant"]
    assert "parental leave" in seen_history[1][0].text

    # a thread the bot never answered: people talk among themselves, the bot stays out
    slack.send(message(C_LEAVE, MEMBER, "lunch?", "111.000002", thread_ts="111.000001"))
    # another bot posting in the answered thread is ignored too
    other_bot = message(C_LEAVE, "U0OTHERBOT", "beep", "110.000003", thread_ts=root) | {"bot_id": "B0OTHER"}
    slack.send(other_bot)
    # and so is the bot's own answer echoed back as a message event
    own = message(C_LEAVE, BOT_USER, "an answer", "110.000004", thread_ts=root) | {"bot_id": BOT_ID}
    slack.send(own)
    slack.idle()
    assert slack.fake.calls_to("chat.postMessage", channel=C_LEAVE, thread_ts="111.000001") == []
    assert len(slack.fake.calls_to("chat.postMessage", channel=C_LEAVE, thread_ts=root)) == 2


def test_a_question_with_several_readings_asks_back_with_a_button_each_and_a_click_answers_it(slack: Harness) -> None:
    from eval.sample_pdfs import CONTRACT, HANDBOOK, sample_bytes

    channel = "C0BOTHPDFS"
    for name in (HANDBOOK, CONTRACT):
        ctx = ChatContext("slack", slack_scope(TEAM, channel), MEMBER)
        assert slack.core.upload(ctx, file_name=name, data=sample_bytes(name)).status == "indexed"
    root = "130.000001"
    slack.send(mention(channel, MEMBER, "What is the limit?", root))
    asked_call = slack.fake.wait_for("chat.postMessage", channel=channel, thread_ts=root)[0]
    asked = asked_call.params
    lines = asked["text"].splitlines()
    assert lines[0] == "Which limit do you mean? The PDFs mention several:"
    assert lines[1].startswith(f"1. 2.1 Flexitime ({HANDBOOK}, p. 2) [1] → ask")
    assert lines[2].startswith(f"2. ARTICLE VI LIABILITY ({CONTRACT}, p. 5) [2] → ask")
    assert lines[3].startswith(f"3. 6 Travel and Expenses ({HANDBOOK}, p. 8) [3] → ask")
    assert slack.files_cited(asked) == {CONTRACT, HANDBOOK}  # each reading quoted, with its place
    # the three readings as buttons, under the quotes and above 👍/👎
    kinds = [b["type"] for b in asked["blocks"]]
    assert kinds.index("actions") > max(i for i, k in enumerate(kinds) if k == "rich_text")
    assert kinds.index("actions") < kinds.index("context_actions")
    (buttons,) = [b["elements"] for b in asked["blocks"] if b["type"] == "actions"]
    assert [b["text"]["text"] for b in buttons] == [f"1. 2.1 Flexitime · {HANDBOOK}",
                                                    f"2. ARTICLE VI LIABILITY · {CONTRACT}",
                                                    f"3. 6 Travel and Expenses · {HANDBOOK}"]
    slack.idle()
    offered_ts = str(asked_call.reply["ts"])

    # a click on the hotel reading: acknowledged at once (while the answer's post is held, so the ack cannot have
    # waited for the answer), answered in the same thread, quoting that reading
    slack.fake.hold_replies["chat.postMessage"] = threading.Event()
    try:
        status, _ = post_interaction(slack.url, button_click(user=MEMBER, channel=channel, message_ts=offered_ts,
                                                             thread_ts=root, action_id=buttons[2]["action_id"],
                                                             value=buttons[2]["value"]))
        assert status == 200
    finally:
        slack.fake.hold_replies.pop("chat.postMessage").set()
    posted = slack.fake.wait_for("chat.postMessage", 2, channel=channel, thread_ts=root)
    assert "up to 160 pounds per night in London" in posted[1].params["text"]
    assert slack.files_cited(posted[1].params) == {HANDBOOK}
    slack.idle()
    assert slack.core.history("slack", f"{channel}:{root}")[-2].text == buttons[2]["value"]  # the thread has it

    # a reply "2" in the thread still answers the second reading
    slack.send(message(channel, MEMBER, "2", "130.000002", thread_ts=root))
    posted = slack.fake.wait_for("chat.postMessage", 3, channel=channel, thread_ts=root)
    assert "total liability" in posted[2].params["text"] and slack.files_cited(posted[2].params) == {CONTRACT}
    slack.idle()

    # the same button clicked in another channel (or a payload naming one): that channel's PDFs, never these
    elsewhere = "150.000001"
    status, _ = post_interaction(slack.url, button_click(user=OUTSIDER, channel=C_CONTRACT, message_ts=elsewhere,
                                                         thread_ts=elsewhere, action_id=buttons[2]["action_id"],
                                                         value=buttons[2]["value"]))
    assert status == 200
    (there,) = slack.fake.wait_for("chat.postMessage", channel=C_CONTRACT, thread_ts=elsewhere)
    assert HANDBOOK not in json.dumps(there.params) and "160 pounds" not in json.dumps(there.params)
    assert slack.files_cited(there.params) <= {CONTRACT_PDF}
    slack.idle()

    # a value no button of ours carries (too long) is acknowledged and dropped
    before = len(slack.fake.calls_to("chat.postMessage", channel=channel))
    status, _ = post_interaction(slack.url, button_click(user=MEMBER, channel=channel, message_ts=offered_ts,
                                                         thread_ts=root, action_id=buttons[0]["action_id"],
                                                         value="What is the limit? " * 100))
    assert status == 200
    slack.idle()
    assert len(slack.fake.calls_to("chat.postMessage", channel=channel)) == before


def test_a_click_under_a_private_which_one_answer_is_answered_privately(slack: Harness) -> None:
    """Issue 40 row 2: a ``/citebot`` question answered "which one?" shows its buttons to the asker alone; a click
    on one is answered to the clicker alone (the click's response_url, ephemeral), never in the channel, where it
    would show the private question and its answer to everyone."""
    from eval.sample_pdfs import CONTRACT, HANDBOOK, sample_bytes

    channel = "C0PRIVCHOICE"
    for name in (HANDBOOK, CONTRACT):
        ctx = ChatContext("slack", slack_scope(TEAM, channel), MEMBER)
        assert slack.core.upload(ctx, file_name=name, data=sample_bytes(name)).status == "indexed"
    slack.command("What is the limit?", channel=channel, user=MEMBER, name="priv-which")
    asked = slack.fake.wait_for("response_url", name="priv-which")[0].params
    assert asked["response_type"] == "ephemeral" and asked["text"].startswith("Which limit do you mean?")
    (buttons,) = [b["elements"] for b in asked["blocks"] if b["type"] == "actions"]
    slack.idle()

    click = button_click(user=MEMBER, channel=channel, message_ts="1700000000.000200",
                         action_id=buttons[2]["action_id"], value=buttons[2]["value"], ephemeral=True,
                         response_url=slack.fake.response_url("priv-pick"))
    assert post_interaction(slack.url, click)[0] == 200
    picked = slack.fake.wait_for("response_url", name="priv-pick")[0].params
    slack.idle()
    assert picked["response_type"] == "ephemeral" and "160 pounds per night in London" in picked["text"]
    assert slack.fake.calls_to("chat.postMessage", channel=channel) == []  # nothing for the channel to see
    assert slack.fake.calls_to("assistant.threads.setStatus", channel_id=channel) == []
    # 👍/👎 under the private answer are recorded against it
    assert any(b["type"] == "context_actions" for b in picked["blocks"])


def test_a_quoted_table_arrives_one_row_per_line(slack: Harness) -> None:
    """A table quoted whole shows as a table: caption, header and each year's row on a line of its own, in the quote
    block and in the notification text, not as one run of ``… | Offices 2018 | 84.2 | 910 | 3 2019 | …``."""
    from eval.sample_pdfs import HANDBOOK, sample_bytes

    channel = "C0TABLES"
    ctx = ChatContext("slack", slack_scope(TEAM, channel), MEMBER)
    assert slack.core.upload(ctx, file_name=HANDBOOK, data=sample_bytes(HANDBOOK)).status == "indexed"
    slack.send(mention(channel, MEMBER, "What does Table 2 say?", "135.000001"))
    posted = slack.fake.wait_for("chat.postMessage", channel=channel, thread_ts="135.000001")[0].params
    (quote,) = [b for b in posted["blocks"] if b["type"] == "rich_text"]
    marker, text = quote["elements"][0]["elements"]
    assert marker["text"] == "[1] "
    rows = [
        "Table 2: Revenue and headcount by year, 2018-2023",
        "Year | Revenue (GBP million) | Headcount at year end | Offices",
        "2018 | 84.2 | 910 | 3",
        "2019 | 91.5 | 985 | 3",
        "2020 | 78.9 | 940 | 3",
        "2021 | 102.3 | 1,050 | 4",
        "2022 | 118.6 | 1,180 | 4",
        "2023 | 112.4 | 1,240 | 4",
    ]
    assert text["text"].splitlines() == rows
    assert slack.files_cited(posted) == {HANDBOOK}
    fallback = posted["text"].splitlines()
    start = fallback.index(f"[1] “{rows[0]}")
    assert fallback[start + 1 : start + len(rows) - 1] == rows[1:-1]
    assert fallback[start + len(rows) - 1].startswith(f"{rows[-1]}” — {HANDBOOK} · p. ")


def test_dm_searches_the_dm_and_the_askers_channels_only(slack: Harness) -> None:
    # MEMBER is in C_LEAVE, not C_CONTRACT: the leave policy and the DM's own notes answer, the contract never
    for ts, question in [
        ("120.000001", "How many weeks of parental leave do employees get?"),
        ("120.000002", "Where does the quarterly offsite take place?"),
        ("120.000003", "What is the penalty for late delivery of the turbines?"),
    ]:
        slack.send(message(DM, MEMBER, question, ts, channel_type="im"))
    leave = slack.fake.wait_for("chat.postMessage", channel=DM, thread_ts="120.000001")[0].params
    offsite = slack.fake.wait_for("chat.postMessage", channel=DM, thread_ts="120.000002")[0].params
    penalty = slack.fake.wait_for("chat.postMessage", channel=DM, thread_ts="120.000003")[0].params
    assert slack.files_cited(leave) == {LEAVE_PDF}
    assert slack.files_cited(offsite) == {OFFSITE_PDF}
    assert CONTRACT_PDF not in penalty["text"] and CONTRACT_PDF not in slack.files_cited(penalty)
    assert "two percent" not in penalty["text"]
    assert slack.fake.calls_to("users.conversations", user=MEMBER)

    # the same question from someone who IS in the contract channel finds it
    slack.send(
        message(
            "D0OUTSIDER",
            OUTSIDER,
            "What is the penalty for late delivery of the turbines?",
            "121.000001",
            channel_type="im",
        )
    )
    found = slack.fake.wait_for("chat.postMessage", channel="D0OUTSIDER", thread_ts="121.000001")[0].params
    assert slack.files_cited(found) == {CONTRACT_PDF}
    assert "two percent" in found["text"]


def test_channel_workspace_and_dm_isolation(slack: Harness) -> None:
    q = "How many weeks of parental leave do employees get?"
    slack.send(mention(C_CONTRACT, OUTSIDER, q, "130.000001"))  # another channel
    slack.send(mention(C_LEAVE, MEMBER, q, "130.000002"), team="T0OTHER")  # same channel id, other workspace
    slack.send(message("D0OUTSIDER", OUTSIDER, q, "130.000003", channel_type="im"))  # DM of a non-member
    for channel, ts in [(C_CONTRACT, "130.000001"), (C_LEAVE, "130.000002"), ("D0OUTSIDER", "130.000003")]:
        posted = slack.fake.wait_for("chat.postMessage", channel=channel, thread_ts=ts)[0].params
        assert LEAVE_PDF not in slack.files_cited(posted)
        assert "eighteen weeks" not in posted["text"]
    # listings and counts follow the same rule
    _, body = slack.command("docs", channel=C_CONTRACT, user=OUTSIDER, name="iso-docs")
    listed = slack.fake.wait_for("response_url", name="iso-docs")[0].params["text"]
    assert CONTRACT_PDF in listed and LEAVE_PDF not in listed and OFFSITE_PDF not in listed
    slack.command("stats", channel="D0OUTSIDER", user=OUTSIDER, name="iso-stats")
    stats = slack.fake.wait_for("response_url", name="iso-stats")[0].params["text"]
    assert stats.startswith("1 documents")  # the contract channel only: not the leave policy, not MEMBER's DM


# --- reliability ------------------------------------------------------------------------------------


def test_retried_and_repeated_deliveries_answer_once(slack: Harness) -> None:
    event = mention(C_LEAVE, MEMBER, "How many weeks of parental leave do employees get?", "140.000001")
    assert slack.send(event, event_id="EvRETRY1") == 200
    assert slack.send(event, event_id="EvRETRY1", retry_num=1) == 200  # Slack's retry
    assert slack.send(event, event_id="EvRETRY1") == 200  # the same event id again
    # the app_mention's twin message event (another event id) must not answer a second time either
    twin = message(C_LEAVE, MEMBER, f"<@{BOT_USER}> How many weeks of parental leave?", "140.000001")
    assert slack.send(twin, event_id="EvTWIN1") == 200
    slack.fake.wait_for("chat.postMessage", channel=C_LEAVE, thread_ts="140.000001")
    slack.idle()
    assert len(slack.answers(C_LEAVE, "140.000001")) == 1

    # a retry whose first delivery never arrived is answered (once)
    late = mention(C_LEAVE, MEMBER, "How many weeks of parental leave do employees get?", "141.000001")
    assert slack.send(late, event_id="EvLOST1", retry_num=2) == 200
    slack.fake.wait_for("chat.postMessage", channel=C_LEAVE, thread_ts="141.000001")
    slack.idle()
    assert len(slack.answers(C_LEAVE, "141.000001")) == 1


def test_retry_after_a_restart_is_not_answered_again(slack: Harness) -> None:
    event = mention(C_LEAVE, MEMBER, "How many weeks of parental leave do employees get?", "145.000001")
    slack.send(event, event_id="EvRESTART1")
    slack.fake.wait_for("chat.postMessage", channel=C_LEAVE, thread_ts="145.000001")
    slack.idle()
    # a fresh process (empty memory) on the same data dir gets Slack's retry
    restarted = build_bot(slack.bot.settings, ChatCore(slack.core.service, slack.core.state, slack.core.settings))
    server = make_http_server(restarted.app, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/slack/events"
        status, _ = post_signed(url, event_callback(event, event_id="EvRESTART1"), retry_num=1)
        assert status == 200
        assert restarted.wait_idle(60)
        # the status and its take-back run on the bot's small UI pool, which wait_idle does not cover and close()
        # cancels: wait for them, or on a busy machine the restarted bot is closed before it shows anything
        slack.fake.wait_for("assistant.threads.setStatus", count=3, thread_ts="145.000001", timeout=60)
    finally:
        server.shutdown()
        server.server_close()
        restarted.close()
    assert len(slack.answers(C_LEAVE, "145.000001")) == 1
    statuses = [c.params["status"] for c in slack.fake.calls_to("assistant.threads.setStatus", thread_ts="145.000001")]
    assert statuses == ["Searching 1 PDF…", "Searching 1 PDF…", ""]  # the restarted bot took its status back


def test_forged_signature_is_rejected_with_401_and_no_work(slack: Harness) -> None:
    before = len(slack.fake.calls)
    event = event_callback(mention(C_LEAVE, MEMBER, "How many weeks of parental leave?", "150.000001"))
    status, _ = post_signed(slack.url, event, secret="not-the-signing-secret")
    assert status == 401
    cmd = {"team_id": TEAM, "channel_id": C_LEAVE, "user_id": ADMIN, "command": "/citebot"}
    cmd["text"] = f"forget {LEAVE_PDF}"
    status, _ = post_signed(slack.url, cmd, form=True, secret="not-the-signing-secret")
    assert status == 401
    slack.idle()
    assert slack.fake.calls[before:] == []
    assert slack.core.documents([slack_scope(TEAM, C_LEAVE)])  # still there


def test_exception_while_answering_posts_apology_and_bot_keeps_serving(
    slack: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_answer = slack.core.service.answer
    calls = {"n": 0}

    def flaky(*args: Any, **kw: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("the store went away")
        return real_answer(*args, **kw)

    monkeypatch.setattr(slack.core.service, "answer", flaky)
    slack.send(mention(C_LEAVE, MEMBER, "How many weeks of parental leave do employees get?", "160.000001"))
    apology = slack.fake.wait_for("chat.postMessage", channel=C_LEAVE, thread_ts="160.000001")[0].params
    assert apology["text"] == APOLOGY
    assert "store went away" not in str(slack.fake.calls_to("chat.postMessage"))
    slack.send(mention(C_LEAVE, MEMBER, "How many weeks of parental leave do employees get?", "160.000002"))
    answer = slack.fake.wait_for("chat.postMessage", channel=C_LEAVE, thread_ts="160.000002")[0].params
    assert "eighteen weeks" in answer["text"]


def test_rate_limited_post_is_retried_after_retry_after(slack: Harness) -> None:
    slack.fake.rate_limit_once.add("chat.postMessage")
    slack.send(mention(C_LEAVE, MEMBER, "How many weeks of parental leave do employees get?", "170.000001"))
    posted = slack.fake.wait_for("chat.postMessage", channel=C_LEAVE, thread_ts="170.000001")
    slack.idle()
    assert slack.fake.calls_to("chat.postMessage#429")
    assert len(posted) == 1 and "eighteen weeks" in posted[0].params["text"]


# --- files ------------------------------------------------------------------------------------------


def _file_share(channel: str, user: str, file_obj: dict[str, Any], ts: str) -> dict[str, Any]:
    return message(channel, user, "", ts) | {"subtype": "file_share", "files": [file_obj]}


def _file_shared(channel: str, user: str, file_id: str) -> dict[str, Any]:
    return {"type": "file_shared", "file_id": file_id, "user_id": user, "file": {"id": file_id}, "channel_id": channel}


def test_pdf_upload_both_delivery_paths_ingest_once_with_progress(slack: Harness) -> None:
    channel, scope = "C0UPLOAD", slack_scope(TEAM, "C0UPLOAD")
    file_obj = slack.fake.add_file("F0LEAVE", "team_handbook.pdf", make_pdf(LEAVE_PAGES))
    slack.fake.files["F0LEAVE"].shares[channel] = "180.000001"
    slack.send(_file_shared(channel, MEMBER, "F0LEAVE"))
    slack.send(_file_share(channel, MEMBER, file_obj, "180.000001"))
    slack.fake.wait_for("chat.update", channel=channel, timeout=120)
    slack.idle()
    progress = slack.fake.calls_to("chat.postMessage", channel=channel)
    assert len(progress) == 1 and progress[0].params["text"] == "Indexing team_handbook.pdf…"
    assert progress[0].params["thread_ts"] == "180.000001"
    updates = slack.fake.calls_to("chat.update", channel=channel)
    assert {u.params["ts"] for u in updates} == {progress[0].reply["ts"]}  # updated in place
    assert updates[-1].params["text"].startswith("Indexed team_handbook.pdf: 2 pages")
    assert len(updates) >= 2 and updates[0].params["text"].startswith("Indexing team_handbook.pdf…")  # progress
    downloads = slack.fake.calls_to("file.download", file="F0LEAVE")
    assert len(downloads) == 1 and downloads[0].authorized
    docs = slack.core.documents([scope])
    assert [(d.file, d.uploaded_by) for d in docs] == [("team_handbook.pdf", MEMBER)]

    # and it answers from it in that channel
    slack.send(mention(channel, MEMBER, "How many weeks of parental leave do employees get?", "181.000001"))
    posted = slack.fake.wait_for("chat.postMessage", channel=channel, thread_ts="181.000001")[0].params
    assert slack.files_cited(posted) == {"team_handbook.pdf"}
    # each citation's file name and page link to the upload (its Slack permalink, kept at upload time)
    permalink = slack.fake.file_object("F0LEAVE")["permalink"]
    assert any(loc.startswith(f"<{permalink}|team_handbook.pdf, p. 2> · ") for loc in slack.locations(posted)), (
        slack.locations(posted)
    )

    # file_deleted removes it
    slack.send({"type": "file_deleted", "file_id": "F0LEAVE", "event_ts": "182.0"})
    slack.idle()
    assert slack.core.documents([scope]) == []


def test_a_question_is_answered_while_uploads_fill_their_pool(slack: Harness) -> None:
    """Issue 28 row 2: uploads run on a bounded pool of their own, so with every upload worker stuck on a slow
    download (and more uploads waiting) a question in another channel is still answered, not queued behind them."""
    channel = "C0BUSY"
    workers = slack.bot.settings.upload_workers
    held = slack.fake.hold_replies["file.download"] = threading.Event()

    def busy_downloads() -> int:
        return sum(c.params["file"].startswith("F0BUSY") for c in slack.fake.calls_to("file.download"))

    try:
        for i in range(workers + 2):
            slack.fake.add_file(f"F0BUSY{i}", f"minutes {i}.pdf", make_pdf([[f"Minutes {i}", f"Meeting {i} agreed."]]))
            slack.send(_file_shared(channel, MEMBER, f"F0BUSY{i}"))
        slack.fake.wait_until(lambda: busy_downloads() >= workers, timeout=60)
        slack.send(mention(C_LEAVE, MEMBER, "How many weeks of parental leave do employees get?", "195.000001"))
        slack.fake.wait_until(lambda: bool(slack.answers(C_LEAVE, "195.000001")), timeout=60)
        assert not held.is_set() and busy_downloads() == workers  # the uploads are still stuck
        assert slack.files_cited(slack.answers(C_LEAVE, "195.000001")[0]) == {LEAVE_PDF}
    finally:
        held.set()
        slack.fake.hold_replies.pop("file.download", None)
        slack.idle()
    assert len(slack.core.documents([slack_scope(TEAM, channel)])) == workers + 2  # and every upload is indexed after


def test_corrupt_pdf_fails_clearly_and_leaves_the_store_unchanged(slack: Harness) -> None:
    channel, scope = "C0BROKEN", slack_scope(TEAM, "C0BROKEN")
    before = slack.core.service.store.count_documents()
    file_obj = slack.fake.add_file("F0BROKEN", "broken report.pdf", b"%PDF-1.4\n%garbage that is no pdf\n" * 20)
    slack.send(_file_share(channel, MEMBER, file_obj, "190.000001"))
    update = slack.fake.wait_for("chat.update", channel=channel)[-1].params
    slack.idle()
    text = slack.fake.calls_to("chat.update", channel=channel)[-1].params["text"]
    assert text.startswith("I couldn't index broken report.pdf"), update
    assert slack.core.service.store.count_documents() == before
    assert slack.core.documents([scope]) == []


def test_oversized_or_vanished_files_fail_clearly_without_indexing(slack: Harness) -> None:
    channel = "C0BIG"
    big = slack.fake.add_file("F0BIG", "huge scan.pdf", make_pdf(OFFSITE_PAGES)) | {"size": 10**9}
    gone = slack.fake.add_file("F0GONE", "gone.pdf", make_pdf(OFFSITE_PAGES))
    del slack.fake.files["F0GONE"]  # deleted on Slack's side before we could fetch it
    slack.send(_file_share(channel, MEMBER, big, "205.000001"))
    slack.send(_file_share(channel, MEMBER, gone, "205.000002"))
    slack.fake.wait_for("chat.update", 2, channel=channel)
    slack.idle()
    texts = sorted(c.params["text"] for c in slack.fake.calls_to("chat.update", channel=channel))
    assert texts == [
        "I couldn't index gone.pdf: the file server answered HTTP 404.",
        "I couldn't index huge scan.pdf: the file is larger than the 50 MB limit.",
    ]
    assert slack.fake.calls_to("file.download", file="F0BIG") == []
    assert slack.core.documents([slack_scope(TEAM, channel)]) == []


def test_a_download_error_shows_a_fixed_text_never_its_message(
    slack: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bug: Slack showed ``f"...: {e}."``; an exception's message may carry a signed URL or the token."""
    import bot.slack.files
    from connectors.download import DownloadError

    def leaky(url: str, **kw: Any) -> bytes:
        raise DownloadError(f"GET {url} with {kw['headers']['Authorization']} failed")

    monkeypatch.setattr(bot.slack.files, "download", leaky)
    channel = "C0LEAKY"
    leaky_file = slack.fake.add_file("F0LEAKY", "leaky.pdf", make_pdf(OFFSITE_PAGES))
    slack.send(_file_share(channel, MEMBER, leaky_file, "206.000001"))
    slack.fake.wait_for("chat.update", channel=channel)
    slack.idle()
    texts = [c.params["text"] for c in slack.fake.calls_to("chat.update", channel=channel)]
    assert texts[-1] == (
        "I couldn't index leaky.pdf: I couldn't download it. Please try uploading it again in a few minutes."
    )
    assert not any(BOT_TOKEN in t or "files/" in t for t in texts), texts
    assert slack.core.documents([slack_scope(TEAM, channel)]) == []


def test_non_pdf_files_are_ignored_silently(slack: Harness) -> None:
    channel = "C0PICS"
    png = slack.fake.add_file("F0PNG", "diagram.png", b"\x89PNG\r\n\x1a\n" + b"0" * 100, filetype="png")
    slack.send(_file_share(channel, MEMBER, png, "200.000001"))
    slack.send(_file_shared(channel, MEMBER, "F0PNG"))
    slack.idle()
    assert slack.fake.calls_to("chat.postMessage", channel=channel) == []
    assert slack.fake.calls_to("file.download", file="F0PNG") == []


# --- feedback ---------------------------------------------------------------------------------------


def test_thumbs_reactions_feed_the_log_and_removal_retracts(slack: Harness) -> None:
    q = "How many weeks of parental leave do employees get?"
    slack.send(mention(C_LEAVE, MEMBER, q, "210.000001"))
    answer = slack.fake.wait_for("chat.postMessage", channel=C_LEAVE, thread_ts="210.000001")[0]
    slack.idle()
    answer_ts = answer.reply["ts"]

    def reaction(kind: str, name: str, ts: str) -> dict[str, Any]:
        item = {"type": "message", "channel": C_LEAVE, "ts": ts}
        return {"type": kind, "user": ADMIN, "reaction": name, "item": item, "item_user": BOT_USER}

    slack.send(reaction("reaction_added", "thumbsup", answer_ts))
    slack.send(reaction("reaction_added", "+1", "210.000001"))  # on the question, not an answer: nothing
    slack.send(reaction("reaction_added", "tada", answer_ts))  # not feedback
    slack.idle()
    entries = [e for e in slack.core.state.feedback() if e.message_ref == f"{C_LEAVE}:{answer_ts}"]
    assert [(e.polarity, e.user, e.question, e.platform, e.scope) for e in entries] == [
        ("up", ADMIN, q, "slack", slack_scope(TEAM, C_LEAVE))
    ]
    assert entries[0].citations and entries[0].retrieved_chunk_ids
    assert "eighteen weeks" in entries[0].answer or "eighteen weeks" in entries[0].citations[0]["quote"]
    assert all(e.message_ref != f"{C_LEAVE}:210.000001" for e in slack.core.state.feedback())

    slack.send(reaction("reaction_removed", "thumbsup", answer_ts))
    slack.idle()
    assert all(e.message_ref != f"{C_LEAVE}:{answer_ts}" for e in slack.core.state.feedback())


def test_feedback_buttons_and_the_thumbs_down_form(
    slack: Harness, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.cli.main import main
    from bot.slack.render import FEEDBACK_ACTION

    q = "How far in advance must parental leave be requested?"
    slack.send(mention(C_LEAVE, MEMBER, q, "215.000001"))
    answer = slack.fake.wait_for("chat.postMessage", channel=C_LEAVE, thread_ts="215.000001")[0]
    slack.idle()
    answer_ts, ref = answer.reply["ts"], f"{C_LEAVE}:{answer.reply['ts']}"
    action_id = slack.feedback_buttons(answer.params)["action_id"]
    assert action_id == FEEDBACK_ACTION

    def votes() -> list[tuple[str, str, str, str]]:
        entries = slack.core.state.feedback()
        return [(e.user, e.polarity, e.choice, e.comment) for e in entries if e.message_ref == ref]

    def click(user: str, value: str) -> None:
        payload = feedback_click(user=user, channel=C_LEAVE, message_ts=answer_ts, thread_ts="215.000001",
                                 value=value, action_id=action_id)
        assert post_interaction(slack.url, payload)[0] == 200
        slack.idle()

    click(ADMIN, "up")
    assert votes() == [(ADMIN, "up", "", "")]
    assert slack.fake.calls_to("views.open") == []  # 👍 needs no form

    click(MEMBER, "down")  # 👎 is recorded at once and asks what was wrong
    opened = slack.fake.wait_for("views.open")[-1].params
    assert opened["trigger_id"] and opened["view"]["title"]["text"] == "What was wrong?"
    choices = [o["value"] for o in opened["view"]["blocks"][0]["element"]["options"]]
    assert choices == ["wrong_passage", "missing_information", "should_have_refused", "other"]
    assert sorted(votes()) == [(ADMIN, "up", "", ""), (MEMBER, "down", "", "")]

    values = {
        "choice": {"choice": {"type": "radio_buttons", "selected_option": {"value": "missing_information"}}},
        "comment": {"comment": {"type": "plain_text_input", "value": "It left out the form to fill in."}},
    }
    status, body = post_interaction(slack.url, view_submission(opened["view"], user=MEMBER, values=values))
    assert status == 200 and body in (b"", b"{}")  # the form closes
    slack.idle()
    assert sorted(votes()) == [
        (ADMIN, "up", "", ""), (MEMBER, "down", "missing_information", "It left out the form to fill in.")
    ]

    # one person's latest vote wins: a 👍 reaction now replaces MEMBER's 👎 (and its comment) ...
    item = {"type": "message", "channel": C_LEAVE, "ts": answer_ts}
    slack.send({"type": "reaction_added", "user": MEMBER, "reaction": "+1", "item": item, "item_user": BOT_USER})
    slack.idle()
    assert sorted(votes()) == [(ADMIN, "up", "", ""), (MEMBER, "up", "", "")]
    # ... and a 👎 button after that replaces the 👍 again
    click(MEMBER, "down")
    assert sorted(votes()) == [(ADMIN, "up", "", ""), (MEMBER, "down", "", "")]

    # the admin's log shows the choice and the comment
    status, _ = post_interaction(slack.url, view_submission(opened["view"], user=MEMBER, values=values))
    slack.idle()
    monkeypatch.setenv("CITEBOT_DATA_DIR", str(slack.bot.settings.data_dir))
    assert main(["feedback", "--polarity", "down"]) == 0
    out = capsys.readouterr().out
    assert q in out and "left out information" in out and "“It left out the form to fill in.”" in out


# --- the assistant pane -----------------------------------------------------------------------------


def test_assistant_pane_searches_the_viewed_channel_and_answers_only_the_asker(slack: Harness) -> None:
    thread = "250.000001"
    started = assistant_thread_event("assistant_thread_started", user=MEMBER, dm_channel=DM, thread_ts=thread,
                                     context_channel=C_LEAVE)
    assert slack.send(started) == 200
    greeting = slack.fake.wait_for("chat.postMessage", channel=DM, thread_ts=thread)[0].params
    assert "only you see this conversation" in greeting["text"]
    prompts = slack.fake.wait_for("assistant.threads.setSuggestedPrompts", channel_id=DM, thread_ts=thread)[0]
    titles = [p["title"] for p in prompts.params["prompts"]]
    assert "Parental leave" in titles  # from the section titles of the channel being viewed
    assert all(p["message"].endswith("?") for p in prompts.params["prompts"])
    assert "What do the PDFs say about parental leave?" in [p["message"] for p in prompts.params["prompts"]]
    assert not any(".pdf" in p["message"] for p in prompts.params["prompts"])  # topics, not file names

    # a question in the pane searches the channel being viewed plus the asker's own DM uploads
    before = len(slack.fake.calls_to("chat.postMessage", channel=C_LEAVE))
    slack.send(message(DM, MEMBER, "How many weeks of parental leave do employees get?", "250.000002",
                       thread_ts=thread, channel_type="im"))
    answers = slack.fake.wait_for("chat.postMessage", 2, channel=DM, thread_ts=thread)
    (status,) = slack.fake.calls_to("assistant.threads.setStatus", channel_id=DM, thread_ts=thread)
    assert status.params["status"] == "Searching 2 PDFs…" and status.at < answers[1].at
    assert slack.files_cited(answers[1].params) == {LEAVE_PDF}
    slack.idle()
    assert len(slack.fake.calls_to("chat.postMessage", channel=C_LEAVE)) == before  # nothing in the channel

    # viewing a channel the asker is not in: it is not searched, and its sections are not suggested
    changed = assistant_thread_event("assistant_thread_context_changed", user=MEMBER, dm_channel=DM,
                                     thread_ts=thread, context_channel=C_CONTRACT)
    slack.send(changed)
    slack.idle()
    assert len(slack.fake.calls_to("chat.postMessage", channel=DM, thread_ts=thread)) == 2  # no second greeting
    assert slack.fake.calls_to("conversations.replies", channel=DM) == []  # the viewed channel is kept by Citebot
    for call in slack.fake.calls_to("assistant.threads.setSuggestedPrompts", channel_id=DM, thread_ts=thread):
        assert not any("Delivery" in p["title"] for p in call.params["prompts"])
    slack.send(message(DM, MEMBER, "What is the penalty for late delivery of the turbines?", "250.000003",
                       thread_ts=thread, channel_type="im"))
    penalty = slack.fake.wait_for("chat.postMessage", 3, channel=DM, thread_ts=thread)[2].params
    assert CONTRACT_PDF not in slack.files_cited(penalty) and "two percent" not in penalty["text"]

    # someone who is in the contract channel gets it in their own pane
    slack.send(assistant_thread_event("assistant_thread_started", user=OUTSIDER, dm_channel="D0OUTSIDER",
                                      thread_ts="251.000001", context_channel=C_CONTRACT))
    slack.fake.wait_for("chat.postMessage", channel="D0OUTSIDER", thread_ts="251.000001")
    slack.send(message("D0OUTSIDER", OUTSIDER, "What is the penalty for late delivery of the turbines?",
                       "251.000002", thread_ts="251.000001", channel_type="im"))
    found = slack.fake.wait_for("chat.postMessage", 2, channel="D0OUTSIDER", thread_ts="251.000001")[1].params
    assert slack.files_cited(found) == {CONTRACT_PDF} and "two percent" in found["text"]


# --- slash command ----------------------------------------------------------------------------------


def test_slash_help_docs_stats(slack: Harness) -> None:
    status, body = slack.command("help", channel=C_LEAVE, user=MEMBER)
    assert status == 200 and HELP_TEXT.splitlines()[0] in body.decode()
    slack.command("docs", channel=C_LEAVE, user=MEMBER, name="docs")
    docs = slack.fake.wait_for("response_url", name="docs")[0].params["text"]
    assert docs.startswith("1 PDF indexed here") and LEAVE_PDF in docs
    slack.command("stats", channel=C_LEAVE, user=MEMBER, name="stats")
    stats = slack.fake.wait_for("response_url", name="stats")[0].params["text"]
    assert stats.startswith("1 documents, 2 pages")


def test_slash_question_is_answered_privately_with_quotes_and_feedback(slack: Harness) -> None:
    q = "How many weeks of paid parental leave do employees get?"
    posted_before = len(slack.fake.calls_to("chat.postMessage"))
    status, body = slack.command(q, channel=C_LEAVE, user=MEMBER, name="private")
    assert status == 200 and b"Searching" in body  # acknowledged at once, only to the asker
    private = slack.fake.wait_for("response_url", name="private")[0].params
    assert private["response_type"] == "ephemeral"
    assert "eighteen weeks" in private["text"] and slack.files_cited(private) == {LEAVE_PDF}
    slack.idle()
    assert len(slack.fake.calls_to("chat.postMessage")) == posted_before  # nothing posted for all to see

    # 👎 under the private answer is recorded against it and opens the same form
    buttons = next(b for b in private["blocks"] if b["type"] == "context_actions")
    payload = feedback_click(user=MEMBER, channel=C_LEAVE, message_ts="1700000000.000100", value="down",
                             action_id=buttons["elements"][0]["action_id"], block_id=buttons["block_id"],
                             ephemeral=True)
    forms_before = len(slack.fake.calls_to("views.open"))  # an earlier test in this module opened one
    assert post_interaction(slack.url, payload)[0] == 200
    opened = slack.fake.wait_for("views.open", count=forms_before + 1)[-1].params
    slack.idle()
    votes = [e for e in slack.core.state.feedback() if e.message_ref == opened["view"]["private_metadata"]]
    assert [(e.user, e.polarity, e.question) for e in votes] == [(MEMBER, "down", q)]

    # the channel's own PDFs only: another channel's contract is not searched from here
    slack.command("What is the penalty for late delivery of the turbines?", channel=C_LEAVE, user=MEMBER,
                  name="private-other")
    other = slack.fake.wait_for("response_url", name="private-other")[0].params
    assert CONTRACT_PDF not in str(other) and "two percent" not in other["text"]


def test_forget_needs_the_uploader_or_an_admin(slack: Harness) -> None:
    channel, scope = "C0FORGET", slack_scope(TEAM, "C0FORGET")
    slack.core.upload(ChatContext("slack", scope, MEMBER), file_name="old_policy.pdf", data=make_pdf(LEAVE_PAGES))
    status, body = slack.command("forget", channel=channel, user=OUTSIDER)
    assert status == 200 and "forget handbook.pdf" in body.decode()  # usage, no work
    slack.command("forget old_policy.pdf", channel=channel, user=OUTSIDER, name="f-outsider")
    refused = slack.fake.wait_for("response_url", name="f-outsider")[0].params["text"]
    assert "Only the person who uploaded" in refused
    assert [d.file for d in slack.core.documents([scope])] == ["old_policy.pdf"]

    slack.command("forget old_policy.pdf", channel=channel, user=ADMIN, name="f-admin")
    done = slack.fake.wait_for("response_url", name="f-admin")[0].params["text"]
    assert done.startswith("Removed “old_policy.pdf”")
    assert slack.core.documents([scope]) == []
    assert slack.fake.calls_to("users.info", user=ADMIN)


def test_health_endpoint_and_slacks_url_verification(slack: Harness) -> None:
    import json
    import urllib.request

    with urllib.request.urlopen(slack.url.replace("/slack/events", "/healthz"), timeout=5) as resp:
        assert resp.status == 200 and json.loads(resp.read())["status"] == "ok"
    with urllib.request.urlopen(slack.url.replace("/slack/events", "/readyz"), timeout=5) as resp:
        assert resp.status == 200 and json.loads(resp.read())["status"] == "ready"
    # what Slack sends when the request URL is entered in the app config
    status, body = post_signed(slack.url, {"token": "x", "challenge": "c0ffee", "type": "url_verification"})
    assert status == 200 and b"c0ffee" in body


def test_tokens_and_message_text_never_reach_the_logs(
    slack: Harness, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    real_answer = slack.core.service.answer

    def flaky(question: str, *args: Any, **kw: Any) -> Any:
        if "zebra" in question:
            raise RuntimeError(f"boom while holding {BOT_TOKEN}")
        return real_answer(question, *args, **kw)

    monkeypatch.setattr(slack.core.service, "answer", flaky)
    slack.send(
        mention(C_LEAVE, MEMBER, "How many weeks of leave do zebra-striped staff get?", "230.000001"),
        event_id="EvFAILS1",
    )
    slack.send(mention(C_LEAVE, MEMBER, "How many weeks of parental leave do okapi-patterned staff get?", "230.000002"))
    file_obj = slack.fake.add_file("F0LOGS", "logs.pdf", make_pdf(OFFSITE_PAGES))
    slack.send(_file_share("C0LOGS", MEMBER, file_obj, "230.000003"))
    slack.fake.wait_for("chat.postMessage", channel=C_LEAVE, thread_ts="230.000002")
    slack.fake.wait_for("chat.update", channel="C0LOGS")
    slack.idle()
    out, err = capfd.readouterr()
    logged = out + err
    failure_lines = [line for line in logged.splitlines() if "slack_work_failed" in line]
    assert failure_lines and "EvFAILS1" in failure_lines[0]  # the failure was logged with its event id...
    assert BOT_TOKEN not in logged and SIGNING_SECRET not in logged  # ...without secrets
    assert "zebra" not in logged and "okapi" not in logged  # ...or what people wrote


def test_serve_refuses_to_start_without_credentials(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bot.slack.server import serve

    settings = Settings(_env_file=None, data_dir=tmp_path)  # type: ignore[call-arg]
    assert serve(settings, http=True, host="127.0.0.1", port=0) == 2
    assert "SLACK_SIGNING_SECRET" in capsys.readouterr().err


def test_serve_says_whether_slack_is_unreachable_or_rejected_a_token(
    slack: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket as sockets

    from bot.slack.server import serve

    with sockets.socket() as s:  # a port nothing listens on: as if DNS or the network were down
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = Settings(_env_file=None, data_dir=tmp_path, slack_bot_token=BOT_TOKEN,  # type: ignore[call-arg]
                    slack_signing_secret=SIGNING_SECRET, ocr_enabled=False)
    offline = base.model_copy(update={"slack_api_url": f"http://127.0.0.1:{port}/api/"})
    assert serve(offline, http=True, host="127.0.0.1", port=0) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"citebot: cannot reach Slack at http://127.0.0.1:{port}/api/") and "network" in line

    from pydantic import SecretStr

    wrong = base.model_copy(update={"slack_api_url": slack.fake.url, "slack_bot_token": SecretStr("xoxb-revoked")})
    assert serve(wrong, http=True, host="127.0.0.1", port=0) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("citebot: Slack rejected SLACK_BOT_TOKEN (invalid_auth): copy the Bot User OAuth Token")

    # Socket Mode: the bot token is fine, the app-level token is not
    wrong_app = base.model_copy(update={"slack_api_url": slack.fake.url, "slack_app_token": SecretStr("xapp-nope")})
    assert serve(wrong_app, http=False, host="127.0.0.1", port=0) == 2
    # the model warms up first in Socket Mode; its JSON log lines (a first ONNX export) are not the message
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("{")]
    assert line.startswith("citebot: Slack rejected SLACK_APP_TOKEN (invalid_auth): make an app-level token")


def test_starting_with_the_token_in_the_environment_logs_no_bolt_warning(
    slack: Harness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)  # how admins run it (the README's export)
    with caplog.at_level(logging.INFO):
        bot = build_bot(slack.bot.settings, slack.core)
        bot.close()
    assert "will be unused" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("slack_bolt")]


def test_socket_mode_gets_events_over_the_websocket_acks_and_answers(slack: Harness) -> None:
    from pydantic import SecretStr

    socket = FakeSocketMode().start()
    slack.fake.socket_url = socket.url
    settings = slack.bot.settings.model_copy(
        update={"slack_app_token": SecretStr(APP_TOKEN), "slack_signing_secret": None}
    )
    bot = build_bot(settings, slack.core)
    handler = socket_mode_handler(bot.app, settings)
    try:
        handler.connect()
        socket.wait_connected()
        q = "How many weeks of parental leave do employees get?"
        socket.deliver(event_callback(mention(C_LEAVE, MEMBER, q, "240.000001")), envelope_id="env-1")
        assert socket.wait_ack("env-1")["envelope_id"] == "env-1"
        posted = slack.fake.wait_for("chat.postMessage", channel=C_LEAVE, thread_ts="240.000001")[0].params
        assert "eighteen weeks" in posted["text"]
        assert bot.wait_idle(60)
    finally:
        handler.close()
        bot.close()
        socket.stop()
        slack.fake.socket_url = ""
    assert slack.fake.calls_to("apps.connections.open")[-1].authorized  # opened with the app-level token


def test_socket_mode_is_ready_only_while_connected_reconnects_within_ten_seconds_and_acks_every_envelope(
    slack: Harness,
) -> None:
    from pydantic import SecretStr

    from bot.health import Health
    from bot.slack.server import watch_socket

    socket = FakeSocketMode().start()
    slack.fake.socket_url = socket.url
    settings = slack.bot.settings.model_copy(
        update={"slack_app_token": SecretStr(APP_TOKEN), "slack_signing_secret": None}
    )
    bot = build_bot(settings, slack.core)
    handler = socket_mode_handler(bot.app, settings)
    health, stop = Health("slack"), threading.Event()
    threading.Thread(target=watch_socket, args=(handler, health, stop), daemon=True).start()

    def wait_ready(ready: bool, within: float) -> float:
        t0 = time.monotonic()
        while health.ready != ready:
            assert time.monotonic() - t0 < within, f"/readyz did not turn {'200' if ready else '503'} in {within} s"
            time.sleep(0.05)
        return time.monotonic() - t0

    try:
        assert not health.ready  # no socket yet: not ready
        handler.connect()
        socket.wait_connected()
        wait_ready(True, 5)
        malformed: list[tuple[str, Any]] = [
            ("events_api", {"type": "event_callback", "event_id": "Ev0NOEVENT", "team_id": TEAM}),
            ("events_api", event_callback({"type": "channel_created", "channel": {"id": "C0NEW"}})),
            ("interactive", feedback_click(user=MEMBER, channel=C_LEAVE, message_ts="1.0", thread_ts="1.0",
                                           value="up", action_id="no_such_action", trigger_id="t-1")),
            ("events_api", "a string"),
            ("events_api", [1, 2]),
            ("events_api", {"type": "event_callback", "event_id": "Ev0STREVENT", "event": "app_mention"}),
            ("events_api", event_callback({"type": "app_mention", "user": 123, "channel": C_LEAVE, "ts": "9.1",
                                           "text": "hi"})),
        ]
        for n, (kind, body) in enumerate(malformed):
            socket.deliver(body, envelope_id=f"bad-{n}", kind=kind)
            assert socket.wait_ack(f"bad-{n}", timeout=10)  # acknowledged: Slack does not re-send it
        q = "How many weeks of parental leave do employees get?"
        for n, how in enumerate(("close", "reset", "close")):
            before = socket.connections
            refused = n == 2  # the third time Slack cannot be reached for a while: not ready meanwhile
            socket.refuse = refused
            t0 = time.monotonic()
            socket.drop(how)
            if refused:
                wait_ready(False, 10)
                time.sleep(1)
                assert not health.ready
                socket.refuse = False
                t0 = time.monotonic()
            slack.fake.wait_until(lambda b=before: socket.connections > b, timeout=10)  # noqa: B023
            wait_ready(True, 10)
            assert time.monotonic() - t0 < 10  # a new link, and ready, within 10 s
            ts = f"250.00000{n}"
            socket.deliver(event_callback(mention(C_LEAVE, MEMBER, q, ts)), envelope_id=f"env-{n}")
            socket.wait_ack(f"env-{n}")
            posted = slack.fake.wait_for("chat.postMessage", channel=C_LEAVE, thread_ts=ts)[0].params
            assert "eighteen weeks" in posted["text"]
    finally:
        stop.set()
        handler.close()
        bot.close()
        socket.stop()
        slack.fake.socket_url = ""
