"""Questions in Slack: an @mention, a DM, a follow-up in an answered thread, or a reading picked under a
"which one?" answer (a mention or DM that starts with a command word, ``@citebot docs``, runs that command).
Each is journaled before the ack (kinds ``slack.answer``, ``slack.choice``), shown as
started at once ("Searching N PDFs…" as the thread's assistant status, else 👀), and answered once in its thread
by a worker: streamed where the answer comes from the LLM (:mod:`bot.slack.stream`), then recorded for 👍/👎.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import structlog
from slack_bolt.context.ack import Ack
from slack_bolt.context.respond import Respond
from slack_bolt.context.set_status import SetStatus
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.commands import is_core_verb, mention_command, run_command
from bot.core import ChatContext, ChatCore, ClaimKey
from bot.journal import Kind, NotRecorded, QueueFull
from bot.slack.events import ChoiceClick, Message, parse_choice_click, parse_message
from bot.slack.items import ItemPosts, is_admin
from bot.slack.render import plain, render_answer
from bot.slack.scopes import MembershipCache, dm_search_scopes
from bot.slack.stream import AnswerStream
from bot.slack.workers import SlackWorkers
from bot.texts import APOLOGY, SLACK_HELP_TEXT, searching_text
from connectors.state_api import WorkItem
from pipelines.models import Answer, slack_scope

log = structlog.get_logger(__name__)

WORKING_REACTION = "eyes"


class Answers:
    """The question listeners and the workers that answer them."""

    def __init__(self, *, core: ChatCore, client: WebClient, members: MembershipCache, work: SlackWorkers,
                 posts: ItemPosts) -> None:
        self.core, self.client, self.members, self.work, self.posts = core, client, members, work, posts
        self._working: dict[str, Future[str]] = {}  # the 👀 or status this process showed, per answer item

    def kinds(self) -> list[Kind]:
        return [
            Kind("slack.answer", self.run_answer, self.give_up_answer),
            Kind("slack.choice", self.run_choice, self.give_up_choice),
        ]

    # --- listeners (the request's thread: cheap, then the ack) ------------------------------------
    def on_mention(self, body: dict[str, Any]) -> None:
        msg = parse_message(body)
        if msg is not None:
            self.start(msg, body)

    def start(self, msg: Message, body: dict[str, Any]) -> None:
        # app_mention and message events for one message share this key: one answer per message.
        key = str(ClaimKey.slack_answer(msg.team, msg.channel, msg.ts))
        working: Future[str] | None = None
        if msg.question:  # the asker sees work start within a moment, never a silent wait
            working = self.work.ui.submit(self._show_working, msg)
            self._working[key] = working
        try:
            accepted = self.work.accept(key, "slack.answer", {"body": body}, user=msg.user, team=msg.team)
        except NotRecorded:  # refused: Slack re-sends it, and that delivery shows its own 👀
            self._working.pop(key, None)
            self.work.ui.submit(self._take_back, working, msg)
            raise
        except QueueFull:  # this person's earlier questions wait already: say so, never a silent drop
            self._working.pop(key, None)
            self.work.ui.submit(self._take_back, working, msg)
            self.work.ui.submit(self.posts.say_queue_full, msg.channel, msg.user, msg.reply_thread_ts)
            return
        if not accepted:
            self._working.pop(key, None)
            self.work.ui.submit(self._take_back, working, msg)

    def on_choice_click(self, ack: Ack, body: dict[str, Any]) -> None:
        """A reading's button under a "which one?" answer: journaled as a mention is (before the ack, so a killed
        bot does not lose it), answered in that answer's thread with the clicker's channel as scope; under a private
        answer (a ``/citebot`` question's), privately: nothing shows in the channel."""
        click = parse_choice_click(body)
        if click is not None:
            # Slack does not re-send interactions; a double click is two clicks, each its own action_ts
            key = ClaimKey.slack_choice(click.team, click.channel, click.user, click.action_ts)
            try:
                if self.work.accept(key, "slack.choice", {"body": body}, user=click.user,
                                    team=click.team) and not click.ephemeral:
                    self.work.ui.submit(self.set_status, click.channel, click.thread_ts, searching_text(0))
            except QueueFull:
                self.work.ui.submit(self.posts.say_queue_full, click.channel, click.user, click.thread_ts)
        ack()

    # --- "working on it" (the UI pool) ------------------------------------------------------------
    def _take_back(self, working: Future[str] | None, msg: Message) -> None:
        """The message was answered before (e.g. before a restart): take back the status or 👀 this delivery
        showed."""
        shown = working.result(timeout=60) if working is not None else ""
        if shown == "reaction":
            self._react(msg.channel, msg.ts, add=False)
        elif shown == "status":
            self.set_status(msg.channel, msg.reply_thread_ts, "")

    def search_scopes(self, msg: Message) -> tuple[str, ...]:
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
            n_docs = self.core.document_count(self.search_scopes(msg) or (msg.scope,))
        except Exception as e:  # noqa: BLE001 - the count is cosmetic; the answer reports real failures
            log.info("status_count_failed", error=type(e).__name__)
            n_docs = 0
        if self.set_status(msg.channel, msg.reply_thread_ts, searching_text(n_docs)):
            return "status"
        self._react(msg.channel, msg.ts, add=True)
        return "reaction"

    def set_status(self, channel: str, thread_ts: str, status: str) -> bool:
        """The thread's "Citebot is …" line (cleared by the next bot message, or by ``status=""``); False where
        Slack refuses it (an older workspace, a missing scope), so the caller can fall back to 👀.

        Bolt's :class:`SetStatus` makes the call. Bolt hands it to listeners as ``set_status``; it is built here
        instead because the status goes up from the UI pool after the ack, and in any thread (a channel's too),
        not only in an assistant thread's listener."""
        try:
            SetStatus(self.client, channel_id=channel, thread_ts=thread_ts)(status)
        except SlackApiError as e:  # Slack's error code ("missing_scope"...) says why; it holds no secret
            log.info("set_status_refused", error=str(e.response.get("error") or "SlackApiError"))
            return False
        except (SlackClientError, OSError) as e:
            log.info("set_status_refused", error=type(e).__name__)
            return False
        return True

    def _react(self, channel: str, ts: str, *, add: bool) -> None:
        """The 👀 that says work started (removed when done); cosmetic, so failures are only logged."""
        try:
            if add:
                self.client.reactions_add(channel=channel, timestamp=ts, name=WORKING_REACTION)
            else:
                self.client.reactions_remove(channel=channel, timestamp=ts, name=WORKING_REACTION)
        except Exception as e:  # noqa: BLE001 - cosmetic: never let the 👀 fail an answer
            log.info("reaction_failed", add=add, error=type(e).__name__)

    # --- the work (a journal worker) --------------------------------------------------------------
    def run_answer(self, item: WorkItem, payload: dict[str, Any]) -> None:
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
        posts = self.posts
        question = msg.question
        where = {"channel": msg.channel, "thread_ts": msg.reply_thread_ts}
        command = mention_command(question) if not choice else None
        if not question or (command is not None and command[0] == "help"):
            posts.post_once(item, "help_ts", **where, text=plain(SLACK_HELP_TEXT))
            return
        verb, arg = command or ("", "")
        if is_core_verb(verb):  # `@citebot docs`: as `/citebot docs`, in the thread
            admin = verb == "forget" and is_admin(self.client, msg.user)
            text = run_command(self.core, ChatContext("slack", msg.scope, msg.user), verb, arg,
                               scopes=self.search_scopes(msg) or (msg.scope,), is_admin=admin)
            posts.post_once(item, "command_ts", **where, text=plain(text))
            return
        if self._keep_posted(item, msg):  # answered before a kill: keep its record, post nothing
            return
        ctx = self._context(msg)
        history = self.core.history("slack", msg.thread_ref) if msg.in_thread and not choice else []
        # an LLM answer streams into the thread (bot/slack/stream.py); a take-over finishes the message it finds
        earlier = posts.posted(item, "stream_ts", **where) or posts.stream_started(item, **where)
        stream = AnswerStream(self.client, **where, team=msg.team, user=msg.user, resume_ts=earlier,
                              started=lambda ts: posts.note(item, stream_ts=ts),
                              starting=lambda: posts.stream_intent(item),
                              metadata=posts.metadata(item, "stream_ts"))
        show = None if earlier else stream
        if choice:
            answer = self.core.answer_choice(ctx, question, show=show)
        else:
            answer = self.core.ask(ctx, question, history, show=show)
        text, blocks = render_answer(answer)
        posts.note(item, answer=answer.model_dump_json())  # the post is noted before it leaves
        ts = stream.finish(text=text, blocks=blocks, metadata=posts.metadata(item, "answer_ts"))
        if ts:
            posts.note(item, answer_ts=ts)
        else:
            ts = posts.post(item, "answer_ts", **where, text=text, blocks=blocks, unfurl_links=False,
                            unfurl_media=False)
        self._record(item, ctx, msg, ts, answer)

    def _context(self, msg: Message) -> ChatContext:
        return ChatContext("slack", msg.scope, msg.user, search_scopes=self.search_scopes(msg), event_id=msg.event_id)

    def _keep_posted(self, item: WorkItem, msg: Message) -> bool:
        """True when the item's answer was posted before (a kill, or every attempt died): its record is made if
        the attempt that posted it died first, so 👍/👎 and follow-ups in the thread find it."""
        posted = self.posts.posted(item, "answer_ts", msg.channel, msg.reply_thread_ts)
        if posted and item.notes.get("answer") and not item.notes.get("recorded"):
            self._record(item, self._context(msg), msg, posted, Answer.model_validate_json(item.notes["answer"]))
        return bool(posted)

    def _record(self, item: WorkItem, ctx: ChatContext, msg: Message, ts: str, answer: Answer) -> None:
        self.posts.record(item, self.core.answer_record(
            ctx, message_ref=f"{msg.channel}:{ts}", thread_ref=msg.thread_ref, question=msg.question, answer=answer
        ))

    def give_up_answer(self, item: WorkItem, payload: dict[str, Any]) -> None:
        """After the last attempt: a short apology in the thread (it also replaces the "Searching…" status); or, when
        the answer was posted after all, its record."""
        msg = parse_message(payload["body"])
        if msg is None or self._keep_posted(item, msg):
            return
        self.posts.post_once(item, "apology_ts", channel=msg.channel, thread_ts=msg.reply_thread_ts, text=APOLOGY)
        self._react(msg.channel, msg.ts, add=False)

    def run_choice(self, item: WorkItem, payload: dict[str, Any]) -> None:
        click = parse_choice_click(payload["body"])
        if click is not None:
            structlog.contextvars.bind_contextvars(user=click.user)
            if click.ephemeral:
                self._answer_privately(item, click)
            else:
                self._answer(item, click.as_message(), choice=True)

    def _answer_privately(self, item: WorkItem, click: ChoiceClick) -> None:
        """A reading picked under a private "which one?" answer: answered to the clicker alone, as the
        ``/citebot`` question was (never in the channel, where the question and its answer would show), and
        recorded for 👍/👎 under an id its buttons carry (an ephemeral message has no ts to key it on)."""
        msg = click.as_message()
        ctx = ChatContext("slack", msg.scope, msg.user, search_scopes=self.search_scopes(msg))
        answer_ref = "choice-" + item.key.rsplit(":", 1)[-1]
        if not item.notes.get("responded"):
            answer = self.core.answer_choice(ctx, msg.question)
            text, blocks = render_answer(answer, answer_ref=answer_ref)
            self.posts.note(item, answer=answer.model_dump_json())  # noted before it leaves
            self._respond_privately(item, click, text, blocks=blocks)
        elif item.notes.get("answer") and not item.notes.get("recorded"):
            answer = Answer.model_validate_json(item.notes["answer"])
        else:
            return
        ref = f"{click.channel}:{answer_ref}"
        self.posts.record(item, self.core.answer_record(ctx, message_ref=ref, thread_ref=ref, question=msg.question,
                                                        answer=answer))

    def _respond_privately(self, item: WorkItem, click: ChoiceClick, text: str, **kw: Any) -> None:
        """To the clicker alone, once: at the click's ``response_url``, else ``chat.postEphemeral``."""
        if item.notes.get("responded"):
            return
        if click.response_url:
            Respond(response_url=click.response_url)(text, response_type="ephemeral", replace_original=False,
                                                       unfurl_links=False, unfurl_media=False, **kw)
        else:
            self.client.chat_postEphemeral(channel=click.channel, user=click.user, text=text, **kw)
        self.posts.note(item, responded="1")

    def give_up_choice(self, item: WorkItem, payload: dict[str, Any]) -> None:
        click = parse_choice_click(payload["body"])
        if click is not None and click.ephemeral:
            self._respond_privately(item, click, APOLOGY)
            return
        if click is None or self._keep_posted(item, click.as_message()):
            return
        self.posts.post_once(item, "apology_ts", channel=click.channel, thread_ts=click.thread_ts, text=APOLOGY)
