"""One contract for both chat states: the SQLite state log always, Elasticsearch (``citebot-state-*`` indices) when
``CITEBOT_TEST_ELASTICSEARCH_URL`` points at a running Elasticsearch 8 (``deploy/README.md``).

Several state objects on one backing store stand for several replicas (each with its own host name where the
test needs it); subprocesses stand for replicas in other processes. The work journal: one accept and one taker
among threads and among processes racing for a key, work held by a killed process taken over once its lease ran
out (by one replica only), done work never redone, expiry after a day, fair turns. Answers and feedback: the round
trip with comments and choices across replicas, a person's latest vote winning, retraction, filters. Uploads and
assistant threads.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from connectors.settings import Settings
from connectors.state_api import WORK_TTL_S, AnswerRecord, ChatState, QueueFull, StateError
from connectors.state_log import StateLog, feedback_as_json
from connectors.stores import open_state
from pipelines.models import Answer, Citation, RetrievedChunk

REPO = Path(__file__).resolve().parents[2]
ES_URL = os.environ.get("CITEBOT_TEST_ELASTICSEARCH_URL")
ES_SKIP_REASON = (
    "set CITEBOT_TEST_ELASTICSEARCH_URL to a running Elasticsearch 8 (deploy/README.md) to run the chat state "
    "contract against it"
)
STATE_KINDS = [
    "sqlite",
    pytest.param(
        "elasticsearch", marks=[pytest.mark.integration, pytest.mark.skipif(not ES_URL, reason=ES_SKIP_REASON)]
    ),
]

Factory = Callable[..., ChatState]


def state_settings(kind: str, tmp_path: Path) -> dict[str, Any]:
    """Settings (as plain values) that open a ``kind`` state; every call in one test shares the backing store."""
    if kind == "sqlite":
        return {"data_dir": str(tmp_path / "data")}
    return {
        "data_dir": str(tmp_path / "data"),
        "elasticsearch_url": ES_URL,
        "elasticsearch_state_prefix": f"citebot-test-state-{tmp_path.name.lower()[-20:]}-{uuid.uuid4().hex[:8]}",
    }


@pytest.fixture(params=STATE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def cfg(kind: str, tmp_path: Path) -> dict[str, Any]:
    return state_settings(kind, tmp_path)


@pytest.fixture
def make_state(kind: str, cfg: dict[str, Any]) -> Iterator[Factory]:
    """``make_state(clock=..., host=...)``: one more replica's view of the same state."""
    opened: list[Any] = []

    def make(**kw: Any) -> ChatState:
        settings = Settings(_env_file=None, **cfg)  # type: ignore[call-arg]
        if kind == "sqlite":
            state: Any = StateLog(settings.state_path, **kw)
        else:
            from connectors.elasticsearch_state import ElasticsearchState

            state = ElasticsearchState.from_settings(settings, **kw)
        opened.append(state)
        return state

    yield make
    if kind == "elasticsearch" and opened:
        opened[0].drop()
    for state in opened:
        state.close()


def stored_work(state: Any) -> int:
    """How many work items the backing store holds, ended ones too (the test peeks below the protocol)."""
    if isinstance(state, StateLog):
        with sqlite3.connect(state.path) as db:
            return int(db.execute("SELECT count(*) FROM work_items").fetchone()[0])
    index = state.index("work")
    state.es.indices.refresh(index=index)
    return int(state.es.count(index=index)["count"])


def _answer(text: str = "Employees get 25 days [1].") -> Answer:
    return Answer(
        text=text,
        citations=[
            Citation(n=1, chunk_id="d1:00003", doc_id="d1", file="handbook.pdf", page_start=4, page_end=4,
                     section="4 Leave", quote="Employees get 25 days of annual leave.")
        ],
        retrieved=[RetrievedChunk(chunk_id="d1:00003", doc_id="d1", file="handbook.pdf", page_start=4, page_end=4,
                                  score=0.8)],
    )


def _record(state: ChatState, ref: str, *, thread: str = "C1:100.0", q: str = "How much leave?",
            platform: str = "slack") -> None:
    state.record_answer(platform=platform, message_ref=ref, thread_ref=thread, scope="slack:T1:C1", user="U1",
                        question=q, answer_json=_answer(f"answer to {q}").model_dump_json())


def test_the_embedded_state_is_the_default_and_the_factory_makes_it(tmp_path: Path) -> None:
    state = open_state(Settings(_env_file=None, data_dir=tmp_path / "d"))  # type: ignore[call-arg]
    assert isinstance(state, StateLog) and isinstance(state, ChatState)
    assert state.path == tmp_path / "d" / "state.sqlite3"


# --- one winner ---------------------------------------------------------------------------------------

KINDS = ("slack.answer", "slack.ingest")


def test_one_winner_among_racing_threads(make_state: Factory) -> None:
    """A re-delivery accepted by another replica at the same moment is journaled once, and taken once."""
    replicas = [make_state(host="replica-a"), make_state(host="replica-b")]
    for round_ in range(5):
        key = f"slack:event:THREADS{round_}"
        barrier = threading.Barrier(12)
        wins: list[bool] = []
        lock = threading.Lock()

        def accept(
            i: int, key: str = key, barrier: threading.Barrier = barrier, wins: list[bool] = wins,
            lock: threading.Lock = lock,
        ) -> None:
            barrier.wait(10)
            state = replicas[i % 2]
            held = {"owner": f"turn-{i}", "lease_s": 120} if i % 3 == 0 else {}  # a quick reply's turn takes it
            won = state.add_work(key, kind="slack.answer", payload="{}", **held)
            won = bool(state.take_work(owner=f"w{i}", lease_s=120, kinds=KINDS, key=key)) or (won and bool(held))
            with lock:
                wins.append(won)

        threads = [threading.Thread(target=accept, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(wins) == [False] * 11 + [True], round_


ACCEPTER = textwrap.dedent(
    """
    import json, sys
    from connectors.settings import Settings
    from connectors.stores import open_state

    cfg, keys = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    state = open_state(Settings(_env_file=None, **cfg))
    print("ready", flush=True)
    sys.stdin.readline()  # go
    for k in keys:
        state.add_work(k, kind="slack.answer", payload="{}")
    won = [i.key for k in keys for i in state.take_work(owner=sys.argv[3], lease_s=300, kinds=("slack.answer",),
                                                        key=k)]
    print(json.dumps(won), flush=True)
    """
)


def _spawn(code: str, *args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HAYSTACK_TELEMETRY_ENABLED": "False"}
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        cwd=cwd,
    )


@pytest.mark.slow
def test_one_winner_among_racing_processes(cfg: dict[str, Any], tmp_path: Path, make_state: Factory) -> None:
    state = make_state()  # creates the store (and, on Elasticsearch, drops it afterwards)
    keys = [f"slack:event:PROC{i:02d}" for i in range(30)]
    procs = [_spawn(ACCEPTER, json.dumps(cfg), json.dumps(keys if n % 2 else keys[::-1]), f"proc-{n}", cwd=tmp_path)
             for n in range(3)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in procs:  # all start accepting and taking at once
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        won = [json.loads(p.stdout.readline()) for p in procs if p.stdout is not None]
    finally:
        for p in procs:
            p.kill()
            p.wait(30)
    flat = [k for w in won for k in w]
    assert sorted(flat) == sorted(keys)  # every key taken, none twice
    assert sorted(i.key for i in state.work_items()) == sorted(keys)  # and journaled once each


HOLDER = textwrap.dedent(
    """
    import json, sys, time
    from connectors.settings import Settings
    from connectors.stores import open_state

    state = open_state(Settings(_env_file=None, **json.loads(sys.argv[1])))
    print(json.dumps(state.add_work(sys.argv[2], kind="teams.reply", payload="{}", owner="turn", lease_s=2)),
          flush=True)
    state.note_work(sys.argv[2], reply="Documents in this channel: ...")
    print("noted", flush=True)
    time.sleep(600)  # mid-reply, until killed
    """
)


@pytest.mark.slow
def test_work_held_by_a_killed_process_is_taken_over_once_with_what_it_noted(
    cfg: dict[str, Any], tmp_path: Path, make_state: Factory
) -> None:
    """A quick reply's turn takes its item as it journals it; killed mid-reply, a worker does it once its lease
    ran out, finding the text the turn noted."""
    state = make_state()
    key = "teams:msg:19:c@thread.tacv2:1700000000001"
    holder = _spawn(HOLDER, json.dumps(cfg), key, cwd=tmp_path)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "true"
        assert holder.stdout.readline().strip() == "noted"
        assert not state.add_work(key, kind="teams.reply", payload="{}")  # a re-delivery: answered once
        assert state.take_work(owner="w", lease_s=60, kinds=("teams.reply",)) == []  # its turn holds it
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
    from connectors.metrics import CLAIMS_TAKEN_OVER

    taken_before = CLAIMS_TAKEN_OVER.labels("teams")._value.get()
    deadline = time.monotonic() + 30
    while not (taken := state.take_work(owner="w", lease_s=60, kinds=("teams.reply",))):
        assert time.monotonic() < deadline, "the killed turn's item was never taken over"
        time.sleep(0.2)
    [item] = taken
    assert (item.key, item.attempts, item.notes) == (key, 2, {"reply": "Documents in this channel: ..."})
    assert CLAIMS_TAKEN_OVER.labels("teams")._value.get() == taken_before + 1  # and /metrics counts it
    other = make_state()
    assert other.take_work(owner="w2", lease_s=60, kinds=("teams.reply",)) == []  # but only once
    assert state.end_work(key, owner="w")
    assert other.take_work(owner="w2", lease_s=60, kinds=("teams.reply",)) == []


# --- the work journal -----------------------------------------------------------------------------


def test_journaled_work_is_taken_by_one_worker_among_racing_replicas(make_state: Factory) -> None:
    a, b = make_state(host="replica-a"), make_state(host="replica-b")
    assert a.add_work("slack:answer:T1:C1:1.0", kind="slack.answer", payload='{"q": 1}')
    assert not b.add_work("slack:answer:T1:C1:1.0", kind="slack.answer", payload='{"q": 2}')  # a re-delivery
    assert a.add_work("slack:file:T1:C1:F1", kind="slack.ingest", payload="{}")
    barrier = threading.Barrier(8)
    taken: list[str] = []

    def take(replica: ChatState, owner: str) -> None:
        barrier.wait(10)
        taken.extend(f"{owner}={i.key}" for i in replica.take_work(owner=owner, lease_s=60, kinds=KINDS, limit=5))

    threads = [threading.Thread(target=take, args=(r, f"w{n}")) for n, r in enumerate([a, b] * 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(t.split("=", 1)[1] for t in taken) == ["slack:answer:T1:C1:1.0", "slack:file:T1:C1:F1"]
    [item] = [i for i in a.work_items() if i.kind == "slack.answer"]
    assert (item.state, item.attempts, json.loads(item.payload)) == ("running", 1, {"q": 1})  # the first payload
    assert a.take_work(owner="late", lease_s=60, kinds=KINDS) == []  # nothing left to take
    assert a.count_work(kinds=KINDS, states=("running",)) == 2


def test_a_burst_of_work_accepted_at_once_is_journaled_once_each_with_its_first_payload(make_state: Factory) -> None:
    """50 deliveries acked at the same moment (some of them Slack's re-deliveries of another): each new key is
    journaled, pending, with the payload of its first delivery, and each re-delivery is told it is one."""
    a, b = make_state(host="replica-a"), make_state(host="replica-b")
    barrier = threading.Barrier(50)
    results: dict[int, bool] = {}

    def accept(i: int) -> None:
        barrier.wait(10)
        replica = a if i % 2 else b
        results[i] = replica.add_work(f"slack:answer:T1:C1:{i % 40}.0", kind="slack.answer", payload=f'{{"d": {i}}}')

    threads = [threading.Thread(target=accept, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    firsts = {}
    for i, added in results.items():
        if added:
            assert f"{i % 40}" not in firsts, "a key was journaled twice"
            firsts[f"{i % 40}"] = i
    assert len(results) == 50 and sorted(firsts) == sorted(str(k) for k in range(40))
    items = {i.key: i for i in a.work_items(state="pending")}
    assert len(items) == 40
    for k, i in firsts.items():
        assert json.loads(items[f"slack:answer:T1:C1:{k}.0"].payload) == {"d": i}


def test_work_whose_lease_ran_out_is_taken_over_once_and_its_old_owner_cannot_end_it(make_state: Factory) -> None:
    now = [3_000_000.0]
    a = make_state(clock=lambda: now[0], host="replica-a")
    b = make_state(clock=lambda: now[0], host="replica-b")
    a.add_work("k1", kind="slack.answer", payload="{}")
    [first] = a.take_work(owner="a", lease_s=30, kinds=KINDS)
    a.note_work("k1", answer_ts="111.1")
    now[0] += 20
    assert a.renew_work(["k1"], owner="a", lease_s=30) == ["k1"]  # a live owner keeps it
    now[0] += 20
    assert b.take_work(owner="b", lease_s=30, kinds=KINDS) == []  # renewed: not expired yet
    now[0] += 31  # owner a was killed: its lease runs out
    [again] = b.take_work(owner="b", lease_s=30, kinds=KINDS)
    assert (again.key, again.attempts, again.notes) == ("k1", 2, {"answer_ts": "111.1"})  # what a did is known
    assert a.take_work(owner="a2", lease_s=30, kinds=KINDS) == []  # only once
    assert a.renew_work(["k1"], owner="a", lease_s=30) == [] and not a.end_work("k1", owner="a")
    assert b.end_work("k1", owner="b")
    now[0] += 3600
    assert b.take_work(owner="c", lease_s=30, kinds=KINDS) == []  # done is never redone
    assert [i.state for i in b.work_items()] == ["done"]


def test_an_answer_ends_its_item_in_the_same_call_and_a_taken_over_item_still_gets_its_record(
    make_state: Factory,
) -> None:
    now = [3_000_000.0]
    a = make_state(clock=lambda: now[0], host="replica-a")
    b = make_state(clock=lambda: now[0], host="replica-b")
    record = AnswerRecord("slack", "C1:111.1", "C1:100.0", "slack:T1:C1", "U1", "How much leave?",
                          _answer().model_dump_json())
    a.add_work("k1", kind="slack.answer", payload="{}")
    a.add_work("k2", kind="slack.answer", payload="{}")
    a.take_work(owner="a", lease_s=30, kinds=KINDS, key="k1")
    assert a.end_work("k1", owner="a", answer=record)
    assert [(i.key, i.state) for i in b.work_items(state="done")] == [("k1", "done")]
    found = b.find_answer(platform="slack", message_ref="C1:111.1")
    assert found is not None and found.question == "How much leave?"
    assert b.thread_history(platform="slack", thread_ref="C1:100.0")[0].text == "How much leave?"
    # a's lease on k2 ran out and b took it over: a's answer is still recorded, but b's run ends the item
    a.take_work(owner="a", lease_s=30, kinds=KINDS, key="k2")
    now[0] += 31
    [again] = b.take_work(owner="b", lease_s=30, kinds=KINDS)
    later = record._replace(message_ref="C1:222.2")
    assert not a.end_work("k2", owner="a", answer=later)
    assert b.find_answer(platform="slack", message_ref="C1:222.2") is not None
    assert b.end_work(again.key, owner="b", answer=later)  # the take-over's record of the same post: one record
    assert len(b.thread_history(platform="slack", thread_ref="C1:100.0")) == 4  # two answers, each once


def test_released_work_is_pending_at_once_and_failed_work_is_never_retaken(make_state: Factory) -> None:
    a, b = make_state(host="a"), make_state(host="b")
    a.add_work("k1", kind="slack.answer", payload="{}")
    a.add_work("k2", kind="slack.ingest", payload="{}")
    [one] = a.take_work(owner="a", lease_s=3600, kinds=("slack.answer",))
    assert b.take_work(owner="b", lease_s=60, kinds=("slack.answer",)) == []
    a.release_work("k1", owner="a")  # a bot draining on SIGTERM
    [back] = b.take_work(owner="b", lease_s=60, kinds=("slack.answer",), key="k1")
    assert back.attempts == 2  # the hand-back's attempt counts: the next take looks for what it posted first
    assert b.end_work("k1", owner="b", failed=True)
    assert b.take_work(owner="c", lease_s=60, kinds=KINDS, limit=5)[0].key == "k2"
    assert a.count_work(kinds=KINDS, states=("failed",)) == 1


def test_ended_work_is_forgotten_after_a_day_and_a_key_is_then_new_work(make_state: Factory) -> None:
    now = [3_000_000.0]
    a = make_state(clock=lambda: now[0], host="a")
    long_key = "teams:msg:" + "x" * 600  # a long key (hashed where ids are bounded)
    assert a.add_work("slack:event:OLD", kind="slack.answer", payload="{}")
    assert a.add_work(long_key, kind="teams.reply", payload="{}", owner="turn", lease_s=60)
    assert not a.add_work(long_key, kind="teams.reply", payload="{}", owner="turn2", lease_s=60)
    [old] = a.take_work(owner="w", lease_s=60, kinds=KINDS)
    assert a.end_work(old.key, owner="w") and a.end_work(long_key, owner="turn")
    assert stored_work(a) == 2
    now[0] += WORK_TTL_S + 60
    b = make_state(clock=lambda: now[0], host="b")
    assert b.add_work("slack:event:NEW", kind="slack.answer", payload="{}")
    assert [i.key for i in b.take_work(owner="w", lease_s=60, kinds=KINDS)] == ["slack:event:NEW"]
    assert stored_work(b) == 1  # pruned by the take
    assert a.add_work("slack:event:OLD", kind="slack.answer", payload="{}")  # a re-delivery a day later is new work


# --- answers and feedback ---------------------------------------------------------------------------


def test_every_posted_answer_can_be_listed_for_the_quality_report(make_state: Factory) -> None:
    a, b = make_state(), make_state()
    _record(a, "C1:111.1")
    _record(b, "C1:222.2", q="Who approves?")
    _record(a, "C1:111.1")  # recorded again (a retry): still one answer
    listed = make_state().answers()
    assert sorted((x.platform, x.message_ref, x.scope) for x in listed) == [
        ("slack", "C1:111.1", "slack:T1:C1"), ("slack", "C1:222.2", "slack:T1:C1")
    ]
    assert all(json.loads(x.answer_json)["citations"] for x in listed)
    assert [x.at for x in listed] == sorted(x.at for x in listed)  # oldest first
    assert make_state().answers(since="2999-01-01") == []
    assert len(make_state().answers(since="2020-01-01")) == 2


def test_feedback_round_trip_with_comments_across_replicas(make_state: Factory) -> None:
    a, b = make_state(), make_state()
    _record(a, "C1:111.1")
    _record(a, "C1:222.2", q="Who approves?")
    recorded = _answer("answer to How much leave?").model_dump_json()
    assert b.find_answer(platform="slack", message_ref="C1:111.1") == ("slack:T1:C1", "How much leave?", recorded)
    assert b.find_answer(platform="teams", message_ref="C1:111.1") is None
    assert not b.add_feedback(platform="slack", message_ref="C1:999.9", user="U2", polarity="down")  # no answer

    assert b.add_feedback(platform="slack", message_ref="C1:111.1", user="U2", polarity="up")
    assert b.add_feedback(platform="slack", message_ref="C1:111.1", user="U3", polarity="down",
                          comment="Wrong page — it’s on p. 5", choice="wrong_passage")
    assert a.add_feedback(platform="slack", message_ref="C1:222.2", user="U2", polarity="down")
    # U2 changes their mind on the first answer: their latest vote replaces the earlier one
    assert a.add_feedback(platform="slack", message_ref="C1:111.1", user="U2", polarity="down",
                          comment="missing the carry-over rule", choice="missing_information")

    fresh = make_state()
    votes = {(e.message_ref, e.user): e for e in fresh.feedback()}
    assert set(votes) == {("C1:111.1", "U2"), ("C1:111.1", "U3"), ("C1:222.2", "U2")}
    u3 = votes[("C1:111.1", "U3")]
    assert (u3.polarity, u3.comment, u3.choice, u3.scope, u3.question) == (
        "down", "Wrong page — it’s on p. 5", "wrong_passage", "slack:T1:C1", "How much leave?"
    )
    assert (votes[("C1:111.1", "U2")].polarity, votes[("C1:111.1", "U2")].choice) == ("down", "missing_information")
    out = json.loads(feedback_as_json([u3]))[0]
    assert out["citations"][0]["quote"] == "Employees get 25 days of annual leave."
    assert out["retrieved_chunk_ids"] == ["d1:00003"] and out["answer"] == "answer to How much leave?"
    assert [e.at for e in fresh.feedback()] == sorted(e.at for e in fresh.feedback())  # oldest first

    assert {e.user for e in fresh.feedback(polarity="down")} == {"U2", "U3"}
    assert fresh.feedback(polarity="up") == []
    assert fresh.feedback(since="2999-01-01") == []
    assert len(fresh.feedback(since="2020-01-01")) == 3

    # a removed 👍 does not retract a 👎; removing the 👎 does, and only once
    assert not b.retract_feedback(platform="slack", message_ref="C1:111.1", user="U3", polarity="up")
    assert b.retract_feedback(platform="slack", message_ref="C1:111.1", user="U3", polarity="down")
    assert not a.retract_feedback(platform="slack", message_ref="C1:111.1", user="U3", polarity="down")
    assert not a.retract_feedback(platform="slack", message_ref="C1:111.1", user="U9", polarity="down")
    assert ("C1:111.1", "U3") not in {(e.message_ref, e.user) for e in fresh.feedback()}
    assert len(fresh.feedback(include_retracted=True)) == 3
    # the 👎 button's own record landing after the form it opened (another replica) keeps the form's words
    assert b.add_feedback(platform="slack", message_ref="C1:222.2", user="U4", polarity="down",
                          comment="Cites the wrong policy", choice="wrong_passage")
    assert a.add_feedback(platform="slack", message_ref="C1:222.2", user="U4", polarity="down")
    [u4] = [e for e in fresh.feedback() if e.user == "U4"]
    assert (u4.polarity, u4.choice, u4.comment) == ("down", "wrong_passage", "Cites the wrong policy")
    assert a.add_feedback(platform="slack", message_ref="C1:222.2", user="U4", polarity="up")  # a change of mind
    assert [(e.polarity, e.comment) for e in fresh.feedback() if e.user == "U4"] == [("up", "")]
    assert a.add_feedback(platform="slack", message_ref="C1:222.2", user="U4", polarity="down")
    assert [(e.polarity, e.comment) for e in fresh.feedback() if e.user == "U4"] == [("down", "")]
    # voting again after a retraction counts again
    assert a.add_feedback(platform="slack", message_ref="C1:111.1", user="U3", polarity="up")
    assert [(e.user, e.polarity) for e in fresh.feedback() if e.message_ref == "C1:111.1"].count(("U3", "up")) == 1


def test_thread_history_is_oldest_first_per_thread_and_platform(make_state: Factory) -> None:
    a, b = make_state(), make_state()
    _record(a, "C1:1.1", q="first")
    _record(b, "C1:2.2", q="second")
    _record(a, "C1:3.3", thread="C1:300.0", q="other thread")
    turns = b.thread_history(platform="slack", thread_ref="C1:100.0")
    assert [(t.role, t.text) for t in turns] == [
        ("user", "first"), ("assistant", "answer to first"), ("user", "second"), ("assistant", "answer to second")
    ]
    assert [t.text for t in a.thread_history(platform="slack", thread_ref="C1:100.0", limit=1)] == [
        "second", "answer to second"
    ]
    assert a.thread_answered(platform="slack", thread_ref="C1:300.0")
    assert not a.thread_answered(platform="slack", thread_ref="C1:400.0")
    assert not a.thread_answered(platform="teams", thread_ref="C1:100.0")
    assert b.thread_history(platform="teams", thread_ref="C1:100.0") == []


def test_uploads_are_popped_once_and_say_whether_another_file_holds_the_document(make_state: Factory) -> None:
    a, b = make_state(), make_state()
    a.record_upload(platform="slack", file_ref="F1", scope="slack:T:C1", doc_id="d1", user="U1")
    a.record_upload(platform="slack", file_ref="F1", scope="slack:T:C2", doc_id="d1", user="U1")
    b.record_upload(platform="slack", file_ref="F2", scope="slack:T:C2", doc_id="d1", user="U2")  # same bytes
    popped = sorted(b.pop_uploads(platform="slack", file_ref="F1"))
    assert popped == [("slack:T:C1", "d1", False), ("slack:T:C2", "d1", True)]
    assert a.pop_uploads(platform="slack", file_ref="F1") == []
    assert a.pop_uploads(platform="slack", file_ref="F2") == [("slack:T:C2", "d1", False)]


def test_assistant_thread_context_is_shared(make_state: Factory) -> None:
    a, b = make_state(), make_state()
    assert b.thread_context(platform="slack", thread_ref="D1:1.0") is None
    a.save_thread_context(platform="slack", thread_ref="D1:1.0", user="U1", context_channel="C9")
    assert b.thread_context(platform="slack", thread_ref="D1:1.0") == ("U1", "C9")
    b.save_thread_context(platform="slack", thread_ref="D1:1.0", user="U1", context_channel="")
    assert a.thread_context(platform="slack", thread_ref="D1:1.0") == ("U1", "")


# --- the Elasticsearch state without a server ------------------------------------------------------------


def test_open_state_picks_elasticsearch_when_its_url_is_set(tmp_path: Path) -> None:
    from connectors.elasticsearch_state import ElasticsearchState

    state = open_state(Settings(_env_file=None, data_dir=tmp_path / "d", elasticsearch_url="http://127.0.0.1:9",
                                elasticsearch_state_prefix="acme-state"))  # type: ignore[call-arg]
    assert isinstance(state, ElasticsearchState) and isinstance(state, ChatState)
    assert state.index("work") == "acme-state-work"
    assert not (tmp_path / "d" / "state.sqlite3").exists()  # nothing local: replicas share the indices
    assert Settings(_env_file=None).elasticsearch_state_prefix == "citebot-state"  # type: ignore[call-arg]


def test_elasticsearch_state_checks_its_settings_and_says_what_to_fix_when_down() -> None:
    import socket

    from connectors.elasticsearch_state import ElasticsearchState, doc_id

    with pytest.raises(ValueError, match="CITEBOT_ELASTICSEARCH_URL"):
        ElasticsearchState(hosts="localhost:9200")
    with pytest.raises(ValueError, match="PASSWORD"):
        ElasticsearchState(hosts="http://127.0.0.1:9200", username="elastic")
    with pytest.raises(ValueError, match="STATE_PREFIX"):
        ElasticsearchState(hosts="http://127.0.0.1:9200", prefix="Citebot State")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    state = ElasticsearchState(hosts=f"http://elastic:hunter2@127.0.0.1:{port}", request_timeout=2)
    with pytest.raises(StateError, match="CITEBOT_ELASTICSEARCH_URL") as err:
        state.add_work("slack:event:E1", kind="slack.answer", payload="{}")
    assert "hunter2" not in str(err.value)
    # deterministic ids: the same key always, distinct keys never collide, long ones are hashed
    assert doc_id("slack:event:E1") == doc_id("slack:event:E1") == "slack:event:E1"
    assert doc_id("a|b", "c") != doc_id("a", "b|c")
    assert len(doc_id("x" * 1000)) < 100


def test_an_add_past_one_persons_bound_is_refused_in_the_same_call_and_a_redelivery_is_still_a_no_op(
    make_state: Factory,
) -> None:
    s = make_state(host="a")
    for n in range(2):
        assert s.add_work(f"a{n}", kind="slack.answer", payload="{}", who="X:a", tenant="X", max_waiting=2)
    with pytest.raises(QueueFull):
        s.add_work("a2", kind="slack.answer", payload="{}", who="X:a", tenant="X", max_waiting=2)
    assert not s.add_work("a1", kind="slack.answer", payload="{}", who="X:a", tenant="X", max_waiting=2)
    assert s.add_work("b0", kind="slack.answer", payload="{}", who="X:b", tenant="X", max_waiting=2)
    assert s.add_work("a3", kind="slack.answer", payload="{}", who="X:a", tenant="X")  # no bound asked for
    [taken] = s.take_work(owner="w", lease_s=60, kinds=KINDS, key="a0")
    with pytest.raises(QueueFull):  # a running item still waits: a0 (running), a1, a3
        s.add_work("a4", kind="slack.answer", payload="{}", who="X:a", tenant="X", max_waiting=3)
    assert s.end_work(taken.key, owner="w")  # done work no longer waits: one more fits
    assert s.add_work("a4", kind="slack.answer", payload="{}", who="X:a", tenant="X", max_waiting=3)
    # accepts of one person at the same moment (one shared SQLite transaction) are bounded together
    results: list[object] = []

    def add(n: int) -> None:
        try:
            results.append(s.add_work(f"c{n}", kind="slack.answer", payload="{}", who="Y:c", tenant="Y",
                                      max_waiting=3))
        except QueueFull as e:
            results.append(e)

    pool = [threading.Thread(target=add, args=(n,)) for n in range(6)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert s.count_work(kinds=KINDS, states=("pending",), who="Y:c") == results.count(True)
    if isinstance(s, StateLog):
        assert results.count(True) == 3


def test_takes_go_round_tenants_then_users_then_oldest_and_a_burst_waits_its_turn(make_state: Factory) -> None:
    """Issue 39 item 6: user a of tenant X asked three times, then b of X and c of Y once each; one worker."""
    s = make_state(host="a")
    for n in range(3):
        s.add_work(f"a{n}", kind="slack.answer", payload="{}", who="X:a", tenant="X")
    s.add_work("b0", kind="slack.answer", payload="{}", who="X:b", tenant="X")
    s.add_work("c0", kind="slack.answer", payload="{}", who="Y:c", tenant="Y")
    assert s.count_work(kinds=KINDS, states=("pending", "running"), who="X:a") == 3
    order = []
    for _ in range(5):
        [item] = s.take_work(owner="w", lease_s=60, kinds=KINDS)
        order.append(item.key)
        assert s.end_work(item.key, owner="w")
    assert order == ["a0", "c0", "b0", "a1", "a2"]  # FIFO would be a0 a1 a2 b0 c0
    assert s.count_work(kinds=KINDS, states=("pending", "running"), who="X:a") == 0


def test_a_probe_write_leaves_no_trace_in_the_journal(make_state: Factory) -> None:
    s = make_state(host="a")
    s.add_work("k1", kind="slack.answer", payload="{}")
    s.probe()
    s.probe()
    assert [i.key for i in s.work_items()] == ["k1"]
