"""``/citebot``: ``help`` and a bare ``forget`` answered in the ack; the other verbs (``bot/commands.py``) and a
question (answered privately, with citations and 👍/👎) journaled before the ack (kind ``slack.command``) and
answered at the command's ``response_url`` once."""

from __future__ import annotations

from typing import Any

import structlog
from slack_bolt.context.ack import Ack
from slack_bolt.context.respond import Respond
from slack_sdk import WebClient

from bot.commands import is_core_verb, run_command
from bot.core import ChatContext, ChatCore, ClaimKey
from bot.journal import Kind, NotRecorded, QueueFull
from bot.slack.events import Command, parse_command
from bot.slack.items import ItemPosts, is_admin, unique
from bot.slack.render import plain, render_answer
from bot.slack.scopes import MembershipCache, dm_search_scopes
from bot.slack.workers import SlackWorkers
from bot.texts import APOLOGY, NOT_RECORDED, QUEUE_FULL, SLACK_FORGET_USAGE, SLACK_HELP_TEXT, searching_text
from connectors.state_api import WorkItem
from pipelines.models import Answer

log = structlog.get_logger(__name__)


class SlashCommand:
    """The ``/citebot`` listener and the worker that runs a command."""

    def __init__(self, *, core: ChatCore, client: WebClient, members: MembershipCache, work: SlackWorkers,
                 posts: ItemPosts) -> None:
        self.core, self.client, self.members, self.work, self.posts = core, client, members, work, posts

    def kinds(self) -> list[Kind]:
        return [Kind("slack.command", self.run, self.give_up)]

    def on_command(self, ack: Ack, body: dict[str, Any]) -> None:
        cmd = parse_command(body)
        if cmd.verb == "help":
            ack(text=plain(SLACK_HELP_TEXT))
            return
        if cmd.verb == "forget" and not cmd.arg:
            ack(text=SLACK_FORGET_USAGE)
            return
        key = ClaimKey.slack_command(unique())  # Slack never re-sends a slash command
        try:
            self.work.accept(key, "slack.command", {"body": body}, user=cmd.user, team=cmd.team)
        except NotRecorded:  # not journaled, and Slack will not re-send it: say so rather than "Searching…"
            ack(text=NOT_RECORDED)
            return
        except QueueFull:
            ack(text=QUEUE_FULL.format(n=self.core.settings.max_queued_per_user))
            return
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
        self.posts.note(item, responded="1")

    def _scopes(self, cmd: Command) -> tuple[str, ...]:
        """What a command may see: the channel's PDFs; in a DM, the DM's plus those of the asker's channels."""
        if cmd.is_dm:
            return tuple(dm_search_scopes(self.members, team=cmd.team, dm_channel=cmd.channel, user=cmd.user))
        return (cmd.scope,)

    def run(self, item: WorkItem, payload: dict[str, Any]) -> None:
        cmd = parse_command(payload["body"])
        verb = cmd.verb
        if not is_core_verb(verb):
            self._private_answer(item, payload, cmd)
            return
        ctx = ChatContext("slack", cmd.scope, cmd.user)
        admin = verb == "forget" and is_admin(self.client, cmd.user)
        text = run_command(self.core, ctx, verb, cmd.arg, scopes=self._scopes(cmd), is_admin=admin)
        self._respond(item, payload, plain(text))

    def _private_answer(self, item: WorkItem, payload: dict[str, Any], cmd: Command) -> None:
        """The answer only the asker sees (ephemeral, through the command's ``response_url``), with the same
        citations and 👍/👎 as a thread answer. An ephemeral message has no ts Citebot could key feedback on, so
        the answer is recorded under an id derived from the work item, which its buttons carry; a take-over uses
        the same id, and records an answer that left just before a kill instead of answering again."""
        ctx = ChatContext("slack", cmd.scope, cmd.user, search_scopes=self._scopes(cmd) if cmd.is_dm else ())
        answer_ref = "cmd-" + item.key.rsplit(":", 1)[-1]
        if not item.notes.get("responded"):
            answer = self.core.ask(ctx, cmd.text, [])
            text, blocks = render_answer(answer, answer_ref=answer_ref)
            self.posts.note(item, answer=answer.model_dump_json())  # noted before it leaves, as a thread answer is
            self._respond(item, payload, text, blocks=blocks, response_type="ephemeral", replace_original=True,
                          unfurl_links=False, unfurl_media=False)
        elif item.notes.get("answer") and not item.notes.get("recorded"):
            answer = Answer.model_validate_json(item.notes["answer"])
        else:
            return
        ref = f"{cmd.channel}:{answer_ref}"
        self.posts.record(item, self.core.answer_record(ctx, message_ref=ref, thread_ref=ref, question=cmd.text,
                                                        answer=answer))

    def give_up(self, item: WorkItem, payload: dict[str, Any]) -> None:
        """After the last attempt: an apology at the ``response_url`` (replacing a question's "Searching…")."""
        if is_core_verb(parse_command(payload["body"]).verb):
            self._respond(item, payload, APOLOGY)
        else:
            self._respond(item, payload, APOLOGY, response_type="ephemeral", replace_original=True)
