from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from connectors.state_api import AnswerRecord
from connectors.state_log import StateLog, feedback_as_json
from pipelines.models import Answer, Citation, RetrievedChunk


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


@pytest.fixture
def log(tmp_path: Path) -> StateLog:
    return StateLog(tmp_path / "state.sqlite3")


def _record(log: StateLog, ref: str = "C1:111.1", thread: str = "C1:100.0", q: str = "How much leave?") -> None:
    log.record_answer(platform="slack", message_ref=ref, thread_ref=thread, scope="slack:T1:C1", user="U1",
                      question=q, answer_json=_answer().model_dump_json())


def test_feedback_links_to_the_answer_and_survives_reopen(log: StateLog, tmp_path: Path) -> None:
    _record(log)
    assert log.add_feedback(platform="slack", message_ref="C1:111.1", user="U2", polarity="up")
    reopened = StateLog(tmp_path / "state.sqlite3")
    [entry] = reopened.feedback()
    out = json.loads(feedback_as_json([entry]))[0]
    assert out["question"] == "How much leave?"
    assert out["polarity"] == "up"
    assert out["scope"] == "slack:T1:C1"
    assert out["citations"][0]["quote"] == "Employees get 25 days of annual leave."
    assert out["retrieved_chunk_ids"] == ["d1:00003"]
    assert {"answer", "platform", "user", "at"} <= set(out)


def test_reaction_on_a_message_that_is_not_an_answer_is_ignored(log: StateLog) -> None:
    assert not log.add_feedback(platform="slack", message_ref="C1:999.9", user="U2", polarity="down")
    assert log.feedback() == []


def test_changing_and_retracting_a_reaction(log: StateLog) -> None:
    _record(log)
    log.add_feedback(platform="slack", message_ref="C1:111.1", user="U2", polarity="up")
    log.add_feedback(platform="slack", message_ref="C1:111.1", user="U2", polarity="down")
    assert [e.polarity for e in log.feedback()] == ["down"]
    assert not log.retract_feedback(platform="slack", message_ref="C1:111.1", user="U2", polarity="up")
    assert log.retract_feedback(platform="slack", message_ref="C1:111.1", user="U2", polarity="down")
    assert log.feedback() == []
    assert len(log.feedback(include_retracted=True)) == 1


def test_filters_by_polarity(log: StateLog) -> None:
    _record(log, ref="C1:1.1")
    _record(log, ref="C1:2.2", q="Who approves?")
    log.add_feedback(platform="slack", message_ref="C1:1.1", user="U2", polarity="up")
    log.add_feedback(platform="slack", message_ref="C1:2.2", user="U3", polarity="down")
    assert [e.question for e in log.feedback(polarity="down")] == ["Who approves?"]
    assert log.feedback(since="2999-01-01") == []


def test_thread_history_is_oldest_first_and_per_thread(log: StateLog) -> None:
    _record(log, ref="C1:1.1", q="first")
    _record(log, ref="C1:2.2", q="second")
    _record(log, ref="C1:3.3", thread="C1:300.0", q="other thread")
    turns = log.thread_history(platform="slack", thread_ref="C1:100.0")
    assert [t.text for t in turns if t.role == "user"] == ["first", "second"]
    assert log.thread_answered(platform="slack", thread_ref="C1:300.0")
    assert not log.thread_answered(platform="slack", thread_ref="C1:400.0")
    assert not log.thread_answered(platform="teams", thread_ref="C1:100.0")


def test_a_state_file_from_before_the_feedback_form_gains_its_choice_column(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(
        """CREATE TABLE feedback (id INTEGER PRIMARY KEY AUTOINCREMENT, platform TEXT NOT NULL,
           message_ref TEXT NOT NULL, scope TEXT NOT NULL, user TEXT NOT NULL, polarity TEXT NOT NULL,
           comment TEXT NOT NULL DEFAULT '', at TEXT NOT NULL, retracted_at TEXT,
           UNIQUE (platform, message_ref, user));"""
    )
    old.close()
    log = StateLog(path)
    _record(log)
    assert log.add_feedback(platform="slack", message_ref="C1:111.1", user="U2", polarity="down",
                            comment="wrong page", choice="wrong_passage")
    [entry] = log.feedback()
    assert (entry.choice, entry.comment) == ("wrong_passage", "wrong page")


# --- a journal that cannot take a write (issue 39 item 3) --------------------------------------------------------
def test_a_journal_locked_by_another_process_refuses_an_add_instead_of_waiting(tmp_path: Path) -> None:
    import sqlite3
    import subprocess
    import sys

    path = tmp_path / "state.sqlite3"
    log = StateLog(path)
    assert log.add_work("k0", kind="slack.answer", payload="{}")
    holder = subprocess.Popen(  # another process holds the write lock until told to let go
        [sys.executable, "-c", "import sqlite3, sys; db = sqlite3.connect(sys.argv[1], isolation_level=None); "
         "db.execute('BEGIN EXCLUSIVE'); print('held', flush=True); sys.stdin.readline(); db.execute('COMMIT')",
         str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            log.add_work("k1", kind="slack.answer", payload="{}")
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            log.probe()
        assert holder.poll() is None  # refused while the other process still held the lock
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(30)
    log.probe()
    assert log.add_work("k1", kind="slack.answer", payload="{}")  # the refused item, re-sent, is journaled once
    assert [i.key for i in log.work_items()] == ["k0", "k1"]


def test_a_damaged_journal_stops_start_up_naming_the_file_and_what_to_do(tmp_path: Path) -> None:
    from connectors.state_api import StateError
    from tests.helpers.stores import damage_table

    path = tmp_path / "state.sqlite3"
    log = StateLog(path)
    for n in range(50):
        log.add_work(f"k{n}", kind="slack.answer", payload="x" * 500)
    log.close()
    damage_table(path, "work_items")
    with pytest.raises(StateError, match="damaged") as raised:
        StateLog(path)
    assert str(path) in str(raised.value) and "backup" in str(raised.value)


@pytest.mark.parametrize("case", ["header", "not_a_folder"])
def test_every_start_up_failure_of_the_chat_state_names_its_cause(tmp_path: Path, case: str) -> None:
    from connectors.state_api import StateError

    if case == "header":
        path = tmp_path / "state.sqlite3"
        StateLog(path).close()
        with path.open("r+b") as f:
            f.write(b"not a sqlite file at all")
        expected = "damaged"
    else:
        (tmp_path / "data").write_text("a file where the data folder should be")
        path = tmp_path / "data" / "state.sqlite3"
        expected = "CITEBOT_DATA_DIR"
    with pytest.raises(StateError, match=expected) as raised:
        StateLog(path)
    assert str(path) in str(raised.value)


def test_a_journal_from_before_fair_takes_is_migrated(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "state.sqlite3"
    db = sqlite3.connect(path)
    db.execute("""CREATE TABLE work_items (key TEXT PRIMARY KEY, kind TEXT NOT NULL, payload TEXT NOT NULL,
                  state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, owner TEXT NOT NULL DEFAULT '',
                  lease_until REAL NOT NULL DEFAULT 0, note TEXT NOT NULL DEFAULT '{}', created REAL NOT NULL,
                  updated REAL NOT NULL)""")
    db.execute("INSERT INTO work_items (key, kind, payload, state, created, updated) "
               "VALUES ('old', 'slack.answer', '{}', 'pending', 1, 1)")
    db.commit()
    db.close()
    log = StateLog(path)
    assert log.add_work("new", kind="slack.answer", payload="{}", who="slack:T1:U1", tenant="T1")
    taken = [log.take_work(owner="w", lease_s=60, kinds=("slack.answer",))[0].key for _ in range(2)]
    assert taken == ["old", "new"]


def test_a_state_file_with_the_retired_claims_table_opens_and_drops_it(tmp_path: Path) -> None:
    """Before the journal carried Teams' quick replies their dedup was a ``seen_events`` table: a data dir made then
    opens, keeps its answers and journal, and loses only that table and its index."""
    import sqlite3

    path = tmp_path / "state.sqlite3"
    old = StateLog(path)
    _record(old)
    assert old.add_work("k1", kind="slack.answer", payload="{}")
    old.close()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE seen_events (key TEXT PRIMARY KEY, at TEXT NOT NULL, state TEXT NOT NULL DEFAULT "
                   "'done', started REAL, budget_s REAL, pid INTEGER, host TEXT, run TEXT, attempts INTEGER NOT NULL "
                   "DEFAULT 1, note TEXT)")
        db.execute("CREATE INDEX seen_events_at ON seen_events (at)")
        db.execute("INSERT INTO seen_events (key, at) VALUES ('teams:msg:c:1', '2026-01-01T00:00:00+00:00')")
    log = StateLog(path)
    assert log.find_answer(platform="slack", message_ref="C1:111.1") is not None
    assert [i.key for i in log.work_items()] == ["k1"]
    with sqlite3.connect(path) as db:
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    assert not {"seen_events", "seen_events_at"} & names


def test_an_answer_and_the_end_of_its_item_are_one_transaction(log: StateLog, tmp_path: Path) -> None:
    """If ending the item fails, its answer is not recorded either (and the other way round): a take-over finds the
    item running and records the answer it posted, never an item done without its answer's record."""
    log.add_work("k1", kind="slack.answer", payload="{}")
    log.take_work(owner="w", lease_s=60, kinds=("slack.answer",))
    record = AnswerRecord("slack", "C1:111.1", "C1:100.0", "slack:T1:C1", "U1", "How much leave?",
                          _answer().model_dump_json())
    with sqlite3.connect(tmp_path / "state.sqlite3") as db:
        db.execute("""CREATE TRIGGER no_end BEFORE UPDATE OF state ON work_items
                      BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END""")
    with pytest.raises(sqlite3.Error):
        log.end_work("k1", owner="w", answer=record)
    assert log.find_answer(platform="slack", message_ref="C1:111.1") is None
    assert [i.state for i in log.work_items()] == ["running"]
    with sqlite3.connect(tmp_path / "state.sqlite3") as db:
        db.execute("DROP TRIGGER no_end")
    assert log.end_work("k1", owner="w", answer=record)
    assert log.find_answer(platform="slack", message_ref="C1:111.1") is not None
    assert [i.state for i in log.work_items()] == ["done"]
