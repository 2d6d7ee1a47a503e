"""What Citebot's chat layer needs from its durable state, and the rules both implementations share.

Two implementations: :class:`connectors.state_log.StateLog` (SQLite in ``CITEBOT_DATA_DIR``, the embedded
default; safe for several processes on one host) and :class:`connectors.elasticsearch_state.ElasticsearchState`
(``citebot-state-*`` indices, chosen with ``CITEBOT_ELASTICSEARCH_URL``; any number of replicas on any hosts).
``connectors.stores.open_state`` picks one from the settings. ``tests/connectors/test_state_contract.py``
holds both to the same contract.

The work journal. Every piece of work a chat adapter acknowledged is a :class:`WorkItem`, written with
``add_work`` before the acknowledgement leaves (the key makes a re-delivery a no-op). Workers take items with
``take_work``: an item is ``pending`` until taken (or taken as it is written, ``add_work(owner=…)``: work its
listener does at once, a quick reply inside a Teams turn), then ``running`` under a lease (``lease_until``, an owner
id per process) that the owner renews with ``renew_work`` while it works, and ``done`` or ``failed`` once ended.
A ``running`` item whose lease ran out (its process was killed, its host died) is taken again by any replica:
leases are plain times, so no process ids that mean nothing across hosts. ``attempts`` counts the takes;
``note`` keeps what the work did so far (the ts of a message it posted), so a take-over does not do it twice.
Ended items are forgotten after :data:`WORK_TTL_S` (chat platforms re-send within minutes); the same pruning, at
most every :data:`PRUNE_EVERY_S`, forgets answers, votes and assistant threads older than the retention. Takes are
fair: an item carries whose it is (``who``) and their ``tenant`` (a Slack team, a Teams tenant), and ``take_work``
takes from the tenant taken from least recently, within it the user taken from least recently, then that user's
oldest item (a latest take of never comes first), so one user's burst of forty questions waits behind a colleague's
one, and ``add_work(max_waiting=…)`` bounds one user's waiting items (:class:`QueueFull`). ``add_work`` raises
rather than wait past :data:`ACCEPT_WITHIN_S` (the listener then refuses the event, and the
platform re-sends it); ``probe`` writes and removes a throwaway item, raising when the journal cannot take a write
(readiness follows it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

Polarity = Literal["up", "down"]

WORK_TTL_S = 24 * 3600.0
PRUNE_EVERY_S = 600.0


WorkState = Literal["pending", "running", "done", "failed"]


@dataclass(frozen=True)
class WorkItem:
    """One acknowledged piece of chat work: ``kind`` says which handler does it, ``payload`` (JSON) what it
    needs, ``note`` what earlier attempts did so far."""

    key: str
    kind: str
    payload: str
    state: WorkState
    attempts: int
    owner: str = ""
    lease_until: float = 0.0
    note: dict[str, str] = field(default_factory=dict)

    @property
    def notes(self) -> dict[str, str]:
        """What the work did so far; the handler's own notes are added to it as it goes."""
        return self.note


class StateError(Exception):
    """The state store could not do what was asked (server down, refused credentials...)."""


class QueueFull(Exception):  # noqa: N818 - the listener's cue to tell the user, not a bug
    """``add_work(max_waiting=…)`` refused the item: its ``who`` already has that many items pending or running. The
    item is not journaled (the listener tells the person to ask again once their earlier work is done)."""


# How long ``add_work`` may wait for the store before it gives up (a lock held by another process, a queue of
# writers): well inside Slack's 3 s, so a listener that cannot journal its event answers an error in time and the
# platform re-sends it, instead of an ack for work that was never written.
ACCEPT_WITHIN_S = 1.0


@dataclass(frozen=True)
class ThreadTurn:
    """One earlier turn of a chat thread: the question asked, or the text of the answer posted."""

    role: Literal["user", "assistant"]
    text: str


class PostedAnswer(NamedTuple):
    """An answer the bot posted: the scope it searched, the question, and the answer as recorded (its JSON
    document: ``text``, ``citations``, ``retrieved``, ``refused``... as the chat core wrote it)."""

    scope: str
    question: str
    answer_json: str


class AnswerRecord(NamedTuple):
    """An answer to record as it was posted (``ChatState.end_work(answer=…)``, ``record_answer``): where
    (``message_ref``, its thread), whose question, and the answer's JSON document as the chat core wrote it."""

    platform: str
    message_ref: str
    thread_ref: str
    scope: str
    user: str
    question: str
    answer_json: str


class RecordedAnswer(NamedTuple):
    """An answer as the quality report reads it: where and when, and its recorded JSON document (``refused``,
    ``citations``, ``validation``...). No question: the report counts, it does not quote."""

    platform: str
    message_ref: str
    scope: str
    at: str
    answer_json: str


@dataclass(frozen=True)
class FeedbackEntry:
    platform: str
    message_ref: str
    scope: str
    user: str
    polarity: Polarity
    comment: str
    at: str
    question: str
    answer: str
    citations: list[dict[str, Any]]
    retrieved_chunk_ids: list[str]
    choice: str = ""
    refused: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.answer,
            "polarity": self.polarity,
            "platform": self.platform,
            "scope": self.scope,
            "user": self.user,
            "at": self.at,
            "comment": self.comment,
            "choice": self.choice,
            "refused": self.refused,
            "message_ref": self.message_ref,
            "citations": self.citations,
            "retrieved_chunk_ids": self.retrieved_chunk_ids,
        }

    @classmethod
    def of(cls, vote: Mapping[str, Any], question: str, answer_json: str) -> FeedbackEntry:
        """An entry from a stored vote (platform, message_ref, scope, user, polarity, comment, choice, at) and
        the answer's recorded JSON document."""
        answer = json.loads(answer_json)
        return cls(
            platform=vote["platform"],
            message_ref=vote["message_ref"],
            scope=vote["scope"],
            user=vote["user"],
            polarity=vote["polarity"],
            comment=vote.get("comment") or "",
            at=vote["at"],
            question=question,
            answer=answer["text"],
            citations=list(answer.get("citations") or []),
            retrieved_chunk_ids=[r["chunk_id"] for r in answer.get("retrieved") or []],
            choice=vote.get("choice") or "",
            refused=bool(answer.get("refused", False)),
        )


@runtime_checkable
class ChatState(Protocol):
    """Durable chat state: the work journal, posted answers and thread history, feedback, uploads, assistant
    threads."""

    # --- the work journal
    def add_work(self, key: str, *, kind: str, payload: str, who: str = "", tenant: str = "", owner: str = "",
                 lease_s: float = 0.0, max_waiting: int = 0) -> bool:
        """Journal an item; False when ``key`` was journaled before. ``max_waiting`` (0: no bound): raise
        :class:`QueueFull` instead when ``who`` already has that many items pending or running, counted in the same
        call (one transaction on SQLite; a count then the create on Elasticsearch)."""
        ...

    def probe(self) -> None: ...

    def take_work(
        self, *, owner: str, lease_s: float, kinds: tuple[str, ...], key: str | None = None, limit: int = 1
    ) -> list[WorkItem]: ...

    def renew_work(self, keys: list[str], *, owner: str, lease_s: float) -> list[str]: ...

    def end_work(self, key: str, *, owner: str, failed: bool = False, answer: AnswerRecord | None = None) -> bool:
        """``done`` (or ``failed``) if ``owner`` still holds the item; False when it was taken over. With ``answer``
        (what the item posted) the answer is recorded in the same call, whoever holds the item: an item never ends
        without its answer's record (one transaction on SQLite; on Elasticsearch the answer is written first)."""
        ...

    def release_work(self, key: str, *, owner: str) -> None: ...

    def note_work(self, key: str, **note: str) -> None: ...

    def work_items(self, *, state: WorkState | None = None) -> list[WorkItem]: ...

    def count_work(self, *, kinds: tuple[str, ...], states: tuple[WorkState, ...], who: str | None = None) -> int: ...

    # --- uploads
    def record_upload(self, *, platform: str, file_ref: str, scope: str, doc_id: str, user: str) -> None: ...

    def pop_uploads(self, *, platform: str, file_ref: str) -> list[tuple[str, str, bool]]: ...

    # --- assistant threads
    def save_thread_context(self, *, platform: str, thread_ref: str, user: str, context_channel: str) -> None: ...

    def thread_context(self, *, platform: str, thread_ref: str) -> tuple[str, str] | None: ...

    # --- answers
    def record_answer(
        self,
        *,
        platform: str,
        message_ref: str,
        thread_ref: str,
        scope: str,
        user: str,
        question: str,
        answer_json: str,
    ) -> None: ...

    def thread_history(self, *, platform: str, thread_ref: str, limit: int = 6) -> list[ThreadTurn]: ...

    def thread_answered(self, *, platform: str, thread_ref: str) -> bool: ...

    def find_answer(self, *, platform: str, message_ref: str) -> PostedAnswer | None: ...

    def answers(self, *, since: str | None = None) -> list[RecordedAnswer]: ...

    # --- feedback
    def add_feedback(
        self,
        *,
        platform: str,
        message_ref: str,
        user: str,
        polarity: Polarity,
        comment: str = "",
        choice: str = "",
    ) -> bool: ...

    def retract_feedback(self, *, platform: str, message_ref: str, user: str, polarity: Polarity) -> bool: ...

    def feedback(
        self, *, since: str | None = None, polarity: Polarity | None = None, include_retracted: bool = False
    ) -> list[FeedbackEntry]: ...

    def close(self) -> None: ...
