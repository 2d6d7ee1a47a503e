"""Slack payloads parsed into small typed models, so listeners never dig through raw dicts.

Each ``parse_*`` takes the whole request body Bolt hands a listener (``body``) and returns a model,
or ``None`` when the payload is not something Citebot acts on (bots, edits, joins, non-PDFs...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.slack.render import ANSWER_REF_BLOCK, CHOICE_ACTION, MAX_CHOICE_VALUE
from connectors.uploads import is_pdf_file
from pipelines.models import slack_scope

_MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")
# Message subtypes that are a person talking; everything else (edits, joins, bot posts...) is ignored.
_USER_SUBTYPES = {None, "", "file_share", "thread_broadcast"}
_POLARITY: dict[str, Literal["up", "down"]] = {"+1": "up", "thumbsup": "up", "-1": "down", "thumbsdown": "down"}


def strip_mentions(text: str) -> str:
    """The question without ``<@U123>`` mentions and surrounding whitespace."""
    return " ".join(_MENTION.sub(" ", text or "").split())


def mentions(text: str, user_id: str) -> bool:
    return bool(user_id) and (f"<@{user_id}>" in (text or "") or f"<@{user_id}|" in (text or ""))


def _team(body: dict[str, Any], event: dict[str, Any]) -> str:
    return str(body.get("team_id") or event.get("team") or event.get("user_team") or "")


@dataclass(frozen=True)
class SlackFile:
    id: str
    name: str
    filetype: str = ""
    mimetype: str = ""
    url_private_download: str = ""
    size: int = 0
    is_external: bool = False
    permalink: str = ""

    @property
    def is_pdf(self) -> bool:
        return is_pdf_file(self.name, file_type=self.filetype, mime_type=self.mimetype)

    @property
    def complete(self) -> bool:
        """False when Slack sent a stub (``file_access: check_file_info``) and files.info is needed."""
        return bool(self.name and self.url_private_download)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> SlackFile:
        return cls(
            id=str(raw.get("id") or ""),
            name=str(raw.get("name") or raw.get("title") or ""),
            filetype=str(raw.get("filetype") or ""),
            mimetype=str(raw.get("mimetype") or ""),
            url_private_download=str(raw.get("url_private_download") or raw.get("url_private") or ""),
            size=int(raw.get("size") or 0),
            # remote files (files.remote.add, Google Drive links...) point outside Slack: never fetched
            is_external=bool(raw.get("is_external")) or str(raw.get("mode") or "") == "external",
            permalink=str(raw.get("permalink") or ""),
        )


@dataclass(frozen=True)
class Message:
    """A person's message: an ``app_mention`` or a ``message`` event."""

    event_id: str
    team: str
    channel: str
    channel_type: str
    user: str
    text: str
    ts: str
    thread_ts: str
    subtype: str
    files: tuple[SlackFile, ...] = field(default=())

    @property
    def scope(self) -> str:
        return slack_scope(self.team, self.channel)

    @property
    def is_dm(self) -> bool:
        return self.channel_type == "im" or self.channel.startswith("D")

    @property
    def in_thread(self) -> bool:
        return bool(self.thread_ts) and self.thread_ts != self.ts

    @property
    def question(self) -> str:
        return strip_mentions(self.text)

    @property
    def reply_thread_ts(self) -> str:
        """Where the bot answers: the message's thread, else a new thread under it."""
        return self.thread_ts or self.ts

    @property
    def thread_ref(self) -> str:
        return f"{self.channel}:{self.reply_thread_ts}"


def parse_message(body: dict[str, Any]) -> Message | None:
    """A human's message, or None for bot posts, edits, deletions, joins and other subtypes.

    Bolt's ``IgnoringSelfEvents`` middleware (on by default) already drops Citebot's own posts, but only those: its
    test is "this app's ``bot_user_id`` or ``bot_id``". Another app's message (``bot_id`` of its own, e.g. a
    workflow or a second assistant posting in a thread Citebot answered) and a person's edit (``message_changed``)
    reach the listeners, and must not be answered: a reply to a bot can start two bots answering each other."""
    event = body.get("event") or {}
    subtype = event.get("subtype")
    if subtype not in _USER_SUBTYPES or event.get("bot_id") or event.get("bot_profile"):
        return None
    user = str(event.get("user") or "")
    channel = str(event.get("channel") or "")
    if not user or not channel:
        return None
    return Message(
        event_id=str(body.get("event_id") or ""),
        team=_team(body, event),
        channel=channel,
        channel_type=str(event.get("channel_type") or ""),
        user=user,
        text=str(event.get("text") or ""),
        ts=str(event.get("ts") or ""),
        thread_ts=str(event.get("thread_ts") or ""),
        subtype=str(subtype or ""),
        files=tuple(SlackFile.parse(f) for f in event.get("files") or [] if isinstance(f, dict)),
    )


@dataclass(frozen=True)
class FileShared:
    event_id: str
    team: str
    channel: str
    user: str
    file: SlackFile
    message_ts: str = ""

    @property
    def scope(self) -> str:
        return slack_scope(self.team, self.channel)


def parse_file_shared(body: dict[str, Any]) -> FileShared | None:
    event = body.get("event") or {}
    file_id = str(event.get("file_id") or (event.get("file") or {}).get("id") or "")
    channel = str(event.get("channel_id") or "")
    if not file_id or not channel:
        return None
    raw = dict(event.get("file") or {})
    raw.setdefault("id", file_id)
    return FileShared(
        event_id=str(body.get("event_id") or ""),
        team=_team(body, event),
        channel=channel,
        user=str(event.get("user_id") or ""),
        file=SlackFile.parse(raw),
    )


def files_of_message(msg: Message) -> list[FileShared]:
    """The files of a ``file_share`` message, in the same shape as ``file_shared`` events."""
    return [
        FileShared(event_id=msg.event_id, team=msg.team, channel=msg.channel, user=msg.user, file=f, message_ts=msg.ts)
        for f in msg.files
        if f.id
    ]


@dataclass(frozen=True)
class FileDeleted:
    event_id: str
    team: str
    file_id: str


def parse_file_deleted(body: dict[str, Any]) -> FileDeleted | None:
    event = body.get("event") or {}
    file_id = str(event.get("file_id") or "")
    if not file_id:
        return None
    return FileDeleted(event_id=str(body.get("event_id") or ""), team=_team(body, event), file_id=file_id)


@dataclass(frozen=True)
class Reaction:
    event_id: str
    team: str
    user: str
    polarity: Literal["up", "down"]
    channel: str
    ts: str
    added: bool

    @property
    def message_ref(self) -> str:
        return f"{self.channel}:{self.ts}"


def parse_reaction(body: dict[str, Any]) -> Reaction | None:
    """A 👍/👎 on a message, or None for any other emoji or item."""
    event = body.get("event") or {}
    item = event.get("item") or {}
    name = str(event.get("reaction") or "").split("::", 1)[0]  # "+1::skin-tone-3"
    polarity = _POLARITY.get(name)
    if polarity is None or item.get("type") != "message" or not event.get("user"):
        return None
    return Reaction(
        event_id=str(body.get("event_id") or ""),
        team=_team(body, event),
        user=str(event["user"]),
        polarity=polarity,
        channel=str(item.get("channel") or ""),
        ts=str(item.get("ts") or ""),
        added=event.get("type") == "reaction_added",
    )


@dataclass(frozen=True)
class Command:
    """``/citebot <verb> <arg>``, or ``/citebot <question>`` (``text``: everything after the command)."""

    team: str
    channel: str
    user: str
    verb: str
    arg: str
    is_dm: bool
    text: str = ""

    @property
    def scope(self) -> str:
        return slack_scope(self.team, self.channel)


def parse_command(body: dict[str, Any]) -> Command:
    text = " ".join(str(body.get("text") or "").split())
    verb, _, arg = text.partition(" ")
    channel = str(body.get("channel_id") or "")
    return Command(
        team=str(body.get("team_id") or ""),
        channel=channel,
        user=str(body.get("user_id") or ""),
        verb=verb.lower() or "help",
        arg=arg.strip().strip("“”\"'`"),
        is_dm=body.get("channel_name") == "directmessage" or channel.startswith("D"),
        text=text,
    )


@dataclass(frozen=True)
class FeedbackClick:
    """A click on an answer's feedback buttons (``block_actions`` with a ``feedback_buttons`` action)."""

    team: str
    user: str
    channel: str
    message_ts: str
    polarity: Literal["up", "down"]
    trigger_id: str

    @property
    def message_ref(self) -> str:
        return f"{self.channel}:{self.message_ts}"


def parse_feedback_click(body: dict[str, Any], action_id: str) -> FeedbackClick | None:
    actions = [a for a in body.get("actions") or [] if isinstance(a, dict) and a.get("action_id") == action_id]
    if not actions:
        return None
    value = str(actions[0].get("value") or "")
    polarity: Literal["up", "down"] | None = "up" if value == "up" else "down" if value == "down" else None
    container = body.get("container") or {}
    channel = str((body.get("channel") or {}).get("id") or container.get("channel_id") or "")
    ts = str((body.get("message") or {}).get("ts") or container.get("message_ts") or "")
    block_id = str(actions[0].get("block_id") or "")
    if block_id.startswith(ANSWER_REF_BLOCK):  # a private answer: its id, not the ephemeral message's ts
        ts = block_id[len(ANSWER_REF_BLOCK):]
    user = str((body.get("user") or {}).get("id") or "")
    if polarity is None or not (channel and ts and user):
        return None
    return FeedbackClick(
        team=str((body.get("team") or {}).get("id") or (body.get("user") or {}).get("team_id") or ""),
        user=user,
        channel=channel,
        message_ts=ts,
        polarity=polarity,
        trigger_id=str(body.get("trigger_id") or ""),
    )


@dataclass(frozen=True)
class ChoiceClick:
    """A click on a reading's button under a "which one?" answer: that reading's follow-up question, asked by
    ``user`` in the channel the click came from (never a channel the payload's value names), in the thread of the
    answer that offered it. ``ephemeral``: the answer was one only the clicker sees (a ``/citebot`` question), so
    the click is answered to the clicker alone, at ``response_url``."""

    team: str
    channel: str
    user: str
    question: str
    message_ts: str
    thread_ts: str
    action_ts: str
    ephemeral: bool = False
    response_url: str = ""

    def as_message(self) -> Message:
        """The click as the message it stands for: the question, asked in the answer's thread, so it is answered
        and recorded with the scope rules, history and journal of a mention."""
        return Message(event_id="", team=self.team, channel=self.channel,
                       channel_type="im" if self.channel.startswith("D") else "", user=self.user,
                       text=self.question, ts=self.action_ts, thread_ts=self.thread_ts, subtype="")


def parse_choice_click(body: dict[str, Any]) -> ChoiceClick | None:
    """The reading clicked, or None when the payload is not such a click or its value is no question (empty,
    longer than any button carries, or control characters only): the value is the clicker's to forge."""
    actions = [a for a in body.get("actions") or [] if isinstance(a, dict)
               and str(a.get("action_id") or "").startswith(CHOICE_ACTION)]
    if not actions:
        return None
    raw = actions[0].get("value")
    if not isinstance(raw, str) or len(raw) > MAX_CHOICE_VALUE:
        return None
    question = " ".join("".join(ch if ch.isprintable() else " " for ch in raw).split())
    container, message = _obj(body.get("container")), _obj(body.get("message"))
    user = _obj(body.get("user"))
    channel = str(_obj(body.get("channel")).get("id") or container.get("channel_id") or "")
    message_ts = str(message.get("ts") or container.get("message_ts") or "")
    thread_ts = str(message.get("thread_ts") or container.get("thread_ts") or message_ts)
    if not (question and channel and user.get("id") and thread_ts):
        return None
    return ChoiceClick(
        team=str(_obj(body.get("team")).get("id") or user.get("team_id") or ""),
        channel=channel, user=str(user["id"]), question=question, message_ts=message_ts, thread_ts=thread_ts,
        action_ts=str(actions[0].get("action_ts") or message_ts),
        ephemeral=bool(container.get("is_ephemeral")), response_url=str(body.get("response_url") or ""),
    )


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class FeedbackForm:
    """The 👎 modal, submitted: which answer (from ``private_metadata``), what was wrong, a comment."""

    user: str
    message_ref: str
    choice: str
    comment: str


def parse_feedback_form(body: dict[str, Any]) -> FeedbackForm | None:
    view = body.get("view") or {}
    user = str((body.get("user") or {}).get("id") or "")
    message_ref = str(view.get("private_metadata") or "")
    values = (view.get("state") or {}).get("values") or {}
    choice = ((values.get("choice") or {}).get("choice") or {}).get("selected_option") or {}
    comment = ((values.get("comment") or {}).get("comment") or {}).get("value") or ""
    if not user or ":" not in message_ref:
        return None
    return FeedbackForm(user=user, message_ref=message_ref, choice=str(choice.get("value") or ""),
                        comment=str(comment))


@dataclass(frozen=True)
class AssistantThread:
    """``assistant_thread_started`` / ``assistant_thread_context_changed``: a person's assistant-pane thread
    (in their DM with the app) and the channel they are viewing beside it ("" when none)."""

    event_id: str
    team: str
    user: str
    channel: str  # the DM holding the thread
    thread_ts: str
    context_channel: str
    started: bool

    @property
    def thread_ref(self) -> str:
        return f"{self.channel}:{self.thread_ts}"


def parse_assistant_thread(body: dict[str, Any]) -> AssistantThread | None:
    event = body.get("event") or {}
    thread = event.get("assistant_thread") or {}
    context = thread.get("context") or {}
    user, channel, ts = (str(thread.get(k) or "") for k in ("user_id", "channel_id", "thread_ts"))
    if not (user and channel and ts):
        return None
    context_channel = str(context.get("channel_id") or "")
    context_team = str(context.get("team_id") or "")
    team = _team(body, event)
    if context_team and team and context_team != team:
        context_channel = ""  # a channel of another workspace (Slack Connect) is never searched from here
    return AssistantThread(
        event_id=str(body.get("event_id") or ""),
        team=team,
        user=user,
        channel=channel,
        thread_ts=ts,
        context_channel=context_channel,
        started=event.get("type") == "assistant_thread_started",
    )
