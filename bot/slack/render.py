"""Answers as Block Kit: the answer, each citation as a quote with a ``file · p. N · section`` line.

Slack's limits are kept here, once: at most 3,000 characters in a section's text, at most 50 blocks
in a message, and a plain-text ``text`` fallback for notifications and old clients.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.core import FEEDBACK_HINT
from pipelines.models import Answer, Citation, RetrievedChunk

MAX_BLOCKS = 50
MAX_SECTION_CHARS = 3000
MAX_FALLBACK_CHARS = 3000
_MAX_ANSWER_SECTIONS = 10
_MAX_QUOTE_CHARS = 2900
_REFUSED_HEADER = "The closest passages I found (they don't answer it):"

Block = dict[str, Any]


def escape(text: str) -> str:
    """Slack mrkdwn control characters (``&``, ``<``, ``>``) as entities, so text shows as written."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def split_text(text: str, limit: int = MAX_SECTION_CHARS) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at a line break or space when possible."""
    parts: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        cut = rest.rfind("\n", 0, limit + 1)
        if cut < limit // 2:
            cut = rest.rfind(" ", 0, limit + 1)
        if cut < limit // 2:
            cut = limit
            amp = rest.rfind("&", cut - 5, cut)  # never cut an &amp; entity in two
            if amp != -1 and ";" not in rest[amp:cut]:
                cut = amp
        parts.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        parts.append(rest)
    return parts


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def pages(start: int, end: int) -> str:
    return f"p. {start}" if end <= start else f"pp. {start}–{end}"


def location(file: str, page_start: int, page_end: int, section: str) -> str:
    """``handbook.pdf · p. 12 · 4 Leave > 4.2 Parental leave``."""
    parts = [file, pages(page_start, page_end)]
    if section:
        parts.append(section)
    return " · ".join(parts)


def section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def context(text: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": _clip(text, MAX_SECTION_CHARS)}]}


def quote_blocks(c: Citation) -> list[Block]:
    """One citation: a quote block (``[n]`` then the quoted span) and its location line."""
    quote: Block = {
        "type": "rich_text",
        "elements": [
            {
                "type": "rich_text_quote",
                "elements": [
                    {"type": "text", "text": f"[{c.n}] ", "style": {"bold": True}},
                    {"type": "text", "text": _clip(" ".join(c.quote.split()), _MAX_QUOTE_CHARS)},
                ],
            }
        ],
    }
    return [quote, context(escape(location(c.file, c.page_start, c.page_end, c.section)))]


def _retrieved_lines(chunks: Sequence[RetrievedChunk], limit: int = 3) -> list[Block]:
    seen: list[str] = []
    for r in chunks:
        loc = location(r.file, r.page_start, r.page_end, r.section)
        if loc not in seen:
            seen.append(loc)
        if len(seen) == limit:
            break
    return [context(escape(loc)) for loc in seen]


def answer_blocks(answer: Answer) -> list[Block]:
    """The answer as at most 50 blocks, no section text over 3,000 characters."""
    head = [section(part) for part in split_text(escape(answer.text or "…"))]
    if len(head) > _MAX_ANSWER_SECTIONS:
        head = head[:_MAX_ANSWER_SECTIONS]
        head[-1] = section(_clip(head[-1]["text"]["text"], MAX_SECTION_CHARS - 40) + " _(answer shortened)_")
    tail: list[Block] = []
    if answer.note:
        tail.append(context(escape(answer.note)))
    tail.append(context(FEEDBACK_HINT))

    body: list[Block] = []
    if answer.refused and (answer.citations or answer.retrieved):
        body.append(context(_REFUSED_HEADER))
    if answer.citations:
        room = MAX_BLOCKS - len(head) - len(tail) - len(body)
        cites = list(answer.citations)
        if 2 * len(cites) > room:
            shown = max(0, (room - 1) // 2)  # keep one block to say how many were left out
            left_out = len(cites) - shown
            for c in cites[:shown]:
                body.extend(quote_blocks(c))
            body.append(context(f"…and {left_out} more source{'s' if left_out != 1 else ''} not shown."))
        else:
            for c in cites:
                body.extend(quote_blocks(c))
    elif answer.refused and answer.retrieved:
        body.extend(_retrieved_lines(answer.retrieved))
    blocks = [*head, *body, *tail]
    assert len(blocks) <= MAX_BLOCKS
    return blocks


def answer_fallback(answer: Answer) -> str:
    """Plain text of the answer and its sources for notifications and clients without Block Kit."""
    lines = [answer.text or "…"]
    if answer.refused and answer.citations:
        lines.append(_REFUSED_HEADER)
    for c in answer.citations:
        loc = location(c.file, c.page_start, c.page_end, c.section)
        lines.append(f"[{c.n}] “{' '.join(c.quote.split())}” — {loc}")
    return _clip(escape("\n".join(lines)), MAX_FALLBACK_CHARS)


def render_answer(answer: Answer) -> tuple[str, list[Block]]:
    """(``text`` fallback, ``blocks``) for ``chat.postMessage``."""
    return answer_fallback(answer), answer_blocks(answer)


def plain(text: str) -> str:
    """A fixed message with user-supplied parts (file names) safe for mrkdwn."""
    return _clip(escape(text), MAX_FALLBACK_CHARS)
