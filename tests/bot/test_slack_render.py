"""Block Kit rendering of answers and parsing of Slack payloads (no network, no model)."""

from __future__ import annotations

import pytest
from haystack import Document

from bot.slack.events import (
    parse_choice_click,
    parse_command,
    parse_file_shared,
    parse_message,
    parse_reaction,
    strip_mentions,
)
from bot.slack.render import MAX_BLOCKS, MAX_SECTION_CHARS, location, render_answer, split_text
from pipelines.components.refusal import REFUSAL_TEXT, refusal_text
from pipelines.models import Answer, Citation, RetrievedChunk


def _citation(n: int, quote: str = "Employees may take eighteen weeks of parental leave.") -> Citation:
    return Citation(
        n=n,
        chunk_id=f"d1:{n:05d}",
        doc_id="d1",
        file="handbook.pdf",
        page_start=4,
        page_end=4,
        section="4 Leave > 4.2 Parental leave",
        quote=quote,
    )


def _texts(blocks: list[dict]) -> list[str]:
    out = []
    for b in blocks:
        if b["type"] == "section":
            out.append(b["text"]["text"])
        elif b["type"] == "context":
            out.extend(e["text"] for e in b["elements"])
        elif b["type"] == "rich_text":
            out.append("".join(e["text"] for q in b["elements"] for e in q["elements"]))
    return out


class TestRenderAnswer:
    def test_answer_then_each_citation_as_quote_with_location_and_the_feedback_buttons(self) -> None:
        answer = Answer(text="Eighteen weeks [1].", citations=[_citation(1)])
        text, blocks = render_answer(answer)
        assert [b["type"] for b in blocks] == ["section", "rich_text", "context", "context_actions"]
        assert blocks[0]["text"]["text"] == "Eighteen weeks [1]."
        quote = blocks[1]["elements"][0]
        assert quote["type"] == "rich_text_quote"
        assert "".join(e["text"] for e in quote["elements"]) == (
            "[1] Employees may take eighteen weeks of parental leave."
        )
        assert blocks[2]["elements"][0]["text"] == "handbook.pdf · p. 4 · 4 Leave &gt; 4.2 Parental leave"
        assert [e["type"] for e in blocks[3]["elements"]] == ["feedback_buttons"]  # no hint line repeating them
        assert "Eighteen weeks [1]." in text and "handbook.pdf · p. 4" in text

    def test_a_citation_with_a_link_shows_file_and_page_as_the_link_text(self) -> None:
        url = "https://acme.slack.com/files/U1/F1/handbook.pdf?a=1&b=2"
        _, blocks = render_answer(Answer(text="Eighteen weeks [1].", citations=[_citation(1).model_copy(
            update={"url": url, "file": "R&D <draft>.pdf"})]))
        assert blocks[2]["elements"][0]["text"] == (
            "<https://acme.slack.com/files/U1/F1/handbook.pdf?a=1&amp;b=2|R&amp;D &lt;draft&gt;.pdf, p. 4>"
            " · 4 Leave &gt; 4.2 Parental leave"
        )

    @pytest.mark.parametrize("url", ["javascript:alert(1)", "http://intranet/x.pdf", "file:///etc/passwd",
                                     "https://x.test/a|b", "https://x.test/<@U1>"])
    def test_links_other_than_plain_https_are_never_drawn(self, url: str) -> None:
        _, blocks = render_answer(Answer(text="x [1].", citations=[_citation(1).model_copy(update={"url": url})]))
        assert blocks[2]["elements"][0]["text"] == "handbook.pdf · p. 4 · 4 Leave &gt; 4.2 Parental leave"

    def test_long_answer_with_many_citations_stays_inside_slack_limits(self) -> None:
        long_text = ("The policy says a great many things about leave and pay. " * 400).strip()  # ~23k chars
        answer = Answer(text=long_text, citations=[_citation(i, "quote " * 700) for i in range(1, 41)])
        text, blocks = render_answer(answer)
        assert len(blocks) <= MAX_BLOCKS
        for b in blocks:
            if b["type"] == "section":
                assert len(b["text"]["text"]) <= MAX_SECTION_CHARS
            if b["type"] == "context":
                assert all(len(e["text"]) <= MAX_SECTION_CHARS for e in b["elements"])
            if b["type"] == "rich_text":
                assert sum(len(e["text"]) for q in b["elements"] for e in q["elements"]) <= MAX_SECTION_CHARS
        assert any("more sources not shown" in t for t in _texts(blocks))
        assert blocks[-1]["type"] == "context_actions"
        assert 0 < len(text) <= 3000

    def test_refusal_shows_closest_passages_once_as_links(self) -> None:
        answer = Answer(
            text=refusal_text([Document(content="x", meta={"file_name": "a.pdf", "page_start": 2, "page_end": 3}),
                               Document(content="y", meta={"file_name": "a.pdf", "page_start": 7, "page_end": 7})]),
            refused=True,
            retrieved=[
                RetrievedChunk(chunk_id="d:1", doc_id="d", file="a.pdf", page_start=2, page_end=3, score=0.1),
                RetrievedChunk(chunk_id="d:2", doc_id="d", file="a.pdf", page_start=7, page_end=7, score=0.05),
            ],
        )
        _, blocks = render_answer(answer)
        texts = _texts(blocks)
        assert texts[0] == REFUSAL_TEXT
        assert sum("closest passages" in t for t in texts) == 1
        assert sum("a.pdf · pp. 2–3" in t for t in texts) == 1 and sum("a.pdf · p. 7" in t for t in texts) == 1

    def test_mrkdwn_control_characters_are_escaped(self) -> None:
        _, blocks = render_answer(Answer(text="Use <b> & <@U123> carefully"))
        assert blocks[0]["text"]["text"] == "Use &lt;b&gt; &amp; &lt;@U123&gt; carefully"

    @pytest.mark.parametrize("n", [10, 2999, 3000, 3001, 9000])
    def test_split_text_keeps_every_word_in_order(self, n: int) -> None:
        text = " ".join(f"w{i}" for i in range(n))[: n * 3]
        parts = split_text(text, 100)
        assert all(len(p) <= 100 for p in parts)
        assert " ".join(parts).split() == text.split()

    def test_location_without_section(self) -> None:
        assert location("x.pdf", 3, 3, "") == "x.pdf · p. 3"


class TestParse:
    def test_message_from_a_bot_or_an_edit_is_ignored(self) -> None:
        base = {"team_id": "T1", "event_id": "E1"}
        bot = {**base, "event": {"type": "message", "bot_id": "B2", "user": "U2", "channel": "C1", "ts": "1"}}
        edit = {**base, "event": {"type": "message", "subtype": "message_changed", "channel": "C1", "ts": "1"}}
        assert parse_message(bot) is None
        assert parse_message(edit) is None

    def test_mention_question_and_thread(self) -> None:
        body = {
            "team_id": "T1",
            "event_id": "E1",
            "event": {"type": "app_mention", "user": "U1", "text": "<@UBOT> how long?", "ts": "5.1", "channel": "C1"},
        }
        msg = parse_message(body)
        assert msg is not None
        got = (msg.question, msg.scope, msg.reply_thread_ts, msg.in_thread)
        assert got == ("how long?", "slack:T1:C1", "5.1", False)
        assert strip_mentions("<@U1|bob>  hi <@U2>") == "hi"

    def test_reactions_map_to_polarity_and_other_emoji_are_ignored(self) -> None:
        def body(name: str, kind: str = "reaction_added") -> dict:
            item = {"type": "message", "channel": "C1", "ts": "9.9"}
            return {"team_id": "T1", "event": {"type": kind, "user": "U1", "reaction": name, "item": item}}

        up = parse_reaction(body("+1::skin-tone-3"))
        assert up is not None and (up.polarity, up.added, up.message_ref) == ("up", True, "C1:9.9")
        down = parse_reaction(body("thumbsdown", "reaction_removed"))
        assert down is not None and (down.polarity, down.added) == ("down", False)
        assert parse_reaction(body("eyes")) is None

    def test_file_shared_and_command(self) -> None:
        fs = parse_file_shared(
            {"team_id": "T1", "event": {"type": "file_shared", "file_id": "F1", "channel_id": "C1", "user_id": "U1"}}
        )
        assert fs is not None and fs.file.id == "F1" and not fs.file.complete and fs.scope == "slack:T1:C1"
        cmd = parse_command({"team_id": "T1", "channel_id": "D9", "user_id": "U1", "text": " forget  “a b.pdf” "})
        assert (cmd.verb, cmd.arg, cmd.is_dm) == ("forget", "a b.pdf", True)
        assert parse_command({"text": ""}).verb == "help"


def test_the_manifest_asks_for_every_event_and_scope_the_app_uses() -> None:
    """Create-from-manifest must give the app what its listeners need: a missing event is a silent bot."""
    from pathlib import Path

    import yaml

    manifest = yaml.safe_load((Path(__file__).resolve().parents[2] / "deploy/slack/manifest.yaml").read_text())
    events = set(manifest["settings"]["event_subscriptions"]["bot_events"])
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert {"app_mention", "file_shared", "file_deleted", "reaction_added", "reaction_removed",
            "assistant_thread_started", "assistant_thread_context_changed", "message.im"} <= events
    assert {"assistant:write", "chat:write", "reactions:write", "commands", "files:read"} <= scopes
    assert manifest["settings"]["interactivity"]["is_enabled"] is True  # feedback buttons and the 👎 form
    assert manifest["features"]["assistant_view"]["assistant_description"]


class TestWhichOneButtons:
    """A "which one?" answer offers each reading as a button whose value is its follow-up question; a click's
    payload is the clicker's to forge, so it is parsed with bounds."""

    def _clarify(self, *choices: str) -> Answer:
        return Answer(text="Which limit do you mean?\n1. … [1]\n2. … [2]", kind="clarify", choices=list(choices),
                      citations=[_citation(1), _citation(2).model_copy(update={"file": "contract.pdf",
                                                                               "section": "ARTICLE VI LIABILITY"})])

    def test_one_button_per_reading_named_by_its_place(self) -> None:
        _, blocks = render_answer(self._clarify("What is the limit in section 4.2?", "What is the limit in VI?"))
        (actions,) = [b for b in blocks if b["type"] == "actions"]
        assert [(e["text"]["text"], e["value"]) for e in actions["elements"]] == [
            ("1. 4.2 Parental leave · handbook.pdf", "What is the limit in section 4.2?"),
            ("2. ARTICLE VI LIABILITY · contract.pdf", "What is the limit in VI?"),
        ]
        assert len({e["action_id"] for e in actions["elements"]}) == 2  # unique within the block, as Slack requires

    def test_no_buttons_on_other_answers_and_no_button_for_a_question_too_long_to_carry(self) -> None:
        _, blocks = render_answer(Answer(text="Eighteen weeks [1].", citations=[_citation(1)], choices=["x?"]))
        assert not [b for b in blocks if b["type"] == "actions"]
        _, blocks = render_answer(self._clarify("x" * 501, "What is the limit in VI?"))
        (actions,) = [b for b in blocks if b["type"] == "actions"]
        assert [e["action_id"] for e in actions["elements"]] == ["citebot_choice_2"]  # still the second reading

    @pytest.mark.parametrize("value", ["", "   ", "\x00\x07", "x" * 501, None, 42])
    def test_a_click_without_a_question_it_could_carry_is_no_click(self, value: object) -> None:
        body = {"type": "block_actions", "user": {"id": "U1"}, "channel": {"id": "C1"}, "team": {"id": "T1"},
                "message": {"ts": "1.0"}, "actions": [{"action_id": "citebot_choice_1", "value": value}]}
        assert parse_choice_click(body) is None

    def test_a_click_is_the_clickers_question_in_the_clicked_messages_thread(self) -> None:
        body = {"type": "block_actions", "user": {"id": "U1", "team_id": "T1"}, "channel": {"id": "C9"},
                "message": {"ts": "2.0", "thread_ts": "1.0"}, "container": {"channel_id": "C1"},
                "actions": [{"action_id": "citebot_choice_3", "value": " What is\nthe limit? ", "action_ts": "3.0"}]}
        click = parse_choice_click(body)
        assert click is not None
        msg = click.as_message()
        assert (msg.scope, msg.user, msg.question, msg.reply_thread_ts, msg.in_thread) == (
            "slack:T1:C9", "U1", "What is the limit?", "1.0", True)
