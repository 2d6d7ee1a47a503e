"""Issue 24's table, row by row, through the real Slack app and the real Teams app, in extractive mode and in LLM
mode (a local server speaking the OpenAI wire format on 127.0.0.1): what the asker reads in the thread.

Both sample PDFs (the staff handbook and the services agreement) are in one Slack channel and in one Teams
personal chat. Each row's question is asked as a user asks it (a signed Slack event, a Bot Framework activity)
and the posted message is read back from the fake Slack / fake Bot Connector: its text, the files it cites and
its quotes. The command line's side of the table is in ``tests/bot/test_ask_demo_cli.py``.
"""

from __future__ import annotations

import html
import itertools
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import structlog

from bot.core import ChatContext, ChatCore
from bot.teams.server import anonymous_authentication, build_app
from connectors.settings import Settings
from eval.fakes.microsoft import AppThread, FakeMicrosoft
from eval.fakes.openai_api import FakeOpenAI, careful_responder, fetching_responder, tool_results
from eval.fakes.slack_api import (
    BOT_TOKEN,
    SIGNING_SECRET,
    TEAM,
    FakeSlack,
    button_click,
    mention,
    message,
    post_interaction,
)
from eval.sample_pdfs import CONTRACT, HANDBOOK, sample_bytes
from pipelines.models import slack_scope, teams_scope
from tests.helpers.slack import SlackHarness
from tests.helpers.teams import TeamsHarness

pytestmark = pytest.mark.slow

CHANNEL, MEMBER = "C0ROWS", "U0ROWS"
TENANT, CHAT, ALICE = "tenant-rows", "a:1personal-rows", "29:alice"
FRESH_CHAT = "a:1personal-rows-fresh"  # both PDFs too, nothing asked there before the "which limit?" row
APP_ID = "0b7f9a3c-1d2e-4f50-8a6b-9c0d1e2f3a4b"
COMPARE_NOTICE = "Compare the notice periods in the handbook and the services agreement"
COMPARE_CONFIDENTIALITY = "Compare the two PDFs on confidentiality"
SUMMARY = "Summarize the services agreement"
FIGURE = "What does Figure 1 show?"
LIMIT = "What is the limit?"
TABLE = "Which year in table 2 had the highest revenue?"
DOC_TYPE = "What kind of document is this?"
PARTIAL = "What is the mileage rate and what is the dress code?"
AFTER_REMOTE = "What does the handbook cover right after the remote work rules?"


@pytest.fixture(scope="module", autouse=True)
def _log_to_live_streams() -> None:
    """A CLI test run earlier may have bound structlog to a captured stream pytest has since closed."""
    structlog.reset_defaults()


@dataclass
class Shown:
    """What the asker reads: the answer's lines, the files its sources name and its quotes."""

    lines: list[str]
    files: set[str]
    quotes: list[str]
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass
class World:
    """Both bots over one core, in one mode: what a question shows the asker on each platform."""

    mode: str
    slack_bot: SlackHarness
    teams_bot: TeamsHarness
    llm: FakeOpenAI | None
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    # --- Slack ----------------------------------------------------------------------------------
    def slack(self, question: str, *, thread: str | None = None) -> Shown:
        ts = f"{300 + next(self.ids)}.000001"
        event = mention(CHANNEL, MEMBER, question, ts) if thread is None else message(
            CHANNEL, MEMBER, question, ts, thread_ts=thread)
        root = thread or ts
        before = len(self._slack_answers(root))
        assert self.slack_bot.send(event) == 200
        self.slack_bot.fake.wait_until(lambda: len(self._slack_answers(root)) > before, timeout=120)
        params = self._slack_answers(root)[-1]
        self.slack_bot.idle()  # the answer is recorded after its post: then the thread is "answered"
        head = [b["text"]["text"] for b in params["blocks"] if b["type"] == "section"]
        lines = html.unescape("\n".join(head)).splitlines()
        files = set()
        for b in params["blocks"]:
            if b["type"] == "context" and " · p" in b["elements"][0]["text"]:
                files.add(html.unescape(b["elements"][0]["text"]).lstrip("<").split("|")[-1].split(" · ")[0]
                          .split(", p")[0])
        quotes = [html.unescape("".join(e.get("text", "") for e in b["elements"][0]["elements"]))
                  for b in params["blocks"] if b["type"] == "rich_text"]
        quotes = [re.sub(r"^\[\d+\] ", "", q) for q in quotes]  # each quote block opens with its [n]
        return Shown(lines, files, quotes, {**params, "root": root})

    def _slack_answers(self, root: str) -> list[dict[str, Any]]:
        # the thread's answers as the asker sees them at the end: posted, or (an LLM answer) streamed, then updated
        return [m for m in self.slack_bot.fake.thread(CHANNEL, root) if m.get("blocks") and not m.get("streaming")]

    # --- Teams ----------------------------------------------------------------------------------
    def teams(self, question: str, *, chat: str = CHAT) -> Shown:
        activity = self.teams_bot.chat_message(question, chat=chat, tenant=TENANT, user=ALICE,
                                               activity_id=f"rows-{self.mode}-{next(self.ids)}")
        activity["from"]["name"] = "Alice"
        assert self.teams_bot.post(activity).status_code in (200, 201)
        call = self.teams_bot.wait_answer(activity, timeout=120)
        # the answer is recorded after its post; a reply in the chat ("2") reads it from the thread's history
        deadline = time.monotonic() + 60
        core = self.teams_bot.core
        while not any(t.role == "user" and t.text == question for t in core.history("teams", chat)[-2:]):
            assert time.monotonic() < deadline, "the answer was never recorded"
            time.sleep(0.05)
        text = call.text.split("\n\n_", 1)[0]  # the note, in italics, follows the answer
        (entity,) = [e for e in call.body["entities"] if e.get("@type") == "Message"]
        cites = list(entity.get("citation") or [])
        # an extractive answer's quotes follow inline, a blank line apart: "[n] “quote” — file · p. N"
        answer = re.split(r"\n\n(?=\[\d+\] “)", text, maxsplit=1)[0]
        lines = [re.sub(r"\\(.)", r"\1", ln) for ln in re.split(r"\n+", answer) if ln.strip()]
        return Shown(lines, {c["appearance"]["name"] for c in cites}, [c["appearance"]["abstract"] for c in cites],
                     call.body)

    # --- "which one?": the readings offered, and a click on one ------------------------------------
    def options(self, platform: str, shown: Shown) -> list[tuple[str, str]]:
        """(label, what a click sends) of each reading a "which one?" answer offers: Slack's buttons, Teams'
        card actions."""
        if platform == "slack":
            (buttons,) = [b["elements"] for b in shown.raw["blocks"] if b["type"] == "actions"]
            return [(b["text"]["text"], json.dumps(b)) for b in buttons]
        (card,) = [a["content"] for a in shown.raw.get("attachments") or [] if a["content"].get("actions")]
        return [(a["title"], json.dumps(a["data"])) for a in card["actions"] if a["type"] == "Action.Submit"]

    def pick(self, platform: str, shown: Shown, option: str, *, where: str = "") -> Shown:
        """Click ``option`` (from :meth:`options`) as a user of ``where`` would (default: where it was offered):
        a signed ``block_actions`` payload into the Slack app, a card's submit activity into the Teams app."""
        if platform == "slack":
            slack = self.slack_bot
            button = json.loads(option)
            channel, root = where or CHANNEL, shown.raw["root"]
            offered = [c for c in slack.fake.calls_to("chat.postMessage", channel=CHANNEL, thread_ts=root)
                       if c.params.get("blocks")][-1].reply["ts"]
            thread = root if not where else f"{400 + next(self.ids)}.000001"
            def final() -> list[dict[str, Any]]:  # posted, or (an LLM answer) streamed and then updated
                return [m for m in slack.fake.thread(channel, thread) if not m.get("streaming")]

            before = len(final())
            status, _ = post_interaction(slack.url, button_click(
                user=MEMBER, channel=channel, message_ts=offered if not where else thread, thread_ts=thread,
                action_id=button["action_id"], value=button["value"]))
            assert status == 200
            slack.fake.wait_until(lambda: len(final()) > before, timeout=120)
            slack.idle()
            message = final()[-1]
            return Shown(html.unescape(message["text"]).splitlines(), set(), [], message)
        activity = self.teams_bot.chat_message("", chat=where or FRESH_CHAT, tenant=TENANT, user=ALICE,
                                               activity_id=f"rows-{self.mode}-{next(self.ids)}")
        activity["from"]["name"] = "Alice"
        del activity["text"], activity["attachments"]
        activity["value"] = json.loads(option)
        assert self.teams_bot.post(activity).status_code in (200, 201)
        call = self.teams_bot.wait_reply(activity, timeout=120)
        return Shown([re.sub(r"\\(.)", r"\1", ln) for ln in call.text.splitlines()], set(), [], call.body)

    def ask(self, platform: str, question: str) -> Shown:
        return self.slack(question) if platform == "slack" else self.teams(question)

    def model_calls(self) -> int:
        return len(self.llm.requests) if self.llm else 0


@pytest.fixture(scope="module", params=["extractive", "llm"])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    mode = request.param
    data_dir = tmp_path_factory.mktemp(f"rows-{mode}")
    llm = FakeOpenAI(careful_responder).start() if mode == "llm" else None
    fake_slack = FakeSlack().start()
    with FakeMicrosoft(client_id=APP_ID, client_secret="fake-app-password") as microsoft:  # noqa: S106
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]
            data_dir=data_dir, ocr_enabled=False,
            slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET, slack_api_url=fake_slack.url,
            slack_workers=2, teams_app_id=APP_ID, teams_app_password="fake-app-password",  # noqa: S106
            teams_graph_url=microsoft.graph_url, teams_token_url=microsoft.token_url,
            openai_base_url=llm.base_url if llm else None,
        )
        core = ChatCore.from_settings(settings)
        for scope, ctx_platform in [(slack_scope(TEAM, CHANNEL), "slack"), (teams_scope(TENANT, CHAT), "teams"),
                                    (teams_scope(TENANT, FRESH_CHAT), "teams")]:
            for name in (HANDBOOK, CONTRACT):
                ctx = ChatContext(ctx_platform, scope, MEMBER if ctx_platform == "slack" else ALICE)
                assert core.upload(ctx, file_name=name, data=sample_bytes(name)).status == "indexed"
        with SlackHarness.serving(settings, core, fake_slack) as slack:
            app = build_app(settings, core, auth=anonymous_authentication())
            with AppThread(app) as teams:
                yield World(mode, slack, TeamsHarness(core, settings, microsoft, teams), llm)
    fake_slack.stop()
    if llm:
        llm.stop()


PLATFORMS = ["slack", "teams"]


def _bullet(lines: list[str], prefix: str) -> str:
    found = [ln for ln in lines if ln.startswith(prefix)]
    assert found, (prefix, lines)
    return found[0]


@pytest.mark.parametrize("platform", PLATFORMS)
def test_compare_the_notice_periods_one_cited_block_per_document(world: World, platform: str) -> None:
    shown = world.ask(platform, COMPARE_NOTICE)
    assert shown.files == {HANDBOOK, CONTRACT}, shown.lines
    if world.mode == "extractive":
        assert shown.lines[0] == "What each PDF says about the notice periods:"
        assert re.fullmatch(r"• \S+ (\[\d+\])+", _bullet(shown.lines, f"• {CONTRACT} ["))
        assert re.fullmatch(r"• \S+ (\[\d+\])+", _bullet(shown.lines, f"• {HANDBOOK} ["))
        assert any("one month during the first two years of service" in q for q in shown.quotes)
    else:  # the model's words, one sentence per document, each with its validated quote
        assert shown.lines == [f"The model read {CONTRACT} [1]. The model read {HANDBOOK} [2]."] or shown.lines == [
            f"The model read {HANDBOOK} [1]. The model read {CONTRACT} [2]."], shown.lines
        assert len(shown.quotes) == 2


@pytest.mark.parametrize("platform", PLATFORMS)
def test_compare_on_confidentiality_names_the_handbook_as_saying_nothing(world: World, platform: str) -> None:
    shown = world.ask(platform, COMPARE_CONFIDENTIALITY)
    assert f"• {HANDBOOK}: says nothing about confidentiality that I could find." in shown.lines, shown.lines
    assert shown.files == {CONTRACT}
    assert any("Confidential Information secret" in q for q in shown.quotes)
    if world.mode == "llm":
        assert shown.lines[0].startswith(f"The model read {CONTRACT} [1].")


@pytest.mark.parametrize("platform", PLATFORMS)
def test_summarise_the_agreement_section_by_section_each_line_cited(world: World, platform: str) -> None:
    shown = world.ask(platform, SUMMARY)
    assert shown.files == {CONTRACT}
    if world.mode == "extractive":
        assert shown.lines[0] == f"A summary of {CONTRACT} (7 pages): the opening sentence of each section."
        bullets = shown.lines[1:]
        assert len(bullets) >= 8 and all(re.fullmatch(r"• .+ \(pp?\. [\d–]+\) \[\d+\]", b) for b in bullets), bullets
        assert "• ARTICLE III FEES AND PAYMENT (p. 3) [4]" in bullets
    else:
        (text,) = shown.lines
        sentences = re.findall(r"The model read \S+ \[(\d+)\]\.", text)
        assert len(sentences) >= 8 and [int(n) for n in sentences] == list(range(1, len(sentences) + 1)), text
    assert len(shown.quotes) >= 8
    assert any("annual subscription fee of EUR 184,000" in q for q in shown.quotes)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_figure_that_does_not_exist_is_said_with_what_does(world: World, platform: str) -> None:
    calls = world.model_calls()
    shown = world.ask(platform, FIGURE)
    assert shown.lines[0] == "There is no Figure 1 in the PDFs here."
    assert shown.lines[1] == (f"They have: {CONTRACT}: Table 1 (p. 3); {HANDBOOK}: Table 1 (p. 4), Table 2 (p. 9).")
    assert shown.quotes == [] and shown.files == set()  # never unrelated passages
    assert world.model_calls() == calls


@pytest.mark.parametrize("platform", PLATFORMS)
def test_what_is_the_limit_asks_which_and_a_click_or_a_numbered_reply_answers_it(world: World, platform: str) -> None:
    # in a personal chat every question but the first has a thread before it, and a bare "what is the limit?"
    # there is a follow-up, rewritten from it; asked first, it asks back
    shown = world.slack(LIMIT) if platform == "slack" else world.teams(LIMIT, chat=FRESH_CHAT)
    assert shown.lines[0] == "Which limit do you mean? The PDFs mention several:"
    assert shown.lines[1].startswith(f"1. 2.1 Flexitime ({HANDBOOK}, p. 2) [1] → ask “")
    assert shown.lines[2].startswith(f"2. ARTICLE VI LIABILITY ({CONTRACT}, p. 5) [2] → ask “")
    assert shown.lines[3].startswith(f"3. 6 Travel and Expenses ({HANDBOOK}, p. 8) [3] → ask “")  # the hotel limit
    assert shown.files == {CONTRACT, HANDBOOK}
    assert any("up to 160 pounds per night in London" in q for q in shown.quotes)
    # the three readings as Slack buttons / Teams card actions
    options = world.options(platform, shown)
    assert [label for label, _ in options] == [
        f"1. 2.1 Flexitime · {HANDBOOK}", f"2. ARTICLE VI LIABILITY · {CONTRACT}",
        f"3. 6 Travel and Expenses · {HANDBOOK}"]
    # a click on the hotel reading answers it where it was offered, quoting that reading
    picked = world.pick(platform, shown, options[2][1])
    text = "\n".join(picked.lines)
    if world.mode == "extractive":
        assert "Hotel costs are reimbursed up to 160 pounds per night in London" in text, text
    else:  # the model answered that reading, from the handbook's passages
        assert text.startswith(f"The model read {HANDBOOK} [1]"), text
    assert HANDBOOK in json.dumps(picked.raw) and CONTRACT not in json.dumps(picked.raw)
    # the reply "2" in the thread (a personal chat is one thread) answers the second reading
    reply = world.slack("2", thread=shown.raw["root"]) if platform == "slack" else world.teams("2", chat=FRESH_CHAT)
    assert reply.files == {CONTRACT}
    if world.mode == "extractive":
        assert any("total liability" in q for q in reply.quotes), reply.quotes
    # the same click from a channel / chat with no PDFs: its own scope, nothing of this one's
    elsewhere = world.pick(platform, shown, options[2][1], where="C0NOPDFS" if platform == "slack" else "a:1nopdfs")
    seen = json.dumps(elsewhere.raw)
    assert "don't seem to answer" in "\n".join(elsewhere.lines), elsewhere.lines
    assert HANDBOOK not in seen and CONTRACT not in seen and "160 pounds" not in seen


@pytest.mark.parametrize("platform", PLATFORMS)
def test_which_year_had_the_highest_revenue_says_the_year_and_cites_the_row(world: World, platform: str) -> None:
    shown = world.ask(platform, TABLE)
    assert shown.lines == [f"2022: the highest Revenue (GBP million) in Table 2 of {HANDBOOK} (p. 9) is 118.6 "
                           "[1][2]."]
    assert shown.quotes[0].startswith("Year | Revenue (GBP million)")  # the row under its header
    assert shown.quotes[1:] == ["2022 | 118.6 | 1,180 | 4"]


@pytest.mark.parametrize("platform", PLATFORMS)
def test_what_kind_of_document_says_the_type_and_cites_the_title(world: World, platform: str) -> None:
    shown = world.ask(platform, DOC_TYPE)
    assert shown.lines == [f"{CONTRACT} is a master services agreement; its first page reads [1]",
                           f"{HANDBOOK} is an employee handbook; its first page reads [2]"]
    assert shown.quotes[0].startswith("Master Services Agreement") and shown.quotes[1].startswith("Employee Handbook")


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_part_the_pdfs_do_not_cover_is_named_and_the_other_answered(world: World, platform: str) -> None:
    calls = world.model_calls()
    shown = world.ask(platform, PARTIAL)
    covered = ("• What is the mileage rate? [1]" if world.mode == "extractive"
               else f"• What is the mileage rate? The model read {HANDBOOK} [1].")
    assert shown.lines[:2] == [covered, "• What is the dress code? The PDFs don't say."], shown.lines
    assert shown.files == {HANDBOOK}
    assert len(shown.quotes) == 1
    if world.mode == "extractive":
        assert "45 pence per mile" in shown.quotes[0]
    else:  # the model's quote (the first sentence of the passage it was given first), validated
        assert world.model_calls() == calls + 1  # the uncovered part never reached the model
    # the note says part of the question was not covered
    note = (shown.raw.get("text", "") if platform == "slack" else "") + json.dumps(shown.raw)
    assert "Part of your question isn" in note



@pytest.mark.parametrize("platform", PLATFORMS)
def test_with_an_llm_the_model_fetches_the_section_it_needs_and_its_page_is_cited(world: World, platform: str) -> None:
    """Triage (issue 24 item 7): the model reads the outline, fetches the section after "5 Remote Work" (section 6,
    p. 8, which retrieval did not bring), and the asker reads its answer with the quote from that page."""
    if world.mode != "llm" or world.llm is None:
        pytest.skip("triage is the model's: without one there is nothing to fetch for")
    scope = slack_scope(TEAM, CHANNEL) if platform == "slack" else teams_scope(TENANT, CHAT)
    (hb,) = [d.doc_id for d in world.slack_bot.core.service.list_documents(scope) if d.file == HANDBOOK]
    before = len(world.llm.requests)
    world.llm.responder = fetching_responder({"name": "fetch_section", "arguments": {"document_id": hb,
                                                                                     "section": "6"}},
                                             then=careful_responder)
    try:
        shown = world.ask(platform, AFTER_REMOTE)
    finally:
        world.llm.responder = careful_responder
    assert shown.lines == [f"The model read {HANDBOOK} [1]."], shown.lines
    assert shown.files == {HANDBOOK}
    assert shown.quotes == ["Business travel must be booked through the travel desk at least 14 days in advance "
                            "where possible."]
    assert "p. 8" in json.dumps(shown.raw)  # the page the quote is on, shown beside it
    offered = [r for r in world.llm.requests[before:] if r.get("tools")]
    assert f'- document_id "{hb}": {HANDBOOK}, 14 pages' in offered[0]["messages"][1]["content"]
    (result,) = tool_results(offered[-1])
    assert "6 Travel and Expenses" in result["content"]
