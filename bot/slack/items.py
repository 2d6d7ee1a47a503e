"""A Slack work item's journal key, and the messages it posts: each once, even across a take-over.

Every message the bot posts for a work item carries the item's key and a slot name (answer, status, apology...)
in its ``metadata``, and its ts is noted on the item in the journal. A take-over (the first worker was killed)
first looks for the ts it noted, then for a message in the thread carrying that metadata (the post may have left
just before the kill), and posts only when it finds neither.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import structlog
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.core import ChatCore, ClaimKey
from bot.journal import RetryLater
from bot.texts import QUEUE_FULL
from connectors.state_api import AnswerRecord, WorkItem

log = structlog.get_logger(__name__)

# The metadata event type of every message the bot posts for a work item: its payload names the item and the
# slot (answer, status, apology...), so a take-over finds a post that left just before a kill.
WORK_METADATA = "citebot_work"
_CLOCK_SKEW_S = 5.0  # a stream started since the noted intent, allowing for Slack's clock against ours


def unique() -> str:
    return uuid.uuid4().hex


def event_key(event_id: str) -> ClaimKey:
    """The journal key of an event's work: its event id (a re-delivery carries the same), else a fresh one."""
    return ClaimKey.slack_event(event_id or unique())


class ItemPosts:
    """Posting once per work item, and noting what the item's work did."""

    def __init__(self, client: WebClient, core: ChatCore, *, finish: Callable[[WorkItem, AnswerRecord], None],
                 gate: Callable[[], AbstractContextManager[None]] = nullcontext) -> None:
        """``gate``: entered around each post (the journal's :meth:`~bot.journal.WorkJournal.posting`: after a
        drain's deadline no post starts); ``finish``: records an item's answer and ends the item in one write (the
        journal's :meth:`~bot.journal.WorkJournal.end_answered`)."""
        self.client, self.core, self.gate = client, core, gate
        self.finish = finish
        self._bot_id = ""  # this bot's id (auth.test), to know its own half-written stream in a thread

    def posted(self, item: WorkItem, slot: str, channel: str, thread_ts: str) -> str:
        """The ts of the message this item posted in ``slot`` before: noted, or (after a take-over, when the
        post may have left just before the kill) found in the thread by the metadata it carries. "" if none."""
        ts = item.notes.get(slot, "")
        if ts or item.attempts <= 1:
            return ts
        try:
            if thread_ts:
                resp = self.client.conversations_replies(channel=channel, ts=thread_ts, include_all_metadata=True,
                                                         limit=200)
            else:
                resp = self.client.conversations_history(channel=channel, include_all_metadata=True, limit=100)
        except SlackApiError as e:  # e.g. a missing history scope: post again rather than stay silent
            log.info("posted_lookup_refused", error=str(e.response.get("error") or "SlackApiError"))
            return ""
        except (SlackClientError, OSError) as e:
            raise RetryLater(5.0) from e
        for message in resp.get("messages") or []:
            meta = message.get("metadata") or {}
            payload = meta.get("event_payload") or {}
            if (meta.get("event_type") == WORK_METADATA and payload.get("work") == item.key
                    and payload.get("slot") == slot and message.get("ts")):
                found = str(message["ts"])
                log.info("posted_before_found", slot=slot)
                self.note(item, **{slot: found})
                return found
        return ""

    def stream_intent(self, item: WorkItem) -> None:
        """Note, before ``chat.startStream``, that this item is about to start a stream: Slack's streaming message
        carries no metadata, so if the reply with its ts never comes (a kill), :meth:`stream_started` finds it."""
        self.note(item, stream_intent=f"{time.time():.6f}")

    def stream_started(self, item: WorkItem, channel: str, thread_ts: str) -> str:
        """The ts of the stream an earlier attempt started: noted, else (its ``chat.startStream`` reply lost to a kill)
        the bot's own message in the thread without work metadata, posted since the noted intent. "" if none."""
        ts = item.notes.get("stream_ts", "")
        intent = item.notes.get("stream_intent", "")
        if ts or not intent or item.attempts <= 1 or not thread_ts:
            return ts
        try:
            bot_id = self._bot_id or str(self.client.auth_test().get("bot_id") or "")
            self._bot_id = bot_id
            resp = self.client.conversations_replies(channel=channel, ts=thread_ts, include_all_metadata=True,
                                                     limit=200)
        except SlackApiError as e:
            log.info("stream_lookup_refused", error=str(e.response.get("error") or "SlackApiError"))
            return ""
        except (SlackClientError, OSError) as e:
            raise RetryLater(5.0) from e
        since = float(intent) - _CLOCK_SKEW_S
        for message in reversed(resp.get("messages") or []):
            meta = message.get("metadata") or {}
            if (bot_id and message.get("bot_id") == bot_id and meta.get("event_type") != WORK_METADATA
                    and message.get("ts") and float(message["ts"]) >= since):
                found = str(message["ts"])
                log.info("stream_started_before_found")
                self.note(item, stream_ts=found)
                return found
        return ""

    def post(self, item: WorkItem, slot: str, *, channel: str, thread_ts: str, **kw: Any) -> str:
        """Post a message carrying the item's key in its metadata, and note its ts under ``slot``."""
        with self.gate():
            resp = self.client.chat_postMessage(
                channel=channel, thread_ts=thread_ts or None, metadata=self.metadata(item, slot), **kw,
            )
            ts = str(resp["ts"])
            self.note(item, **{slot: ts})
        return ts

    @staticmethod
    def metadata(item: WorkItem, slot: str) -> dict[str, Any]:
        """What a message the item posts carries, so a take-over can find it (:meth:`posted`)."""
        return {"event_type": WORK_METADATA, "event_payload": {"work": item.key, "slot": slot}}

    def note(self, item: WorkItem, **note: str) -> None:
        """Keep what the item's work did, in the journal (for a take-over) and on the item (for this run)."""
        self.core.note_work(item.key, **note)
        item.notes.update(note)

    def record(self, item: WorkItem, answer: AnswerRecord) -> None:
        """Record the answer the item posted, and end the item with it: the item's last write."""
        self.finish(item, answer)
        item.notes["recorded"] = "1"  # for this run only: the ended item is never taken again

    def say_queue_full(self, channel: str, user: str, thread_ts: str) -> None:
        """Tell ``user`` (only them, in the thread) that this question or file was not taken: their earlier ones
        wait already (:class:`bot.journal.QueueFull`). Not journaled: it stands for work that is not either."""
        text = QUEUE_FULL.format(n=self.core.settings.max_queued_per_user)
        try:
            self.client.chat_postEphemeral(channel=channel, user=user, text=text, thread_ts=thread_ts or None)
        except Exception as e:  # noqa: BLE001 - best effort, as the 👀 is
            log.warning("queue_full_notice_failed", error=type(e).__name__)

    def post_once(self, item: WorkItem, slot: str, *, channel: str, thread_ts: str, **kw: Any) -> str:
        return self.posted(item, slot, channel, thread_ts) or self.post(
            item, slot, channel=channel, thread_ts=thread_ts, **kw
        )


def is_admin(client: WebClient, user: str) -> bool:
    """A workspace admin or owner (``users.info``): who may forget or replace anyone's upload."""
    info = client.users_info(user=user).get("user") or {}
    return bool(info.get("is_admin") or info.get("is_owner") or info.get("is_primary_owner"))
