"""Durable chat state on SQLite (``CITEBOT_DATA_DIR/state.sqlite3``), shared by Slack, Teams and eval.

The embedded implementation of :class:`connectors.state_api.ChatState`; several processes on one host may share
the file (WAL, ``BEGIN IMMEDIATE`` for every write). Replicas on several hosts use
:mod:`connectors.elasticsearch_state` instead.

* ``answers``: every answer the bot posted, keyed by (platform, message_ref), so a later 👍/👎 on
  that message can be linked to its question, answer, citations and retrieved chunks.
* ``feedback``: one row per (platform, message_ref, user): a person's latest vote on an answer wins (a
  button, a reaction or the 👎 form replaces their earlier vote, with its ``comment`` and ``choice``); a
  removed reaction sets ``retracted_at``.
* ``work_items``: the work journal (see :mod:`connectors.state_api`): every acknowledged piece of work, its
  payload, state, lease and attempts; taken in one ``BEGIN IMMEDIATE`` transaction, so one taker wins.
* ``uploads``: which document a chat platform's file became (platform file id -> scope, doc_id), so a
  platform event that carries only the file id (Slack's ``file_deleted``) can remove the document.
* ``assistant_threads``: the channel a person is viewing beside a Slack assistant-pane thread (its
  context), so a question in that thread searches that channel.

With ``retention_days`` (``CITEBOT_RETENTION_DAYS``), answers (their questions, citations), votes and assistant
threads older than that are forgotten, checked with the journal's pruning (at most every few minutes).
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from connectors.metrics import record_claim_taken_over
from connectors.private_files import private_sqlite_file
from connectors.state_api import (
    ACCEPT_WITHIN_S,
    PRUNE_EVERY_S,
    WORK_TTL_S,
    AnswerRecord,
    FeedbackEntry,
    Polarity,
    PostedAnswer,
    QueueFull,
    RecordedAnswer,
    StateError,
    ThreadTurn,
    WorkItem,
    WorkState,
)
from connectors.state_log_schema import TABLES, migrate

__all__ = ["FeedbackEntry", "Polarity", "StateLog", "feedback_as_json"]

_PRUNE_EVERY_S = PRUNE_EVERY_S
# In an upsert of a vote: the new vote is bare and repeats the standing, unretracted one.
_SAME_BARE_VOTE = (
    "excluded.comment = '' AND excluded.choice = '' AND feedback.polarity = excluded.polarity "
    "AND feedback.retracted_at IS NULL"
)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


_BUSY_TIMEOUT_MS = 30_000  # how long a write waits for another process's lock (the accept path: ACCEPT_WITHIN_S)
_MAX_ADDS = 500  # journal items in one shared transaction (12 variables each, SQLite allows 32,766)


class _Adding:
    """One :meth:`StateLog.add_work` waiting for its shared transaction."""

    __slots__ = ("added", "error", "lead", "max_waiting", "row", "woken")

    def __init__(self, row: tuple[Any, ...], max_waiting: int = 0) -> None:
        self.row = row
        self.max_waiting = max_waiting  # refuse (QueueFull) when its ``who`` has this many waiting (0: no bound)
        self.woken = threading.Event()  # its item is written (or failed), or it leads the next transaction
        self.lead = False
        self.added = False
        self.error: BaseException | None = None


class StateLog:
    """Thread-safe; one connection per thread, WAL so the CLI can read while the bot writes."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time, host: str | None = None,
                 retention_days: float = 0) -> None:
        """``clock`` and ``host`` (default: this machine's name) exist for tests of lease take-over;
        ``retention_days`` (0: forever) is how long answers, votes and assistant threads are kept."""
        if retention_days < 0:
            raise ValueError("retention_days must be 0 (keep forever) or more")
        self.path = path
        self.retention_days = retention_days
        self._local = threading.local()
        self._clock = clock
        self._host = host or socket.gethostname()
        self._pruned_at = 0.0
        # this process's writers queue here, as the chunk store's do (``sqlite_store.connection.Connections``):
        # threads waiting on SQLite's own write lock sleep in its busy handler's back-off (1, 2, 5 … 100 ms)
        # however soon it frees; 50 journal writes at once (0.4 ms each alone) waited 140 ms at p95, 47 ms here.
        # Other processes (replicas, the CLI) still meet SQLite's lock and its busy timeout.
        self._write_lock = threading.Lock()
        # every write goes through one connection, used only under that lock: the threads that ack (a new one per
        # HTTP request) do not each open, set up and parse the schema of a connection of their own first
        self._writer: sqlite3.Connection | None = None
        self._adds: list[_Adding] = []  # journal items waiting for the next shared transaction (add_work)
        self._adds_lock = threading.Lock()
        self._adding = False  # a caller is writing such a transaction
        try:
            private_sqlite_file(path)
            self._conn().executescript(TABLES)
            with self._tx() as db:
                migrate(db)
            self._check_integrity()
        except (sqlite3.Error, OSError) as e:
            self.close()
            raise StateError(_cannot_open(path, e)) from e

    def _check_integrity(self) -> None:
        """``PRAGMA quick_check`` at start: a damaged file stops the bot before it acknowledges anything it then
        could not journal."""
        rows = [str(r[0]) for r in self._conn().execute("PRAGMA quick_check(5)").fetchall()]
        if rows != ["ok"]:
            raise sqlite3.DatabaseError(f"database disk image is malformed: {rows[0] if rows else 'no answer'}")

    def _connect(self, *, shared: bool = False) -> sqlite3.Connection:
        """A connection in WAL mode with ``synchronous=NORMAL``, as the chunk store's: a commit is in the WAL file,
        so in the OS, before it returns, which a killed process (SIGKILL, out of memory) cannot take back; only a
        crash of the machine itself may lose the last commits before the next checkpoint. With ``FULL`` every
        commit waited for an fsync (5 ms at p50, 13 ms at p95 on these disks), one after the other behind the
        write lock: 50 mentions acked at once queued ~0.4 s on it, and each answer's six writes ~50 ms."""
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=not shared)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        conn.row_factory = sqlite3.Row
        return conn

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection, for reads."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    def close(self) -> None:
        """Close this thread's connection (others close with their threads) and the writers' one (it reopens if
        written to again)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
        with self._write_lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    @contextmanager
    def _tx(self, *, within_s: float | None = None) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE`` … ``COMMIT``) on the writers' connection, under the lock.
        ``within_s``: give up (``sqlite3.OperationalError``) when the lock, this process's or the file's, is not
        had by then, instead of the busy timeout's 30 s (the accept path: an ack must leave within Slack's 3 s)."""
        deadline = time.monotonic() + within_s if within_s is not None else None
        if not self._write_lock.acquire(timeout=within_s if within_s is not None else -1):
            raise sqlite3.OperationalError(f"database is locked (this process's writers, {within_s} s)")
        try:
            if self._writer is None:
                self._writer = self._connect(shared=True)
            db = self._writer
            if deadline is not None:
                db.execute(f"PRAGMA busy_timeout={max(int((deadline - time.monotonic()) * 1000), 1)}")
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    yield db
                except BaseException:
                    if db.in_transaction:  # SQLite may have rolled it back itself (a full disk, a damaged page)
                        db.execute("ROLLBACK")
                    raise
                try:
                    db.execute("COMMIT")
                except sqlite3.Error:
                    if db.in_transaction:  # a COMMIT that failed (disk full) leaves the transaction open
                        db.execute("ROLLBACK")
                    raise
            finally:
                if deadline is not None:
                    db.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        finally:
            self._write_lock.release()

    def forget_before(self, cutoff: str) -> int:
        """Forget answers, votes and assistant threads recorded before ``cutoff`` (ISO time); how many rows went."""
        with self._tx() as db:
            return self._forget_before(db, cutoff)

    @staticmethod
    def _forget_before(db: sqlite3.Connection, cutoff: str) -> int:
        return sum(db.execute(f"DELETE FROM {table} WHERE at < ?", (cutoff,)).rowcount  # noqa: S608 - fixed names
                   for table in ("answers", "feedback", "assistant_threads"))

    # --- the work journal ----------------------------------------------------------------------
    def add_work(self, key: str, *, kind: str, payload: str, who: str = "", tenant: str = "", owner: str = "",
                 lease_s: float = 0.0, max_waiting: int = 0) -> bool:
        """Journal a piece of acknowledged work as ``pending`` (with ``owner``: ``running``, taken by ``owner`` for
        ``lease_s``, its first attempt); False when ``key`` is journaled already. ``who`` and ``tenant``: whose work
        it is (:meth:`take_work` takes turns between them). ``max_waiting``: :class:`QueueFull` instead when ``who``
        has that many items pending or running, counted in the transaction that writes the item.

        Calls at the same moment share one transaction (a group commit): the first caller writes every item queued
        meanwhile, the others wait for it; each returns only once its own item is committed. Each statement gives
        the GIL up and takes it back, and beside threads that run Python (answers) taking it back waits up to the
        interpreter's switch interval, while the write lock is held: 50 journal writes at once beside two busy
        threads took 0.32-0.47 s at p95 one transaction each, 0.12-0.13 s in shared ones (four statements for all)."""
        now = self._clock()
        state, attempts, taken = ("running", 1, now) if owner else ("pending", 0, 0.0)
        mine = _Adding((key, kind, payload, state, attempts, owner, now + lease_s if owner else 0.0, now, now, who,
                        tenant, taken), max_waiting if who else 0)
        deadline = time.monotonic() + ACCEPT_WITHIN_S
        with self._adds_lock:
            self._adds.append(mine)
            lead = not self._adding
            self._adding = True
        if not lead:
            if not mine.woken.wait(ACCEPT_WITHIN_S):
                with self._adds_lock:  # still queued behind a transaction that does not end: give up
                    if mine in self._adds and not mine.lead:
                        self._adds.remove(mine)
                        raise sqlite3.OperationalError(f"database is locked (journal writers, {ACCEPT_WITHIN_S} s)")
                mine.woken.wait()  # in a transaction being written (bounded by its own deadline), or leading next
            lead = mine.lead  # the caller before handed this one the next transaction
        if lead:
            with self._adds_lock:
                batch, self._adds = self._adds[:_MAX_ADDS], self._adds[_MAX_ADDS:]
            try:
                self._add_batch(batch, within_s=max(deadline - time.monotonic(), 0.05))
            finally:
                with self._adds_lock:
                    if self._adds:  # arrived meanwhile: the first of them writes them all
                        self._adds[0].lead = True
                        self._adds[0].woken.set()
                    else:
                        self._adding = False
        if mine.error is not None:
            raise mine.error
        return mine.added

    def _add_batch(self, batch: list[_Adding], *, within_s: float) -> None:
        """Write ``batch`` in one transaction; tell each caller how it went."""
        try:
            keys = [a.row[0] for a in batch]
            with self._tx(within_s=within_s) as db:
                seen = {r[0] for r in db.execute(
                    f"SELECT key FROM work_items WHERE key IN ({','.join('?' * len(keys))})", keys
                )}
                waiting = self._waiting(db, {a.row[9] for a in batch if a.max_waiting})
                rows: list[Any] = []
                for a in batch:
                    a.added = a.row[0] not in seen
                    if a.added and a.max_waiting and waiting.get(a.row[9], 0) >= a.max_waiting:
                        a.added, a.error = False, QueueFull(a.row[1])
                    elif a.added:
                        seen.add(a.row[0])
                        waiting[a.row[9]] = waiting.get(a.row[9], 0) + 1
                        rows.extend(a.row)
                if rows:
                    db.execute(
                        "INSERT INTO work_items (key, kind, payload, state, attempts, owner, lease_until, created, "
                        "updated, who, tenant, taken_at) VALUES "
                        + ",".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * (len(rows) // 12)),
                        rows,
                    )
        except BaseException as e:
            for a in batch:
                a.added, a.error = False, e
            raise
        finally:
            for a in batch:
                if not a.lead:
                    a.woken.set()

    @staticmethod
    def _waiting(db: sqlite3.Connection, whos: set[str]) -> dict[str, int]:
        """How many items each of ``whos`` has pending or running (one look-up on the ``(who, state)`` index)."""
        if not whos:
            return {}
        return {r[0]: int(r[1]) for r in db.execute(
            f"""SELECT who, COUNT(*) FROM work_items WHERE who IN ({','.join('?' * len(whos))})
                AND state IN ('pending', 'running') GROUP BY who""", sorted(whos))}

    def probe(self) -> None:
        """Write and remove a throwaway journal item, as an accept would, within its deadline; raises when the
        journal cannot take a write (locked, full, damaged)."""
        key = f"probe:{self._host}:{os.getpid()}"
        with self._tx(within_s=ACCEPT_WITHIN_S) as db:
            db.execute(
                "INSERT OR REPLACE INTO work_items (key, kind, payload, state, created, updated) "
                "VALUES (?, 'probe', '', 'done', 0, 0)", (key,),
            )
            db.execute("DELETE FROM work_items WHERE key = ?", (key,))

    def take_work(
        self, *, owner: str, lease_s: float, kinds: tuple[str, ...], key: str | None = None, limit: int = 1
    ) -> list[WorkItem]:
        """Take up to ``limit`` items of ``kinds`` that are pending or whose lease ran out: each becomes ``running``
        for ``owner`` until ``now + lease_s``, its ``attempts`` one higher. ``key``: only that item.

        Fair turns (:data:`connectors.state_api.FAIR_ORDER`): the tenant taken from least recently first, within it
        the user taken from least recently, then that user's oldest item; so one user's burst waits behind
        everyone else's next item instead of ahead of it."""
        if not kinds or limit < 1:
            return []
        now = self._clock()
        marks = ",".join("?" * len(kinds))
        sql = f"""SELECT * FROM work_items WHERE kind IN ({marks})
                  AND (state = 'pending' OR (state = 'running' AND lease_until < ?))"""
        args: list[Any] = [*kinds, now]
        if key is not None:
            sql += " AND key = ?"
            args.append(key)
        if self._conn().execute(sql + " LIMIT 1", args).fetchone() is None:
            return []  # idle workers poll: no write lock for them when there is nothing to take
        with self._tx() as db:
            self._prune(db, now)
            rows = db.execute(sql + f" {_FAIR_ORDER} LIMIT ?", (*args, limit)).fetchall()
            taken = []
            for n, row in enumerate(rows):
                db.execute(
                    """UPDATE work_items SET state = 'running', owner = ?, lease_until = ?, attempts = attempts + 1,
                       updated = ?, taken_at = ? WHERE key = ?""",
                    (owner, now + lease_s, now, now + n * 1e-6, row["key"]),  # takes of one call keep their order
                )
                if row["state"] == "running":
                    record_claim_taken_over(row["key"])
                taken.append(
                    WorkItem(row["key"], row["kind"], row["payload"], "running", row["attempts"] + 1, owner,
                             now + lease_s, json.loads(row["note"] or "{}"))
                )
            return taken

    def renew_work(self, keys: list[str], *, owner: str, lease_s: float) -> list[str]:
        """Extend the leases ``owner`` still holds; returns those keys (a lost one was taken over)."""
        if not keys:
            return []
        now = self._clock()
        kept = []
        with self._tx() as db:
            for key in keys:
                cur = db.execute(
                    """UPDATE work_items SET lease_until = ?, updated = ?
                       WHERE key = ? AND owner = ? AND state = 'running'""",
                    (now + lease_s, now, key, owner),
                )
                if cur.rowcount:
                    kept.append(key)
        return kept

    def end_work(self, key: str, *, owner: str, failed: bool = False, answer: AnswerRecord | None = None) -> bool:
        """``done`` (or ``failed``: its user was told) if ``owner`` still holds it; False when it was taken over.
        ``answer``: recorded in the same transaction (whoever holds the item: it was posted), so no kill leaves an
        answer recorded and its item running, or the item ended and its answer unrecorded."""
        with self._tx() as db:
            if answer is not None:
                _insert_answer(db, answer)
            cur = db.execute(
                "UPDATE work_items SET state = ?, updated = ? WHERE key = ? AND owner = ? AND state = 'running'",
                ("failed" if failed else "done", self._clock(), key, owner),
            )
            return cur.rowcount > 0

    def release_work(self, key: str, *, owner: str) -> None:
        """Hand an item back unfinished (a bot stopping): pending at once for anyone. Its attempt still counts, so the
        next take knows an earlier one may have posted (and looks for that post before posting)."""
        with self._tx() as db:
            db.execute(
                """UPDATE work_items SET state = 'pending', lease_until = 0, owner = '',
                   updated = ? WHERE key = ? AND owner = ? AND state = 'running'""",
                (self._clock(), key, owner),
            )

    def note_work(self, key: str, **note: str) -> None:
        """Merge ``note`` into what the item's work noted so far (e.g. ``answer_ts``)."""
        with self._tx() as db:
            row = db.execute("SELECT note FROM work_items WHERE key = ?", (key,)).fetchone()
            if row is not None:
                merged = {**json.loads(row["note"] or "{}"), **note}
                db.execute("UPDATE work_items SET note = ? WHERE key = ?", (json.dumps(merged), key))

    def work_items(self, *, state: WorkState | None = None) -> list[WorkItem]:
        """Journaled items (of one ``state``), oldest first."""
        sql, args = "SELECT * FROM work_items", []
        if state is not None:
            sql += " WHERE state = ?"
            args.append(state)
        rows = self._conn().execute(sql + " ORDER BY created, rowid", args).fetchall()
        return [
            WorkItem(r["key"], r["kind"], r["payload"], r["state"], r["attempts"], r["owner"], r["lease_until"],
                     json.loads(r["note"] or "{}"))
            for r in rows
        ]

    def count_work(self, *, kinds: tuple[str, ...], states: tuple[WorkState, ...], who: str | None = None) -> int:
        """How many items of ``kinds`` are in one of ``states`` (``who``: of that user only)."""
        if not kinds or not states:
            return 0
        sql = (f"SELECT COUNT(*) FROM work_items WHERE kind IN ({','.join('?' * len(kinds))}) "
               f"AND state IN ({','.join('?' * len(states))})")
        args: list[Any] = [*kinds, *states]
        if who is not None:
            sql += " AND who = ?"
            args.append(who)
        return int(self._conn().execute(sql, args).fetchone()[0])

    def _prune(self, db: sqlite3.Connection, now: float) -> None:
        """Forget ended items older than :data:`WORK_TTL_S`, and what is older than the retention (checked at most
        every few minutes, by the workers' takes)."""
        if now - self._pruned_at < _PRUNE_EVERY_S:
            return
        self._pruned_at = now
        db.execute("DELETE FROM work_items WHERE state IN ('done', 'failed') AND updated < ?", (now - WORK_TTL_S,))
        if self.retention_days:
            self._forget_before(db, _iso(now - self.retention_days * 86400))

    # --- uploads -----------------------------------------------------------------------------
    def record_upload(self, *, platform: str, file_ref: str, scope: str, doc_id: str, user: str) -> None:
        """Remember that the platform's file ``file_ref`` shared in ``scope`` is document ``doc_id``."""
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO uploads VALUES (?, ?, ?, ?, ?, ?)",
                (platform, file_ref, scope, doc_id, user, _now()),
            )

    def pop_uploads(self, *, platform: str, file_ref: str) -> list[tuple[str, str, bool]]:
        """Forget every upload of ``file_ref``; returns (scope, doc_id, still_shared) for each, where
        ``still_shared`` says another file of the same scope is the same document (keep it then)."""
        with self._tx() as db:
            rows = db.execute(
                "SELECT scope, doc_id FROM uploads WHERE platform = ? AND file_ref = ?", (platform, file_ref)
            ).fetchall()
            db.execute("DELETE FROM uploads WHERE platform = ? AND file_ref = ?", (platform, file_ref))
            out = []
            for row in rows:
                other = db.execute(
                    "SELECT 1 FROM uploads WHERE platform = ? AND scope = ? AND doc_id = ? LIMIT 1",
                    (platform, row["scope"], row["doc_id"]),
                ).fetchone()
                out.append((row["scope"], row["doc_id"], other is not None))
        return out

    # --- assistant threads -------------------------------------------------------------------
    def save_thread_context(self, *, platform: str, thread_ref: str, user: str, context_channel: str) -> None:
        """Remember which channel ``user`` is viewing beside the assistant thread ``thread_ref`` ("" for none)."""
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO assistant_threads VALUES (?, ?, ?, ?, ?)",
                (platform, thread_ref, user, context_channel, _now()),
            )

    def thread_context(self, *, platform: str, thread_ref: str) -> tuple[str, str] | None:
        """(user, context channel) of an assistant thread, or None when the thread is not one."""
        row = self._conn().execute(
            "SELECT user, context_channel FROM assistant_threads WHERE platform = ? AND thread_ref = ?",
            (platform, thread_ref),
        ).fetchone()
        return None if row is None else (row["user"], row["context_channel"])

    # --- answers -----------------------------------------------------------------------------
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
    ) -> None:
        with self._tx() as db:
            _insert_answer(db, AnswerRecord(platform, message_ref, thread_ref, scope, user, question, answer_json))

    def thread_history(self, *, platform: str, thread_ref: str, limit: int = 6) -> list[ThreadTurn]:
        """The last ``limit`` question/answer pairs the bot handled in a thread, oldest first."""
        rows = self._conn().execute(
            """SELECT question, answer_json FROM answers WHERE platform = ? AND thread_ref = ?
               ORDER BY at DESC, rowid DESC LIMIT ?""",
            (platform, thread_ref, limit),
        ).fetchall()
        turns: list[ThreadTurn] = []
        for row in reversed(rows):
            turns.append(ThreadTurn(role="user", text=row["question"]))
            turns.append(ThreadTurn(role="assistant", text=json.loads(row["answer_json"])["text"]))
        return turns

    def thread_answered(self, *, platform: str, thread_ref: str) -> bool:
        row = self._conn().execute(
            "SELECT 1 FROM answers WHERE platform = ? AND thread_ref = ? LIMIT 1", (platform, thread_ref)
        ).fetchone()
        return row is not None

    def find_answer(self, *, platform: str, message_ref: str) -> PostedAnswer | None:
        """(scope, question, answer) of a posted answer, or None if the bot did not post it."""
        row = self._conn().execute(
            "SELECT scope, question, answer_json FROM answers WHERE platform = ? AND message_ref = ?",
            (platform, message_ref),
        ).fetchone()
        if row is None:
            return None
        return PostedAnswer(row["scope"], row["question"], row["answer_json"])

    def answers(self, *, since: str | None = None) -> list[RecordedAnswer]:
        """Every answer posted on or after ``since`` (ISO-8601 UTC; all without it), oldest first."""
        sql = "SELECT platform, message_ref, scope, at, answer_json FROM answers"
        args: list[Any] = []
        if since:
            sql += " WHERE at >= ?"
            args.append(since)
        rows = self._conn().execute(sql + " ORDER BY at, rowid", args).fetchall()
        return [RecordedAnswer(r["platform"], r["message_ref"], r["scope"], r["at"], r["answer_json"]) for r in rows]

    # --- feedback ----------------------------------------------------------------------------
    def add_feedback(
        self,
        *,
        platform: str,
        message_ref: str,
        user: str,
        polarity: Polarity,
        comment: str = "",
        choice: str = "",
    ) -> bool:
        """Record ``user``'s 👍/👎 on a posted answer, replacing their earlier vote (the latest wins). A bare vote (no
        comment, no choice) equal to the standing one keeps that one's comment and choice: the 👎 button's record
        may land after the 👎 form it opened (another replica, a busy pool). False when the message is not a bot
        answer."""
        found = self.find_answer(platform=platform, message_ref=message_ref)
        if found is None:
            return False
        scope = found[0]
        with self._tx() as db:
            db.execute(
                f"""INSERT INTO feedback (platform, message_ref, scope, user, polarity, comment, choice, at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (platform, message_ref, user) DO UPDATE SET
                     comment = CASE WHEN {_SAME_BARE_VOTE} THEN feedback.comment ELSE excluded.comment END,
                     choice = CASE WHEN {_SAME_BARE_VOTE} THEN feedback.choice ELSE excluded.choice END,
                     polarity = excluded.polarity, at = excluded.at, retracted_at = NULL""",
                (platform, message_ref, scope, user, polarity, comment, choice, _now()),
            )
        return True

    def retract_feedback(self, *, platform: str, message_ref: str, user: str, polarity: Polarity) -> bool:
        """Retract ``user``'s reaction of that polarity (a removed 👍 does not retract a 👎)."""
        with self._tx() as db:
            cur = db.execute(
                """UPDATE feedback SET retracted_at = ? WHERE platform = ? AND message_ref = ?
                   AND user = ? AND polarity = ? AND retracted_at IS NULL""",
                (_now(), platform, message_ref, user, polarity),
            )
            return cur.rowcount > 0

    def feedback(
        self, *, since: str | None = None, polarity: Polarity | None = None, include_retracted: bool = False
    ) -> list[FeedbackEntry]:
        """Feedback entries, oldest first, joined with the answers they rate."""
        sql = """SELECT f.*, a.question, a.answer_json FROM feedback f
                 JOIN answers a ON a.platform = f.platform AND a.message_ref = f.message_ref WHERE 1=1"""
        args: list[Any] = []
        if not include_retracted:
            sql += " AND f.retracted_at IS NULL"
        if since:
            sql += " AND f.at >= ?"
            args.append(since)
        if polarity:
            sql += " AND f.polarity = ?"
            args.append(polarity)
        sql += " ORDER BY f.at, f.id"
        out = []
        for row in self._conn().execute(sql, args):
            out.append(FeedbackEntry.of(dict(row), row["question"], row["answer_json"]))
        return out


# Fair turns: the tenant, then the user, taken from least recently (a latest take of 0: never), then the oldest item.
_FAIR_ORDER = """ORDER BY
    (SELECT COALESCE(MAX(t.taken_at), 0) FROM work_items t WHERE t.tenant = work_items.tenant),
    (SELECT COALESCE(MAX(u.taken_at), 0) FROM work_items u WHERE u.who = work_items.who),
    created, rowid"""


def _cannot_open(path: Path, e: BaseException) -> str:
    """What an operator reads when the chat state cannot be opened: the file, the cause, what to do."""
    text = str(e).lower()
    if "locked" in text or "busy" in text:
        return (f"the chat state {path} is locked by another process ({e}): stop the other process (a stuck bot, a "
                "backup holding a lock), or give this bot its own CITEBOT_DATA_DIR")
    if "malformed" in text or "not a database" in text or "corrupt" in text:
        return (f"the chat state {path} is damaged ({e}): stop every bot using it, then move it aside (its work "
                "journal, answers and feedback go with it) or restore it from a backup, and start again")
    if "full" in text:
        return f"the disk holding the chat state {path} is full ({e}): free space there, then start again"
    return (f"cannot write the chat state {path} ({e}): check that CITEBOT_DATA_DIR ({path.parent}) exists, is a "
            "folder, and that this user may write to it")


def feedback_as_json(entries: list[FeedbackEntry]) -> str:
    return json.dumps([e.to_json() for e in entries], ensure_ascii=False, indent=2)


def _insert_answer(db: sqlite3.Connection, answer: AnswerRecord) -> None:
    """Record ``answer`` (a later record of the same message replaces it), inside the caller's transaction."""
    db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (*answer, _now()))
