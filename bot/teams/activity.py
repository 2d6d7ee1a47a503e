"""Teams activities parsed into small typed models, so the handler never digs through raw dicts.

Scopes: ``teams:{tenant}:{channel_id}`` for channel messages (the channel id from
``channelData.channel.id``, never the ``;messageid=`` thread suffix of ``conversation.id``) and
``teams:{tenant}:{conversation_id}`` for personal and group chats.

``channelData`` is whatever the channel put there, and on Web Chat / Direct Line that is the *client*: a
stranger can name any tenant and channel in it. So :func:`refusal` runs before anything is parsed into a
scope: the activity must come from Teams (``channelId == "msteams"``), its two tenant fields must agree
(and, for a SingleTenant bot, name the bot's own tenant), and a claimed channel must be the conversation the
activity is in. Only then does the scope built from ``channelData`` name the place the reply goes to.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

from microsoft_agents.activity import Activity, ActivityTypes

from connectors.uploads import is_pdf_file
from pipelines.models import teams_scope

FILE_DOWNLOAD_INFO = "application/vnd.microsoft.teams.file.download.info"
TEAMS_CHANNEL = "msteams"
EMULATOR_CHANNEL = "emulator"
ConversationKind = Literal["channel", "personal", "groupChat"]

_AT_TAG = re.compile(r"<at[^>]*>.*?</at>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"</?(?:p|div|span|br)\b[^>]*>", re.IGNORECASE)


@dataclass(frozen=True)
class TeamsFile:
    name: str
    download_url: str
    file_type: str = ""
    unique_id: str = ""
    content_url: str = ""  # where people open it (OneDrive/SharePoint), from the attachment's contentUrl

    @property
    def is_pdf(self) -> bool:
        return is_pdf_file(self.name, file_type=self.file_type)


@dataclass(frozen=True)
class TeamsTurn:
    """Where a message came from and what it says (mention stripped)."""

    kind: ConversationKind
    tenant_id: str
    conversation_id: str
    channel_id: str  # the channel for channel messages, else ""
    team_id: str  # the team's Bot Framework id (19:...@thread...), else ""
    team_group_id: str  # the team's Microsoft 365 group id when Teams sent it, else ""
    user: str
    text: str
    mentioned: bool
    files: tuple[TeamsFile, ...] = ()
    aad_user: str = ""  # the sender's Entra object id (``from.aadObjectId``), which Graph's ``createdBy`` names

    @property
    def scope(self) -> str:
        return teams_scope(self.tenant_id, self.channel_id if self.kind == "channel" else self.conversation_id)

    @property
    def thread_ref(self) -> str:
        """The thread: for channels the conversation id carries ``;messageid=<root post>``."""
        return self.conversation_id


def synced_owner(object_id: str) -> str:
    """Who owns a file synced from a channel's Files tab: ``aad:{object id}`` of the user Graph names as its
    ``createdBy``, the same person as a message's ``from.aadObjectId``; ``teams-files`` when Graph names no user
    (added by an app): then no one can ``forget`` it in chat."""
    return f"aad:{object_id}" if object_id else "teams-files"


def also_known_as(turn: TeamsTurn) -> tuple[str, ...]:
    """The sender's other identity: the owner name of the files they added to the channel's Files tab."""
    return (synced_owner(turn.aad_user),) if turn.aad_user else ()


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def channel_data(activity: Activity) -> dict[str, Any]:
    return _dict(activity.channel_data)


def tenant_id(activity: Activity) -> str:
    tenant = _dict(channel_data(activity).get("tenant")).get("id")
    conv = activity.conversation
    return str(tenant or (conv.tenant_id if conv else None) or "no-tenant")


def _thread_channel(conversation_id: str) -> str:
    """The channel a channel post lives in: ``conversation.id`` without its ``;messageid=`` thread suffix."""
    return conversation_id.split(";messageid=")[0]


def refusal(activity: Activity, *, channels: Collection[str], home_tenant: str | None) -> str:
    """Why the bot must not act on ``activity`` ("" when it may).

    ``channels``: the Bot Framework channels served (``msteams``; the Emulator too in local testing).
    ``home_tenant``: a SingleTenant bot's own tenant, else None.
    """
    channel = str(activity.channel_id or "")
    if channel not in channels:
        return "channel_not_served"
    data = channel_data(activity)
    conv = activity.conversation
    named = [_dict(data.get("tenant")).get("id"), conv.tenant_id if conv else None]
    tenants = {str(t).lower() for t in named if t}
    if len(tenants) > 1:
        return "tenant_mismatch"
    tenant = next(iter(tenants), "")
    if channel == TEAMS_CHANNEL and not tenant:
        return "no_tenant"
    if home_tenant and tenant.lower() != home_tenant.lower():
        return "foreign_tenant"
    # conversationUpdate events about a channel (created, renamed...) name it in channelData while the
    # conversation is the team's; they never become a scope.
    if activity.type != ActivityTypes.conversation_update:
        claimed = {str(_dict(data.get("channel")).get("id") or ""), str(data.get("teamsChannelId") or "")} - {""}
        if claimed and claimed != {_thread_channel((conv.id if conv else None) or "")}:
            return "channel_mismatch"
    return ""


def conversation_kind(activity: Activity) -> ConversationKind:
    conv_type = (activity.conversation.conversation_type if activity.conversation else None) or ""
    if conv_type == "channel" or channel_data(activity).get("channel"):
        return "channel"
    if conv_type == "groupChat" or (activity.conversation and activity.conversation.is_group):
        return "groupChat"
    return "personal"


def _mention_texts(activity: Activity) -> tuple[bool, list[str]]:
    """(the bot is mentioned, the markup of each of its mentions)."""
    bot_id = activity.recipient.id if activity.recipient else None
    found = False
    texts: list[str] = []
    for entity in activity.entities or []:
        if (entity.type or "").lower() != "mention":
            continue
        props = entity.model_dump(mode="json", by_alias=True, exclude_none=True)
        mentioned = _dict(props.get("mentioned"))
        if bot_id and mentioned.get("id") == bot_id:
            found = True
            if props.get("text"):
                texts.append(str(props["text"]))
    return found, texts


def strip_bot_mention(activity: Activity) -> tuple[bool, str]:
    """(mentioned, the text without the bot's ``<at>…</at>`` markup and HTML whitespace).

    Other people's mentions keep their names; only the bot's own mention is removed.
    """
    mentioned, markups = _mention_texts(activity)
    text = activity.text or ""
    for markup in markups:
        text = text.replace(markup, " ")
    if mentioned and not markups:
        text = _AT_TAG.sub(" ", text, count=1)  # the mention entity had no text: drop the first tag
    text = _AT_TAG.sub(lambda m: re.sub(r"<[^>]+>", "", m.group(0)), text)
    text = _TAG.sub(" ", text).replace("&nbsp;", " ")
    return mentioned, " ".join(html.unescape(text).split())


def _file_content(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return _dict(raw)


def files(activity: Activity) -> tuple[TeamsFile, ...]:
    out = []
    for att in activity.attachments or []:
        if att.content_type != FILE_DOWNLOAD_INFO:
            continue
        content = _file_content(att.content)
        url = str(content.get("downloadUrl") or "")
        if not url:
            continue
        out.append(
            TeamsFile(
                name=str(att.name or "file"),
                download_url=url,
                file_type=str(content.get("fileType") or ""),
                unique_id=str(content.get("uniqueId") or ""),
                content_url=str(att.content_url or ""),
            )
        )
    return tuple(out)


def parse_turn(activity: Activity) -> TeamsTurn:
    data = channel_data(activity)
    kind = conversation_kind(activity)
    conv_id = (activity.conversation.id if activity.conversation else None) or ""
    channel_id = ""
    if kind == "channel":
        channel_id = str(_dict(data.get("channel")).get("id") or data.get("teamsChannelId") or "")
        channel_id = channel_id or _thread_channel(conv_id)
    team = _dict(data.get("team"))
    mentioned, text = strip_bot_mention(activity)
    user = activity.from_property.id if activity.from_property and activity.from_property.id else "unknown"
    aad = (activity.from_property.aad_object_id if activity.from_property else None) or ""
    return TeamsTurn(
        kind=kind,
        tenant_id=tenant_id(activity),
        conversation_id=conv_id,
        channel_id=channel_id,
        team_id=str(team.get("id") or data.get("teamsTeamId") or ""),
        team_group_id=str(team.get("aadGroupId") or ""),
        user=str(user),
        aad_user=str(aad),
        text=text,
        mentioned=mentioned,
        files=files(activity),
    )


def choice_of(value: Any, *, key: str, max_chars: int) -> str | None:
    """The reading's question a card action sent (``value`` of a message activity: the action's ``data``), or
    None when the activity is no such click. The value is the sender's to forge: a question is at most
    ``max_chars`` and printable, and it is asked in the sender's own conversation like anything they type."""
    raw = _dict(value).get(key)
    if not isinstance(raw, str) or len(raw) > max_chars:
        return None
    question = " ".join("".join(ch if ch.isprintable() else " " for ch in raw).split())
    return question or None


def message_ref(scope: str, activity_id: str) -> str:
    """The key an answer is recorded under: Teams message ids are only unique per conversation."""
    return f"{scope}|{activity_id}"


def feedback_comment(raw: Any) -> str:
    """The optional text of a feedback-loop submission (Teams sends ``{"feedbackText": "..."}`` as JSON)."""
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return raw.strip()[:2000]
        raw = parsed
    if isinstance(raw, dict):
        for key in ("feedbackText", "feedback", "text"):
            if isinstance(raw.get(key), str):
                return str(raw[key]).strip()[:2000]
        return ""
    return str(raw).strip()[:2000] if isinstance(raw, str) else ""
