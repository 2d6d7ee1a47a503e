"""The Slack adapter: Bolt listeners that parse events, call :class:`bot.core.ChatCore`, and render.

Acknowledge first, work after. The app runs with ``process_before_response=True``: every listener
runs in the request's own thread, does only cheap things (parse, claim, ``ack``) and hands the real
work (answering, downloading, indexing) to one explicitly sized ``ThreadPoolExecutor``
(``CITEBOT_SLACK_WORKERS``). The HTTP response (or Socket Mode ack) goes out as soon as the listener
returns, so a busy pool never delays an ack — not even a slash command's, which with Bolt's default
(listeners themselves queued on the listener executor) would wait for a free worker.

Cross-cutting concerns are Bolt middleware: log context, and dedup (a re-delivered ``event_id``,
e.g. a retry carrying ``X-Slack-Retry-Num``, is acknowledged and dropped). Dedup has two lines: an
in-memory set of recent event ids in the middleware (no disk on the ack path), and durable claims in
the state log (``event:<id>``, ``answer:<message>``, ``file:<channel>:<file>``) taken by the worker
before it does anything, so a re-delivery after a restart, or the twin ``message`` event of an
``app_mention``, never does the work twice. One ``@app.error`` handler and the pool's own guard share
one failure path: log the event id, apologise in the thread.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import structlog
from slack_bolt import App, BoltContext, BoltRequest, BoltResponse
from slack_bolt.context.ack import Ack
from slack_bolt.context.respond import Respond
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from bot.commands import is_core_verb, run_command
from bot.core import ChatContext, ChatCore, ClaimKey
from bot.journal import Kind, RetryLater
from bot.slack.events import (
    Command,
    FeedbackClick,
    FileShared,
    Message,
    SlackFile,
    files_of_message,
    mentions,
    parse_assistant_thread,
    parse_choice_click,
    parse_command,
    parse_feedback_click,
    parse_feedback_form,
    parse_file_deleted,
    parse_file_shared,
    parse_message,
    parse_reaction,
)
from bot.slack.render import CHOICE_ACTION, FEEDBACK_ACTION, FEEDBACK_MODAL, feedback_modal, plain, render_answer
from bot.slack.scopes import MembershipCache, dm_search_scopes
from bot.slack.stream import AnswerStream
from bot.slack.workers import SlackWorkers
from bot.texts import (
    APOLOGY,
    ASSISTANT_GREETING,
    ASSISTANT_GREETING_NO_CHANNEL,
    EXTERNAL_FILE_TEXT,
    INGEST_FAILED_TEXT,
    SLACK_FORGET_USAGE,
    SLACK_HELP_TEXT,
    SUGGESTED_PROMPTS_TITLE,
    UPLOADS_BUSY_TEXT,
    indexing_text,
    progress_text,
    searching_text,
)
from connectors.download import download, host_of, may_receive_credentials
from connectors.log import error_fields
from connectors.settings import Settings
from connectors.state_api import WorkItem
from pipelines.models import Answer, IngestProgress, slack_scope

log = structlog.get_logger("citebot.slack")

WORKING_REACTION = "eyes"
PROGRESS_MIN_INTERVAL_S = 1.0
# Slack serves uploaded files from this host; the bot token is sent nowhere else.
SLACK_FILE_HOST = "files.slack.com"
_RETRY_HEADER = "x-slack-retry-num"
# The metadata event type of every message the bot posts for a work item: its payload names the item and the
# slot (answer, status, apology...), so a take-over finds a post that left just before a kill.
WORK_METADATA = "citebot_work"


class _DropTokenUnusedWarning(logging.Filter):
    """Bolt warns "As you gave `client` as well, `token` will be unused" whenever SLACK_BOT_TOKEN is in the
    environment and an app is given its client, i.e. on every start of Citebot, whose client is built from that
    very token. The warning tells an admin nothing; drop just that record."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


def _quiet_bolt_token_warning() -> None:
    bolt_app_logger = logging.getLogger("slack_bolt.App")
    if not any(isinstance(f, _DropTokenUnusedWarning) for f in bolt_app_logger.filters):
        bolt_app_logger.addFilter(_DropTokenUnusedWarning())


class SlackConfigError(Exception):
    """The Slack settings are incomplete; the message names the variable to set."""


def web_client(settings: Settings) -> WebClient:
    """The Web API client: ``CITEBOT_SLACK_API_URL``, a timeout, and retries on 429 and dropped connections."""
    if settings.slack_bot_token is None:
        raise SlackConfigError("SLACK_BOT_TOKEN is not set: copy the Bot User OAuth Token (xoxb-...) from the app")
    base_url = settings.slack_api_url if settings.slack_api_url.endswith("/") else settings.slack_api_url + "/"
    return WebClient(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=base_url,
        timeout=30,
        retry_handlers=[ConnectionErrorRetryHandler(max_retry_count=2), RateLimitErrorRetryHandler(max_retry_count=3)],
    )


class SlackBot:
    """One Bolt app, its worker pool and its membership cache."""

    def __init__(self, settings: Settings, core: ChatCore, client: WebClient | None = None) -> None:
        if settings.slack_signing_secret is None and settings.slack_app_token is None:
            raise SlackConfigError(
                "SLACK_SIGNING_SECRET is not set (HTTP mode), nor SLACK_APP_TOKEN (Socket Mode): set one of them"
            )
        self.settings = settings
        self.core = core
        self.client = client if client is not None else web_client(settings)
        self.members = MembershipCache(self.client)
        self._working: dict[str, Future[str]] = {}  # the 👀 or status this process showed, per answer item
        self.work = SlackWorkers(core, kinds=[
            Kind("slack.answer", self._run_answer, self._give_up_answer),
            Kind("slack.choice", self._run_choice, self._give_up_choice),
            Kind("slack.ingest", self._run_ingest, self._give_up_ingest),
            Kind("slack.command", self._run_command, self._give_up_command),
            Kind("slack.vote", self._run_vote),
            Kind("slack.forget_file", self._run_forget_file),
            Kind("slack.assistant", self._run_assistant),
        ])
        secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else None
        _quiet_bolt_token_warning()
        self.app = App(
            name="citebot",
            client=self.client,
            signing_secret=secret,
            # Socket Mode needs no signature (the socket is authenticated by the app token).
            request_verification_enabled=secret is not None,
            process_before_response=True,
        )
        self.app.use(self._track_acks)
        self.app.use(self._log_context)
        self.app.use(self._dedup)
        self.app.event("app_mention")(self._on_mention)
        self.app.event("message")(self._on_message)
        self.app.event("file_shared")(self._on_file_shared)
        self.app.event("file_deleted")(self._on_file_deleted)
        self.app.event("reaction_added")(self._on_reaction)
        self.app.event("reaction_removed")(self._on_reaction)
        self.app.event("assistant_thread_started")(self._on_assistant_thread)
        self.app.event("assistant_thread_context_changed")(self._on_assistant_thread)
        self.app.action(FEEDBACK_ACTION)(self._on_feedback_click)
        self.app.action(re.compile(rf"^{CHOICE_ACTION}\d+$"))(self._on_choice_click)
        self.app.view(FEEDBACK_MODAL)(self._on_feedback_form)
        self.app.command("/citebot")(self._on_command)
        self.app.error(self._on_error)
        self.work.start()  # takes over what a killed bot left in the journal, at once

    # --- lifecycle -------------------------------------------------------------------------------
    def wait_idle(self, timeout_s: float = 60.0) -> bool:
        """Block until no journaled work is pending or running (for tests and benchmarks)."""
        return self.work.wait_idle(timeout_s)

    def drain(self, budget_s: float) -> bool:
        """SIGTERM: finish what runs within ``budget_s``, hand the rest back to the journal."""
        return self.work.drain(budget_s)

    def close(self) -> None:
        self.work.close()

    # --- middleware ------------------------------------------------------------------------------
    def _track_acks(self, next: Callable[[], BoltResponse]) -> BoltResponse:  # noqa: A002
        self.work.gate.enter()
        try:
            return next()
        finally:
            self.work.gate.leave()

    def _log_context(self, body: dict[str, Any], next: Callable[[], BoltResponse]) -> BoltResponse:  # noqa: A002
        event = _event_of(body)
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(
            platform="slack",
            event_id=str(body.get("event_id", "")),
            event_type=str(event.get("type", body.get("command", body.get("type", "")))),
            team=str(body.get("team_id", "")),
            user=str(event.get("user") or body.get("user_id", "")),
        )
        return next()

    def _dedup(
        self,
        body: dict[str, Any],
        request: BoltRequest,
        next: Callable[[], BoltResponse],  # noqa: A002
    ) -> BoltResponse:
        """Drop an ``event_id`` seen before. Slack re-sends an event (``X-Slack-Retry-Num`` 1, 2, 3) when it did
        not see our ack in time; the retry carries the same event id, so it is dropped here (and, after a
        restart, by the work journal's key). A retry whose first delivery never arrived is processed."""
        event_id = body.get("event_id")
        if body.get("type") != "event_callback" or not event_id:
            return next()
        retry = (request.headers.get(_RETRY_HEADER) or [""])[0]
        if not self.work.recent.add(str(event_id)):
            log.info("duplicate_event_skipped", retry_num=retry)
            return BoltResponse(status=200, body="")
        if retry not in ("", "0"):  # Bolt passes the header as "0" on a first delivery in Socket Mode
            log.info("retried_event_first_seen", retry_num=retry)
        return next()

    def _on_error(self, error: Exception, body: Any) -> BoltResponse:
        """Bolt's one error handler: a listener raised before its work was journaled. It survives any payload."""
        body = body if isinstance(body, dict) else {}
        event = _event_of(body)
        channel, ts = event.get("channel"), event.get("ts")
        log.error("slack_listener_failed", **error_fields(error))
        if event.get("type") in ("app_mention", "message") and isinstance(channel, str) and isinstance(ts, str):
            thread = event.get("thread_ts") if isinstance(event.get("thread_ts"), str) else ts
            self.work.ui.submit(self._apologise_quietly, channel, str(thread))
        # Slack would re-send only to hit the same failure: answer 200.
        return BoltResponse(status=200, body="")

    def _apologise_quietly(self, channel: str, thread_ts: str) -> None:
        try:
            self.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=APOLOGY)
        except Exception as e:  # noqa: BLE001 - best effort: the apology itself may fail
            log.warning("apology_failed", error=type(e).__name__)

    # --- posting once per work item ----------------------------------------------------------------
    def _posted(self, item: WorkItem, slot: str, channel: str, thread_ts: str) -> str:
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
                self._note(item, **{slot: found})
                return found
        return ""

    def _post(self, item: WorkItem, slot: str, *, channel: str, thread_ts: str, **kw: Any) -> str:
        """Post a message carrying the item's key in its metadata, and note its ts under ``slot``."""
        resp = self.client.chat_postMessage(
            channel=channel, thread_ts=thread_ts or None, metadata=self._metadata(item, slot), **kw,
        )
        ts = str(resp["ts"])
        self._note(item, **{slot: ts})
        return ts

    @staticmethod
    def _metadata(item: WorkItem, slot: str) -> dict[str, Any]:
        """What a message the item posts carries, so a take-over can find it (:meth:`_posted`)."""
        return {"event_type": WORK_METADATA, "event_payload": {"work": item.key, "slot": slot}}

    def _note(self, item: WorkItem, **note: str) -> None:
        """Keep what the item's work did, in the journal (for a take-over) and on the item (for this run)."""
        self.core.note_work(item.key, **note)
        item.notes.update(note)

    def _post_once(self, item: WorkItem, slot: str, *, channel: str, thread_ts: str, **kw: Any) -> str:
        return self._posted(item, slot, channel, thread_ts) or self._post(
            item, slot, channel=channel, thread_ts=thread_ts, **kw
        )

    # --- questions -------------------------------------------------------------------------------
    def _on_mention(self, body: dict[str, Any]) -> None:
        msg = parse_message(body)
        if msg is not None:
            self._start_answer(msg, body)

    def _on_message(self, body: dict[str, Any], context: BoltContext) -> None:
        msg = parse_message(body)
        if msg is None:
            return
        if msg.subtype == "file_share":
            for shared in files_of_message(msg):
                self._start_ingest(shared, body)
            return
        if not msg.is_dm and mentions(msg.text, context.bot_user_id or ""):
            return  # the app_mention event for this message answers it
        if msg.is_dm:
            self._start_answer(msg, body)
        elif msg.in_thread and self.core.thread_answered("slack", msg.thread_ref):
            self._start_answer(msg, body)  # a follow-up in a thread the bot answered; others are people talking

    def _start_answer(self, msg: Message, body: dict[str, Any]) -> None:
        # app_mention and message events for one message share this key: one answer per message.
        key = str(ClaimKey.slack_answer(msg.team, msg.channel, msg.ts))
        working: Future[str] | None = None
        if msg.question:  # the asker sees work start within a moment, never a silent wait
            working = self.work.ui.submit(self._show_working, msg)
            self._working[key] = working
        if not self.work.accept(key, "slack.answer", {"body": body}):
            self._working.pop(key, None)
            self.work.ui.submit(self._take_back, working, msg)

    def _take_back(self, working: Future[str] | None, msg: Message) -> None:
        """The message was answered before (e.g. before a restart): take back the status or 👀 this delivery
        showed."""
        shown = working.result(timeout=60) if working is not None else ""
        if shown == "reaction":
            self._react(msg.channel, msg.ts, add=False)
        elif shown == "status":
            self._set_status(msg.channel, msg.reply_thread_ts, "")

    def _search_scopes(self, msg: Message) -> tuple[str, ...]:
        """() for a channel (its own scope). In a DM: the DM's scope plus, in an assistant-pane thread whose
        person is viewing a channel they belong to, that channel; in any other DM thread, every channel the
        asker belongs to."""
        if not msg.is_dm:
            return ()
        own = slack_scope(msg.team, msg.channel)
        pane = self.core.thread_context("slack", msg.thread_ref) if msg.in_thread else None
        if pane is not None and pane[1]:
            member_of = self.members.channels(msg.team, msg.user) or ()
            return (own, slack_scope(msg.team, pane[1])) if pane[1] in member_of else (own,)
        return dm_search_scopes(self.members, team=msg.team, dm_channel=msg.channel, user=msg.user)

    def _show_working(self, msg: Message) -> str:
        """Show that an answer is coming: ``assistant.threads.setStatus`` ("Searching 3 PDFs…") where Slack
        allows it, else the 👀 reaction. Returns what was shown ("status", "reaction" or "")."""
        self.work.gate.wait_quiet()
        try:
            n_docs = self.core.document_count(self._search_scopes(msg) or (msg.scope,))
        except Exception as e:  # noqa: BLE001 - the count is cosmetic; the answer reports real failures
            log.info("status_count_failed", error=type(e).__name__)
            n_docs = 0
        if self._set_status(msg.channel, msg.reply_thread_ts, searching_text(n_docs)):
            return "status"
        self._react(msg.channel, msg.ts, add=True)
        return "reaction"

    def _set_status(self, channel: str, thread_ts: str, status: str) -> bool:
        """The thread's "Citebot is …" line (cleared by the next bot message, or by ``status=""``); False where
        Slack refuses it (an older workspace, a missing scope), so the caller can fall back to 👀."""
        try:
            self.client.assistant_threads_setStatus(channel_id=channel, thread_ts=thread_ts, status=status)
        except SlackApiError as e:  # Slack's error code ("missing_scope"...) says why; it holds no secret
            log.info("set_status_refused", error=str(e.response.get("error") or "SlackApiError"))
            return False
        except (SlackClientError, OSError) as e:
            log.info("set_status_refused", error=type(e).__name__)
            return False
        return True

    def _run_answer(self, item: WorkItem, payload: dict[str, Any]) -> None:
        msg = parse_message(payload["body"])
        if msg is None:
            return
        structlog.contextvars.bind_contextvars(event_id=msg.event_id, user=msg.user)
        working = self._working.pop(item.key, None)
        try:
            self._answer(item, msg)
        finally:
            # never remove the 👀 before it was added; a status goes away by itself with the bot's reply. A
            # take-over does not know what the dead process showed: it tries to take a 👀 back.
            shown = working.result(timeout=60) if working is not None else ("" if item.attempts <= 1 else "reaction")
            if shown == "reaction":
                self._react(msg.channel, msg.ts, add=False)

    def _answer(self, item: WorkItem, msg: Message, *, choice: bool = False) -> None:
        """Answer ``msg`` in its thread once; ``choice``: it is a reading picked under a "which one?" answer."""
        question = msg.question
        where = {"channel": msg.channel, "thread_ts": msg.reply_thread_ts}
        if not question:
            self._post_once(item, "help_ts", **where, text=plain(SLACK_HELP_TEXT))
            return
        ctx = ChatContext("slack", msg.scope, msg.user, search_scopes=self._search_scopes(msg), event_id=msg.event_id)
        posted = self._posted(item, "answer_ts", **where)
        if posted:  # answered before a kill: keep its record, post nothing
            if item.notes.get("answer") and not item.notes.get("recorded"):
                self._record(item, ctx, msg, posted, Answer.model_validate_json(item.notes["answer"]))
            return
        history = self.core.history("slack", msg.thread_ref) if msg.in_thread and not choice else []
        # an LLM answer streams into the thread (bot/slack/stream.py); a take-over finishes the message it finds
        earlier = self._posted(item, "stream_ts", **where)
        stream = AnswerStream(self.client, **where, team=msg.team, user=msg.user, resume_ts=earlier,
                              started=lambda ts: self._note(item, stream_ts=ts),
                              metadata=self._metadata(item, "stream_ts"))
        show = None if earlier else stream
        if choice:
            answer = self.core.answer_choice(ctx, question, show=show)
        else:
            answer = self.core.ask(ctx, question, history, show=show)
        text, blocks = render_answer(answer)
        self._note(item, answer=answer.model_dump_json())  # the post is noted before it leaves
        ts = stream.finish(text=text, blocks=blocks, metadata=self._metadata(item, "answer_ts"))
        if ts:
            self._note(item, answer_ts=ts)
        else:
            ts = self._post(item, "answer_ts", **where, text=text, blocks=blocks, unfurl_links=False,
                            unfurl_media=False)
        self._record(item, ctx, msg, ts, answer)

    def _record(self, item: WorkItem, ctx: ChatContext, msg: Message, ts: str, answer: Answer) -> None:
        self.core.record_answer(
            ctx, message_ref=f"{msg.channel}:{ts}", thread_ref=msg.thread_ref, question=msg.question, answer=answer
        )
        self._note(item, recorded="1")

    def _give_up_answer(self, item: WorkItem, payload: dict[str, Any]) -> None:
        """After the last attempt: a short apology in the thread (it also replaces the "Searching…" status)."""
        msg = parse_message(payload["body"])
        if msg is None or self._posted(item, "answer_ts", msg.channel, msg.reply_thread_ts):
            return
        self._post_once(item, "apology_ts", channel=msg.channel, thread_ts=msg.reply_thread_ts, text=APOLOGY)
        self._react(msg.channel, msg.ts, add=False)

    # --- "which one?" ------------------------------------------------------------------------------
    def _on_choice_click(self, ack: Ack, body: dict[str, Any]) -> None:
        """A reading's button under a "which one?" answer: journaled as a mention is (before the ack, so a killed
        bot does not lose it), answered in that answer's thread with the clicker's channel as scope."""
        click = parse_choice_click(body)
        if click is not None:
            # Slack does not re-send interactions; a double click is two clicks, each its own action_ts
            key = ClaimKey.slack_choice(click.team, click.channel, click.user, click.action_ts)
            if self.work.accept(key, "slack.choice", {"body": body}):
                self.work.ui.submit(self._set_status, click.channel, click.thread_ts, searching_text(0))
        ack()

    def _run_choice(self, item: WorkItem, payload: dict[str, Any]) -> None:
        click = parse_choice_click(payload["body"])
        if click is not None:
            structlog.contextvars.bind_contextvars(user=click.user)
            self._answer(item, click.as_message(), choice=True)

    def _give_up_choice(self, item: WorkItem, payload: dict[str, Any]) -> None:
        click = parse_choice_click(payload["body"])
        if click is None or self._posted(item, "answer_ts", click.channel, click.thread_ts):
            return
        self._post_once(item, "apology_ts", channel=click.channel, thread_ts=click.thread_ts, text=APOLOGY)

    def _react(self, channel: str, ts: str, *, add: bool) -> None:
        """The 👀 that says work started (removed when done); cosmetic, so failures are only logged."""
        try:
            if add:
                self.client.reactions_add(channel=channel, timestamp=ts, name=WORKING_REACTION)
            else:
                self.client.reactions_remove(channel=channel, timestamp=ts, name=WORKING_REACTION)
        except Exception as e:  # noqa: BLE001 - cosmetic: never let the 👀 fail an answer
            log.info("reaction_failed", add=add, error=type(e).__name__)

    # --- files -----------------------------------------------------------------------------------
    def _on_file_shared(self, body: dict[str, Any]) -> None:
        shared = parse_file_shared(body)
        if shared is not None:
            self._start_ingest(shared, body)

    def _start_ingest(self, shared: FileShared, body: dict[str, Any]) -> None:
        if shared.file.complete and not shared.file.is_pdf:
            return  # other file types are none of our business
        structlog.contextvars.bind_contextvars(file_id=shared.file.id)
        # file_shared and message/file_share both announce one share: ingest it once per channel.
        key = str(ClaimKey.slack_file(shared.team, shared.channel, shared.file.id))
        if self.work.uploads_waiting() >= self.settings.upload_queue:
            log.warning("upload_queue_full", waiting=self.settings.upload_queue)
            self.work.ui.submit(self._say_busy, shared)
            return
        self.work.accept(key, "slack.ingest", {"body": body, "file_id": shared.file.id})

    def _say_busy(self, shared: FileShared) -> None:
        name = shared.file.name or "your file"
        try:
            self.client.chat_postMessage(channel=shared.channel, thread_ts=shared.message_ts or None,
                                         text=plain(UPLOADS_BUSY_TEXT.format(file=name)))
        except Exception as e:  # noqa: BLE001 - best effort
            log.warning("busy_notice_failed", error=type(e).__name__)

    def _shared_of(self, payload: dict[str, Any]) -> FileShared | None:
        body, file_id = payload["body"], payload.get("file_id")
        shared = parse_file_shared(body)
        if shared is not None:
            return shared
        msg = parse_message(body)
        return next((s for s in files_of_message(msg) if s.file.id == file_id), None) if msg is not None else None

    def _run_ingest(self, item: WorkItem, payload: dict[str, Any]) -> None:
        shared = self._shared_of(payload)
        if shared is None:
            return
        structlog.contextvars.bind_contextvars(event_id=shared.event_id, file_id=shared.file.id, user=shared.user)
        file, thread_ts = shared.file, shared.message_ts
        if not file.complete or not thread_ts:
            info = self.client.files_info(file=file.id)["file"]
            if not file.complete:
                file = SlackFile.parse(info)
            thread_ts = thread_ts or _share_ts(info, shared.channel)
        if not file.is_pdf:
            return
        self._note(item, file_name=file.name, thread_ts=thread_ts)
        where = {"channel": shared.channel, "thread_ts": thread_ts}
        if file.is_external or not self._is_slack_file_url(file.url_private_download):
            log.info("external_file_refused", external=file.is_external)
            self._post_once(item, "refused_ts", **where, text=plain(EXTERNAL_FILE_TEXT.format(file=file.name)))
            return
        indexing = plain(indexing_text(file.name))
        earlier = self._posted(item, "status_ts", **where)
        if earlier:  # a take-over after the first worker died: carry on in the status message it posted
            status = _StatusMessage(self.client, shared.channel, earlier, text="")
            status.set(indexing, force=True)
        else:
            status = _StatusMessage(self.client, shared.channel, self._post(item, "status_ts", **where, text=indexing),
                                    text=indexing)
        text = self._download_and_index(shared, file, status)
        status.set(plain(text), force=True)

    def _give_up_ingest(self, item: WorkItem, payload: dict[str, Any]) -> None:
        """The upload failed, or every attempt died: its status message (or a new one) says so and how to retry."""
        shared = self._shared_of(payload)
        if shared is None:
            return
        text = plain(INGEST_FAILED_TEXT.format(file=item.notes.get("file_name") or shared.file.name or "your file"))
        thread_ts = item.notes.get("thread_ts") or shared.message_ts
        status_ts = self._posted(item, "status_ts", shared.channel, thread_ts)
        if status_ts:
            self.client.chat_update(channel=shared.channel, ts=status_ts, text=text)
        else:
            self._post_once(item, "failed_ts", channel=shared.channel, thread_ts=thread_ts, text=text)

    @property
    def _file_hosts(self) -> set[str]:
        """Where the bot token may go: Slack's file host, and the host of the configured Web API (tests)."""
        return {SLACK_FILE_HOST, host_of(self.settings.slack_api_url)}

    def _is_slack_file_url(self, url: str) -> bool:
        """A link the bot token may follow (HTTPS on Slack's file host; plain HTTP only on a configured endpoint,
        a local test server): the download's own rule, asked before anything is posted."""
        return may_receive_credentials(url, self._file_hosts, self.settings.configured_hosts)

    def _download_and_index(self, shared: FileShared, file: SlackFile, status: _StatusMessage) -> str:
        def fetch(max_bytes: int) -> bytes:
            return download(
                file.url_private_download,
                headers={"Authorization": f"Bearer {self.client.token}"},
                max_bytes=max_bytes,
                timeout_s=self.settings.download_timeout_s,
                credential_hosts=self._file_hosts,
                trusted_hosts=self.settings.configured_hosts,
            )

        def progress(p: IngestProgress) -> None:
            status.set(plain(progress_text(p)))

        return self.core.ingest(
            ChatContext("slack", shared.scope, shared.user, event_id=shared.event_id),
            file_name=file.name, fetch=fetch, size=file.size, progress=progress,
            is_admin=lambda: self._is_admin(shared.user), source_url=file.permalink, file_ref=file.id,
        )

    def _on_file_deleted(self, body: dict[str, Any]) -> None:
        deleted = parse_file_deleted(body)
        if deleted is not None:
            self.work.accept(_event_key(deleted.event_id), "slack.forget_file", {"file_id": deleted.file_id})

    def _run_forget_file(self, item: WorkItem, payload: dict[str, Any]) -> None:
        self.core.forget_file("slack", str(payload["file_id"]))

    # --- feedback --------------------------------------------------------------------------------
    def _on_reaction(self, body: dict[str, Any]) -> None:
        reaction = parse_reaction(body)
        if reaction is None:
            return
        vote = {"message_ref": reaction.message_ref, "user": reaction.user, "polarity": reaction.polarity,
                "added": reaction.added}
        self.work.accept(_event_key(reaction.event_id), "slack.vote", vote)

    def _on_feedback_click(self, ack: Ack, body: dict[str, Any]) -> None:
        """👍/👎 under an answer: recorded at once (the latest vote wins); 👎 also opens "What was wrong?"."""
        click = parse_feedback_click(body, FEEDBACK_ACTION)
        if click is not None:
            # Slack does not re-send interactions: each click is its own item
            vote = {"message_ref": click.message_ref, "user": click.user, "polarity": click.polarity, "added": True}
            self.work.accept(ClaimKey.slack_vote(_unique()), "slack.vote", vote)
        ack()
        if click is not None and click.polarity == "down" and click.trigger_id:
            self.work.ui.submit(self._open_feedback_modal, click)  # the trigger id is only good for 3 s

    def _open_feedback_modal(self, click: FeedbackClick) -> None:
        try:
            self.client.views_open(trigger_id=click.trigger_id, view=feedback_modal(click.message_ref))
        except (SlackApiError, SlackClientError, OSError) as e:  # the 👎 itself is recorded already
            log.info("feedback_modal_failed", error=type(e).__name__)

    def _on_feedback_form(self, ack: Ack, body: dict[str, Any]) -> None:
        """The 👎 form was sent: store what was wrong with the answer, then close it."""
        form = parse_feedback_form(body)
        if form is not None:
            self.work.accept(ClaimKey.slack_vote(_unique()), "slack.vote", {
                "message_ref": form.message_ref, "user": form.user, "polarity": "down", "added": True,
                "comment": form.comment, "choice": form.choice})
        ack()

    def _run_vote(self, item: WorkItem, vote: dict[str, Any]) -> None:
        if vote.get("added", True):
            self.core.feedback("slack", message_ref=vote["message_ref"], user=vote["user"], polarity=vote["polarity"],
                               comment=vote.get("comment") or "", choice=vote.get("choice") or "")
        else:
            self.core.retract_feedback("slack", message_ref=vote["message_ref"], user=vote["user"],
                                       polarity=vote["polarity"])

    # --- the assistant pane ------------------------------------------------------------------------
    def _on_assistant_thread(self, body: dict[str, Any]) -> None:
        """A person opened Citebot's assistant pane (or switched the channel beside it): remember which
        channel they are viewing, greet them once and suggest questions from that channel's PDFs."""
        thread = parse_assistant_thread(body)
        if thread is not None:
            self.work.accept(_event_key(thread.event_id), "slack.assistant", {"body": body})

    def _run_assistant(self, item: WorkItem, payload: dict[str, Any]) -> None:
        thread = parse_assistant_thread(payload["body"])
        if thread is None:
            return
        self.core.save_thread_context(
            "slack", thread_ref=thread.thread_ref, user=thread.user, context_channel=thread.context_channel
        )
        viewing = bool(thread.context_channel) and thread.context_channel in (
            self.members.channels(thread.team, thread.user) or ()
        )
        if thread.started:
            greeting = ASSISTANT_GREETING if thread.context_channel else ASSISTANT_GREETING_NO_CHANNEL
            self._post_once(item, "greeting_ts", channel=thread.channel, thread_ts=thread.thread_ts, text=greeting)
        scopes = [slack_scope(thread.team, thread.channel)]
        if viewing:  # section titles of a channel are shown only to its members
            scopes.insert(0, slack_scope(thread.team, thread.context_channel))
        questions = self.core.suggested_questions(scopes)
        if not questions:
            return
        try:
            self.client.assistant_threads_setSuggestedPrompts(
                channel_id=thread.channel,
                thread_ts=thread.thread_ts,
                title=SUGGESTED_PROMPTS_TITLE,
                prompts=[{"title": title[:75], "message": question} for title, question in questions],
            )
        except (SlackApiError, SlackClientError) as e:  # cosmetic: the pane works without prompts
            log.info("suggested_prompts_failed", error=type(e).__name__)

    # --- /citebot --------------------------------------------------------------------------------
    def _on_command(self, ack: Ack, body: dict[str, Any]) -> None:
        cmd = parse_command(body)
        if cmd.verb == "help":
            ack(text=plain(SLACK_HELP_TEXT))
            return
        if cmd.verb == "forget" and not cmd.arg:
            ack(text=SLACK_FORGET_USAGE)
            return
        key = ClaimKey.slack_command(_unique())  # Slack never re-sends a slash command
        self.work.accept(key, "slack.command", {"body": body})
        if is_core_verb(cmd.verb):
            ack()
        else:  # `/citebot how long is parental leave?`: a private answer, journaled like any command
            ack(text=searching_text(0))

    def _respond(self, item: WorkItem, payload: dict[str, Any], text: str, **kw: Any) -> None:
        """Reply at the command's ``response_url`` once (noted: a take-over does not reply again)."""
        if item.notes.get("responded"):
            return
        url = str(payload["body"].get("response_url") or "")
        if url:
            Respond(response_url=url)(text, **kw)
        self._note(item, responded="1")

    def _command_scopes(self, cmd: Command) -> tuple[str, ...]:
        """What a command may see: the channel's PDFs; in a DM, the DM's plus those of the asker's channels."""
        if cmd.is_dm:
            return tuple(dm_search_scopes(self.members, team=cmd.team, dm_channel=cmd.channel, user=cmd.user))
        return (cmd.scope,)

    def _run_command(self, item: WorkItem, payload: dict[str, Any]) -> None:
        cmd = parse_command(payload["body"])
        verb = cmd.verb
        if not is_core_verb(verb):
            self._private_answer(item, payload, cmd)
            return
        ctx = ChatContext("slack", cmd.scope, cmd.user)
        is_admin = verb == "forget" and self._is_admin(cmd.user)
        text = run_command(self.core, ctx, verb, cmd.arg, scopes=self._command_scopes(cmd), is_admin=is_admin)
        self._respond(item, payload, plain(text))

    def _private_answer(self, item: WorkItem, payload: dict[str, Any], cmd: Command) -> None:
        """The answer only the asker sees (ephemeral, through the command's ``response_url``), with the same
        citations and 👍/👎 as a thread answer. An ephemeral message has no ts Citebot could key feedback on, so
        the answer is recorded under an id derived from the work item, which its buttons carry; a take-over uses
        the same id, and records an answer that left just before a kill instead of answering again."""
        ctx = ChatContext("slack", cmd.scope, cmd.user, search_scopes=self._command_scopes(cmd) if cmd.is_dm else ())
        answer_ref = "cmd-" + item.key.rsplit(":", 1)[-1]
        if not item.notes.get("responded"):
            answer = self.core.ask(ctx, cmd.text, [])
            text, blocks = render_answer(answer, answer_ref=answer_ref)
            self._note(item, answer=answer.model_dump_json())  # noted before it leaves, as a thread answer is
            self._respond(item, payload, text, blocks=blocks, response_type="ephemeral", replace_original=True,
                          unfurl_links=False, unfurl_media=False)
        elif item.notes.get("answer") and not item.notes.get("recorded"):
            answer = Answer.model_validate_json(item.notes["answer"])
        else:
            return
        ref = f"{cmd.channel}:{answer_ref}"
        self.core.record_answer(ctx, message_ref=ref, thread_ref=ref, question=cmd.text, answer=answer)
        self._note(item, recorded="1")

    def _give_up_command(self, item: WorkItem, payload: dict[str, Any]) -> None:
        """After the last attempt: an apology at the ``response_url`` (replacing a question's "Searching…")."""
        if is_core_verb(parse_command(payload["body"]).verb):
            self._respond(item, payload, APOLOGY)
        else:
            self._respond(item, payload, APOLOGY, response_type="ephemeral", replace_original=True)

    def _is_admin(self, user: str) -> bool:
        info = self.client.users_info(user=user).get("user") or {}
        return bool(info.get("is_admin") or info.get("is_owner") or info.get("is_primary_owner"))


class _StatusMessage:
    """A message updated in place (chat.update), at most once a second unless forced."""

    def __init__(self, client: WebClient, channel: str, ts: str, *, text: str) -> None:
        self._client, self.channel, self.ts = client, channel, ts
        self._lock = threading.Lock()
        self._last_text = text
        self._last_at = 0.0

    def set(self, text: str, *, force: bool = False) -> None:
        with self._lock:
            now = time.monotonic()
            if text == self._last_text or (not force and now - self._last_at < PROGRESS_MIN_INTERVAL_S):
                return
            self._last_text, self._last_at = text, now
        try:
            self._client.chat_update(channel=self.channel, ts=self.ts, text=text)
        except (SlackApiError, SlackClientError) as e:
            if force:
                raise
            log.info("progress_update_failed", error=type(e).__name__)


def _event_of(body: Any) -> dict[str, Any]:
    """The ``event`` of a payload, ``{}`` when there is none or it is not an object (malformed envelopes)."""
    event = body.get("event") if isinstance(body, dict) else None
    return event if isinstance(event, dict) else {}


def _unique() -> str:
    return uuid.uuid4().hex


def _event_key(event_id: str) -> ClaimKey:
    """The journal key of an event's work: its event id (a re-delivery carries the same), else a fresh one."""
    return ClaimKey.slack_event(event_id or _unique())


def _share_ts(info: dict[str, Any], channel: str) -> str:
    """The ts of the message that shared ``info`` (a files.info file) in ``channel``, or ""."""
    shares = info.get("shares") or {}
    for kind in ("public", "private"):
        for share in (shares.get(kind) or {}).get(channel) or []:
            if share.get("ts"):
                return str(share["ts"])
    return ""


def build_bot(settings: Settings, core: ChatCore, client: WebClient | None = None) -> SlackBot:
    return SlackBot(settings, core, client)


def build_app(settings: Settings, core: ChatCore, client: WebClient | None = None) -> App:
    """The Bolt app with every Citebot listener; its worker pool lives as long as the process."""
    return build_bot(settings, core, client).app
