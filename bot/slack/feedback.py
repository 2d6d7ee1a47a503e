"""Feedback on an answer: a 👍/👎 reaction on it, its 👍/👎 buttons, and the "What was wrong?" form a 👎 opens.
Each vote is journaled before the ack (kind ``slack.vote``) and recorded by a worker; the latest vote wins."""

from __future__ import annotations

from typing import Any

import structlog
from slack_bolt.context.ack import Ack
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.core import ChatCore, ClaimKey
from bot.journal import Kind
from bot.slack.events import FeedbackClick, parse_feedback_click, parse_feedback_form, parse_reaction
from bot.slack.items import event_key, unique
from bot.slack.render import FEEDBACK_ACTION, feedback_modal
from bot.slack.workers import SlackWorkers
from connectors.state_api import WorkItem

log = structlog.get_logger(__name__)


class Feedback:
    """The feedback listeners and the worker that records votes."""

    def __init__(self, *, core: ChatCore, client: WebClient, work: SlackWorkers) -> None:
        self.core, self.client, self.work = core, client, work

    def kinds(self) -> list[Kind]:
        return [Kind("slack.vote", self.run_vote)]

    def on_reaction(self, body: dict[str, Any]) -> None:
        reaction = parse_reaction(body)
        if reaction is None:
            return
        vote = {"message_ref": reaction.message_ref, "user": reaction.user, "polarity": reaction.polarity,
                "added": reaction.added}
        self.work.accept(event_key(reaction.event_id), "slack.vote", vote)

    def on_click(self, ack: Ack, body: dict[str, Any]) -> None:
        """👍/👎 under an answer: recorded at once (the latest vote wins); 👎 also opens "What was wrong?"."""
        click = parse_feedback_click(body, FEEDBACK_ACTION)
        if click is not None:
            # Slack does not re-send interactions: each click is its own item
            vote = {"message_ref": click.message_ref, "user": click.user, "polarity": click.polarity, "added": True}
            self.work.accept(ClaimKey.slack_vote(unique()), "slack.vote", vote)
        ack()
        if click is not None and click.polarity == "down" and click.trigger_id:
            self.work.ui.submit(self._open_modal, click)  # the trigger id is only good for 3 s

    def _open_modal(self, click: FeedbackClick) -> None:
        try:
            self.client.views_open(trigger_id=click.trigger_id, view=feedback_modal(click.message_ref))
        except (SlackApiError, SlackClientError, OSError) as e:  # the 👎 itself is recorded already
            log.info("feedback_modal_failed", error=type(e).__name__)

    def on_form(self, ack: Ack, body: dict[str, Any]) -> None:
        """The 👎 form was sent: store what was wrong with the answer, then close it."""
        form = parse_feedback_form(body)
        if form is not None:
            self.work.accept(ClaimKey.slack_vote(unique()), "slack.vote", {
                "message_ref": form.message_ref, "user": form.user, "polarity": "down", "added": True,
                "comment": form.comment, "choice": form.choice})
        ack()

    def run_vote(self, item: WorkItem, vote: dict[str, Any]) -> None:
        if vote.get("added", True):
            self.core.feedback("slack", message_ref=vote["message_ref"], user=vote["user"], polarity=vote["polarity"],
                               comment=vote.get("comment") or "", choice=vote.get("choice") or "")
        else:
            self.core.retract_feedback("slack", message_ref=vote["message_ref"], user=vote["user"],
                                       polarity=vote["polarity"])
