"""Defect 1 of the second security review: a PDF put live links into Teams answers. A section heading such as
``4.2 Parental leave [request form](https://evil.example/sso)`` was appended unescaped to the message text beside
a checked quote, and quote and section went unescaped into the citation pop-up card and the channel quote card.

Here one PDF (and its file name) carries Markdown and HTML links, images and mentions in its headings and text.
It is indexed, asked about, and every answer and text goes through every render path of both platforms: Slack's
blocks and fallback, and Teams' message text (chat, channel, LLM prose), citation pop-up cards, the channel quote
card, and the status texts (indexed, docs, forget). Teams' markdown is rendered with a CommonMark parser and the
cards are read as Teams reads them; Slack's mrkdwn is read for ``<…>`` links and mentions. The only link anyone
can click is the file's own.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from markdown_it import MarkdownIt

from bot import texts
from bot.core import ChatContext, ChatCore
from bot.slack import render as slack
from bot.teams import render as teams
from connectors.settings import Settings
from pipelines.models import Answer

EVIL = "evil.example"
FILE_URL = "https://contoso.sharepoint.com/sites/hr/Shared%20Documents/handbook.pdf"
HEADING = (
    "4.2 Parental leave [request form](https://evil.example/sso) ![x](https://evil.example/pixel.png) "
    "<https://evil.example/a|click here> &lt;a href='https://evil.example/b'&gt;portal&lt;/a&gt;"
)
BODY = (
    "Parental leave is sixteen weeks at full pay. Apply with the [request form](https://evil.example/sso) or "
    "&lt;a href='https://evil.example/c'&gt;here&lt;/a&gt; &lt;img src='https://evil.example/p.png'&gt; "
    "&lt;!channel&gt; &lt;@U0ADMIN&gt; &lt;at&gt;Everyone&lt;/at&gt; ![logo](https://evil.example/logo.png) "
    "<a href='https://evil.example/d'>benefits portal</a>."
)
FILE_NAME = "handbook [sso](https://evil.example/f) <!here>.pdf"
SCOPE = "teams:T1:19:hr@thread.tacv2"


def _pdf() -> bytes:
    import io

    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate

    styles = getSampleStyleSheet()
    story = [
        Paragraph("4 Leave", styles["Heading1"]),
        Paragraph(HEADING, styles["Heading2"]),
        Paragraph(BODY, styles["BodyText"]),
    ]
    buf = io.BytesIO()
    SimpleDocTemplate(buf, pagesize=A4, title="Handbook [t](https://evil.example/t)").build(story)
    return buf.getvalue()


_MD = MarkdownIt("commonmark")  # links, images, autolinks and raw HTML, as Teams' markdown has them


def _teams_markdown_links(text: str) -> list[str]:
    """Every link, image and HTML tag a Teams client draws from ``text`` (rendered as CommonMark)."""
    html = _MD.render(text)
    plain_tags = r"(?:p|em|strong|code|ul|ol|li|br|hr|h\d|blockquote|pre)\b"
    return re.findall(rf"<(?!/|{plain_tags})[^>]+>", html)  # opening tags other than plain formatting


def _card_links(card: dict[str, Any]) -> list[str]:
    """Links a Teams client draws in an Adaptive Card: markdown of TextBlocks, and every action URL."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "TextBlock":
                found.extend(_teams_markdown_links(str(node.get("text", ""))))
            if node.get("type") == "Action.OpenUrl":
                found.append(f"<a href={node.get('url')}>")
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(card)
    return found


def _card_text(card: dict[str, Any]) -> str:
    """All the text a card shows (TextBlocks and TextRuns)."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") in ("TextBlock", "TextRun"):
                out.append(str(node.get("text", "")))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(card)
    return " ".join(out)


def _slack_links(text: str) -> list[str]:
    """Slack mrkdwn's ``<…>`` sequences: links, user/channel mentions, ``<!here>``-style broadcasts."""
    return re.findall(r"<[^<>]*>", text)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[ChatCore, ChatContext, str, Answer]:
    data = tmp_path_factory.mktemp("data")
    core = ChatCore.from_settings(Settings(data_dir=data, ocr_enabled=False))
    ctx = ChatContext("teams", SCOPE, "UHR")
    result = core.upload(ctx, file_name=FILE_NAME, data=_pdf(), source_url=FILE_URL)
    assert result.status == "indexed", result
    answer = core.ask(ctx, "How long is parental leave?")
    assert answer.citations and not answer.refused
    return core, ctx, texts.ingest_result_text(result), answer


def _variants(answer: Answer) -> list[Answer]:
    """The answer as it came (extractive) and as an LLM answer that repeats the PDF's link in its prose."""
    prose = "Sixteen weeks at full pay [1]. Use the [request form](https://evil.example/sso) <!channel>."
    return [answer, answer.model_copy(update={"mode": "llm", "text": prose, "note": "See [x](https://evil.example)"})]


@pytest.mark.slow
def test_the_pdfs_links_mentions_and_images_stay_text_in_teams(indexed: Any) -> None:
    core, ctx, ingest_text, answer = indexed
    assert any(EVIL in (c.section + c.quote) for c in answer.citations)  # the hostile text really is cited
    for variant in _variants(answer):
        for card in (False, True):
            activity = teams.answer_activity(variant, quote_card=card)
            links = _teams_markdown_links(activity.text)
            assert all(EVIL not in link for link in links), links
            assert all(FILE_URL in link for link in links), links  # only the file's own link
            for attachment in activity.attachments or []:
                links = _card_links(attachment.content)
                assert links and all(link == f"<a href={FILE_URL}>" for link in links), links
                assert "(https://evil.example/" in _card_text(attachment.content)  # shown as written, not a link
            wire = activity.model_dump(mode="json", by_alias=True, exclude_none=True)
            for citation in wire["entities"][0]["citation"]:
                popup = json.loads(citation["appearance"]["text"])
                links = _card_links(popup)
                assert links and all(link == f"<a href={FILE_URL}>" for link in links), links
                assert citation["appearance"]["url"] == FILE_URL
    docs = texts.docs_text(core.documents([SCOPE]))
    for text in (ingest_text, docs, texts.forgot_text(FILE_NAME), texts.indexing_text(FILE_NAME)):
        shown = teams.text_activity(text).text
        assert _teams_markdown_links(shown) == [], shown
        assert "sso" in _MD.render(shown)  # the name is still there, as text


@pytest.mark.slow
def test_the_pdfs_links_mentions_and_images_stay_text_in_slack(indexed: Any) -> None:
    core, ctx, ingest_text, answer = indexed
    slack_answer = answer.model_copy(update={"citations": [
        c.model_copy(update={"url": "https://files.slack.com/files-pri/T1-F1/handbook.pdf"}) for c in answer.citations
    ]})
    for variant in _variants(slack_answer):
        fallback, blocks = slack.render_answer(variant)
        assert _slack_links(fallback) == []
        for block in blocks:
            for element in [block.get("text")] + list(block.get("elements", [])):
                if isinstance(element, dict) and element.get("type") == "mrkdwn":
                    assert element.get("verbatim") is True  # no auto-linking of bare URLs or #channels
                    links = _slack_links(element["text"])
                    assert all(link.startswith("<https://files.slack.com/") for link in links), links
        assert "(https://evil.example/" in json.dumps(blocks)  # the PDF's and the uploader's words, shown as text
    docs = texts.docs_text(core.documents([SCOPE]))
    for text in (ingest_text, docs, texts.forgot_text(FILE_NAME)):
        assert _slack_links(slack.plain(text)) == []
