"""How the Slack bot runs its work: acknowledge first, work after, each delivery once.

* :class:`RecentKeys`: the in-memory first line of dedup (Slack re-sends an event it saw no ack for);
* :class:`AckBackPressure`: a worker about to start waits while acks are in flight (capped), so a burst of
  deliveries is acknowledged before the answering takes the interpreter;
* :class:`SlackWorkers`: the explicitly sized worker pool (answers, ingests, commands) and a small pool for
  the "working on it" signals, each job run once per durable claim in the chat state.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import structlog

from bot.core import ChatCore, ClaimKey
from connectors import metrics
from connectors.log import error_fields

log = structlog.get_logger("citebot.slack")

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
    """The worker pools of one Slack bot, and the claims and log context each job runs under."""

    def __init__(self, core: ChatCore, *, workers: int) -> None:
        self.core = core
        self.recent = RecentKeys()
        self.gate = AckBackPressure()
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="citebot-slack")
        # the 👀 that says "working on it" must not wait for a free worker behind a queue of answers
        self.ui = ThreadPoolExecutor(max_workers=2, thread_name_prefix="citebot-slack-ui")
        self._pending: set[Future[None]] = set()
        self._pending_lock = threading.Lock()

    def wait_idle(self, timeout_s: float = 60.0) -> bool:
        """Block until no submitted work is running (for shutdown and benchmarks)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._pending_lock:
                if not self._pending:
                    return True
            time.sleep(0.01)
        return False

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=False)
        self.ui.shutdown(wait=True)

    def submit(
        self,
        job: Callable[[], object],
        *,
        event_id: str,
        on_failure: Callable[[], object] | None,
        claim: ClaimKey | None = None,
        on_duplicate: Callable[[], object] | None = None,
        budget_s: float | None = None,
    ) -> None:
        """Run ``job`` on the worker pool with this request's log context, once per ``event_id`` and
        once per ``claim`` key (durable claims in the state log); failures go to :meth:`failed`.
        The claims stay ``started`` while the job runs (``budget_s``, default an answer's) and are finished
        however it ends; if the process dies first, Slack's retry takes them over once."""
        ctx = contextvars.copy_context()
        budget = budget_s if budget_s is not None else self.core.answer_budget_s
        keys = [k for k in (ClaimKey.slack_event(event_id) if event_id else None, claim) if k is not None]

        def guarded() -> None:
            taken: list[ClaimKey] = []
            try:
                self.gate.wait_quiet()
                for key in keys:
                    if not self.core.claim(key, budget_s=budget):
                        log.info("duplicate_skipped", durable=True)
                        if on_duplicate is not None:
                            on_duplicate()
                        return
                    taken.append(key)
                job()
            except Exception as e:  # noqa: BLE001 - a listener's failure must never stop the bot
                self.failed(e, event_id=event_id, on_failure=on_failure)
            finally:
                for key in taken:
                    self.finish(key)

        metrics.queue_changed("slack", +1)
        future = self.pool.submit(ctx.run, guarded)
        with self._pending_lock:
            self._pending.add(future)
        future.add_done_callback(self._done)

    def finish(self, key: ClaimKey) -> None:
        try:
            self.core.finish(key)
        except Exception as e:  # noqa: BLE001 - the claim then expires with its budget
            log.warning("claim_finish_failed", error=type(e).__name__)

    def _done(self, future: Future[None]) -> None:
        metrics.queue_changed("slack", -1)
        with self._pending_lock:
            self._pending.discard(future)

    def failed(self, error: BaseException, *, event_id: str, on_failure: Callable[[], object] | None) -> None:
        # Where it failed, not what it held: no exception message or locals (they can carry text or tokens).
        log.error("slack_work_failed", event_id=event_id, **error_fields(error))
        if on_failure is None:
            return
        try:
            on_failure()
        except Exception as e:  # noqa: BLE001 - best effort: the apology itself may fail
            log.warning("apology_failed", event_id=event_id, error=type(e).__name__)
