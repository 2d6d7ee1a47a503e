"""An LLM answer streamed into a Teams personal chat while the model writes it.

Teams streams bot messages in one-on-one chats only: a ``typing`` activity whose ``streaminfo`` entity says
``streamType: streaming`` and a ``streamSequence`` (1, 2, …) carries the text so far (each one holds everything the
one before held); the first one's id is the stream's ``streamId``, which every later one carries; the ``message``
that ends it has ``streamType: final`` and the same ``streamId`` (Microsoft's "Stream bot messages" REST flow).

:class:`TeamsStream` is the ``show`` of :meth:`bot.core.ChatCore.ask`: it gets the answer's checked sentences
(:mod:`pipelines.streaming`) and sends them that way, at most one update per :data:`UPDATE_INTERVAL_S` (Teams
throttles faster updates; a sentence that comes sooner goes with the next one, or with the final message).
:meth:`TeamsStream.final` makes the answer message, exactly as the non-streaming path posts it, the stream's end.
Elsewhere (channels, group chats) nothing streams and the answer is posted at once, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog
from microsoft_agents.activity import Activity, ActivityTypes, Entity

from bot.teams.render import escape_markdown

log = structlog.get_logger(__name__)

UPDATE_INTERVAL_S = 1.0
STREAM_INFO = "streaminfo"


def stream_info(stream_type: str, *, stream_id: str = "", sequence: int | None = None) -> Entity:
    """The ``streaminfo`` entity of a streamed activity."""
    data: dict[str, object] = {"streamType": stream_type}
    if stream_id:
        data["streamId"] = stream_id
    if sequence is not None:
        data["streamSequence"] = sequence
    return Entity(type=STREAM_INFO, **data)


class TeamsStream:
    """One answer's stream. ``send(activity)`` posts in the chat and returns the new activity's id; ``started(id)``
    is told the stream's id (the work journal notes it)."""

    def __init__(self, send: Callable[[Activity], str | None], *, started: Callable[[str], None]) -> None:
        self._send = send
        self._started = started
        self.stream_id = ""
        self.text = ""  # the answer text shown so far (as the model's checked sentences came)
        self._sequence = 0
        self._last = float("-inf")

    def __call__(self, piece: str) -> None:
        """Show the next checked piece of the answer (sent now, or with the next update)."""
        self.text += piece
        if time.monotonic() - self._last < UPDATE_INTERVAL_S:
            return
        self._sequence += 1
        shown = escape_markdown(self.text.strip())
        update = Activity(type=ActivityTypes.typing, text=shown, text_format="markdown",
                          entities=[stream_info("streaming", stream_id=self.stream_id, sequence=self._sequence)])
        new_id = self._send(update)
        self._last = time.monotonic()
        if not self.stream_id:
            if not new_id:
                raise RuntimeError("Teams gave the stream no id")
            self.stream_id = new_id
            self._started(new_id)

    def final(self, message: Activity) -> Activity:
        """``message`` (the answer as the non-streaming path posts it) as the end of this stream; unchanged when
        nothing was streamed."""
        return ending(message, self.stream_id) if self.stream_id else message


def ending(message: Activity, stream_id: str) -> Activity:
    """``message`` as the ``final`` of the stream ``stream_id``: also of a stream a killed bot started, whose id
    its work item noted (a take-over ends that stream with the answer instead of leaving it open)."""
    entities = [*(message.entities or []), stream_info("final", stream_id=stream_id)]
    return message.model_copy(update={"entities": entities})
