"""How the Slack bot runs its work: acknowledge first, work after, each delivery once.

* :class:`RecentKeys`: the in-memory first line of dedup (Slack re-sends an event it saw no ack for);
* :class:`AckBackPressure`: a worker about to start waits while acks are in flight (capped), so a burst of
  deliveries is acknowledged before the answering takes the interpreter;
* :class:`SlackWorkers`: the work journal's lanes (:mod:`bot.journal`), explicitly sized: answers and commands
  (``CITEBOT_SLACK_WORKERS``), uploads (``CITEBOT_UPLOAD_WORKERS``); and a small pool for the "working on it"
  signals.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any

import structlog

from bot.core import ChatCore, ClaimKey
from bot.journal import Kind, Lane, WorkJournal
from connectors.state_api import AnswerRecord, WorkItem

log = structlog.get_logger(__name__)

INGEST_KINDS = ("slack.ingest",)
RECENT_EVENTS = 100_000  # event ids remembered in memory; Slack retries within minutes


class RecentKeys:
    """Bounded, thread-safe set of recently seen keys (the in-memory first line of dedup)."""

    def __init__(self, max_keys: int = RECENT_EVENTS) -> None:
        self._keys: OrderedDict[str, None] = OrderedDict()
        self._max = max_keys
        self._lock = threading.Lock()

    def add(self, key: str) -> bool:
        """True the first time ``key`` is added, False while it is remembered."""
        with self._lock:
            if key in self._keys:
                return False
            self._keys[key] = None
            if len(self._keys) > self._max:
                self._keys.popitem(last=False)
            return True

    def discard(self, key: str) -> None:
        """Forget ``key``: its delivery was refused (not journaled), so Slack's re-send must be processed."""
        with self._lock:
            self._keys.pop(key, None)


class AckBackPressure:
    """Acks before answers: a worker about to start a job waits while deliveries are being acknowledged
    (until none is in flight and none arrived for ``quiet_s``), at most ``max_wait_s``. On ~one core the
    Python-heavy answering otherwise takes the interpreter from a burst of acks; a job's delay is capped,
    so a steady stream of chatter can only slow a job by ``max_wait_s``, never starve it."""

    def __init__(self, *, quiet_s: float = 0.02, max_wait_s: float = 0.25) -> None:
        self.quiet_s, self.max_wait_s = quiet_s, max_wait_s
        self._cond = threading.Condition()
        self._inflight = 0
        self._last = 0.0

    def enter(self) -> None:
        with self._cond:
            self._inflight += 1
            self._last = time.monotonic()

    def leave(self) -> None:
        with self._cond:
            self._inflight -= 1
            self._last = time.monotonic()
            self._cond.notify_all()

    def wait_quiet(self) -> None:
        deadline = time.monotonic() + self.max_wait_s
        with self._cond:
            while True:
                now = time.monotonic()
                quiet_for = now - self._last
                if now >= deadline or (self._inflight == 0 and quiet_for >= self.quiet_s):
                    return
                self._cond.wait(min(deadline - now, max(self.quiet_s - quiet_for, 0.002)))


class SlackWorkers:
    """The Slack bot's work: the journal's lanes (answers and commands; uploads) and a small pool for the
    "working on it" signals, with the ack gate the workers wait on."""

    def __init__(self, core: ChatCore) -> None:
        self.core = core
        self.recent = RecentKeys()
        self.gate = AckBackPressure()
        # the 👀 that says "working on it" must not wait for a free worker behind a queue of answers
        self.ui = ThreadPoolExecutor(max_workers=2, thread_name_prefix="citebot-slack-ui")
        self._journal: WorkJournal | None = None

    def start(self, kinds: list[Kind]) -> None:
        """Open the journal's lanes for ``kinds`` and take over what a killed bot left, at once. The kinds come
        here rather than to ``__init__`` because the listeners that run them are built with these workers."""
        if self._journal is not None:
            raise RuntimeError("SlackWorkers started twice")
        s = self.core.settings
        ingest = tuple(k.name for k in kinds if k.name in INGEST_KINDS)
        self._journal = WorkJournal(
            self.core.state,
            platform="slack",
            kinds=kinds,
            lanes=[
                Lane("answers", tuple(k.name for k in kinds if k.name not in INGEST_KINDS), s.slack_workers),
                Lane("uploads", ingest, s.upload_workers),
            ],
            lease_s=s.work_lease_s,
            scan_s=s.work_scan_s,
            before_start=self.gate.wait_quiet,
            max_queued_per_user=s.max_queued_per_user,
        )
        self._journal.start()

    @property
    def journal(self) -> WorkJournal:
        if self._journal is None:
            raise RuntimeError("SlackWorkers.start() was not called")
        return self._journal

    def accept(self, key: ClaimKey | str, kind: str, payload: dict[str, Any], *, user: str = "",
               team: str = "") -> bool:
        """Journal the work (before the ack leaves); False for a re-delivery. ``user``, ``team``: whose it is (fair
        turns, and the bound on one person's waiting work: :class:`bot.journal.QueueFull`). Slack's verification
        token (which Bolt no longer needs: requests are signed) is left out: the journal keeps no credential."""
        body = payload.get("body")
        if isinstance(body, dict) and "token" in body:
            payload = {**payload, "body": {k: v for k, v in body.items() if k != "token"}}
        return self.journal.accept(str(key), kind, payload, user=user, tenant=team)

    def posting(self) -> AbstractContextManager[None]:
        """Entered around each post of a work item (:meth:`bot.journal.WorkJournal.posting`)."""
        return self.journal.posting()

    def end_answered(self, item: WorkItem, answer: AnswerRecord) -> None:
        """Record an item's answer and end the item in one write (:meth:`bot.journal.WorkJournal.end_answered`)."""
        self.journal.end_answered(item, answer)

    def uploads_waiting(self) -> int:
        return self.core.state.count_work(kinds=INGEST_KINDS, states=("pending",))

    def wait_idle(self, timeout_s: float = 60.0) -> bool:
        """Block until no journaled work is pending or running (for benchmarks and tests)."""
        return self.journal.wait_idle(timeout_s)

    def drain(self, budget_s: float) -> bool:
        ok = self._journal.drain(budget_s) if self._journal is not None else True
        self.ui.shutdown(wait=False, cancel_futures=True)
        return ok

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()
        self.ui.shutdown(wait=False, cancel_futures=True)
