"""The Teams activity handler: activities in, :class:`bot.core.ChatCore` calls, Teams messages out.

Every turn acknowledges at once (a typing indicator, or a short reply for quick commands). Slow work (answers,
file ingestion, channel sync) is written to the work journal (:mod:`bot.journal`, the activity itself as the
item's payload) before the HTTP 200 leaves, because the Bot Framework never resends an activity it saw
acknowledged; the journal's workers, sized per lane, do it from there, here or in another replica once a killed
bot's lease ran out. Results are posted proactively with ``adapter.continue_conversation`` and the activity's
conversation reference (the Bot Service gives a turn only about 15 seconds); the id of each post is noted on the
item, so a take-over carries on in the status message it finds there and never posts an answer twice.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import structlog
from botbuilder.core import ActivityHandler, BotAdapter, InvokeResponse, TurnContext
from botbuilder.schema import Activity, ChannelAccount, ConversationReference, MessageReaction

from bot.commands import is_core_verb, run_command
from bot.core import ChatContext, ChatCore, ClaimKey
from bot.journal import Kind, Lane, RetryLater, WorkJournal
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
    INGEST_FAILED_TEXT,
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
from connectors.download import DownloadError, download
from connectors.log import error_fields
from connectors.settings import Settings
from connectors.state_api import WorkItem
from pipelines.models import Answer, IngestProgress

log = structlog.get_logger("citebot.teams")
T = TypeVar("T")

PROGRESS_INTERVAL_S = 2.0
CONNECTOR_TIMEOUT_S = 60.0  # one Bot Connector call from a worker; its own client retries inside that
ANSWER, INGEST, SYNC = "teams.answer", "teams.ingest", "teams.sync"  # the journal's kinds of Teams work
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
    """``allow_emulator``: also serve the Bot Framework Emulator's channel (``--insecure-local`` only).

    ``workers``: threads answering questions (default ``CITEBOT_TEAMS_WORKERS``); uploads and syncs have their own
    (``CITEBOT_UPLOAD_WORKERS``). The work runs from the journal (:mod:`bot.journal`) once :meth:`bind` gave the
    bot the adapter and the event loop to post on; the server binds at start-up, so left-behind work is taken
    over before any activity arrives."""

    def __init__(
        self, core: ChatCore, settings: Settings, *, workers: int | None = None, allow_emulator: bool = False
    ) -> None:
        self.core = core
        self.settings = settings
        self.app_id = settings.teams_app_id or ""
        self.channels = frozenset({TEAMS_CHANNEL, EMULATOR_CHANNEL} if allow_emulator else {TEAMS_CHANNEL})
        self.home_tenant = settings.teams_app_tenant_id if settings.teams_app_type == "SingleTenant" else None
        # the turn's own quick calls (the journal, commands, feedback), never the slow work
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="citebot-teams-turn")
        self._adapter: BotAdapter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.work = WorkJournal(
            core.state,
            platform="teams",
            kinds=[
                Kind(ANSWER, self._run_answer, self._give_up_answer),
                Kind(INGEST, self._run_ingest, self._give_up_ingest),
                Kind(SYNC, self._run_sync, self._give_up_sync),
            ],
            lanes=[
                Lane("answers", (ANSWER,), workers if workers is not None else settings.teams_workers),
                Lane("uploads", (INGEST, SYNC), settings.upload_workers),
            ],
            lease_s=settings.work_lease_s,
            scan_s=settings.work_scan_s,
        )

    # --- lifecycle --------------------------------------------------------------------------------
    def bind(self, adapter: BotAdapter, loop: asyncio.AbstractEventLoop) -> None:
        """Where journaled work posts (the adapter's ``continue_conversation`` on ``loop``); the first call starts
        the workers, which take over at once whatever a killed bot left in the journal."""
        self._adapter, self._loop = adapter, loop
        self.work.start()

    async def drain(self) -> None:
        """Wait until no journaled work is pending or running (tests)."""
        await asyncio.get_running_loop().run_in_executor(None, self.work.wait_idle, 600.0)

    async def stop(self, budget_s: float) -> bool:
        """SIGTERM: let running work finish within ``budget_s``, hand the rest back to the journal."""
        return await asyncio.get_running_loop().run_in_executor(None, self.work.drain, budget_s)

    def close(self) -> None:
        self.work.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # --- plumbing ---------------------------------------------------------------------------------
    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking core call from a turn on the turn pool."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, partial(fn, *args, **kwargs))

    def _on_loop(self, work: Coroutine[Any, Any, T]) -> T:
        """Run a Bot Connector call from a worker thread on the bot's event loop. The Connector unreachable is
        worth a later try (by any replica); what it refuses is a failure."""
        if self._loop is None or self._adapter is None:
            work.close()
            raise RuntimeError("the Teams bot was not bound to an adapter")
        future = asyncio.run_coroutine_threadsafe(work, self._loop)
        try:
            return future.result(timeout=CONNECTOR_TIMEOUT_S)
        except concurrent.futures.TimeoutError as e:
            future.cancel()
            raise RetryLater(5.0) from e
        except OSError as e:  # aiohttp's connection errors are OSErrors
            raise RetryLater(5.0) from e

    def _post(self, item: WorkItem, slot: str, ref: ConversationReference, activity: Activity) -> str:
        """Post ``activity`` in the referenced thread and note its id under ``slot`` (the Bot Connector can not be
        asked afterwards what was posted: the id is all a take-over has to go by)."""
        self._note(item, **{f"{slot}_sending": "1"})
        message_id = self._on_loop(self._send(ref, activity)) or ""
        if message_id:
            self._note(item, **{slot: message_id})
        return message_id

    def _post_once(self, item: WorkItem, slot: str, ref: ConversationReference, activity: Activity) -> str:
        return item.notes.get(slot) or self._post(item, slot, ref, activity)

    def _show(self, item: WorkItem, slot: str, ref: ConversationReference, text: str) -> None:
        """Replace the status message noted under ``slot`` with ``text`` (or post it once, when there is none)."""
        status_id = item.notes.get(slot)
        if status_id:
            self._on_loop(self._update(ref, status_id, text))
        else:
            self._post_once(item, slot, ref, render.text_activity(text))

    def _note(self, item: WorkItem, **note: str) -> None:
        """Keep what the item's work did, in the journal (for a take-over) and on the item (for this run)."""
        self.core.note_work(item.key, **note)
        item.notes.update(note)

    def _sending_lost(self, item: WorkItem, slot: str) -> None:
        if item.notes.get(f"{slot}_sending") and not item.notes.get(slot):
            # killed while the post was on its way: it may have reached the thread, and Teams can not be asked
            log.warning("teams_post_outcome_unknown", slot=slot)

    async def _send(self, ref: ConversationReference, activity: Activity) -> str | None:
        """Post ``activity`` proactively in the referenced thread; returns the new message id."""
        assert self._adapter is not None
        posted: dict[str, str | None] = {}

        async def callback(ctx: TurnContext) -> None:
            # Reply to the user's message (same thread), not to the synthetic continuation event.
            ctx.activity.id = ref.activity_id
            resp = await ctx.send_activity(activity)
            posted["id"] = resp.id if resp else None

        await self._adapter.continue_conversation(ref, callback, self.app_id)
        return posted.get("id")

    async def _update(self, ref: ConversationReference, message_id: str, text: str) -> None:
        assert self._adapter is not None

        async def callback(ctx: TurnContext) -> None:
            ctx.activity.id = ref.activity_id
            activity = render.text_activity(text)
            activity.id = message_id
            await ctx.update_activity(activity)

        await self._adapter.continue_conversation(ref, callback, self.app_id)

    # --- turns ------------------------------------------------------------------------------------
    async def on_turn(self, turn_context: TurnContext) -> None:
        activity = turn_context.activity
        reason = refusal(activity, channels=self.channels, home_tenant=self.home_tenant)
        if reason:  # not from Teams, another tenant, or channelData naming a place the activity is not in
            log.warning("teams_activity_refused", reason=reason, channel=(activity.channel_id or "")[:40],
                        activity_type=activity.type)
            return
        if self._adapter is None or self._loop is not asyncio.get_running_loop():
            # no server bound the bot (botbuilder's TestAdapter, a loop per turn): work posts through this turn's
            self.bind(turn_context.adapter, asyncio.get_running_loop())
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
        ctx = ChatContext(platform="teams", scope=turn.scope, user=turn.user, event_id=activity.id or "")
        structlog.contextvars.bind_contextvars(platform="teams", scope=turn.scope, user=turn.user)
        try:
            await self._dispatch(turn_context, turn, ctx)
        finally:
            structlog.contextvars.unbind_contextvars("platform", "scope", "user")

    async def _claim(self, activity: Activity) -> bool:
        """A quick reply's dedup: False for an activity handled before."""
        claim = ClaimKey.teams_message(activity.conversation.id if activity.conversation else "", activity.id or "")
        if activity.id and not await self._run(self.core.claim, claim):
            log.info("teams_duplicate_ignored", event_id=activity.id)
            return False
        return True

    async def _reply(self, turn_context: TurnContext, text: str) -> None:
        if await self._claim(turn_context.activity):
            await turn_context.send_activity(render.text_activity(text))

    async def _dispatch(self, turn_context: TurnContext, turn: TeamsTurn, ctx: ChatContext) -> None:
        word, _, rest = turn.text.partition(" ")
        command = word.lower().strip("!/.") if word.lower().strip("!/.") in COMMANDS else ""
        if not turn.files and (not turn.text or command == "help"):
            await self._reply(turn_context, TEAMS_HELP_TEXT)
            return
        if is_core_verb(command) and (command != "forget" or rest.strip()):
            if await self._claim(turn_context.activity):
                text = await self._run(run_command, self.core, ctx, command, rest.strip(), scopes=[turn.scope],
                                       is_admin=False)
                await turn_context.send_activity(render.text_activity(text))
            return
        if command == "sync" and turn.kind != "channel":
            await self._reply(turn_context, SYNC_ONLY_IN_CHANNELS)
            return
        if command == "sync" and not graph_configured(self.settings):
            await self._reply(turn_context, GRAPH_NOT_CONFIGURED)
            return

        # Slow work: journaled before the 200 leaves, done by the journal's workers, delivered proactively.
        kind = INGEST if turn.files else SYNC if command == "sync" else ANSWER
        activity = turn_context.activity
        key = ClaimKey.teams_message(turn.conversation_id, activity.id or uuid.uuid4().hex)
        ref = TurnContext.get_conversation_reference(activity)
        payload = {"turn": dataclasses.asdict(turn), "ref": ref.serialize(), "event_id": activity.id or ""}
        if not await self._run(self.work.accept, str(key), kind, payload):
            log.info("teams_duplicate_ignored", event_id=activity.id or "")
            return
        try:
            await turn_context.send_activity(render.typing_activity())
        except Exception:  # noqa: BLE001 - a lost typing indicator must not lose the answer
            log.warning("teams_typing_failed")

    def _work_of(self, payload: dict[str, Any]) -> tuple[TeamsTurn, ConversationReference, ChatContext]:
        """A journaled activity: what the turn knew, for a worker here or in another replica."""
        raw = payload["turn"]
        turn = TeamsTurn(**{**raw, "files": tuple(TeamsFile(**f) for f in raw["files"])})
        ref = ConversationReference().deserialize(payload["ref"])
        event_id = str(payload.get("event_id") or "")
        ctx = ChatContext(platform="teams", scope=turn.scope, user=turn.user, event_id=event_id)
        structlog.contextvars.bind_contextvars(scope=turn.scope, user=turn.user, event_id=event_id)
        return turn, ref, ctx

    # --- answers ----------------------------------------------------------------------------------
    def _run_answer(self, item: WorkItem, payload: dict[str, Any]) -> None:
        turn, ref, ctx = self._work_of(payload)
        posted = item.notes.get("answer_id")
        if posted:  # answered before a kill: keep its record, post nothing
            if item.notes.get("answer") and not item.notes.get("recorded"):
                self._record(item, ctx, turn, posted, Answer.model_validate_json(item.notes["answer"]))
            return
        self._sending_lost(item, "answer_id")
        if item.notes.get("answer"):  # decided before the kill: post that one, do not ask again
            answer = Answer.model_validate_json(item.notes["answer"])
        else:
            history = self.core.history("teams", turn.thread_ref)
            answer = self.core.ask(ctx, turn.text, history)
            self._note(item, answer=answer.model_dump_json())  # the answer is noted before it leaves
        message = render.answer_activity(answer, quote_card=turn.kind == "channel")
        message_id = self._post(item, "answer_id", ref, message)
        if not message_id:
            log.warning("teams_answer_without_id")
            return
        self._record(item, ctx, turn, message_id, answer)
        log.info("teams_answer_posted")

    def _record(self, item: WorkItem, ctx: ChatContext, turn: TeamsTurn, message_id: str, answer: Answer) -> None:
        self.core.record_answer(ctx, message_ref=message_ref(turn.scope, message_id), thread_ref=turn.thread_ref,
                                question=turn.text, answer=answer)
        self._note(item, recorded="1")

    def _give_up_answer(self, item: WorkItem, payload: dict[str, Any]) -> None:
        """After the last attempt: a short apology in the thread, unless the answer is known to be there."""
        _, ref, _ = self._work_of(payload)
        if not item.notes.get("answer_id"):
            self._post_once(item, "apology_id", ref, render.text_activity(APOLOGY))

    # --- files ------------------------------------------------------------------------------------
    def _ingest_one(
        self,
        item: WorkItem,
        slot: str,
        ref: ConversationReference,
        ctx: ChatContext,
        name: str,
        fetch: Callable[[int], bytes],
        source_url: str = "",
    ) -> str:
        """Download and ingest one file, editing the status message noted under ``slot``; returns the result text.
        ``source_url``: where people open the file, for the citations' links."""
        status_id = item.notes.get(slot)

        async def post(text: str) -> None:
            if status_id:
                await self._update(ref, status_id, text)

        assert self._loop is not None
        progress = _Progress(post, self._loop)
        try:
            return self.core.ingest(ctx, file_name=name, fetch=fetch, progress=progress, source_url=source_url)
        finally:
            self._on_loop(progress.settle())

    def _run_ingest(self, item: WorkItem, payload: dict[str, Any]) -> None:
        """Each file of the activity in turn; a take-over skips the ones done and carries on in the status
        message the killed bot posted (indexing is idempotent: the same bytes are the same document)."""
        turn, ref, ctx = self._work_of(payload)
        for i, f in enumerate(turn.files):
            if item.notes.get(f"done_{i}"):
                continue
            slot = f"status_{i}"
            if not f.is_pdf:
                self._post_once(item, slot, ref, render.text_activity(NOT_A_PDF.format(name=f.name)))
                self._note(item, **{f"done_{i}": "1"})
                continue
            self._sending_lost(item, slot)
            if item.attempts > 1 and item.notes.get(slot):
                self._on_loop(self._update(ref, item.notes[slot], indexing_text(f.name)))
            self._post_once(item, slot, ref, render.text_activity(indexing_text(f.name)))
            fetch = partial(_attachment_download, f.download_url, timeout_s=self.settings.download_timeout_s,
                            trusted_hosts=self.settings.configured_hosts)
            text = self._ingest_one(item, slot, ref, ctx, f.name, fetch, f.content_url)
            self._show(item, slot, ref, text)
            self._note(item, **{f"done_{i}": "1"})

    def _give_up_ingest(self, item: WorkItem, payload: dict[str, Any]) -> None:
        """After the last attempt: each file not indexed says so in its status message, with how to retry."""
        turn, ref, _ = self._work_of(payload)
        for i, f in enumerate(turn.files):
            if not item.notes.get(f"done_{i}"):
                self._show(item, f"status_{i}", ref, INGEST_FAILED_TEXT.format(file=f.name))

    async def _team_group_id(self, ref: ConversationReference, turn: TeamsTurn) -> str:
        """The team's Microsoft 365 group id (Graph needs it), from channelData or the Bot Connector."""
        if turn.team_group_id:
            return turn.team_group_id
        if not turn.team_id:
            raise GraphError("Teams did not say which team this channel belongs to")
        from botbuilder.core.teams import TeamsInfo

        assert self._adapter is not None
        found: dict[str, str] = {}

        async def callback(ctx: TurnContext) -> None:
            client = await TeamsInfo.get_teams_connector_client(ctx)
            details = await asyncio.get_running_loop().run_in_executor(
                self._pool, client.teams.get_team_details, turn.team_id
            )
            found["id"] = (details.aad_group_id if details else "") or ""

        await self._adapter.continue_conversation(ref, callback, self.app_id)
        if not found.get("id"):
            raise GraphError("Teams did not return the team's group id")
        return found["id"]

    def _run_sync(self, item: WorkItem, payload: dict[str, Any]) -> None:
        turn, ref, ctx = self._work_of(payload)
        self._sending_lost(item, "status_id")
        self._post_once(item, "status_id", ref, render.text_activity(SYNC_LOOKING))
        try:
            group_id = self._on_loop(self._team_group_id(ref, turn))
            client = GraphClient(self.settings, turn.tenant_id)
            found = list(client.channel_pdfs(group_id, turn.channel_id))
        except GraphError as e:
            self._show(item, "status_id", ref, channel_files_unreadable_text(str(e)))
            return
        if not found:
            self._show(item, "status_id", ref, NO_CHANNEL_PDFS)
            return
        lines = []
        for i, f in enumerate(found, 1):
            self._show(item, "status_id", ref, sync_progress_text(i, len(found), f.name))
            fetch = partial(_graph_download, client, f, timeout_s=self.settings.download_timeout_s)
            lines.append(self._ingest_one(item, "status_id", ref, ctx, f.name, fetch, f.web_url))
        self._show(item, "status_id", ref, sync_summary_text(lines))

    def _give_up_sync(self, item: WorkItem, payload: dict[str, Any]) -> None:
        _, ref, _ = self._work_of(payload)
        self._show(item, "status_id", ref, APOLOGY)

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


def _attachment_download(url: str, max_bytes: int, *, timeout_s: float, trusted_hosts: frozenset[str]) -> bytes:
    """A file sent in a chat: its download URL is pre-authenticated, so no token goes with it."""
    return download(url, max_bytes=max_bytes, timeout_s=timeout_s, trusted_hosts=trusted_hosts)


def _graph_download(client: GraphClient, f: DriveFile, max_bytes: int, *, timeout_s: float) -> bytes:
    """A channel file's bytes; Graph refusing the bot a token is a failed download like any other."""
    try:
        return client.download(f, max_bytes=max_bytes, timeout_s=timeout_s)
    except GraphError as e:
        raise DownloadError("Microsoft Graph refused the download") from e
