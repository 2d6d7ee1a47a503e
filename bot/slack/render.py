"""Answers as Block Kit: the answer, each citation as a quote with a ``file · p. N · section`` line.

The file name and page of a citation link to the uploaded file (its Slack permalink, kept in the
document's metadata at upload): ``<permalink|handbook.pdf, p. 12> · 4.2 Parental leave``. Under the
answer sit Slack's feedback buttons (``feedback_buttons`` in a ``context_actions`` block); 👎 opens
:func:`feedback_modal`. A "which one?" answer (``kind`` clarify) has a button per reading above them
(:func:`choice_buttons`), whose value is that reading's follow-up question.

Slack's limits are kept here, once: at most 3,000 characters in a section's text, at most 50 blocks
in a message, and a plain-text ``text`` fallback for notifications and old clients.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.core import MAX_CHOICE_CHARS
from bot.texts import FEEDBACK_CHOICES, choice_label, location_text, pages_text, quote_lines
from pipelines.components.refusal import CLOSEST_PASSAGES
from pipelines.models import Answer, Citation, RetrievedChunk

MAX_BLOCKS = 50
MAX_SECTION_CHARS = 3000
MAX_FALLBACK_CHARS = 3000
_MAX_ANSWER_SECTIONS = 10
_MAX_QUOTE_CHARS = 2900
_REFUSED_HEADER = "The closest passages, if you want to check:"
FEEDBACK_ACTION = "citebot_feedback"  # action_id of the feedback buttons
FEEDBACK_MODAL = "citebot_feedback_modal"  # callback_id of the 👎 modal
# action_id prefix of a "which one?" answer's buttons (one per reading: ids are unique within a block)
CHOICE_ACTION = "citebot_choice_"
CHOICE_BLOCK = "citebot_choices"
MAX_BUTTON_TEXT = 75  # Slack's limit on a button's label
MAX_CHOICE_VALUE = MAX_CHOICE_CHARS  # a reading's follow-up question, carried in its button (Slack: 2,000)
# block_id prefix of the feedback buttons under a private (ephemeral) answer: a click on an ephemeral message
# carries no ts Citebot knows, so the block says which answer it was
ANSWER_REF_BLOCK = "citebot_answer:"
MAX_COMMENT_CHARS = 2000

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


def location(file: str, page_start: int, page_end: int, section: str) -> str:
    """``handbook.pdf · p. 12 · 4 Leave > 4.2 Parental leave``: the whole section path."""
    return location_text(file, page_start, page_end, section, whole_section=True)


def linkable(url: str) -> bool:
    """Only https links are drawn (a permalink from Slack, a file URL from Teams): never javascript:, file:..."""
    return url.startswith("https://") and not any(ch in url for ch in "<>| \n")


def location_mrkdwn(file: str, page_start: int, page_end: int, section: str, url: str = "") -> str:
    """The location line as mrkdwn: ``<url|handbook.pdf, p. 12> · section`` when the file has a link, else the
    escaped plain :func:`location`."""
    if not linkable(url):
        return escape(location(file, page_start, page_end, section))
    label = escape(f"{file}, {pages_text(page_start, page_end)}").replace("|", "¦")
    parts = [f"<{url.replace('&', '&amp;')}|{label}>"]
    if section:
        parts.append(escape(section))
    return " · ".join(parts)


def section(text: str) -> Block:
    """``verbatim``: Slack does not turn the text's bare URLs, ``#channel`` names or ``@here`` into links or
    mentions; only our own escaped ``<url|label>`` links are drawn."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": text, "verbatim": True}}


def context(text: str) -> Block:
    return {
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": _clip(text, MAX_SECTION_CHARS), "verbatim": True}],
    }


def quote_blocks(c: Citation) -> list[Block]:
    """One citation: a quote block (``[n]`` then the quoted span, its line breaks kept: a quoted table shows one row
    per line) and its location line. A rich text ``text`` element is never read as mrkdwn."""
    quote: Block = {
        "type": "rich_text",
        "elements": [
            {
                "type": "rich_text_quote",
                "elements": [
                    {"type": "text", "text": f"[{c.n}] ", "style": {"bold": True}},
                    {"type": "text", "text": _clip("\n".join(quote_lines(c.quote)), _MAX_QUOTE_CHARS)},
                ],
            }
        ],
    }
    return [quote, context(location_mrkdwn(c.file_label, c.page_start, c.page_end, c.section, c.url))]


def _retrieved_lines(chunks: Sequence[RetrievedChunk], limit: int = 3) -> list[Block]:
    seen: list[str] = []
    for r in chunks:
        loc = location_mrkdwn(r.file_label, r.page_start, r.page_end, r.section, r.url)
        if loc not in seen:
            seen.append(loc)
        if len(seen) == limit:
            break
    return [context(loc) for loc in seen]


def feedback_buttons(answer_ref: str = "") -> Block:
    """Slack's 👍/👎 feedback buttons for AI answers; a click arrives as a ``block_actions`` payload. With
    ``answer_ref`` (a private answer's id) the block's ``block_id`` carries it back."""
    def button(emoji: str, value: str, label: str) -> dict[str, Any]:
        return {"text": {"type": "plain_text", "text": emoji}, "value": value, "accessibility_label": label}

    block: Block = {
        "type": "context_actions",
        "elements": [
            {
                "type": "feedback_buttons",
                "action_id": FEEDBACK_ACTION,
                "positive_button": button("👍", "up", "This answer helped"),
                "negative_button": button("👎", "down", "This answer did not help: tell us what was wrong"),
            }
        ],
    }
    if answer_ref:
        block["block_id"] = ANSWER_REF_BLOCK + answer_ref
    return block


def choice_buttons(answer: Answer) -> list[Block]:
    """A "which one?" answer's readings as buttons (an ``actions`` block, at most 25 elements); a click asks that
    reading's follow-up question in the thread. None for any other answer."""
    buttons = [
        {"type": "button", "action_id": f"{CHOICE_ACTION}{n}", "value": question,
         "text": {"type": "plain_text", "text": choice_label(answer, n, MAX_BUTTON_TEXT), "emoji": False}}
        for n, question in enumerate(answer.choices[:25], 1) if 0 < len(question) <= MAX_CHOICE_VALUE
    ]
    if answer.kind != "clarify" or not buttons:
        return []
    return [{"type": "actions", "block_id": CHOICE_BLOCK, "elements": buttons}]


def feedback_modal(private_metadata: str) -> dict[str, Any]:
    """The 👎 modal: what was wrong (one choice) and an optional comment."""
    options = [
        {"text": {"type": "plain_text", "text": label}, "value": value} for value, label in FEEDBACK_CHOICES.items()
    ]
    return {
        "type": "modal",
        "callback_id": FEEDBACK_MODAL,
        "private_metadata": private_metadata,
        "title": {"type": "plain_text", "text": "What was wrong?"},
        "submit": {"type": "plain_text", "text": "Send"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "input",
                "block_id": "choice",
                "label": {"type": "plain_text", "text": "The answer…"},
                "element": {"type": "radio_buttons", "action_id": "choice", "options": options},
            },
            {
                "type": "input",
                "block_id": "comment",
                "optional": True,
                "label": {"type": "plain_text", "text": "Anything else? (optional)"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": "comment",
                    "multiline": True,
                    "max_length": MAX_COMMENT_CHARS,
                    "placeholder": {"type": "plain_text", "text": "What did you expect it to say, or where?"},
                },
            },
        ],
    }


def _answer_text(answer: Answer) -> str:
    """The answer's text; a refusal's without its list of closest passages, which the blocks draw with links."""
    if answer.refused and (answer.citations or answer.retrieved):
        return answer.text.split(CLOSEST_PASSAGES, 1)[0]
    return answer.text


def answer_blocks(answer: Answer, answer_ref: str = "") -> list[Block]:
    """The answer as at most 50 blocks, no section text over 3,000 characters; ``answer_ref`` names a private
    answer in its feedback buttons. Under it: the quotes (a refusal: the closest passages, once), a note if
    any, and the 👍/👎 buttons, which say what they are for themselves."""
    head = [section(part) for part in split_text(escape(_answer_text(answer) or "…"))]
    if len(head) > _MAX_ANSWER_SECTIONS:
        head = head[:_MAX_ANSWER_SECTIONS]
        head[-1] = section(_clip(head[-1]["text"]["text"], MAX_SECTION_CHARS - 40) + " _(answer shortened)_")
    tail: list[Block] = choice_buttons(answer)
    if answer.note:
        tail.append(context(escape(answer.note)))
    tail.append(feedback_buttons(answer_ref))

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
    # a refusal keeps its own list of the closest passages here, unless quotes of them follow
    lines = [(_answer_text(answer) if answer.citations else answer.text) or "…"]
    if answer.refused and answer.citations:
        lines.append(_REFUSED_HEADER)
    for c in answer.citations:
        loc = location(c.file_label, c.page_start, c.page_end, c.section)
        quoted = "\n".join(quote_lines(c.quote))
        lines.append(f"[{c.n}] “{quoted}” — {loc}")
    return _clip(escape("\n".join(lines)), MAX_FALLBACK_CHARS)


def render_answer(answer: Answer, answer_ref: str = "") -> tuple[str, list[Block]]:
    """(``text`` fallback, ``blocks``) for ``chat.postMessage`` or, with ``answer_ref``, a private answer."""
    return answer_fallback(answer), answer_blocks(answer, answer_ref)


def plain(text: str) -> str:
    """A fixed message with user-supplied parts (file names) safe for mrkdwn."""
    return _clip(escape(text), MAX_FALLBACK_CHARS)
