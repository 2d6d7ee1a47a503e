"""The Teams activity handler: activities in, :class:`bot.core.ChatCore` calls, Teams messages out.

Every turn acknowledges at once: help and the quick commands are answered in the turn, on a journal key taken by
the turn (a re-delivery is answered once; a reply whose process died first is posted by a worker after the
restart); answers, uploads and ``sync`` are written to the work journal before the HTTP 200 leaves
(:mod:`bot.teams.work` does them from there and posts proactively), and the turn shows a typing indicator.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import structlog
from microsoft_agents.activity import ChannelAccount, InvokeResponse, MessageReaction, TurnContextProtocol
from microsoft_agents.hosting.core import ActivityHandler, ChannelServiceAdapter

from bot.commands import is_core_verb
from bot.core import MAX_CHOICE_CHARS, ChatContext, ChatCore, ClaimKey
from bot.journal import QueueFull
from bot.teams import render
from bot.teams.activity import (
    EMULATOR_CHANNEL,
    TEAMS_CHANNEL,
    TeamsTurn,
    also_known_as,
    choice_of,
    message_ref,
    parse_turn,
    refusal,
)
from bot.teams.feedback import FETCH_TASK, SUBMIT_ACTION, parse_vote, task_response
from bot.teams.graph import graph_configured
from bot.teams.work import ANSWER, CHOICE, INGEST, SYNC, TeamsWork
from bot.texts import APOLOGY, GRAPH_NOT_CONFIGURED, QUEUE_FULL, SYNC_ONLY_IN_CHANNELS, TEAMS_HELP_TEXT
from connectors.log import error_fields
from connectors.settings import Settings

log = structlog.get_logger(__name__)
T = TypeVar("T")

COMMANDS = ("help", "docs", "stats", "forget", "sync")


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
        self.work = TeamsWork(core, settings, workers=workers if workers is not None else settings.teams_workers)

    # --- lifecycle --------------------------------------------------------------------------------
    def bind(self, adapter: ChannelServiceAdapter, loop: asyncio.AbstractEventLoop) -> None:
        """Where journaled work posts (the adapter's ``continue_conversation`` on ``loop``); the first call starts
        the workers, which take over at once whatever a killed bot left in the journal."""
        self.work.bind(adapter, loop)

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

    # --- turns ------------------------------------------------------------------------------------
    async def on_turn(self, turn_context: TurnContextProtocol) -> None:
        activity = turn_context.activity
        reason = refusal(activity, channels=self.channels, home_tenant=self.home_tenant)
        if reason:  # not from Teams, another tenant, or channelData naming a place the activity is not in
            log.warning("teams_activity_refused", reason=reason, channel=str(activity.channel_id or "")[:40],
                        activity_type=activity.type)
            return
        adapter = turn_context.adapter
        if not self.work.bound_to(asyncio.get_running_loop()) and isinstance(adapter, ChannelServiceAdapter):
            # no server bound the bot (a test's adapter, a loop per turn): work posts through this turn's
            self.bind(adapter, asyncio.get_running_loop())
        try:
            await super().on_turn(turn_context)
        except Exception as e:  # noqa: BLE001 - a failed turn apologises; the bot keeps serving
            log.error("teams_turn_failed", activity_type=turn_context.activity.type, **error_fields(e))
            try:
                await turn_context.send_activity(render.text_activity(APOLOGY))
            except Exception as apology_error:  # noqa: BLE001
                log.warning("teams_apology_failed", **error_fields(apology_error))

    async def on_message_activity(self, turn_context: TurnContextProtocol) -> None:
        activity = turn_context.activity
        turn = parse_turn(activity)
        choice = choice_of(activity.value, key=render.CHOICE_DATA, max_chars=MAX_CHOICE_CHARS)
        if choice is not None:  # a reading picked on a "which one?" card: answered in this conversation
            turn = dataclasses.replace(turn, text=choice, mentioned=True, files=())
            structlog.contextvars.bind_contextvars(platform="teams", scope=turn.scope, user=turn.user)
            try:
                await self._journal(turn_context, turn, CHOICE)
            finally:
                structlog.contextvars.unbind_contextvars("platform", "scope", "user")
            return
        if turn.kind == "channel" and not turn.mentioned:
            return  # channel messages are for people unless they mention the bot
        ctx = ChatContext(platform="teams", scope=turn.scope, user=turn.user, event_id=activity.id or "",
                          also_known_as=also_known_as(turn))
        structlog.contextvars.bind_contextvars(platform="teams", scope=turn.scope, user=turn.user)
        try:
            await self._dispatch(turn_context, turn, ctx)
        finally:
            structlog.contextvars.unbind_contextvars("platform", "scope", "user")

    async def _reply(self, turn_context: TurnContextProtocol, turn: TeamsTurn, ctx: ChatContext, *, text: str = "",
                     command: str = "", arg: str = "") -> None:
        """A quick reply (``text``, or what ``command`` says), sent in the turn under the activity's journal key."""
        activity = turn_context.activity
        key = ClaimKey.teams_message(turn.conversation_id, activity.id or uuid.uuid4().hex)
        item = await self._run(self.work.hold, str(key), turn, activity.get_conversation_reference(),
                               activity.id or "", text=text, command=command, arg=arg)
        if item is None:
            log.info("teams_duplicate_ignored", event_id=activity.id or "")
            return
        sent = False
        try:
            reply = await self._run(self.work.reply_text, item, ctx)
            await turn_context.send_activity(render.text_activity(reply))
            sent = True
        finally:  # a failed reply is not retried: the turn's error handler apologises instead
            await self._run(self.work.finish, item, failed=not sent)

    async def _dispatch(self, turn_context: TurnContextProtocol, turn: TeamsTurn, ctx: ChatContext) -> None:
        word, _, rest = turn.text.partition(" ")
        command = word.lower().strip("!/.") if word.lower().strip("!/.") in COMMANDS else ""
        if not turn.files and (not turn.text or command == "help"):
            await self._reply(turn_context, turn, ctx, text=TEAMS_HELP_TEXT)
            return
        if is_core_verb(command) and (command != "forget" or rest.strip()):
            await self._reply(turn_context, turn, ctx, command=command, arg=rest.strip())
            return
        if command == "sync" and turn.kind != "channel":
            await self._reply(turn_context, turn, ctx, text=SYNC_ONLY_IN_CHANNELS)
            return
        if command == "sync" and not graph_configured(self.settings):
            await self._reply(turn_context, turn, ctx, text=GRAPH_NOT_CONFIGURED)
            return

        await self._journal(turn_context, turn, INGEST if turn.files else SYNC if command == "sync" else ANSWER)

    async def _journal(self, turn_context: TurnContextProtocol, turn: TeamsTurn, kind: str) -> None:
        """Slow work: journaled before the 200 leaves, done by the journal's workers, delivered proactively."""
        activity = turn_context.activity
        key = ClaimKey.teams_message(turn.conversation_id, activity.id or uuid.uuid4().hex)
        ref = activity.get_conversation_reference()
        try:
            accepted = await self._run(self.work.accept, str(key), kind, turn, ref, activity.id or "")
        except QueueFull:  # this person's earlier work waits already: say so, never drop it silently
            await turn_context.send_activity(render.text_activity(
                QUEUE_FULL.format(n=self.settings.max_queued_per_user)))
            return
        if not accepted:
            log.info("teams_duplicate_ignored", event_id=activity.id or "")
            return
        try:
            await turn_context.send_activity(render.typing_activity())
        except Exception:  # noqa: BLE001 - a lost typing indicator must not lose the answer
            log.warning("teams_typing_failed")

    # --- feedback ---------------------------------------------------------------------------------
    async def on_reactions_added(
        self, message_reactions: list[MessageReaction], turn_context: TurnContextProtocol
    ) -> None:
        await self._reactions(message_reactions, turn_context, added=True)

    async def on_reactions_removed(
        self, message_reactions: list[MessageReaction], turn_context: TurnContextProtocol
    ) -> None:
        await self._reactions(message_reactions, turn_context, added=False)

    async def _reactions(
        self, reactions: list[MessageReaction], turn_context: TurnContextProtocol, *, added: bool
    ) -> None:
        activity = turn_context.activity
        if not activity.reply_to_id or not any((r.type or "").lower() == "like" for r in reactions):
            return
        turn = parse_turn(activity)
        ref = message_ref(turn.scope, activity.reply_to_id)
        if added:
            await self._run(self.core.feedback, "teams", message_ref=ref, user=turn.user, polarity="up")
        else:
            await self._run(self.core.retract_feedback, "teams", message_ref=ref, user=turn.user, polarity="up")

    async def on_invoke_activity(self, turn_context: TurnContextProtocol) -> InvokeResponse | None:
        """👍/👎 under an answer (:mod:`bot.teams.feedback`): a click (``message/fetchTask``) is recorded at once and
        answered with the 👎 form or a thank-you; the sent form (``message/submitAction``) records what was wrong.
        Teams shows an error unless a feedback invoke gets a 200, even for a message the bot does not know."""
        activity = turn_context.activity
        if activity.name not in (FETCH_TASK, SUBMIT_ACTION):
            return await super().on_invoke_activity(turn_context)
        vote = parse_vote(activity.value)
        if vote is None or not activity.reply_to_id:
            return InvokeResponse(status=200)
        turn = parse_turn(activity)
        linked = await self._run(
            self.core.feedback,
            "teams",
            message_ref=message_ref(turn.scope, activity.reply_to_id),
            user=turn.user,
            polarity=vote.polarity,
            comment=vote.comment,
            choice=vote.choice,
        )
        if not linked:
            log.info("teams_feedback_unlinked", event_id=activity.id or "")
        if activity.name == FETCH_TASK:
            return InvokeResponse(status=200, body=task_response(vote))
        return InvokeResponse(status=200)

    # --- install ----------------------------------------------------------------------------------
    async def on_members_added_activity(
        self, members_added: list[ChannelAccount], turn_context: TurnContextProtocol
    ) -> None:
        bot_id = turn_context.activity.recipient.id if turn_context.activity.recipient else None
        if any(m.id == bot_id for m in members_added):
            await turn_context.send_activity(render.text_activity(TEAMS_HELP_TEXT))
