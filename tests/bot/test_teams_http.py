"""The Teams bot end to end over HTTP: real Activity JSON posted to ``/api/messages`` (unauthenticated
mode), ``serviceUrl`` pointing at a local fake Bot Connector that records replies, a local fake Graph
and token endpoint for ``sync``, the real CitebotService with the SQLite store and generated PDFs.
"""

from __future__ import annotations

import html
import io
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import structlog
from markdown_it import MarkdownIt

from bot.core import ChatCore
from bot.teams.server import anonymous_authentication, build_app
from bot.texts import APOLOGY
from connectors.settings import Settings
from eval.fakes.microsoft import AppThread, ChannelFolder, FakeMicrosoft
from tests.helpers.pdfs import ZEPHYR_LINES, make_pdf
from tests.helpers.teams import (
    APP_ID,
    APP_PASSWORD,
    BOT,
    CHANNEL_A,
    CHANNEL_B,
    GROUP_ID,
    OTHER_TENANT,
    PDF_LAYOUT,
    TEAM_ID,
    TENANT,
    citations,
    cited_files,
    new_id,
)
from tests.helpers.teams import TeamsHarness as World

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def _log_to_live_streams() -> None:
    """A CLI test run earlier may have bound structlog to a captured stream pytest has since closed."""
    structlog.reset_defaults()

# Each PDF holds one fact nobody else has, so a leak is visible in the answer.
ZEPHYR = "zephyr_budget.pdf"
KESTREL = "kestrel_parking.pdf"
KESTREL_LINES = [
    "Kestrel Campus Parking Rules",
    "1 Permits",
    "A Kestrel parking permit costs 75 euros per month.",
    "Permits are issued by the facilities desk in building C.",
]
ORCHID = "orchid_travel.pdf"
ORCHID_LINES = [
    "Orchid Travel Guidelines",
    "1 Trains",
    "Orchid staff travel by train when the journey takes under six hours.",
    "First class tickets are reimbursed only for journeys over four hours.",
]


_MD = MarkdownIt("commonmark")  # links as a Teams client draws them from a markdown message


def markdown_links(text: str) -> list[tuple[str, str]]:
    """(the text shown, the URL it opens) of every link a Teams client draws from markdown ``text``."""
    found = re.findall(r'<a href="([^"]*)">(.*?)</a>', _MD.render(text))
    return [(html.unescape(label), html.unescape(url)) for url, label in found]


def card_links(card: dict[str, Any]) -> list[tuple[str, str]]:
    """(the text shown, the URL it opens) of everything a Teams client makes clickable in an Adaptive Card: markdown
    links of TextBlocks, TextRuns whose selectAction opens a URL, and Action.OpenUrl buttons (their title)."""
    found: list[tuple[str, str]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "TextBlock":
                found.extend(markdown_links(str(node.get("text", ""))))
            action = node.get("selectAction")
            if isinstance(action, dict) and action.get("type") == "Action.OpenUrl":
                found.append((str(node.get("text", "")), str(action.get("url"))))
            elif node.get("type") == "Action.OpenUrl":
                found.append((str(node.get("title", "")), str(node.get("url"))))
            for key, value in node.items():
                if key != "selectAction":
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(card)
    return found


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    data_dir = tmp_path_factory.mktemp("teams-http")
    with FakeMicrosoft(client_id=APP_ID, client_secret=APP_PASSWORD, page_size=2) as fake:
        settings = Settings(
            data_dir=data_dir,
            teams_app_id=APP_ID,
            teams_app_password=APP_PASSWORD,
            teams_graph_url=fake.graph_url,
            teams_token_url=fake.token_url,
            download_timeout_s=15,
            max_file_mb=2,
        )
        core = ChatCore.from_settings(settings)
        # Inbound and Bot Connector calls run anonymously (Emulator mode) while Graph uses the app's
        # credentials against the fake token endpoint.
        app = build_app(settings, core, auth=anonymous_authentication())
        with AppThread(app) as thread:
            yield World(fake=fake, app=thread, core=core, settings=settings)


@pytest.fixture(scope="module")
def seeded(world: World) -> World:
    """Channel A synced from its Files tab (Zephyr), a personal chat holding Kestrel (sent as a file)."""
    fake = world.fake
    fake.files[ZEPHYR] = make_pdf([ZEPHYR_LINES], **PDF_LAYOUT)
    fake.files["notes.txt"] = b"not a pdf"
    fake.files["zephyr_copy.pdf"] = fake.files[ZEPHYR]
    folder = [ZEPHYR, "notes.txt", "zephyr_copy.pdf"]
    fake.channel_folders[(GROUP_ID, CHANNEL_A)] = ChannelFolder("drive-1", "folder-a", folder)
    sync = world.channel_message("sync")
    assert world.post(sync).status_code in (200, 201)
    world.wait_text(sync["conversation"]["id"], "Synced 2 PDFs")

    kestrel = make_pdf([KESTREL_LINES], **PDF_LAYOUT)
    upload = world.chat_message("", attachments=[world.file_attachment(KESTREL, kestrel)])
    assert world.post(upload).status_code in (200, 201)
    world.wait_text(upload["conversation"]["id"], f"Indexed {KESTREL}")
    return world


# --- answers, threads, mentions ---------------------------------------------------------------------


def test_channel_mention_answers_in_the_thread_with_citations(seeded: World) -> None:
    question = seeded.channel_message("What is the Zephyr budget for the Aurora project?")
    thread = question["conversation"]["id"]
    t0 = time.perf_counter()
    resp = seeded.post(question)
    acked = time.perf_counter()
    assert resp.status_code in (200, 201)

    answer = seeded.wait_answer(question)
    assert answer.reply_to_id == question["id"], "replies go to the user's post, in its thread"
    assert answer.conversation_id == thread
    assert "[1]" in answer.text
    cites = citations(answer)
    assert ZEPHYR in cited_files(answer)
    assert any("4,200 kroner" in c["appearance"]["abstract"] for c in cites)
    assert answer.body["channelData"]["feedbackLoop"] == {"type": "custom"}  # 👍/👎 with Citebot's own form
    (entity,) = [e for e in answer.body["entities"] if e.get("@type") == "Message"]
    assert entity["additionalType"] == ["AIGeneratedContent"]
    # the channel reply also carries the quote card, for clients that don't draw citations
    # a synced channel file's citation opens it where the team keeps it (the driveItem's SharePoint webUrl)
    web_url = seeded.fake.web_url(ZEPHYR)
    assert {c["appearance"].get("url") for c in cites if c["appearance"]["name"] == ZEPHYR} == {web_url}
    (card,) = answer.body["attachments"]
    assert card["contentType"] == "application/vnd.microsoft.card.adaptive"
    # the card's source line is "[n] zephyr_budget.pdf, p. 1 · …", its file and page a link to the file
    assert (f"{ZEPHYR}, p. 1", web_url) in card_links(card["content"])
    # a typing indicator went out inside the turn, before the HTTP response; the answer after it
    (typing,) = [c for c in seeded.replies(thread) if c.type == "typing"]
    assert t0 <= typing.at <= acked
    assert typing.at < answer.at


def test_channel_message_without_mention_is_not_answered(seeded: World) -> None:
    quiet = seeded.channel_message("What is the Zephyr budget?", mention=False)
    assert seeded.post(quiet).status_code in (200, 201)
    loud = seeded.channel_message("What is the Zephyr budget?")
    seeded.ask(loud)
    assert seeded.replies(quiet["conversation"]["id"]) == []


def test_group_chat_answers_every_message_without_mention(seeded: World) -> None:
    msg = seeded.chat_message("what does a parking permit cost?", chat="19:groupchat-1@thread.v2", kind="groupChat")
    answer = seeded.ask(msg)
    # a new, empty scope: the bot answers (here: that nothing is indexed) rather than staying silent
    assert "75 euros" not in answer.text
    assert KESTREL not in cited_files(answer)


# --- scope isolation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where",
    ["channel_b", "personal_chat", "other_tenant_same_channel_id"],
)
def test_channel_a_pdf_is_never_quoted_elsewhere(seeded: World, where: str) -> None:
    question = "What is the Zephyr budget for the Aurora project?"
    if where == "channel_b":
        activity = seeded.channel_message(question, channel=CHANNEL_B)
    elif where == "personal_chat":
        activity = seeded.chat_message(question)
    else:
        activity = seeded.channel_message(question, tenant=OTHER_TENANT)
    answer = seeded.ask(activity)
    assert ZEPHYR not in cited_files(answer)
    assert "zephyr_copy.pdf" not in cited_files(answer)
    assert "4,200" not in answer.text
    assert "4,200" not in json.dumps(answer.body)


def test_personal_chat_pdf_is_not_visible_in_the_channel(seeded: World) -> None:
    answer = seeded.ask(seeded.channel_message("How much does a Kestrel parking permit cost?"))
    assert KESTREL not in cited_files(answer)
    assert "75 euros" not in json.dumps(answer.body)
    docs = seeded.channel_message("docs")
    assert seeded.post(docs).status_code in (200, 201)
    listing = seeded.wait_text(docs["conversation"]["id"], "indexed here")
    assert ZEPHYR in listing.text and KESTREL not in listing.text


# --- files -------------------------------------------------------------------------------------------


def test_pdf_sent_in_personal_chat_is_indexed_and_answered(seeded: World) -> None:
    chat = "a:1personal-alice"
    answer = seeded.ask(seeded.chat_message("How much does a Kestrel parking permit cost?", chat=chat))
    assert "75 euros" in answer.text
    assert cited_files(answer) == {KESTREL}
    # the citation opens the file the person sent (the contentUrl Teams gave with the attachment)
    sent = f"https://contoso-my.sharepoint.com/personal/alice/Documents/{KESTREL}"
    assert {c["appearance"].get("url") for c in citations(answer)} == {sent}
    assert (f"{KESTREL}, p. 1", sent) in markdown_links(answer.text)  # the inline quotes link too
    assert "attachments" not in answer.body or not answer.body["attachments"], "no quote card in chats"


def test_slow_ingest_is_finished_proactively(seeded: World) -> None:
    chat = "a:1personal-slow"
    seeded.fake.download_delay_s = 1.0
    try:
        attachment = seeded.file_attachment(ORCHID, make_pdf([ORCHID_LINES], **PDF_LAYOUT))
        upload = seeded.chat_message("", chat=chat, attachments=[attachment])
        resp = seeded.post(upload)
        acked = time.perf_counter()
        assert resp.status_code in (200, 201)
        result = seeded.wait_text(chat, f"Indexed {ORCHID}")
    finally:
        seeded.fake.download_delay_s = 0.0
    calls = seeded.replies(chat)
    status = next(c for c in calls if c.kind == "reply" and c.text.startswith(f"Indexing {ORCHID}"))
    # the result replaces the status message, posted after the turn ended
    assert result.kind == "update" and result.activity_id == status.response_id
    assert result.at > acked
    answer = seeded.ask(seeded.chat_message("When do Orchid staff travel by train?", chat=chat))
    assert cited_files(answer) == {ORCHID}


def test_ingest_progress_edits_the_status_message_and_the_result_comes_last(
    seeded: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bot.teams.work as teams_work

    monkeypatch.setattr(teams_work, "PROGRESS_INTERVAL_S", 0.0)  # every progress step may edit
    chat = "a:1personal-progress"
    pages = [
        ["Heron Building Handbook", "Visitors sign in at the east reception desk before nine."],
        ["Badges", "Green badges open the laboratory wing; grey badges open only the offices."],
        ["Deliveries", "Couriers leave parcels in the loading bay behind the cafeteria."],
    ]
    heron = make_pdf(pages, **PDF_LAYOUT, bold=None)
    upload = seeded.chat_message("", chat=chat, attachments=[seeded.file_attachment("heron.pdf", heron)])
    assert seeded.post(upload).status_code in (200, 201)
    seeded.wait_text(chat, "Indexed heron.pdf")
    calls = seeded.replies(chat)
    status = next(c for c in calls if c.kind == "reply" and c.text == "Indexing heron.pdf…")
    edits = [c.text for c in calls if c.kind == "update" and c.activity_id == status.response_id]
    assert len(edits) >= 2, edits
    assert all(e.startswith("Indexing heron.pdf") for e in edits[:-1])
    assert edits[-1].startswith("Indexed heron.pdf: 3 pages")


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("broken.pdf", b"this is a text file pretending to be a PDF\n" * 20, "not a PDF"),
        ("truncated.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\n" + b"\x00garbage" * 50, ""),
    ],
)
def test_corrupt_file_is_named_and_store_unchanged(seeded: World, name: str, data: bytes, reason: str) -> None:
    chat = f"a:1personal-corrupt-{name}"
    scope = f"teams:{TENANT}:{chat}"
    before = seeded.core.documents([scope])
    upload = seeded.chat_message("", chat=chat, attachments=[seeded.file_attachment(name, data)])
    assert seeded.post(upload).status_code in (200, 201)
    msg = seeded.wait_text(chat, f"I couldn't index {name}")
    assert reason in msg.text
    assert APOLOGY not in msg.text
    assert seeded.core.documents([scope]) == before == []


# --- feedback ----------------------------------------------------------------------------------------


def test_reaction_and_feedback_invoke_land_in_the_same_log(
    seeded: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = "19:groupchat-feedback@thread.v2"
    # the group chat gets its own PDF first, so the answer has a citation
    upload = seeded.chat_message(
        "", chat=chat, kind="groupChat",
        attachments=[seeded.file_attachment(KESTREL, make_pdf([KESTREL_LINES], **PDF_LAYOUT))],
    )
    seeded.post(upload)
    seeded.wait_text(chat, f"Indexed {KESTREL}")
    question = "How much does a Kestrel parking permit cost?"
    answer = seeded.ask(seeded.chat_message(question, chat=chat, kind="groupChat"))
    # the bot records an answer right after the connector returns its id; react once it is on record,
    # as a person (seconds later) always does
    ref = f"teams:{TENANT}:{chat}|{answer.response_id}"
    deadline = time.monotonic() + 10
    while seeded.core.state.find_answer(platform="teams", message_ref=ref) is None:
        assert time.monotonic() < deadline, "the answer was never recorded"
        time.sleep(0.02)
    base = {
        "channelId": "msteams",
        "serviceUrl": seeded.fake.service_url,
        "recipient": BOT,
        "conversation": {"id": chat, "conversationType": "groupChat", "tenantId": TENANT},
        "channelData": {"tenant": {"id": TENANT}},
        "replyToId": answer.response_id,
    }
    like = {
        **base,
        "type": "messageReaction",
        "id": new_id(),
        "from": {"id": "29:alice"},
        "reactionsAdded": [{"type": "like"}],
    }
    assert seeded.post(like).status_code in (200, 201)
    invoke = {
        **base,
        "type": "invoke",
        "name": "message/submitAction",
        "id": new_id(),
        "from": {"id": "29:bob"},
        "value": {
            "actionName": "feedback",
            "actionValue": {"reaction": "dislike", "feedback": json.dumps({"feedbackText": "wrong building"})},
        },
    }
    resp = seeded.post(invoke)
    assert resp.status_code == 200

    entries = [e for e in seeded.core.state.feedback() if e.message_ref.endswith(f"|{answer.response_id}")]
    assert {(e.user, e.polarity, e.comment) for e in entries} == {
        ("29:alice", "up", ""),
        ("29:bob", "down", "wrong building"),
    }
    for e in entries:
        assert e.question == question
        assert e.scope == f"teams:{TENANT}:{chat}"
        assert any("75 euros" in c["quote"] for c in e.citations)
        assert [c["file"] for c in e.citations] == [KESTREL] * len(e.citations) and e.citations
    # the admin's log shows Teams' 👎 comment the way it shows Slack's
    from bot.cli.main import main

    monkeypatch.setenv("CITEBOT_DATA_DIR", str(seeded.settings.data_dir))
    assert main(["feedback", "--polarity", "down"]) == 0
    out = capsys.readouterr().out
    assert f"👎 teams teams:{TENANT}:{chat} 29:bob: {question}" in out and "“wrong building”" in out

    unlike = {
        **base,
        "type": "messageReaction",
        "id": new_id(),
        "from": {"id": "29:alice"},
        "reactionsRemoved": [{"type": "like"}],
    }
    assert seeded.post(unlike).status_code in (200, 201)
    left = [e for e in seeded.core.state.feedback() if e.message_ref.endswith(f"|{answer.response_id}")]
    assert [(e.user, e.polarity) for e in left] == [("29:bob", "down")]


def test_thumbs_down_opens_the_same_form_as_slack_and_records_its_choice(
    seeded: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Teams' 👍/👎 under an answer (custom feedback loop): each click is recorded at once; 👎 answers with the
    "What was wrong?" form of Slack's modal, and what is sent there is recorded as Slack records it."""
    from bot.cli.main import main
    from bot.texts import FEEDBACK_CHOICES

    chat = "a:1personal-alice"  # the chat holding Kestrel
    question = "How much does a Kestrel parking permit cost?"
    answer = seeded.ask(seeded.chat_message(question, chat=chat))
    ref = f"teams:{TENANT}:{chat}|{answer.response_id}"
    deadline = time.monotonic() + 10
    while seeded.core.state.find_answer(platform="teams", message_ref=ref) is None:
        assert time.monotonic() < deadline, "the answer was never recorded"
        time.sleep(0.02)

    def invoke(name: str, user: str, action: dict[str, Any]) -> requests.Response:
        return seeded.post({
            "type": "invoke", "name": name, "id": new_id(), "channelId": "msteams",
            "serviceUrl": seeded.fake.service_url, "from": {"id": user}, "recipient": BOT,
            "conversation": {"id": chat, "conversationType": "personal", "tenantId": TENANT},
            "channelData": {"tenant": {"id": TENANT}}, "replyToId": answer.response_id,
            "value": {"actionName": "feedback", "actionValue": action},
        })

    def votes() -> list[tuple[str, str, str, str]]:
        return sorted((e.user, e.polarity, e.choice, e.comment) for e in seeded.core.state.feedback()
                      if e.message_ref == ref)

    liked = invoke("message/fetchTask", "29:carol", {"reaction": "like"})
    assert liked.status_code == 200
    assert liked.json()["task"]["type"] == "message"  # 👍 needs no form: a thank-you
    assert votes() == [("29:carol", "up", "", "")]

    opened = invoke("message/fetchTask", "29:dave", {"reaction": "dislike"})
    assert opened.status_code == 200
    task = opened.json()["task"]
    assert task["type"] == "continue" and task["value"]["title"] == "What was wrong?"
    card = task["value"]["card"]
    assert card["contentType"] == "application/vnd.microsoft.card.adaptive"
    (choice_set,) = [e for e in card["content"]["body"] if e["type"] == "Input.ChoiceSet"]
    assert [(c["value"], c["title"]) for c in choice_set["choices"]] == list(FEEDBACK_CHOICES.items())
    assert any(e["type"] == "Input.Text" and e["id"] == "comment" for e in card["content"]["body"])
    assert votes() == [("29:carol", "up", "", ""), ("29:dave", "down", "", "")]  # 👎 recorded at once

    form = json.dumps({"choice": "missing_information", "comment": "It left out the monthly fee for visitors."})
    sent = invoke("message/submitAction", "29:dave", {"reaction": "dislike", "feedback": form})
    assert sent.status_code == 200
    assert votes() == [("29:carol", "up", "", ""),
                       ("29:dave", "down", "missing_information", "It left out the monthly fee for visitors.")]
    # the admin's log shows the choice and the comment, as for Slack
    monkeypatch.setenv("CITEBOT_DATA_DIR", str(seeded.settings.data_dir))
    assert main(["feedback", "--polarity", "down"]) == 0
    out = capsys.readouterr().out
    assert question in out and "left out information" in out and "“It left out the monthly fee for visitors.”" in out


def test_feedback_from_another_conversation_is_not_linked(seeded: World) -> None:
    answer = seeded.ask(seeded.channel_message("What is the Zephyr budget?"))
    n_before = len(seeded.core.state.feedback())
    stray = {
        "type": "messageReaction",
        "id": new_id(),
        "channelId": "msteams",
        "serviceUrl": seeded.fake.service_url,
        "from": {"id": "29:mallory"},
        "recipient": BOT,
        "conversation": {"id": "a:1personal-mallory", "conversationType": "personal", "tenantId": OTHER_TENANT},
        "channelData": {"tenant": {"id": OTHER_TENANT}},
        "replyToId": answer.response_id,
        "reactionsAdded": [{"type": "like"}],
    }
    assert seeded.post(stray).status_code in (200, 201)
    assert len(seeded.core.state.feedback()) == n_before


# --- reliability -------------------------------------------------------------------------------------


def test_duplicate_activity_is_answered_once(seeded: World) -> None:
    chat = "a:1personal-dup"
    msg = seeded.chat_message("What is a Kestrel permit?", chat=chat)
    seeded.ask(msg)
    assert seeded.post(msg).status_code in (200, 201)  # Teams re-delivers the same activity id
    sentinel = seeded.chat_message("help", chat=chat)
    assert seeded.post(sentinel).status_code in (200, 201)
    # the help reply is sent inside the sentinel's turn, so the duplicate's turn is over by now
    seeded.fake.wait_for(lambda c: c.reply_to_id == sentinel["id"] and "Citebot" in c.text)
    calls = seeded.replies(chat)
    assert sum(1 for c in calls if c.type == "message" and c.body.get("entities")) == 1
    assert sum(1 for c in calls if c.type == "typing") == 1


def test_failure_apologises_and_the_bot_keeps_serving(seeded: World, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = "a:1personal-fail"
    service = seeded.core.service

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("store exploded: secret internals")

    monkeypatch.setattr(service, "answer", broken)
    assert seeded.post(seeded.chat_message("What is the Zephyr budget?", chat=chat)).status_code in (200, 201)
    apology = seeded.wait_text(chat, APOLOGY)
    assert "secret internals" not in json.dumps([c.body for c in seeded.replies(chat)])
    assert apology.type == "message"
    monkeypatch.undo()

    answer = seeded.ask(seeded.channel_message("What is the Zephyr budget for the Aurora project?"))
    assert "4,200" in json.dumps(answer.body)


def test_health(seeded: World) -> None:
    resp = requests.get(f"{seeded.app.url}/healthz", timeout=10)
    assert resp.status_code == 200 and resp.json()["status"] == "ok"


# --- channel sync ------------------------------------------------------------------------------------


def test_sync_reads_the_channel_files_through_graph(seeded: World) -> None:
    fake = seeded.fake
    # token from the fake Entra endpoint, then filesFolder and two pages of children
    graph_paths = [c.path for c in fake.calls if c.path.startswith("/v1.0/")]
    assert f"/v1.0/teams/{GROUP_ID}/channels/{CHANNEL_A}/filesFolder" in graph_paths
    assert sum(1 for p in graph_paths if p.endswith("/children")) == 2
    assert fake.token_requests >= 1
    summary = next(c for c in fake.connector_calls() if "Synced 2 PDFs" in c.text)
    assert ZEPHYR in summary.text and "zephyr_copy.pdf" in summary.text and "notes.txt" not in summary.text
    docs = seeded.core.documents([f"teams:{TENANT}:{CHANNEL_A}"])
    assert ZEPHYR in {d.file for d in docs}


def test_sync_finds_the_team_group_through_the_bot_connector(seeded: World) -> None:
    """Channel messages usually lack channelData.team.aadGroupId: the bot asks the Bot Connector."""
    fake = seeded.fake
    fake.team_groups[TEAM_ID] = GROUP_ID
    fake.files["orchid_b.pdf"] = make_pdf([ORCHID_LINES], **PDF_LAYOUT)
    fake.channel_folders[(GROUP_ID, CHANNEL_B)] = ChannelFolder("drive-1", "folder-b", ["orchid_b.pdf"])
    sync = seeded.channel_message("sync", channel=CHANNEL_B, group_id=None)
    assert seeded.post(sync).status_code in (200, 201)
    seeded.wait_text(sync["conversation"]["id"], "Synced 1 PDF")
    assert any(c.path == f"/v3/teams/{TEAM_ID}" for c in fake.calls)
    assert {d.file for d in seeded.core.documents([f"teams:{TENANT}:{CHANNEL_B}"])} == {"orchid_b.pdf"}


def test_sync_without_graph_credentials_says_so(tmp_path: Path) -> None:
    with FakeMicrosoft() as fake:
        settings = Settings(data_dir=tmp_path)
        core = ChatCore.from_settings(settings)
        with AppThread(build_app(settings, core, insecure_local=True)) as app:
            world = World(fake=fake, app=app, core=core, settings=settings)
            sync = world.channel_message("sync")
            assert world.post(sync).status_code in (200, 201)
            reply = world.wait_text(sync["conversation"]["id"], "not configured")
    assert "TEAMS_APP_ID" in reply.text and "TEAMS_APP_PASSWORD" in reply.text
    assert fake.token_requests == 0


def test_insecure_local_mode_warns_it_is_unauthenticated(tmp_path: Path) -> None:
    from structlog.testing import capture_logs

    settings = Settings(data_dir=tmp_path)
    with capture_logs() as logs:
        build_app(settings, ChatCore.from_settings(settings), insecure_local=True)
    (warning,) = [e for e in logs if e["event"] == "teams_unauthenticated"]
    assert warning["log_level"] == "warning" and "unauthenticated" in warning["detail"]


def test_with_app_id_unsigned_requests_are_refused(tmp_path: Path) -> None:
    """With credentials configured, a request without a Bot Framework token gets 401 and no reply."""
    with FakeMicrosoft() as fake:
        settings = Settings(data_dir=tmp_path, teams_app_id=APP_ID, teams_app_password=APP_PASSWORD)
        core = ChatCore.from_settings(settings)
        with AppThread(build_app(settings, core)) as app:
            world = World(fake=fake, app=app, core=core, settings=settings)
            resp = world.post(world.chat_message("help"))
            health = requests.get(f"{app.url}/healthz", timeout=10).json()
    assert resp.status_code == 401
    assert fake.calls == []
    assert health["authenticated"] is True


@pytest.mark.parametrize(
    ("headers", "body", "status", "event"),
    [
        ({"Authorization": "Bearer not.a.jwt"}, None, 401, "teams_unauthorized"),  # a token that is no JWT
        ({"Authorization": "Bearer x"}, "{not json", 400, "teams_bad_request"),
        ({}, "[1, 2]", 400, "teams_bad_request"),  # JSON, but no activity
    ],
)
def test_a_malformed_token_or_body_gets_401_or_400_and_one_log_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], headers: dict[str, str], body: str | None, status: int,
    event: str,
) -> None:
    """Issue 29 row 13: not a 500 with aiohttp's 'Error handling request' traceback."""
    from connectors.log import configure_logging

    with FakeMicrosoft() as fake:
        settings = Settings(data_dir=tmp_path, teams_app_id=APP_ID, teams_app_password=APP_PASSWORD)
        core = ChatCore.from_settings(settings)
        with AppThread(build_app(settings, core)) as app:
            configure_logging("info", "json")
            world = World(fake=fake, app=app, core=core, settings=settings)
            data = body if body is not None else json.dumps(world.chat_message("help"))
            resp = requests.post(f"{app.url}/api/messages", data=data, timeout=30,
                                 headers={"Content-Type": "application/json", **headers})
            ok = requests.post(f"{app.url}/api/messages", json=world.chat_message("help"), timeout=30)
    assert resp.status_code == status
    assert ok.status_code == 401  # and the server goes on refusing unsigned requests as before
    assert fake.calls == []
    logged = [ln for ln in capfd.readouterr().err.splitlines() if ln.strip()]
    assert [json.loads(ln)["event"] for ln in logged if ln.startswith("{")].count(event) == 1
    assert not any("Error handling request" in ln or "Traceback" in ln for ln in logged)


# --- quoted tables (last: its channel sync adds Graph calls the sync tests above count) ----------------


TABLE_PDF = "heron_parking_fees.pdf"
TABLE_ROWS = [
    "Table 1: Parking fees by zone",
    "Zone | Permit (EUR per month) | Spaces | Charging points",
    "North | 75 | 120 | 8",
    "South | 60 | 95 | 4",
    "Harbour | 90 | 40 | 12",
    "Visitor | 5 | 30 | 2",
]


def table_pdf() -> bytes:
    """A captioned table under a heading, as a word processor lays it out."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Table

    styles = getSampleStyleSheet()
    cells = [row.split(" | ") for row in TABLE_ROWS[1:]]
    story = [
        Paragraph("Heron Campus Parking Fees", styles["Heading1"]),
        Paragraph("1 Fees", styles["Heading2"]),
        Paragraph("Permit fees depend on the zone, as Table 1 shows.", styles["BodyText"]),
        Paragraph(TABLE_ROWS[0], styles["BodyText"]),
        Table(cells, colWidths=[90, 150, 80, 110], hAlign="LEFT"),
    ]
    buf = io.BytesIO()
    SimpleDocTemplate(buf, pagesize=A4, invariant=1).build(story)
    return buf.getvalue()


def test_a_quoted_table_arrives_one_row_per_line(seeded: World) -> None:
    """A table quoted whole shows one row per line wherever Teams shows the quote: in a chat's message text (markdown,
    where only a blank line breaks a line), in the citation's pop-up and in a channel's quote card; never as one run of
    ``… | Charging points North | 75 | 120 | 8 South | …``."""
    chat = "a:1personal-alice-tables"
    upload = seeded.chat_message("", chat=chat, attachments=[seeded.file_attachment(TABLE_PDF, table_pdf())])
    assert seeded.post(upload).status_code in (200, 201)
    seeded.wait_text(chat, f"Indexed {TABLE_PDF}")
    answer = seeded.ask(seeded.chat_message("What does Table 1 say?", chat=chat))
    shown = [html.unescape(p) for p in re.findall(r"<p>(.*?)</p>", _MD.render(answer.text), re.S)]
    start = shown.index(f"[1] “{TABLE_ROWS[0]}")
    assert shown[start + 1 : start + len(TABLE_ROWS) - 1] == TABLE_ROWS[1:-1]
    assert shown[start + len(TABLE_ROWS) - 1].startswith(f"{TABLE_ROWS[-1]}” — ")
    (cite,) = citations(answer)
    popup = json.loads(cite["appearance"]["text"])
    assert [block["inlines"][0]["text"] for block in popup["body"][1:]] == TABLE_ROWS

    # a channel answer carries the quote card
    channel = "19:channel-tables@thread.tacv2"
    seeded.fake.files[TABLE_PDF] = table_pdf()
    seeded.fake.channel_folders[(GROUP_ID, channel)] = ChannelFolder("drive-t", "folder-t", [TABLE_PDF])
    sync = seeded.channel_message("sync", channel=channel)
    assert seeded.post(sync).status_code in (200, 201)
    seeded.wait_text(sync["conversation"]["id"], "Synced 1 PDF")
    answer = seeded.ask(seeded.channel_message("What does Table 1 say?", channel=channel))
    (card,) = answer.body["attachments"]
    (sources,) = [item for item in card["content"]["body"] if item["type"] == "Container"]
    quoted = [block["inlines"][0]["text"] for block in sources["items"][1:]]
    assert quoted == [f"“{TABLE_ROWS[0]}", *TABLE_ROWS[1:-1], f"{TABLE_ROWS[-1]}”"]
