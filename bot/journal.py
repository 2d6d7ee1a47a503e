"""Accept, journal, do: how both chat adapters run the work they acknowledged, so a kill loses none of it.

An adapter's listener parses an event and calls :meth:`WorkJournal.accept` before it acknowledges: the work
item (its key, kind and JSON payload, see :class:`connectors.state_api.WorkItem`) is in the chat state before
the platform hears "got it", and a re-delivery of the same key is a no-op. Worker threads, explicitly sized per
lane (answers and commands; uploads, which hold a worker for minutes), take items from the journal, not from
memory: the one just accepted (woken at once), and every few seconds (``CITEBOT_WORK_SCAN_S``) anything
pending or whose lease ran out — work a killed process or another replica left behind, at start-up too.

While an item runs its lease (``CITEBOT_WORK_LEASE_S``) is renewed by one thread for all of them; if the
process dies the lease runs out and any replica takes the item over. A handler keeps what it already did in
the item's note (the ts of a message it posted), so a take-over carries on instead of doing it again. After
:data:`MAX_ATTEMPTS` takes, or when a handler fails, the kind's ``give_up`` tells the user (an apology in the
thread, a failed status), never silence. :meth:`drain` is the bounded stop of SIGTERM.

Nothing is acknowledged that is not journaled: when the chat state cannot take an item (a full disk, a damaged
file, a lock held past :data:`connectors.state_api.ACCEPT_WITHIN_S`), :meth:`accept` raises :class:`NotRecorded`
and the listener answers an error instead of the ack, so the platform re-sends the event. :attr:`writable` says
whether the journal takes writes (readiness follows it): false from such a failure until a probe write, every
``probe_s``, succeeds again.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import structlog

from connectors import metrics
from connectors.log import error_fields
from connectors.state_api import AnswerRecord, ChatState, QueueFull, StateError, WorkItem

__all__ = ["Kind", "Lane", "NotRecorded", "QueueFull", "RetryLater", "Stopping", "WorkJournal"]

log = structlog.get_logger(__name__)

PROBE_S = 1.0  # how often the journal's writability is tried while it is not writable (5x that while it is)
MAX_ATTEMPTS = 3  # takes of one item (the first and two take-overs); the next take tells the user it failed


class NotRecorded(Exception):  # noqa: N818 - the listener's cue to refuse the event, not a bug
    """The journal could not take a piece of work: it must not be acknowledged (the platform re-sends it)."""


class Stopping(Exception):  # noqa: N818 - a signal to the journal, not an error to report
    """Raised by :meth:`WorkJournal.posting` once a drain's deadline has passed: the handler must not post; its
    item goes back to the journal unfinished (a take-over looks for what it posted before)."""


class RetryLater(Exception):  # noqa: N818 - a signal to the journal, not an error to report
    """Raised by a handler when the work may succeed later (the platform's API unreachable): the item is retried
    after ``delay_s`` (by any replica) instead of failing at once; it still counts as an attempt."""

    def __init__(self, delay_s: float = 5.0) -> None:
        super().__init__(f"retry in {delay_s} s")
        self.delay_s = delay_s


@dataclass(frozen=True)
class Kind:
    """What one kind of work item does: ``run(item, payload)``, and ``give_up(item, payload)`` to tell the user
    it could not be done (None: nobody waits for it, e.g. a vote)."""

    name: str
    run: Callable[[WorkItem, dict[str, Any]], object]
    give_up: Callable[[WorkItem, dict[str, Any]], object] | None = None


@dataclass(frozen=True)
class Lane:
    """Worker threads that take items of some kinds; each lane is sized on its own."""

    name: str
    kinds: tuple[str, ...]
    workers: int


class WorkJournal:
    """The journal's worker lanes in one process. ``start()`` them once; ``accept()`` from listeners."""

    def __init__(
        self,
        state: ChatState,
        *,
        platform: str,
        kinds: list[Kind],
        lanes: list[Lane],
        lease_s: float,
        scan_s: float,
        before_start: Callable[[], None] | None = None,
        max_attempts: int = MAX_ATTEMPTS,
        probe_s: float = PROBE_S,
        max_queued_per_user: int = 0,
    ) -> None:
        """``max_queued_per_user``: how many items one user may have waiting (pending or running) before the next
        is refused with :class:`QueueFull` (0: no bound)."""
        if lease_s <= 0 or scan_s <= 0 or max_attempts < 1:
            raise ValueError("lease_s and scan_s must be positive, max_attempts at least 1")
        for lane in lanes:
            if lane.workers < 1:
                raise ValueError(f"lane {lane.name} needs at least one worker")
        self.state = state
        self.platform = platform
        self.kinds = {k.name: k for k in kinds}
        self.lanes = lanes
        self.lease_s, self.scan_s, self.max_attempts = lease_s, scan_s, max_attempts
        self.probe_s = probe_s
        self.max_queued_per_user = max_queued_per_user
        self._writable = threading.Event()  # the journal took the last write tried (an accept or a probe)
        self._writable.set()
        self.owner = uuid.uuid4().hex  # this process's leases: a restart is a new owner, whatever its pid
        self._before_start = before_start
        self._lane_of = {kind: lane.name for lane in lanes for kind in lane.kinds}
        self._wake = {lane.name: threading.Condition() for lane in lanes}
        self._woken = {lane.name: 0 for lane in lanes}
        self._running: dict[str, WorkItem] = {}
        self._running_lock = threading.Condition()
        self._ended: set[str] = set()  # items their handler ended already (end_answered), under _running_lock
        self._stopping = threading.Event()
        self._closed = threading.Event()
        self._worker = threading.local()  # the item this worker thread runs (its key), for posting()
        self._posts = threading.Condition()  # guards the two below
        self._posting: dict[str, int] = {}  # items with a post on its way to the platform, and how many
        self._posts_closed = False  # a drain's deadline passed: no new post starts
        self._threads: list[threading.Thread] = []

    # --- intake ----------------------------------------------------------------------------------
    def accept(self, key: str, kind: str, payload: dict[str, Any], *, user: str = "", tenant: str = "") -> bool:
        """Journal one acknowledged piece of work (before the ack goes out) and wake a worker; False when ``key``
        was journaled before (a re-delivery: nothing to do). ``user`` and ``tenant`` (a Slack team, a Teams tenant):
        whose work it is, so the workers take turns between users (:meth:`ChatState.take_work`) and one user's
        waiting work is bounded (:class:`QueueFull`)."""
        who = self._who(kind, user, tenant)
        if not self._add(key, kind, payload, who=who, tenant=tenant, max_waiting=self.max_queued_per_user):
            return False
        lane = self._lane_of[kind]
        with self._wake[lane]:
            self._woken[lane] += 1
            self._wake[lane].notify()
        return True

    def hold(
        self, key: str, kind: str, payload: dict[str, Any], *, user: str = "", tenant: str = ""
    ) -> WorkItem | None:
        """Journal a piece of work its listener does at once (a quick reply inside a Teams turn), taken by this
        process in the same write: no worker takes it while this process renews its lease; if the process dies
        first, the lease runs out and a worker does it (the kind's ``run``). None when ``key`` was journaled before
        (a re-delivery). The listener ends it with :meth:`finish`. Never refused for a full queue: it waits for no
        worker."""
        who = self._who(kind, user, tenant)
        if not self._add(key, kind, payload, who=who, tenant=tenant, owner=self.owner):
            return None
        item = WorkItem(key, kind, json.dumps(payload), "running", 1, self.owner)
        with self._running_lock:
            self._running[key] = item  # renewed with the workers' items until finished
        return item

    def finish(self, item: WorkItem, *, failed: bool = False) -> None:
        """End an item :meth:`hold` gave its listener: done (or ``failed``: the user was told in the turn)."""
        with self._running_lock:
            self._running.pop(item.key, None)
            self._running_lock.notify_all()
        self._end(item, failed=failed, retry_in=0.0)

    def end_answered(self, item: WorkItem, answer: AnswerRecord) -> None:
        """Record the answer ``item`` posted and end the item (done; failed in its kind's ``give_up``) in one write
        (:meth:`ChatState.end_work`): the handler calls it once the answer is out, instead of recording it and
        leaving the end to the journal. What the handler does after it (a 👀 taken back) is cosmetic: a kill then
        loses nothing. Raises when the chat state cannot take the write (the handler fails, as a failed record
        made it before)."""
        failed = getattr(self._worker, "giving_up", False)  # recorded by a give-up: the item still ends failed
        if not self.state.end_work(item.key, owner=self.owner, failed=failed, answer=answer):
            log.warning("work_lost_lease")  # taken over meanwhile: the answer is recorded, their run ends it
        with self._running_lock:
            self._running.pop(item.key, None)  # no lease to renew, nothing for a drain to hand back
            self._ended.add(item.key)
            self._running_lock.notify_all()

    def _who(self, kind: str, user: str, tenant: str) -> str:
        if kind not in self.kinds or kind not in self._lane_of:
            raise ValueError(f"no handler or lane for work of kind {kind!r}")
        return f"{self.platform}:{tenant}:{user}" if user else ""

    def _add(self, key: str, kind: str, payload: dict[str, Any], *, who: str, tenant: str, owner: str = "",
             max_waiting: int = 0) -> bool:
        """Write the item (taken by ``owner`` when given); :class:`NotRecorded` when the chat state cannot take it,
        :class:`QueueFull` when ``who`` has ``max_waiting`` items waiting (counted in the same write)."""
        try:
            added = self.state.add_work(key, kind=kind, payload=json.dumps(payload), who=who, tenant=tenant,
                                        owner=owner, lease_s=self.lease_s if owner else 0.0, max_waiting=max_waiting)
        except QueueFull:
            log.warning("work_queue_full", kind=kind, max_queued_per_user=max_waiting)
            raise
        except Exception as e:
            self._writable.clear()
            log.error("work_not_recorded", kind=kind, reason=_reason(e), **error_fields(e))
            raise NotRecorded(kind) from e
        if not added:
            log.info("duplicate_skipped", durable=True, kind=kind)
        return added

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> WorkJournal:
        """Start the workers (they take over left-behind work at once) and the lease renewer."""
        if self._threads:
            return self
        for lane in self.lanes:
            for n in range(lane.workers):
                self._spawn(self._work_loop, lane, name=f"citebot-{self.platform}-{lane.name}-{n}")
        self._spawn(self._renew_loop, name=f"citebot-{self.platform}-leases")
        self._spawn(self._probe_loop, name=f"citebot-{self.platform}-probe")
        return self

    @property
    def writable(self) -> bool:
        """Whether the journal took the last write tried: readiness (``/readyz``) follows it."""
        return self._writable.is_set()

    def probe(self) -> bool:
        """Try one throwaway write now; updates and returns :attr:`writable`."""
        try:
            self.state.probe()
        except Exception as e:  # noqa: BLE001 - the answer is "not writable", logged once per change
            if self._writable.is_set():
                log.error("journal_not_writable", reason=_reason(e), **error_fields(e))
            self._writable.clear()
            return False
        if not self._writable.is_set():
            log.info("journal_writable_again")
        self._writable.set()
        return True

    def _probe_loop(self) -> None:
        while not self._closed.wait(self.probe_s if not self.writable else self.probe_s * 5):
            self.probe()

    def _spawn(self, target: Callable[..., None], *args: Any, name: str) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def running(self) -> list[str]:
        with self._running_lock:
            return list(self._running)

    def wait_idle(self, timeout_s: float = 60.0) -> bool:
        """Block until nothing of this journal's kinds is pending or running anywhere (tests, benchmarks)."""
        deadline = time.monotonic() + timeout_s
        kinds = tuple(self.kinds)
        while time.monotonic() < deadline:
            if not self.running() and self.state.count_work(kinds=kinds, states=("pending", "running")) == 0:
                return True
            time.sleep(0.05)
        return False

    @contextmanager
    def posting(self) -> Iterator[None]:
        """Around each message a handler posts for its item: after a drain's deadline no post starts
        (:class:`Stopping`), and the drain knows which items have a post on its way (those it must not hand back:
        another replica could post again before this post lands)."""
        key = getattr(self._worker, "key", "")
        with self._posts:
            if self._posts_closed:
                raise Stopping("draining: no new post")
            self._posting[key] = self._posting.get(key, 0) + 1
        try:
            yield
        finally:
            with self._posts:
                self._posting[key] -= 1
                if not self._posting[key]:
                    del self._posting[key]
                self._posts.notify_all()

    def drain(self, budget_s: float) -> bool:
        """The bounded stop (SIGTERM), within ``budget_s``: take nothing new and let what runs finish; at the
        deadline no new post starts, and what is left goes back to the journal, pending at once for another replica
        (or this bot's next start), keeping its attempt count so the next take looks for an earlier post first.
        An item whose post is still on its way at the deadline is not handed back: its lease runs out after this
        process has ended, so its take-over finds the post if it landed. True when everything finished in time."""
        self._stopping.set()
        for lane in self.lanes:
            with self._wake[lane.name]:
                self._wake[lane.name].notify_all()
        deadline = time.monotonic() + max(budget_s, 0.0)
        with self._running_lock:
            while self._running and time.monotonic() < deadline:
                self._running_lock.wait(min(0.2, max(deadline - time.monotonic(), 0.01)))
        with self._posts:
            self._posts_closed = True  # from here a handler's next post raises Stopping
            in_flight = set(self._posting)
        left = self.running()
        handed_back = [key for key in left if key not in in_flight]
        for key in handed_back:
            try:
                self.state.release_work(key, owner=self.owner)
            except Exception as e:  # noqa: BLE001 - then its lease runs out and it is taken over anyway
                log.warning("work_release_failed", error=type(e).__name__)
        log.info("drained", platform=self.platform, handed_back=len(handed_back),
                 left_to_lease=len(left) - len(handed_back), budget_s=budget_s)
        self._closed.set()
        return not left

    def close(self) -> None:
        """Stop at once (tests): running items keep their leases, which then run out."""
        self._stopping.set()
        self._closed.set()
        for lane in self.lanes:
            with self._wake[lane.name]:
                self._wake[lane.name].notify_all()

    # --- workers ---------------------------------------------------------------------------------
    def _work_loop(self, lane: Lane) -> None:
        while not self._stopping.is_set():
            try:
                items = self.state.take_work(owner=self.owner, lease_s=self.lease_s, kinds=lane.kinds)
            except Exception as e:  # noqa: BLE001 - the state store is down: try again on the next scan
                log.warning("work_take_failed", lane=lane.name, error=type(e).__name__)
                items = []
            if not items:
                self._sleep(lane)
                continue
            for item in items:
                with self._running_lock:
                    ours = item.key in self._running
                if ours:  # its lease ran out while this process still works on it (a starved renewer): the
                    continue  # take renewed it for us; the run under way finishes it
                if self._stopping.is_set():  # taken just as the drain began: give it straight back
                    self.state.release_work(item.key, owner=self.owner)
                    continue
                self._run(item)

    def _sleep(self, lane: Lane) -> None:
        """Until an item of this lane is accepted here, or the next scan."""
        cond = self._wake[lane.name]
        with cond:
            if self._woken[lane.name] == 0 and not self._stopping.is_set():
                cond.wait(self.scan_s)
            self._woken[lane.name] = max(self._woken[lane.name] - 1, 0)

    def _run(self, item: WorkItem) -> None:
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(platform=self.platform, work_kind=item.kind, attempt=item.attempts)
        with self._running_lock:
            self._running[item.key] = item
        self._worker.key = item.key
        metrics.queue_changed(self.platform, +1)
        failed, retry_in, stopped = False, 0.0, False
        try:
            payload = json.loads(item.payload)
            kind = self.kinds[item.kind]  # lanes take only the kinds given: a KeyError is an unreadable item
            if item.attempts > 1:
                log.info("work_taken_over", attempt=item.attempts)
            if item.attempts > self.max_attempts:  # every earlier take died with its process: say so
                failed = True
                self._give_up(kind, item, payload)
                return
            if self._before_start is not None:
                self._before_start()
            try:
                kind.run(item, payload)
            except Stopping:  # the drain's deadline: handed back (or left to its lease) by the drain
                stopped = True
                log.info("work_stopped_before_post")
            except RetryLater as e:
                if item.attempts >= self.max_attempts:
                    failed = True
                    self._give_up(kind, item, payload)
                else:
                    retry_in = e.delay_s
                    log.info("work_retry_later", delay_s=e.delay_s)
            except Exception as e:  # noqa: BLE001 - a handler's failure must never stop the bot
                log.error(f"{self.platform}_work_failed", **error_fields(e))
                failed = True
                self._give_up(kind, item, payload)
        except Stopping:  # an apology that would have started after the drain's deadline: the next take gives it
            stopped = True
        except Exception as e:  # noqa: BLE001 - an unreadable item: failed, never retried for ever
            log.error("work_unreadable", **error_fields(e))
            failed = True
        finally:
            self._worker.key = ""
            with self._running_lock:
                self._running.pop(item.key, None)
                self._running_lock.notify_all()
            metrics.queue_changed(self.platform, -1)
            if not stopped:
                self._end(item, failed=failed, retry_in=retry_in)
            else:
                with self._running_lock:
                    self._ended.discard(item.key)

    def _give_up(self, kind: Kind, item: WorkItem, payload: dict[str, Any]) -> None:
        log.warning("work_given_up", attempts=item.attempts)
        if kind.give_up is None:
            return
        self._worker.giving_up = True
        try:
            kind.give_up(item, payload)
        except Stopping:
            raise
        except Exception as e:  # noqa: BLE001 - best effort: the apology itself may fail
            log.warning("apology_failed", error=type(e).__name__)
        finally:
            self._worker.giving_up = False

    def _end(self, item: WorkItem, *, failed: bool, retry_in: float) -> None:
        with self._running_lock:
            if item.key in self._ended:  # its handler ended it with its answer (end_answered)
                self._ended.discard(item.key)
                return
        try:
            if retry_in > 0:  # leave it running under a short lease: any replica takes it again after that
                self.state.renew_work([item.key], owner=self.owner, lease_s=retry_in)
            elif not self.state.end_work(item.key, owner=self.owner, failed=failed):
                log.warning("work_lost_lease")  # someone took it over meanwhile: their run decides
        except Exception as e:  # noqa: BLE001 - the lease then runs out and the item is done again
            log.warning("work_end_failed", error=type(e).__name__)

    # --- leases ----------------------------------------------------------------------------------
    def _renew_loop(self) -> None:
        every = max(self.lease_s / 3, 0.05)
        while not self._closed.wait(every):
            keys = self.running()
            if not keys:
                continue
            try:
                kept = self.state.renew_work(keys, owner=self.owner, lease_s=self.lease_s)
            except Exception as e:  # noqa: BLE001 - try again shortly; a lease has room for two misses
                log.warning("work_renew_failed", error=type(e).__name__)
                continue
            if len(kept) < len(keys):
                log.warning("work_lease_lost", n=len(keys) - len(kept))


def _reason(error: BaseException) -> str:
    """The store's own words for why it refused a write ("database is locked", "database or disk is full"): they
    name no user and no text; any other exception's message is not logged."""
    return str(error)[:200] if isinstance(error, (sqlite3.Error, StateError)) else ""
