"""Teams message rendering, activity parsing (scopes, mentions, files) and the app package."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from microsoft_agents.activity import Activity
from PIL import Image

from bot.teams import render
from bot.teams.activity import FILE_DOWNLOAD_INFO, feedback_comment, message_ref, parse_turn
from bot.teams.package import PackageError, build_package
from pipelines.models import Answer, Citation


def wire(activity: Activity) -> dict[str, Any]:
    """The activity as the Bot Connector receives it (JSON, camelCase keys)."""
    return activity.model_dump(mode="json", by_alias=True, exclude_none=True)


APP_ID = "0b7f9a3c-1d2e-4f50-8a6b-9c0d1e2f3a4b"
LONG_QUOTE = (
    "Employees who have completed five years of continuous service receive twenty-five days of annual "
    "leave, which may be carried over to the next calendar year up to a maximum of five days."
)


def _answer() -> Answer:
    return Answer(
        text="Staff with five years of service get 25 days [1]; carry-over is capped at five days [2].",
        citations=[
            Citation(
                n=1,
                chunk_id="d1:00003",
                doc_id="d1",
                file="handbook.pdf",
                page_start=4,
                page_end=4,
                section="4 Leave > 4.1 Annual leave",
                quote=LONG_QUOTE,
            ),
            Citation(
                n=2,
                chunk_id="d1:00004",
                doc_id="d1",
                file="handbook.pdf",
                page_start=4,
                page_end=5,
                quote="up to a maximum of five days",
            ),
        ],
    )


def _entity(activity: Activity) -> dict:
    data = wire(activity)
    (entity,) = [e for e in data["entities"] if e.get("@type") == "Message"]
    return entity


def _card_text(element: dict[str, Any]) -> str:
    """What a card element shows: a TextBlock's text, a RichTextBlock's runs one after another."""
    if element["type"] == "RichTextBlock":
        return "".join(run["text"] for run in element["inlines"])
    return str(element["text"])


class TestAnswerActivity:
    def test_text_keeps_markers_and_ai_label_and_feedback_loop(self) -> None:
        data = wire(render.answer_activity(_answer(), quote_card=False))
        assert "[1]" in data["text"] and "[2]" in data["text"]
        assert data["channelData"] == {"feedbackLoop": {"type": "custom"}}  # 👍/👎 ask for Citebot's own form
        entity = _entity(render.answer_activity(_answer(), quote_card=False))
        assert entity["type"] == "https://schema.org/Message"
        assert entity["@context"] == "https://schema.org"
        assert entity["additionalType"] == ["AIGeneratedContent"]

    def test_citation_entities_carry_file_page_and_verbatim_quote(self) -> None:
        entity = _entity(render.answer_activity(_answer(), quote_card=False))
        first, second = entity["citation"]
        assert first["@type"] == "Claim" and first["position"] == 1 and second["position"] == 2
        app = first["appearance"]
        assert app["@type"] == "DigitalDocument"
        assert app["name"] == "handbook.pdf"
        assert app["keywords"] == ["p. 4", "4.1 Annual leave"]
        # abstract: a verbatim prefix within Teams' 160-character limit; the full quote in the pop-up card
        assert len(app["abstract"]) <= 160
        assert LONG_QUOTE.startswith(app["abstract"].rstrip("…"))
        assert app["encodingFormat"] == "application/vnd.microsoft.card.adaptive"
        assert LONG_QUOTE in _card_text(json.loads(app["text"])["body"][1])
        assert second["appearance"]["abstract"] == "up to a maximum of five days"
        assert second["appearance"]["keywords"] == ["pp. 4–5"]

    @pytest.mark.parametrize("url", ["javascript:alert(1)", "file:///etc/passwd", "http://intranet/a.pdf", ""])
    def test_only_https_file_links_are_drawn(self, url: str) -> None:
        answer = _answer()
        answer = answer.model_copy(update={"citations": [c.model_copy(update={"url": url}) for c in answer.citations]})
        activity = render.answer_activity(answer, quote_card=True)
        assert all("url" not in c["appearance"] for c in _entity(activity)["citation"])
        assert "](" not in json.dumps(wire(activity)["attachments"])

    def test_quote_card_only_when_asked(self) -> None:
        assert not render.answer_activity(_answer(), quote_card=False).attachments
        (card,) = render.answer_activity(_answer(), quote_card=True).attachments
        assert card.content_type == "application/vnd.microsoft.card.adaptive"
        blocks = [b for b in card.content["body"] if b["type"] == "Container"]
        assert [_card_text(b["items"][0]) for b in blocks] == [
            "[1] handbook.pdf · p. 4 · 4.1 Annual leave",
            "[2] handbook.pdf · pp. 4–5",
        ]
        assert _card_text(blocks[0]["items"][1]) == f"“{LONG_QUOTE}”"

    def test_extractive_answer_in_a_chat_shows_the_quotes_inline(self) -> None:
        text = render.answer_activity(_answer(), quote_card=False).text
        assert f"[1] “{LONG_QUOTE}” — handbook.pdf · p. 4 · 4.1 Annual leave" in text
        assert "[2] “up to a maximum of five days” — handbook.pdf · pp. 4–5" in text
        # with the quote card (channels) the quotes are in the card, not repeated in the text
        assert LONG_QUOTE not in render.answer_activity(_answer(), quote_card=True).text
        # an LLM answer is prose with markers; its quotes live in the citations
        llm = _answer().model_copy(update={"mode": "llm"})
        assert render.answer_activity(llm, quote_card=False).text == llm.text

    def test_quote_lines_that_look_like_markdown_blocks_show_as_written(self) -> None:
        """A quote's lines stand on lines of their own in a chat's markdown text; a line starting as a heading, a list
        item or a table row in the PDF stays that line of text, never a heading or a list Teams draws."""
        from markdown_it import MarkdownIt

        lines = ["# Fees", "- North zone", "2019. A good year", "3) Harbour", "| Zone | Fee |", "=== 75 ==="]
        cite = Citation(n=1, chunk_id="d1:1", doc_id="d1", file="fees.pdf", page_start=2, page_end=2,
                        quote="\n".join(lines))
        text = render.answer_text(Answer(text="Here is what the PDFs say [1]:", citations=[cite]), inline_quotes=True)
        html = MarkdownIt("commonmark").render(text)
        shown = html.replace("<p>", "").split("</p>\n")
        assert shown[1:-1] == ["[1] “# Fees", "- North zone", "2019. A good year", "3) Harbour", "| Zone | Fee |",
                               "=== 75 ===” — fees.pdf · p. 2"]

    def test_refusal_has_label_but_no_citations_or_card(self) -> None:
        refused = Answer(text="The PDFs here don't say.", refused=True, note="No passage was relevant enough.")
        activity = render.answer_activity(refused, quote_card=True)
        assert "citation" not in _entity(activity)
        assert not activity.attachments
        assert "No passage was relevant enough." in activity.text


def _channel_activity(text: str, *, mention: bool = True, tenant: str = "tenant-1") -> Activity:
    entities = [{"type": "mention", "text": "<at>Citebot</at>", "mentioned": {"id": "28:bot", "name": "Citebot"}}]
    return Activity.model_validate(
        {
            "type": "message",
            "id": "1700000000001",
            "text": text,
            "from": {"id": "29:alice", "aadObjectId": "aad-alice"},
            "recipient": {"id": "28:bot", "name": "Citebot"},
            "conversation": {
                "id": "19:general@thread.tacv2;messageid=1699999999999",
                "conversationType": "channel",
                "tenantId": tenant,
            },
            "channelData": {
                "channel": {"id": "19:general@thread.tacv2"},
                "team": {"id": "19:team@thread.tacv2", "aadGroupId": "group-1"},
                "tenant": {"id": tenant},
            },
            "entities": entities if mention else [],
        }
    )


class TestParseTurn:
    def test_channel_scope_uses_channel_id_not_thread_suffix(self) -> None:
        turn = parse_turn(_channel_activity("<at>Citebot</at> what is the leave policy?"))
        assert turn.kind == "channel"
        assert turn.scope == "teams:tenant-1:19:general@thread.tacv2"
        assert turn.thread_ref == "19:general@thread.tacv2;messageid=1699999999999"
        assert turn.team_group_id == "group-1"

    def test_other_tenant_same_channel_id_is_another_scope(self) -> None:
        a = parse_turn(_channel_activity("x", tenant="tenant-1"))
        b = parse_turn(_channel_activity("x", tenant="tenant-2"))
        assert a.scope != b.scope
        assert message_ref(a.scope, "42") != message_ref(b.scope, "42")

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("<at>Citebot</at> what is the leave policy?", "what is the leave policy?"),
            ("<p><at>Citebot</at>&nbsp;how many days?</p>", "how many days?"),
            ("Ask <at>Citebot</at> about &quot;Table 2&quot; please", 'Ask about "Table 2" please'),
            ("<at>Citebot</at> does <at>Bob</at> approve?", "does Bob approve?"),
        ],
    )
    def test_mention_is_stripped(self, text: str, expected: str) -> None:
        turn = parse_turn(_channel_activity(text))
        assert turn.mentioned
        assert turn.text == expected

    def test_unmentioned_channel_message(self) -> None:
        turn = parse_turn(_channel_activity("just chatting", mention=False))
        assert not turn.mentioned and turn.text == "just chatting"

    def test_personal_chat_scope_and_file_attachment(self) -> None:
        activity = Activity.model_validate(
            {
                "type": "message",
                "id": "1",
                "from": {"id": "29:alice"},
                "recipient": {"id": "28:bot"},
                "conversation": {"id": "a:1personal", "conversationType": "personal", "tenantId": "tenant-1"},
                "channelData": {"tenant": {"id": "tenant-1"}},
                "attachments": [
                    {
                        "contentType": FILE_DOWNLOAD_INFO,
                        "name": "policy.pdf",
                        "content": {"downloadUrl": "http://127.0.0.1:1/files/x", "uniqueId": "u1", "fileType": "pdf"},
                    },
                    {"contentType": "text/html", "content": "<p>here</p>"},
                ],
            }
        )
        turn = parse_turn(activity)
        assert turn.kind == "personal"
        assert turn.scope == "teams:tenant-1:a:1personal"
        (f,) = turn.files
        assert (f.name, f.download_url, f.is_pdf) == ("policy.pdf", "http://127.0.0.1:1/files/x", True)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (json.dumps({"feedbackText": "Quote was from the wrong page"}), "Quote was from the wrong page"),
        ({"feedbackText": "ok"}, "ok"),
        ("plain words", "plain words"),
        (None, ""),
    ],
)
def test_feedback_comment(raw: object, expected: str) -> None:
    assert feedback_comment(raw) == expected


class TestPackage:
    def test_builds_zip_with_app_id_and_icons(self, tmp_path: Path) -> None:
        out = build_package(APP_ID, tmp_path / "citebot.zip")
        with zipfile.ZipFile(out) as zf:
            assert sorted(zf.namelist()) == ["color.png", "manifest.json", "outline.png"]
            manifest = json.loads(zf.read("manifest.json"))
            color = Image.open(io.BytesIO(zf.read("color.png")))
            outline = Image.open(io.BytesIO(zf.read("outline.png")))
        assert "{{" not in json.dumps(manifest)
        assert manifest["id"] == APP_ID
        (bot,) = manifest["bots"]
        assert bot["botId"] == APP_ID
        assert sorted(bot["scopes"]) == ["groupChat", "personal", "team"]
        assert bot["supportsFiles"] is True
        assert {c["title"] for cl in bot["commandLists"] for c in cl["commands"]} >= {"help", "docs", "sync"}
        assert float(manifest["manifestVersion"]) >= 1.16
        assert "validDomains" in manifest
        assert color.size == (192, 192)
        assert outline.size == (32, 32)
        # the outline icon is white on transparent, as Teams requires
        pixels = [outline.convert("RGBA").getpixel((x, y)) for x in range(32) for y in range(32)]
        assert {px[:3] for px in pixels if px[3] > 0} == {(255, 255, 255)}

    def test_refuses_without_a_guid_app_id(self, tmp_path: Path) -> None:
        with pytest.raises(PackageError, match="TEAMS_APP_ID"):
            build_package("", tmp_path / "x.zip")
        assert not (tmp_path / "x.zip").exists()

    def test_cli_command(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        import argparse

        from bot.cli.teams_cmds import register, run_package
        from connectors.settings import Settings

        parser = argparse.ArgumentParser()
        register(parser.add_subparsers(dest="command"))
        args = parser.parse_args(["teams", "package", "--out", str(tmp_path / "pkg.zip")])
        assert args.func is run_package
        assert run_package(args, Settings(data_dir=tmp_path, teams_app_id=APP_ID)) == 0
        assert zipfile.ZipFile(tmp_path / "pkg.zip").namelist()
        assert run_package(args, Settings(data_dir=tmp_path)) == 2
        assert "TEAMS_APP_ID" in capsys.readouterr().err


class TestWhichOneCard:
    """A "which one?" answer offers each reading as a card action whose data is its follow-up question; what a
    submit sends back is the sender's to forge, so it is read with bounds."""

    @staticmethod
    def _clarify(*choices: str) -> Answer:
        cites = [Citation(n=n, chunk_id=f"d{n}:00001", doc_id=f"d{n}", file=f, page_start=p, page_end=p, section=sec,
                          quote="up to 20 hours") for n, (f, p, sec) in enumerate(
                              [("handbook.pdf", 2, "2 Working Hours > 2.1 Flexitime"),
                               ("contract.pdf", 5, "ARTICLE VI LIABILITY")], 1)]
        return Answer(text="Which limit do you mean?", kind="clarify", choices=list(choices), citations=cites)

    def test_one_submit_action_per_reading_named_as_slacks_button(self) -> None:
        activity = render.answer_activity(self._clarify("What is the limit in 2.1?", "What is the limit in VI?"),
                                          quote_card=False)
        (card,) = [a.content for a in activity.attachments or []]
        assert [(a["type"], a["title"], a["data"][render.CHOICE_DATA]) for a in card["actions"]] == [
            ("Action.Submit", "1. 2.1 Flexitime · handbook.pdf", "What is the limit in 2.1?"),
            ("Action.Submit", "2. ARTICLE VI LIABILITY · contract.pdf", "What is the limit in VI?"),
        ]

    def test_other_answers_have_no_reading_card(self) -> None:
        answer = self._clarify("x?").model_copy(update={"kind": "answer"})
        assert not render.answer_activity(answer, quote_card=False).attachments

    @pytest.mark.parametrize(("value", "question"), [
        ({render.CHOICE_DATA: " What is\nthe limit? "}, "What is the limit?"),
        ({render.CHOICE_DATA: "x" * 501}, None),
        ({render.CHOICE_DATA: 42}, None),
        ({render.CHOICE_DATA: "\x00 "}, None),
        ({"other": "What is the limit?"}, None),
        ("What is the limit?", None),
        (None, None),
    ])
    def test_a_submit_carries_a_bounded_question_or_nothing(self, value: Any, question: str | None) -> None:
        from bot.core import MAX_CHOICE_CHARS
        from bot.teams.activity import choice_of

        assert choice_of(value, key=render.CHOICE_DATA, max_chars=MAX_CHOICE_CHARS) == question
