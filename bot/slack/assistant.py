"""Citebot's assistant pane (Slack's "Agents & AI Apps"): a person opens it, or switches the channel beside it.

Bolt's :class:`slack_bolt.Assistant` middleware routes ``assistant_thread_started`` and
``assistant_thread_context_changed`` to :meth:`AssistantPane.on_thread`. As every Citebot listener, that listener
only journals the event (kind ``slack.assistant``) before the ack; a worker then remembers which channel the
person is viewing, greets them once and suggests questions from that channel's PDFs, with Bolt's
:class:`SetSuggestedPrompts`. What is deliberately not Bolt's:

* **The thread context store.** Bolt's default store (``AssistantThreadContextStore``) keeps the viewed channel in
  the metadata of the bot's first reply: a ``conversations.replies`` and a ``chat.update`` on every change, and a
  ``conversations.replies`` on every look-up, so Web API calls inside the listener, before the ack. Citebot keeps
  it in the chat state (``ChatCore.save_thread_context``, written by the worker; read with one local look-up by
  each question's search scopes), where every replica finds it and a restart keeps it.
* **``@assistant.user_message``.** Bolt's matcher is "a person's DM message in a thread": any DM thread, not only
  the pane's. A question in the pane takes the same path as any DM (the ``message`` listener,
  :mod:`bot.slack.answers`): journaled before the ack, status from the UI pool, streamed by the worker. Its
  search scopes come from the saved context (:meth:`bot.slack.answers.Answers.search_scopes`).
* **``say`` / ``set_status`` / ``say_stream`` from the listener's arguments.** They are bound to the request;
  Citebot's work runs after the ack on a worker (and a take-over's on another replica), which posts once per
  work item (:mod:`bot.slack.items`) and streams with :mod:`bot.slack.stream` (resuming a stream a killed worker
  began, falling back to post-and-update where Slack refuses to stream).
"""

from __future__ import annotations

from typing import Any

import structlog
from slack_bolt import Assistant
from slack_bolt.context.set_suggested_prompts import SetSuggestedPrompts
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.core import ChatCore
from bot.journal import Kind
from bot.slack.events import parse_assistant_thread
from bot.slack.items import ItemPosts, event_key
from bot.slack.scopes import MembershipCache
from bot.slack.workers import SlackWorkers
from bot.texts import ASSISTANT_GREETING, ASSISTANT_GREETING_NO_CHANNEL, SUGGESTED_PROMPTS_TITLE
from connectors.state_api import WorkItem
from pipelines.models import slack_scope

log = structlog.get_logger(__name__)

PROMPT_TITLE_CHARS = 75  # Slack's limit on a suggested prompt's title


class AssistantPane:
    """The assistant pane's listener (inside Bolt's :class:`Assistant`) and its worker."""

    def __init__(self, *, core: ChatCore, client: WebClient, members: MembershipCache, work: SlackWorkers,
                 posts: ItemPosts) -> None:
        self.core, self.client, self.members, self.work, self.posts = core, client, members, work, posts

    def kinds(self) -> list[Kind]:
        return [Kind("slack.assistant", self.run)]

    def middleware(self) -> Assistant:
        """Bolt's :class:`Assistant`, routing the pane's thread events to :meth:`on_thread`."""
        assistant = Assistant()
        assistant.thread_started(self.on_thread)
        # without a listener of its own here, Bolt adds its default one, which saves the context in a bot message
        assistant.thread_context_changed(self.on_thread)
        return assistant

    def on_thread(self, body: dict[str, Any]) -> None:
        """A person opened Citebot's assistant pane (or switched the channel beside it): remember which
        channel they are viewing, greet them once and suggest questions from that channel's PDFs."""
        thread = parse_assistant_thread(body)
        if thread is not None:
            self.work.accept(event_key(thread.event_id), "slack.assistant", {"body": body})

    def run(self, item: WorkItem, payload: dict[str, Any]) -> None:
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
            self.posts.post_once(item, "greeting_ts", channel=thread.channel, thread_ts=thread.thread_ts,
                                 text=greeting)
        scopes = [slack_scope(thread.team, thread.channel)]
        if viewing:  # section titles of a channel are shown only to its members
            scopes.insert(0, slack_scope(thread.team, thread.context_channel))
        questions = self.core.suggested_questions(scopes)
        if not questions:
            return
        suggest = SetSuggestedPrompts(self.client, channel_id=thread.channel, thread_ts=thread.thread_ts)
        try:
            suggest([{"title": title[:PROMPT_TITLE_CHARS], "message": question} for title, question in questions],
                    title=SUGGESTED_PROMPTS_TITLE)
        except (SlackApiError, SlackClientError) as e:  # cosmetic: the pane works without prompts
            log.info("suggested_prompts_failed", error=type(e).__name__)
