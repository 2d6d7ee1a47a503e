"""An LLM answer shown in its thread while the model writes it.

:class:`AnswerStream` is the ``show`` of :meth:`bot.core.ChatCore.ask`: it gets the answer's checked sentences
(:mod:`pipelines.streaming`) and shows them with Slack's chat streaming methods, ``chat.startStream`` with the
first, ``chat.appendStream`` with each next one. Where Slack refuses to stream (an older workspace, a missing
scope, a channel type it does not stream into), the first sentence is posted (``chat.postMessage``) and the message
edited (``chat.update``) as sentences come. :meth:`AnswerStream.finish` ends the stream (``chat.stopStream``) and
puts the answer as the non-streaming path posts it in its place (``chat.update``: the same text, citation blocks,
note and feedback buttons). An extractive answer calls ``show`` never: nothing is streamed and the answer is posted
at once, as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import structlog
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.slack.render import plain

log = structlog.get_logger(__name__)

_MARKDOWN = re.compile(r"([\\`*_~\[\]()<>#|>])")


def markdown(text: str) -> str:
    """``text`` shown as written in ``markdown_text``: no emphasis, links or headings made of it."""
    return _MARKDOWN.sub(r"\\\1", text)


class AnswerStream:
    """One answer's stream in one thread. ``started(ts)`` is told the message's ts as soon as there is one (the
    work journal notes it, so a take-over finishes this message instead of leaving it half written);
    ``metadata`` goes on a message posted where streaming is refused, for the same reason. ``resume_ts``: a message
    an earlier attempt started, finished by :meth:`finish`. ``starting()`` is called just before ``chat.startStream``
    (the journal notes the intent, see :meth:`bot.slack.items.ItemPosts.stream_started`)."""

    def __init__(
        self,
        client: WebClient,
        *,
        channel: str,
        thread_ts: str,
        team: str,
        user: str,
        started: Callable[[str], None],
        metadata: dict[str, Any],
        resume_ts: str = "",
        starting: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self.channel, self.thread_ts, self.team, self.user = channel, thread_ts, team, user
        self._started = started
        self._starting = starting
        self._metadata = metadata
        self.ts = resume_ts
        self.streaming = bool(resume_ts)  # an earlier attempt's message may still be streaming: stop it first
        self.text = ""

    def __call__(self, piece: str) -> None:
        """Show the next checked piece of the answer."""
        self.text += piece
        if not self.ts:
            self._start(piece)
        elif self.streaming:
            try:
                self.client.chat_appendStream(channel=self.channel, ts=self.ts, markdown_text=markdown(piece))
            except SlackApiError as e:  # the stream ended under us (expired, stopped): edit the message instead
                log.info("slack_stream_append_refused", error=str(e.response.get("error") or "SlackApiError"))
                self.streaming = False
                self._edit()
        else:
            self._edit()

    def _start(self, piece: str) -> None:
        if self._starting is not None:  # noted before the stream exists: its reply may never come (a kill), and a
            self._starting()  # streaming message carries no metadata a take-over could find it by
        try:
            resp = self.client.chat_startStream(
                channel=self.channel, thread_ts=self.thread_ts, markdown_text=markdown(piece),
                recipient_user_id=self.user or None, recipient_team_id=self.team or None,
            )
            self.streaming = True
        except SlackApiError as e:  # streaming unavailable here: post, then edit
            log.info("slack_stream_refused", error=str(e.response.get("error") or "SlackApiError"))
            resp = self.client.chat_postMessage(channel=self.channel, thread_ts=self.thread_ts, text=plain(self.text),
                                                metadata=self._metadata, unfurl_links=False, unfurl_media=False)
        self.ts = str(resp["ts"])
        self._started(self.ts)

    def _edit(self) -> None:
        self.client.chat_update(channel=self.channel, ts=self.ts, text=plain(self.text))

    def finish(self, *, text: str, blocks: list[dict[str, Any]], metadata: dict[str, Any]) -> str:
        """Put the final answer (``text``, ``blocks``) in place of what was streamed; returns the message's ts, or
        "" when nothing was streamed (the caller posts the answer as usual)."""
        if not self.ts:
            return ""
        if self.streaming:
            try:
                self.client.chat_stopStream(channel=self.channel, ts=self.ts)
            except (SlackApiError, SlackClientError) as e:  # ended already (expired): the edit below still holds
                log.info("slack_stream_stop_refused", error=type(e).__name__)
            self.streaming = False
        self.client.chat_update(channel=self.channel, ts=self.ts, text=text, blocks=blocks, metadata=metadata)
        return self.ts
