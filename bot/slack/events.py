"""Slack payloads parsed into small typed models, so listeners never dig through raw dicts.

Each ``parse_*`` takes the whole request body Bolt hands a listener (``body``) and returns a model,
or ``None`` when the payload is not something Citebot acts on (bots, edits, joins, non-PDFs...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

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

    @property
    def is_pdf(self) -> bool:
        return (
            self.filetype.lower() == "pdf"
            or self.mimetype.lower() == "application/pdf"
            or self.name.lower().endswith(".pdf")
        )

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
    """A human's message, or None for bot posts, edits, deletions, joins and other subtypes."""
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
    """``/citebot <verb> <arg>``."""

    team: str
    channel: str
    user: str
    verb: str
    arg: str
    is_dm: bool

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
    )
