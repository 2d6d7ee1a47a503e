"""The Teams activity handler: activities in, :class:`bot.core.ChatCore` calls, Teams messages out.

Every turn acknowledges at once (a typing indicator, or a short reply for quick commands) and
hands slow work (answers, file ingestion, channel sync) to a background task on a sized thread
pool; its results are posted proactively with ``adapter.continue_conversation`` and the stored
conversation reference, because the Bot Service gives a turn only about 15 seconds.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

import structlog
from botbuilder.core import ActivityHandler, BotAdapter, InvokeResponse, TurnContext
from botbuilder.schema import Activity, ChannelAccount, ConversationReference, MessageReaction

from bot.commands import is_core_verb, run_command
from bot.core import ChatContext, ChatCore, ClaimKey
from bot.teams import render
from bot.teams.activity import (
    EMULATOR_CHANNEL,
    TEAMS_CHANNEL,
    TeamsFile,
    TeamsTurn,
    feedback_comment,
    message_ref,
    parse_turn,
    refusal,
)
from bot.teams.graph import DriveFile, GraphClient, GraphError, graph_configured
from bot.texts import (
    APOLOGY,
    GRAPH_NOT_CONFIGURED,
    NO_CHANNEL_PDFS,
    NOT_A_PDF,
    SYNC_LOOKING,
    SYNC_ONLY_IN_CHANNELS,
    TEAMS_HELP_TEXT,
    channel_files_unreadable_text,
    indexing_text,
    progress_text,
    sync_progress_text,
    sync_summary_text,
)
from connectors import metrics
from connectors.download import DownloadError, download
from connectors.log import error_fields
from connectors.settings import Settings
from pipelines.models import IngestProgress

log = structlog.get_logger("citebot.teams")
T = TypeVar("T")

PROGRESS_INTERVAL_S = 2.0
COMMANDS = ("help", "docs", "stats", "forget", "sync")


class _Progress:
    """Thread-safe progress callback that edits the status message at most every few seconds."""

    def __init__(self, post: Callable[[str], Coroutine[Any, Any, None]], loop: asyncio.AbstractEventLoop) -> None:
        self._post = post
        self._loop = loop
        self._lock = threading.Lock()
        self._last = 0.0
        self._pending: list[Future[None]] = []

    def __call__(self, p: IngestProgress) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._last < PROGRESS_INTERVAL_S or any(not f.done() for f in self._pending):
                return
            self._last = now
            self._pending.append(asyncio.run_coroutine_threadsafe(self._post(progress_text(p)), self._loop))

    async def settle(self) -> None:
        """Wait for in-flight edits so the final text is never overwritten by a late progress edit."""
        with self._lock:
            pending = list(self._pending)
        for fut in pending:
            try:
                await asyncio.wrap_future(fut)
            except Exception:  # noqa: BLE001 - a failed progress edit must not fail the ingest
                log.warning("teams_progress_update_failed")


class CitebotTeamsBot(ActivityHandler):
    """``allow_emulator``: also serve the Bot Framework Emulator's channel (``--insecure-local`` only)."""

    def __init__(self, core: ChatCore, settings: Settings, *, workers: int = 4, allow_emulator: bool = False) -> None:
        self.core = core
        self.settings = settings
        self.app_id = settings.teams_app_id or ""
        self.channels = frozenset({TEAMS_CHANNEL, EMULATOR_CHANNEL} if allow_emulator else {TEAMS_CHANNEL})
        self.home_tenant = settings.teams_app_tenant_id if settings.teams_app_type == "SingleTenant" else None
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="citebot-teams")
        self._tasks: set[asyncio.Task[None]] = set()

    # --- plumbing ---------------------------------------------------------------------------------
    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking core call on the worker pool."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, partial(fn, *args, **kwargs))

    def _spawn(self, adapter: BotAdapter, ref: ConversationReference, work: Awaitable[None], what: str) -> None:
        task = asyncio.get_running_loop().create_task(self._guard(adapter, ref, work, what))
        self._tasks.add(task)
        metrics.queue_changed("teams", +1)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        metrics.queue_changed("teams", -1)

    async def _guard(self, adapter: BotAdapter, ref: ConversationReference, work: Awaitable[None], what: str) -> None:
        try:
            await work
        except Exception as e:  # noqa: BLE001 - a failed job apologises; the bot keeps serving
            # the type and place only: an exception's message can carry a URL with its password
            log.error("teams_job_failed", job=what, conversation=ref.conversation.id if ref.conversation else "",
                      **error_fields(e))
            try:
                await self._send(adapter, ref, render.text_activity(APOLOGY))
            except Exception as apology_error:  # noqa: BLE001
                log.warning("teams_apology_failed", **error_fields(apology_error))

    async def drain(self) -> None:
        """Wait for all background work (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _send(self, adapter: BotAdapter, ref: ConversationReference, activity: Activity) -> str | None:
        """Post ``activity`` proactively in the referenced thread; returns the new message id."""
        posted: dict[str, str | None] = {}

        async def callback(ctx: TurnContext) -> None:
            # Reply to the user's message (same thread), not to the synthetic continuation event.
            ctx.activity.id = ref.activity_id
            resp = await ctx.send_activity(activity)
            posted["id"] = resp.id if resp else None

        await adapter.continue_conversation(ref, callback, self.app_id)
        return posted.get("id")

    async def _update(self, adapter: BotAdapter, ref: ConversationReference, message_id: str, text: str) -> None:
        async def callback(ctx: TurnContext) -> None:
            ctx.activity.id = ref.activity_id
            activity = render.text_activity(text)
            activity.id = message_id
            await ctx.update_activity(activity)

        await adapter.continue_conversation(ref, callback, self.app_id)

    async def _show(self, adapter: BotAdapter, ref: ConversationReference, status_id: str | None, text: str) -> None:
        """Replace the status message with ``text`` (or post it when there is no status message)."""
        if status_id:
            await self._update(adapter, ref, status_id, text)
        else:
            await self._send(adapter, ref, render.text_activity(text))

    # --- turns ------------------------------------------------------------------------------------
    async def on_turn(self, turn_context: TurnContext) -> None:
        activity = turn_context.activity
        reason = refusal(activity, channels=self.channels, home_tenant=self.home_tenant)
        if reason:  # not from Teams, another tenant, or channelData naming a place the activity is not in
            log.warning("teams_activity_refused", reason=reason, channel=(activity.channel_id or "")[:40],
                        activity_type=activity.type)
            return
        try:
            await super().on_turn(turn_context)
        except Exception as e:  # noqa: BLE001 - a failed turn apologises; the bot keeps serving
            log.error("teams_turn_failed", activity_type=turn_context.activity.type, **error_fields(e))
            try:
                await turn_context.send_activity(render.text_activity(APOLOGY))
            except Exception as apology_error:  # noqa: BLE001
                log.warning("teams_apology_failed", **error_fields(apology_error))

    async def on_message_activity(self, turn_context: TurnContext) -> None:
        activity = turn_context.activity
        turn = parse_turn(activity)
        if turn.kind == "channel" and not turn.mentioned:
            return  # channel messages are for people unless they mention the bot
        claim = ClaimKey.teams_message(turn.conversation_id, activity.id or "")
        if activity.id and not await self._run(self.core.claim, claim):
            log.info("teams_duplicate_ignored", event_id=activity.id)
            return
        ctx = ChatContext(platform="teams", scope=turn.scope, user=turn.user, event_id=activity.id or "",
                          also_known_as=(synced_owner(turn.aad_user),) if turn.aad_user else ())
        structlog.contextvars.bind_contextvars(platform="teams", scope=turn.scope, user=turn.user)
        try:
            await self._dispatch(turn_context, turn, ctx)
        finally:
            structlog.contextvars.unbind_contextvars("platform", "scope", "user")

    async def _dispatch(self, turn_context: TurnContext, turn: TeamsTurn, ctx: ChatContext) -> None:
        word, _, rest = turn.text.partition(" ")
        command = word.lower().strip("!/.") if word.lower().strip("!/.") in COMMANDS else ""
        if not turn.files and (not turn.text or command == "help"):
            await turn_context.send_activity(render.text_activity(TEAMS_HELP_TEXT))
            return
        if is_core_verb(command) and (command != "forget" or rest.strip()):
            text = await self._run(run_command, self.core, ctx, command, rest.strip(), scopes=[turn.scope],
                                   is_admin=False)
            await turn_context.send_activity(render.text_activity(text))
            return
        if command == "sync" and turn.kind != "channel":
            await turn_context.send_activity(render.text_activity(SYNC_ONLY_IN_CHANNELS))
            return
        if command == "sync" and not graph_configured(self.settings):
            await turn_context.send_activity(render.text_activity(GRAPH_NOT_CONFIGURED))
            return

        # Slow work: acknowledge now, deliver proactively.
        try:
            await turn_context.send_activity(render.typing_activity())
        except Exception:  # noqa: BLE001 - a lost typing indicator must not lose the answer
            log.warning("teams_typing_failed")
        adapter = turn_context.adapter
        ref = TurnContext.get_conversation_reference(turn_context.activity)
        if turn.files:
            self._spawn(adapter, ref, self._ingest_files(adapter, ref, ctx, turn.files), "ingest")
        elif command == "sync":
            self._spawn(adapter, ref, self._sync(adapter, ref, ctx, turn), "sync")
        else:
            self._spawn(adapter, ref, self._answer(adapter, ref, ctx, turn, turn.text), "answer")

    # --- answers ----------------------------------------------------------------------------------
    async def _answer(
        self, adapter: BotAdapter, ref: ConversationReference, ctx: ChatContext, turn: TeamsTurn, question: str
    ) -> None:
        history = await self._run(self.core.history, "teams", turn.thread_ref)
        answer = await self._run(self.core.ask, ctx, question, history)
        message = render.answer_activity(answer, quote_card=turn.kind == "channel")
        message_id = await self._send(adapter, ref, message)
        if not message_id:
            log.warning("teams_answer_without_id")
            return
        await self._run(
            self.core.record_answer,
            ctx,
            message_ref=message_ref(turn.scope, message_id),
            thread_ref=turn.thread_ref,
            question=question,
            answer=answer,
        )

    # --- files ------------------------------------------------------------------------------------
    async def _ingest_one(
        self,
        adapter: BotAdapter,
        ref: ConversationReference,
        ctx: ChatContext,
        name: str,
        fetch: Callable[[int], bytes],
        status_id: str | None,
        source_url: str = "",
    ) -> str:
        """Download and ingest one file, editing the status message; returns the result text. ``source_url``:
        where people open the file, for the citations' links."""

        async def post(text: str) -> None:
            if status_id:
                await self._update(adapter, ref, status_id, text)

        progress = _Progress(post, asyncio.get_running_loop())
        try:
            return await self._run(
                self.core.ingest, ctx, file_name=name, fetch=fetch, progress=progress, source_url=source_url
            )
        finally:
            await progress.settle()

    async def _ingest_files(
        self, adapter: BotAdapter, ref: ConversationReference, ctx: ChatContext, files: tuple[TeamsFile, ...]
    ) -> None:
        for f in files:
            if not f.is_pdf:
                await self._send(adapter, ref, render.text_activity(NOT_A_PDF.format(name=f.name)))
                continue
            status_id = await self._send(adapter, ref, render.text_activity(indexing_text(f.name)))
            fetch = partial(_attachment_download, f.download_url, timeout_s=self.settings.download_timeout_s,
                            trusted_hosts=self.settings.configured_hosts)
            text = await self._ingest_one(adapter, ref, ctx, f.name, fetch, status_id, f.content_url)
            await self._show(adapter, ref, status_id, text)

    async def _team_group_id(self, adapter: BotAdapter, ref: ConversationReference, turn: TeamsTurn) -> str:
        """The team's Microsoft 365 group id (Graph needs it), from channelData or the Bot Connector."""
        if turn.team_group_id:
            return turn.team_group_id
        if not turn.team_id:
            raise GraphError("Teams did not say which team this channel belongs to")
        from botbuilder.core.teams import TeamsInfo

        found: dict[str, str] = {}

        async def callback(ctx: TurnContext) -> None:
            client = await TeamsInfo.get_teams_connector_client(ctx)
            details = await asyncio.get_running_loop().run_in_executor(
                self._pool, client.teams.get_team_details, turn.team_id
            )
            found["id"] = (details.aad_group_id if details else "") or ""

        await adapter.continue_conversation(ref, callback, self.app_id)
        if not found.get("id"):
            raise GraphError("Teams did not return the team's group id")
        return found["id"]

    async def _sync(self, adapter: BotAdapter, ref: ConversationReference, ctx: ChatContext, turn: TeamsTurn) -> None:
        status_id = await self._send(adapter, ref, render.text_activity(SYNC_LOOKING))
        try:
            group_id = await self._team_group_id(adapter, ref, turn)
            client = GraphClient(self.settings, turn.tenant_id)
            found = await self._run(lambda: list(client.channel_pdfs(group_id, turn.channel_id)))
        except GraphError as e:
            await self._show(adapter, ref, status_id, channel_files_unreadable_text(str(e)))
            return
        if not found:
            await self._show(adapter, ref, status_id, NO_CHANNEL_PDFS)
            return
        lines = []
        for i, f in enumerate(found, 1):
            if status_id:
                await self._update(adapter, ref, status_id, sync_progress_text(i, len(found), f.name))
            fetch = partial(_graph_download, client, f, timeout_s=self.settings.download_timeout_s)
            # the file is its author's, not the syncing member's: they (not whoever typed sync) may forget it
            owner = replace(ctx, user=synced_owner(f.created_by), also_known_as=())
            lines.append(await self._ingest_one(adapter, ref, owner, f.name, fetch, None, f.web_url))
        await self._show(adapter, ref, status_id, sync_summary_text(lines))

    # --- feedback ---------------------------------------------------------------------------------
    async def on_reactions_added(self, message_reactions: list[MessageReaction], turn_context: TurnContext) -> None:
        await self._reactions(message_reactions, turn_context, added=True)

    async def on_reactions_removed(self, message_reactions: list[MessageReaction], turn_context: TurnContext) -> None:
        await self._reactions(message_reactions, turn_context, added=False)

    async def _reactions(self, reactions: list[MessageReaction], turn_context: TurnContext, *, added: bool) -> None:
        activity = turn_context.activity
        if not activity.reply_to_id or not any((r.type or "").lower() == "like" for r in reactions):
            return
        turn = parse_turn(activity)
        ref = message_ref(turn.scope, activity.reply_to_id)
        if added:
            await self._run(self.core.feedback, "teams", message_ref=ref, user=turn.user, polarity="up")
        else:
            await self._run(self.core.retract_feedback, "teams", message_ref=ref, user=turn.user, polarity="up")

    async def on_invoke_activity(self, turn_context: TurnContext) -> InvokeResponse | None:
        activity = turn_context.activity
        if activity.name != "message/submitAction":
            return await super().on_invoke_activity(turn_context)
        value: dict[str, Any] = activity.value if isinstance(activity.value, dict) else {}
        raw_action = value.get("actionValue")
        action: dict[str, Any] = raw_action if isinstance(raw_action, dict) else {}
        reaction = str(action.get("reaction") or "").lower()
        if value.get("actionName") == "feedback" and reaction in ("like", "dislike") and activity.reply_to_id:
            turn = parse_turn(activity)
            linked = await self._run(
                self.core.feedback,
                "teams",
                message_ref=message_ref(turn.scope, activity.reply_to_id),
                user=turn.user,
                polarity="up" if reaction == "like" else "down",
                comment=feedback_comment(action.get("feedback")),
            )
            if not linked:
                log.info("teams_feedback_unlinked", event_id=activity.id or "")
        return InvokeResponse(status=200)

    # --- install ----------------------------------------------------------------------------------
    async def on_members_added_activity(self, members_added: list[ChannelAccount], turn_context: TurnContext) -> None:
        bot_id = turn_context.activity.recipient.id if turn_context.activity.recipient else None
        if any(m.id == bot_id for m in members_added):
            await turn_context.send_activity(render.text_activity(TEAMS_HELP_TEXT))


def synced_owner(object_id: str) -> str:
    """Who owns a file synced from a channel's Files tab: ``aad:{object id}`` of the user Graph names as its
    ``createdBy``, the same person as a message's ``from.aadObjectId``; ``teams-files`` when Graph names no user
    (added by an app): then no one can ``forget`` it in chat."""
    return f"aad:{object_id}" if object_id else "teams-files"


def _attachment_download(url: str, max_bytes: int, *, timeout_s: float, trusted_hosts: frozenset[str]) -> bytes:
    """A file sent in a chat: its download URL is pre-authenticated, so no token goes with it."""
    return download(url, max_bytes=max_bytes, timeout_s=timeout_s, trusted_hosts=trusted_hosts)


def _graph_download(client: GraphClient, f: DriveFile, max_bytes: int, *, timeout_s: float) -> bytes:
    """A channel file's bytes; Graph refusing the bot a token is a failed download like any other."""
    try:
        return client.download(f, max_bytes=max_bytes, timeout_s=timeout_s)
    except GraphError as e:
        raise DownloadError("Microsoft Graph refused the download") from e
