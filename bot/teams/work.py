"""The Teams bot's journaled work: answers, uploads and ``sync``, done from the work journal (:mod:`bot.journal`);
and quick replies (help, the commands), done in the turn on a journal key and posted by a worker only when the
turn's process died first.

The turn (:mod:`bot.teams.bot`) writes each of them to the journal before the HTTP 200 leaves, with the parsed turn
and its conversation reference as the item's payload, because the Bot Framework never resends an activity it saw
acknowledged. The journal's workers, sized per lane, do it from there, in this process or in another replica once a
killed bot's lease ran out, and post proactively with ``adapter.continue_conversation`` on the server's event loop
(the Bot Service gives a turn only about 15 seconds). The id of each post is noted on the item, so a take-over
carries on in the status message it finds there and never posts a noted answer again; the Bot Connector cannot be
asked what a bot posted, so a kill inside a post's own round trip may post that one message again
(``teams_post_outcome_unknown``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from functools import partial
from typing import Any, TypeVar

import aiohttp
import structlog
from microsoft_agents.activity import Activity, ConversationReference
from microsoft_agents.hosting.core import ChannelServiceAdapter, ConnectorClientBase, TeamsConnectorClient, TurnContext

from bot.commands import is_core_verb, run_command
from bot.core import ChatContext, ChatCore
from bot.journal import Kind, Lane, RetryLater, WorkJournal
from bot.teams import render
from bot.teams.activity import TeamsFile, TeamsTurn, also_known_as, message_ref, synced_owner
from bot.teams.graph import DriveFile, GraphClient, GraphError
from bot.teams.stream import TeamsStream, ending
from bot.texts import (
    APOLOGY,
    INGEST_FAILED_TEXT,
    NO_CHANNEL_PDFS,
    NOT_A_PDF,
    SYNC_LOOKING,
    channel_files_unreadable_text,
    indexing_text,
    progress_text,
    sync_progress_text,
    sync_summary_text,
)
from connectors.download import DownloadError, download
from connectors.settings import Settings
from connectors.state_api import WorkItem
from pipelines.models import Answer, IngestProgress

log = structlog.get_logger(__name__)
T = TypeVar("T")

PROGRESS_INTERVAL_S = 2.0
CONNECTOR_TIMEOUT_S = 60.0  # one Bot Connector call from a worker; its own client retries inside that
ANSWER, INGEST, SYNC = "teams.answer", "teams.ingest", "teams.sync"  # the journal's kinds of Teams work
CHOICE = "teams.choice"  # a reading picked on a "which one?" card, answered as a question is
REPLY = "teams.reply"  # a quick reply: its text, or the command whose text it is; answered in the turn


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


class TeamsWork:
    """The journal's Teams lanes: ``workers`` threads answer, ``CITEBOT_UPLOAD_WORKERS`` index uploads and syncs.
    They start at :meth:`bind`, which gives them the adapter and the event loop to post on."""

    def __init__(self, core: ChatCore, settings: Settings, *, workers: int) -> None:
        self.core = core
        self.settings = settings
        self.app_id = settings.teams_app_id or ""
        self._adapter: ChannelServiceAdapter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.journal = WorkJournal(
            core.state,
            platform="teams",
            kinds=[
                Kind(ANSWER, self._run_answer, self._give_up_answer),
                Kind(CHOICE, partial(self._run_answer, choice=True), self._give_up_answer),
                Kind(INGEST, self._run_ingest, self._give_up_ingest),
                Kind(SYNC, self._run_sync, self._give_up_sync),
                Kind(REPLY, self._run_reply, self._give_up_reply),
            ],
            lanes=[Lane("answers", (ANSWER, CHOICE, REPLY), workers),
                   Lane("uploads", (INGEST, SYNC), settings.upload_workers)],
            lease_s=settings.work_lease_s,
            scan_s=settings.work_scan_s,
            max_queued_per_user=settings.max_queued_per_user,
        )

    def bind(self, adapter: ChannelServiceAdapter, loop: asyncio.AbstractEventLoop) -> None:
        """Where the work posts; the first call starts the workers, which take over at once whatever a killed bot
        left in the journal."""
        self._adapter, self._loop = adapter, loop
        self.journal.start()

    def bound_to(self, loop: asyncio.AbstractEventLoop) -> bool:
        return self._adapter is not None and self._loop is loop

    def accept(self, key: str, kind: str, turn: TeamsTurn, ref: ConversationReference, event_id: str) -> bool:
        """Journal one activity's work (before the turn's 200); False when it was journaled before."""
        payload = _payload(turn, ref, event_id)
        return self.journal.accept(key, kind, payload, user=turn.user, tenant=turn.tenant_id)

    def hold(self, key: str, turn: TeamsTurn, ref: ConversationReference, event_id: str, *, text: str = "",
             command: str = "", arg: str = "") -> WorkItem | None:
        """Journal a quick reply the turn sends itself: ``text``, or what ``command`` (``docs``, ``stats``,
        ``forget``) with ``arg`` says. None when the activity was journaled before (a re-delivery: answered once).
        The turn sends :meth:`reply_text` and ends the item with :meth:`finish`."""
        payload = {**_payload(turn, ref, event_id), "text": text, "command": command, "arg": arg}
        return self.journal.hold(key, REPLY, payload, user=turn.user, tenant=turn.tenant_id)

    def reply_text(self, item: WorkItem, ctx: ChatContext) -> str:
        """A quick reply's text; a command's is noted before it is sent, so a take-over sends that text and never
        runs the command (a ``forget``) twice."""
        if "reply" in item.notes:
            return item.notes["reply"]
        payload = json.loads(item.payload)
        command = str(payload.get("command") or "")
        if not is_core_verb(command):
            return str(payload["text"])
        text = run_command(self.core, ctx, command, str(payload.get("arg") or ""), scopes=[ctx.scope],
                           is_admin=False)
        self._note(item, reply=text)
        return text

    def finish(self, item: WorkItem, *, failed: bool = False) -> None:
        self.journal.finish(item, failed=failed)

    def wait_idle(self, timeout_s: float) -> bool:
        return self.journal.wait_idle(timeout_s)

    def drain(self, budget_s: float) -> bool:
        return self.journal.drain(budget_s)

    def close(self) -> None:
        self.journal.close()

    # --- posting, once per work item -----------------------------------------------------------------
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
        asked afterwards what was posted: the id is all a take-over has to go by). None starts after a drain's
        deadline (:meth:`bot.journal.WorkJournal.posting`)."""
        with self.journal.posting():
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

    async def _proactive(self, ref: ConversationReference, work: Callable[[TurnContext], Awaitable[None]]) -> None:
        """Run ``work`` in a proactive turn in the referenced thread. What it raises (the Bot Connector refusing a
        post, or unreachable) comes back to the caller instead of going to the adapter's turn-error handler, which
        would post an apology and leave the worker believing the post went out."""
        assert self._adapter is not None
        failed: list[BaseException] = []

        async def callback(ctx: TurnContext) -> None:
            # Reply to the user's message (same thread), not to the synthetic continuation event.
            ctx.activity.id = ref.activity_id
            try:
                await work(ctx)
            except Exception as e:  # noqa: BLE001 - re-raised below, outside the adapter's turn
                failed.append(e)

        await self._adapter.continue_conversation(self.app_id, ref.get_continuation_activity(), callback)
        if failed:
            raise failed[0]

    async def _send(self, ref: ConversationReference, activity: Activity) -> str | None:
        """Post ``activity`` proactively in the referenced thread; returns the new message id."""
        posted: dict[str, str | None] = {}

        async def send(ctx: TurnContext) -> None:
            resp = await ctx.send_activity(activity)
            posted["id"] = resp.id if resp else None

        await self._proactive(ref, send)
        return posted.get("id")

    async def _update(self, ref: ConversationReference, message_id: str, text: str) -> None:
        async def update(ctx: TurnContext) -> None:
            activity = render.text_activity(text)
            activity.id = message_id
            await ctx.update_activity(activity)

        await self._proactive(ref, update)

    def _work_of(self, payload: dict[str, Any]) -> tuple[TeamsTurn, ConversationReference, ChatContext]:
        """A journaled activity: what the turn knew, for a worker here or in another replica."""
        raw = payload["turn"]
        turn = TeamsTurn(**{**raw, "files": tuple(TeamsFile(**f) for f in raw["files"])})
        ref = ConversationReference.model_validate(payload["ref"])
        event_id = str(payload.get("event_id") or "")
        ctx = ChatContext(platform="teams", scope=turn.scope, user=turn.user, event_id=event_id,
                          also_known_as=also_known_as(turn))
        structlog.contextvars.bind_contextvars(scope=turn.scope, user=turn.user, event_id=event_id)
        return turn, ref, ctx

    # --- answers ----------------------------------------------------------------------------------
    def _run_answer(self, item: WorkItem, payload: dict[str, Any], *, choice: bool = False) -> None:
        """Answer the turn once; ``choice``: it is a reading picked on a "which one?" card."""
        turn, ref, ctx = self._work_of(payload)
        if self._keep_posted(item, ctx, turn):  # answered before a kill: keep its record, post nothing
            return
        self._sending_lost(item, "answer_id")
        if item.notes.get("stream_sending") and not item.notes.get("stream_id"):
            # killed while the stream's first update was on its way: a stream may be open whose id no one knows
            log.warning("teams_stream_outcome_unknown")
        stream: TeamsStream | None = None
        if item.notes.get("answer"):  # decided before the kill: post that one, do not ask again
            answer = Answer.model_validate_json(item.notes["answer"])
        else:
            if turn.kind == "personal" and not item.notes.get("stream_id"):  # Teams streams in 1:1 chats only
                stream = TeamsStream(partial(self._stream_update, item, ref),
                                     started=partial(self._stream_started, item))
            if choice:
                answer = self.core.answer_choice(ctx, turn.text, show=stream)
            else:
                answer = self.core.ask(ctx, turn.text, self.core.history("teams", turn.thread_ref), show=stream)
            self._note(item, answer=answer.model_dump_json())  # the answer is noted before it leaves
        message = render.answer_activity(answer, quote_card=turn.kind == "channel")
        # the answer ends the stream it was shown in: this attempt's, or the one a killed attempt left open
        stream_id = stream.stream_id if stream is not None else item.notes.get("stream_id", "")
        if stream_id:
            try:
                message_id = self._post(item, "answer_id", ref, ending(message, stream_id))
            except aiohttp.ClientResponseError as e:  # the stream was stopped (by the user, or timed out): post it
                log.info("teams_stream_final_refused", status=e.status)
                message_id = self._post(item, "answer_id", ref, message)
        else:
            message_id = self._post(item, "answer_id", ref, message)
        if not message_id:
            log.warning("teams_answer_without_id")
            return
        self._record(item, ctx, turn, message_id, answer)
        log.info("teams_answer_posted")

    def _stream_update(self, item: WorkItem, ref: ConversationReference, update: Activity) -> str | None:
        """Send one update of the answer's stream; before the first, the intent is noted (a take-over then knows a
        stream may be open even if its id never came back)."""
        if not item.notes.get("stream_id") and not item.notes.get("stream_sending"):
            self._note(item, stream_sending="1")
        return self._on_loop(self._send(ref, update))

    def _stream_started(self, item: WorkItem, stream_id: str) -> None:
        """The stream's id, noted as soon as Teams gives it: a take-over ends this stream with the answer."""
        self._note(item, stream_id=stream_id)
        log.info("teams_stream_started")

    def _keep_posted(self, item: WorkItem, ctx: ChatContext, turn: TeamsTurn) -> bool:
        """True when the answer was posted before (a kill, or the last attempt given up): its record is made if it
        was not, so 👍/👎 and follow-ups in its thread find it."""
        posted = item.notes.get("answer_id")
        if posted and item.notes.get("answer") and not item.notes.get("recorded"):
            self._record(item, ctx, turn, posted, Answer.model_validate_json(item.notes["answer"]))
        return bool(posted)

    def _record(self, item: WorkItem, ctx: ChatContext, turn: TeamsTurn, message_id: str, answer: Answer) -> None:
        self.journal.end_answered(item, self.core.answer_record(
            ctx, message_ref=message_ref(turn.scope, message_id), thread_ref=turn.thread_ref, question=turn.text,
            answer=answer))
        item.notes["recorded"] = "1"  # for this run only: the ended item is never taken again

    def _give_up_answer(self, item: WorkItem, payload: dict[str, Any]) -> None:
        """After the last attempt: a short apology in the thread, unless the answer is known to be there (then it is
        recorded, if the attempt that posted it died first)."""
        turn, ref, ctx = self._work_of(payload)
        if not self._keep_posted(item, ctx, turn):
            self._post_once(item, "apology_id", ref, render.text_activity(APOLOGY))

    # --- quick replies, when the turn that held one died -------------------------------------------------
    def _run_reply(self, item: WorkItem, payload: dict[str, Any]) -> None:
        _, ref, ctx = self._work_of(payload)
        self._sending_lost(item, "reply_id")
        self._post_once(item, "reply_id", ref, render.text_activity(self.reply_text(item, ctx)))

    def _give_up_reply(self, item: WorkItem, payload: dict[str, Any]) -> None:
        _, ref, _ = self._work_of(payload)
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
        found: dict[str, str] = {}

        async def fetch(ctx: TurnContext) -> None:
            client = ctx.services.get(ConnectorClientBase)  # type: ignore[type-abstract]  # the SDK's key
            if not isinstance(client, TeamsConnectorClient):
                raise GraphError("Teams did not return the team's group id")
            try:
                details = await client.fetch_team_details(turn.team_id)
            except aiohttp.ClientResponseError as e:
                raise GraphError("Teams did not return the team's group id") from e
            found["id"] = details.aad_group_id or ""

        await self._proactive(ref, fetch)
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
            # the file is its author's, not the syncing member's: they (not whoever typed sync) may forget it
            owner = dataclasses.replace(ctx, user=synced_owner(f.created_by), also_known_as=())
            lines.append(self._ingest_one(item, "status_id", ref, owner, f.name, fetch, f.web_url))
        self._show(item, "status_id", ref, sync_summary_text(lines))

    def _give_up_sync(self, item: WorkItem, payload: dict[str, Any]) -> None:
        _, ref, _ = self._work_of(payload)
        self._show(item, "status_id", ref, APOLOGY)


def _payload(turn: TeamsTurn, ref: ConversationReference, event_id: str) -> dict[str, Any]:
    """What a worker here or in another replica needs of an activity: the parsed turn, where to post, its id."""
    ref_json = ref.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {"turn": dataclasses.asdict(turn), "ref": ref_json, "event_id": event_id}


def _attachment_download(url: str, max_bytes: int, *, timeout_s: float, trusted_hosts: frozenset[str]) -> bytes:
    """A file sent in a chat: its download URL is pre-authenticated, so no token goes with it."""
    return download(url, max_bytes=max_bytes, timeout_s=timeout_s, trusted_hosts=trusted_hosts)


def _graph_download(client: GraphClient, f: DriveFile, max_bytes: int, *, timeout_s: float) -> bytes:
    """A channel file's bytes; Graph refusing the bot a token is a failed download like any other."""
    try:
        return client.download(f, max_bytes=max_bytes, timeout_s=timeout_s)
    except GraphError as e:
        raise DownloadError("Microsoft Graph refused the download") from e

