"""Answers and statuses as Teams messages.

An answer becomes one message activity:

* ``text``: the answer with its ``[n]`` markers (Teams turns them into citation pills);
* ``entities``: one schema.org ``Message`` entity with ``additionalType: ["AIGeneratedContent"]``
  (the "AI generated" label) and a ``citation`` list: per marker its position and appearance
  (file name, the verbatim quote as abstract, page and section as keywords, the full quote in an
  Adaptive Card shown in the citation's pop-up, and ``url``: where the file opens — a channel file's
  SharePoint ``webUrl``, a chat file's ``contentUrl``);
* ``channelData.feedbackLoop`` of type ``custom``: Teams' own 👍/👎 buttons, which ask the bot for the form to
  show (``message/fetchTask``, :mod:`bot.teams.feedback`) and send what was filled in as ``message/submitAction``;
* optionally an Adaptive Card attachment with one quote block per citation (file · p. N · section),
  for places where the client does not draw citation entities (older channel clients);
* for a "which one?" answer (``kind`` clarify), an Adaptive Card with an ``Action.Submit`` per reading
  (:func:`choices_card`): its ``data`` is that reading's follow-up question, which Teams sends back as a message
  activity's ``value`` (:func:`bot.teams.activity.choice_of`).

The quotes are the validated spans from the answer pipeline, never re-worded here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from microsoft_agents.activity import Activity, ActivityTypes, Attachment, Entity

from bot.core import MAX_CHOICE_CHARS
from bot.texts import choice_label, location_text, pages_text, quote_lines
from pipelines.models import Answer, Citation

ADAPTIVE_CARD = "application/vnd.microsoft.card.adaptive"
CHOICE_DATA = "citebot_choice"  # the key of a reading's Action.Submit data: its follow-up question
MAX_CARD_ACTIONS = 6  # Teams shows at most six actions on a card
# Limits from the Teams client-citation schema.
_ABSTRACT_MAX = 160
_NAME_MAX = 80
_KEYWORD_MAX = 28
_KEYWORDS_MAX = 3


_CITATION_MARKER = re.compile(r"\[\d+\]")
_MARKDOWN = re.compile(r"([\\`*_~\[\]()])")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def escape_markdown(text: str) -> str:
    """``text`` shown as written in a markdown message: no links (``[text](url)``, ``<url>``), no HTML, no
    emphasis. The ``[n]`` citation markers stay as they are (Teams draws them as citation pills)."""
    out: list[str] = []
    pos = 0
    for m in _CITATION_MARKER.finditer(text):
        out.append(_escape_plain(text[pos : m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_escape_plain(text[pos:]))
    return "".join(out)


def _escape_plain(text: str) -> str:
    text = "".join(_HTML.get(ch, ch) for ch in text)
    return _MARKDOWN.sub(r"\\\1", text)


# What makes a line start a markdown block (heading, list, table, setext underline) once it stands on a line of its own
_BLOCK_START = re.compile(r"^(?:[#+=|-]|\d{1,9}(?=[.)]))")
_PARAGRAPH = "\n\n"  # Teams' markdown draws a line break for a blank line only; a single newline is a space


def _escape_line(line: str) -> str:
    """One line of a quote as a markdown paragraph of its own, shown as written: escaped as :func:`_escape_plain`,
    and no heading, list or table made of a line that starts with ``#``, ``-``, ``1.``..."""
    line = _escape_plain(line)
    m = _BLOCK_START.match(line)
    if m is None:
        return line
    if line[0].isdigit():  # "2018. Revenue" -> "2018\. Revenue": the escape goes on the list marker's dot
        return line[: m.end()] + "\\" + line[m.end():]
    return "\\" + line


def pages_label(c: Citation) -> str:
    return pages_text(c.page_start, c.page_end)


def source_label(c: Citation) -> str:
    """``file · p. N · section`` (the section's innermost heading, when the chunk has one)."""
    return location_text(c.file_label, c.page_start, c.page_end, c.section)


def linkable(url: str) -> bool:
    """Only https links are drawn (SharePoint / OneDrive file pages), never javascript:, file:..."""
    return url.startswith("https://") and not any(ch.isspace() for ch in url)


def _md_link(label: str, url: str) -> str:
    """``[label](url)`` for markdown and Adaptive Card text, or the label alone when ``url`` is not linkable."""
    if not linkable(url):
        return label
    label = label.replace("[", "(").replace("]", ")")
    return f"[{label}]({quote(url, safe=':/?#&=%+;,@!$*~.-_')})"


def linked_source_label(c: Citation) -> str:
    """``[file, p. N](url) · section`` as markdown: the file and page open the file; the escaped plain
    :func:`source_label` without a link. File name and section are the uploader's and the PDF's words: escaped,
    so a heading such as ``[request form](https://evil.example)`` shows as written, never as a link."""
    if not linkable(c.url):
        return _escape_plain(source_label(c))
    parts = [_md_link(_escape_plain(f"{c.file_label}, {pages_label(c)}"), c.url)]
    if c.section:
        parts.append(_escape_plain(c.section.split(" > ")[-1]))
    return " · ".join(parts)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _run(text: str, **style: Any) -> dict[str, Any]:
    """An Adaptive Card ``TextRun``: shown as written, never read as markdown (a ``TextBlock`` would draw a PDF's
    ``[text](url)`` as a link)."""
    return {"type": "TextRun", "text": text, **style}


def _source_runs(c: Citation, *, prefix: str = "") -> list[dict[str, Any]]:
    """``[n] file, p. N · section`` as TextRuns; the file and page open the file when it has an https link."""
    runs: list[dict[str, Any]] = []
    if prefix:
        runs.append(_run(prefix, weight="Bolder"))
    if linkable(c.url):
        runs.append(_run(f"{c.file_label}, {pages_label(c)}", weight="Bolder",
                         selectAction={"type": "Action.OpenUrl", "url": c.url}))
        if c.section:
            runs.append(_run(" · " + c.section.split(" > ")[-1], weight="Bolder"))
    else:
        runs.append(_run(source_label(c), weight="Bolder"))
    return runs


def _quote_blocks(quote: str, **style: Any) -> list[dict[str, Any]]:
    """A quote as one RichTextBlock per line, so a quoted table shows one row per line on every client (a TextRun's
    own line breaks are not drawn everywhere, and a TextBlock would read the PDF's text as markdown)."""
    lines = quote_lines(quote) or [""]
    return [
        {"type": "RichTextBlock", **({"spacing": "None"} if i else {}), "inlines": [_run(line, **style)]}
        for i, line in enumerate(lines)
    ]


def _quote_card(c: Citation) -> dict[str, Any]:
    """The full verbatim quote, shown when the user opens a citation."""
    return {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": "1.5",
        "body": [{"type": "RichTextBlock", "inlines": _source_runs(c)}, *_quote_blocks(c.quote)],
    }


def citation_entity(c: Citation) -> dict[str, Any]:
    keywords = [pages_label(c)]
    if c.section:
        keywords.append(_clip(c.section.split(" > ")[-1], _KEYWORD_MAX))
    return {
        "@type": "Claim",
        "position": c.n,
        "appearance": {
            "@type": "DigitalDocument",
            "name": _clip(c.file, _NAME_MAX),
            "abstract": _clip(c.quote, _ABSTRACT_MAX),
            "text": json.dumps(_quote_card(c), ensure_ascii=False),
            "encodingFormat": ADAPTIVE_CARD,
            "keywords": keywords[:_KEYWORDS_MAX],
            **({"url": c.url} if linkable(c.url) else {}),
        },
    }


def ai_message_entity(citations: Sequence[Citation]) -> Entity:
    """The schema.org Message entity: AI label plus the client-drawn citations."""
    data: dict[str, Any] = {
        "@type": "Message",
        "@context": "https://schema.org",
        "@id": "",
        "additionalType": ["AIGeneratedContent"],
    }
    if citations:
        data["citation"] = [citation_entity(c) for c in citations]
    return Entity(type="https://schema.org/Message", **data)


def quotes_card(citations: Sequence[Citation]) -> Attachment:
    """An Adaptive Card with one quote block per citation (for clients that don't draw citations)."""
    body: list[dict[str, Any]] = [{"type": "TextBlock", "text": "Sources", "weight": "Bolder", "size": "Medium"}]
    for c in citations:
        body.append(
            {
                "type": "Container",
                "style": "emphasis",
                "spacing": "Small",
                "items": [
                    {"type": "RichTextBlock", "inlines": [
                        {**r, "size": "Small"} for r in _source_runs(c, prefix=f"[{c.n}] ")
                    ]},
                    *_quote_blocks(f"“{c.quote.strip()}”", isSubtle=True),
                ],
            }
        )
    content = {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": "1.5",
        "body": body,
    }
    return Attachment(content_type=ADAPTIVE_CARD, content=content)


def choices_card(answer: Answer) -> Attachment | None:
    """A "which one?" answer's readings as card actions, each named as Slack's button is; None for any other
    answer. A click sends the reading's question back to the bot in this conversation."""
    actions = [
        {"type": "Action.Submit", "title": choice_label(answer, n), "data": {CHOICE_DATA: question}}
        for n, question in enumerate(answer.choices[:MAX_CARD_ACTIONS], 1) if 0 < len(question) <= MAX_CHOICE_CHARS
    ]
    if answer.kind != "clarify" or not actions:
        return None
    content = {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": "1.5",
        "body": [{"type": "TextBlock", "text": "Which one do you mean?", "weight": "Bolder", "wrap": True}],
        "actions": actions,
    }
    return Attachment(content_type=ADAPTIVE_CARD, content=content)


def answer_text(answer: Answer, *, inline_quotes: bool) -> str:
    """The message text. Extractive answers are "Here is what the PDFs say [1][2]:" plus the quotes,
    so without a quote card the quotes follow inline, one ``[n] “quote” — file · p. N`` paragraph each, a quote's
    own lines (a table's rows) on lines of their own: Teams draws a line break only for a blank line in markdown.
    Answer, quotes and file names are markdown-escaped: a PDF or a model steered by one never puts a
    link or formatting into the message."""
    text = escape_markdown(answer.text.strip())
    if inline_quotes and answer.citations:
        lines = [
            f"[{c.n}] “{_PARAGRAPH.join(_escape_line(line) for line in quote_lines(c.quote))}” — "
            f"{linked_source_label(c)}"
            for c in answer.citations
        ]
        text += "\n\n" + "\n\n".join(lines)
    if answer.note:
        text += f"\n\n_{_escape_plain(answer.note)}_"
    return text


def answer_activity(answer: Answer, *, quote_card: bool) -> Activity:
    """The Teams message for an answer; ``quote_card`` adds the Adaptive Card of quotes."""
    card = quote_card and bool(answer.citations)
    activity = Activity(
        type=ActivityTypes.message,
        text=answer_text(answer, inline_quotes=answer.mode == "extractive" and not card),
        text_format="markdown",
        entities=[ai_message_entity(answer.citations)],
        channel_data={"feedbackLoop": {"type": "custom"}},  # 👍/👎 open Citebot's form (bot.teams.feedback)
    )
    attachments = [quotes_card(answer.citations)] if card else []
    choices = choices_card(answer)
    if choices is not None:
        attachments.append(choices)
    if attachments:
        activity.attachments = attachments
    return activity


def escape_links(text: str) -> str:
    """A status or command text (file names, a PDF's title) with no link, image or HTML left in it: brackets
    escaped, ``& < >`` as entities. The texts' own light formatting (``**bold**``, `` `code` ``, lists) stays."""
    text = "".join(_HTML.get(ch, ch) for ch in text)
    return re.sub(r"([\\\[\]])", r"\\\1", text)


def text_activity(text: str) -> Activity:
    """Every text of :mod:`bot.texts` on Teams; names in it are the users', so links and HTML are escaped."""
    return Activity(type=ActivityTypes.message, text=escape_links(text), text_format="markdown")


def typing_activity() -> Activity:
    return Activity(type=ActivityTypes.typing)
