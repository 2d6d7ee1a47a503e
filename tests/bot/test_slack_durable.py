"""Nothing acknowledged is lost: the real ``citebot serve slack --http``, killed with SIGKILL mid-work.

Each test runs the command line itself as a process group on one data directory, against the local Slack
stand-in (:class:`eval.fakes.slack_api.FakeSlack`), and kills the group as the OOM killer or a node failure
would. The restarted bot (or the other replica) is sent nothing again: what was acknowledged is in the work
journal, and its lease running out is all it takes.

* a burst of mentions and an upload, killed with answers half posted and the upload mid-download: after the
  restart every mention is answered exactly once and the upload is indexed in its own status message;
* two replicas, one killed mid-burst: the live one takes its work over;
* an answer posted just before the kill, then Slack's retry of the event: no second answer;
* a ``/citebot <question>`` acknowledged ("Searching…") but not yet answered at the kill: the restarted bot
  gives the private answer, once, at the command's ``response_url`` (Slack never re-sends a slash command);
* a click on a reading's button, acknowledged but not yet answered at the kill: answered once after the restart;
* a journal another process holds locked: mentions, an upload and a click are refused (503, so Slack re-sends), not
  acknowledged, ``/readyz`` is 503 until the lock goes, and each re-sent one is then done once;
* a damaged journal: the bot does not start, and says which file and what to do;
* SIGTERM with twenty acknowledged mentions, a drain budget shorter than one post: the bot exits (no post starts
  after the deadline; the one on its way is left to its lease, not handed back), and after the restart each is
  answered once;
* killed while chat.startStream's reply is on its way (the streaming message exists, its ts never noted): the
  restarted bot finishes that message, and starts no second one;
* one member's burst of DM questions and a colleague's question in a channel: the colleague's is answered next,
  not after the burst, and the member's questions past CITEBOT_MAX_QUEUED_PER_USER are refused with a notice to
  them, never dropped silently;
* an item whose every attempt died, its answer posted by the last one before it could be recorded: the give-up
  records it (no apology), so a follow-up in its thread is answered;
* a data dir on a file system of its own (a tmpfs in the bot's own mount namespace), read-only or full at
  start-up: the bot does not start, and names the directory and the cause; filled to its last byte while running:
  mentions, an upload and a click are refused (503), ``/readyz`` is 503, and once space is back each is done once;
  an ext4 data dir the kernel turns read-only after a disk error while running: the same refused, and the next start
  on the repaired disk does each re-sent one once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eval.fakes.slack_api import (
    TEAM,
    FakeSlack,
    button_click,
    event_callback,
    mention,
    message,
    post_interaction,
    post_signed,
)
from tests.helpers import mounts
from tests.helpers.mounts import DataDisk
from tests.helpers.pdfs import make_pdf
from tests.helpers.slack import SlackProcess

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CHANNEL, ASKER, UPLOADER = "C0DURABLE", "U0ASKER", "U0UPLOADER"
POLICY = [["4 Leave", "Employees may take eighteen weeks of paid parental leave after the birth of a child."]]
QUESTION, EXPECTED = "How many weeks of parental leave do employees get?", "eighteen weeks"
LEASE_S = 4.0
AFTER_RESTART_S = 30.0  # the promise: all of it within 30 s of the restart


class _DownloadsHeld(dict):  # type: ignore[type-arg]
    """FakeSlack's hosted files; downloads of the files in ``held`` wait (the bot is mid-ingest) until
    ``release``."""

    def __init__(self) -> None:
        super().__init__()
        self.held: set[str] = set()
        self.release = threading.Event()

    def get(self, key: Any, default: Any = None) -> Any:
        if key in self.held:
            self.release.wait(120)
        return super().get(key, default)


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack() as f:
        f.files = _DownloadsHeld()
        yield f
        f.files.release.set()
        for held in f.hold_replies.values():
            held.set()


def _bot(fake: FakeSlack, data_dir: Path, log: Path, **settings: str) -> SlackProcess:
    """``citebot serve slack --http`` with a short lease, one worker, no per-person bound, and ``settings``."""
    return SlackProcess(fake, data_dir, log, **{"CITEBOT_WORK_LEASE_S": str(LEASE_S), "CITEBOT_WORK_SCAN_S": "0.5",
                                                "CITEBOT_SLACK_WORKERS": "1",
                                                # one asker stands for many here, unless a test bounds them
                                                "CITEBOT_MAX_QUEUED_PER_USER": "1000", **settings})


def _answers(fake: FakeSlack) -> Counter[str]:
    """How many answers (posts noted as an item's answer) each thread got."""
    with fake._cond:
        posted = list(fake.messages.get(CHANNEL, []))
    return Counter(
        m["thread_ts"] for m in posted
        if (m.get("metadata") or {}).get("event_payload", {}).get("slot") == "answer_ts"
    )


def _answer_texts(fake: FakeSlack) -> list[str]:
    return [c.params["text"] for c in fake.calls_to("chat.postMessage", channel=CHANNEL) if c.params.get("blocks")]


def _index_handbook(fake: FakeSlack, bot: SlackProcess) -> None:
    fake.add_file("F0HANDBOOK", "handbook.pdf", make_pdf(POLICY))
    shared = {"type": "file_shared", "file_id": "F0HANDBOOK", "user_id": UPLOADER, "file": {"id": "F0HANDBOOK"},
              "channel_id": CHANNEL}
    assert post_signed(bot.url, event_callback(shared))[0] == 200
    fake.wait_until(lambda: any(str(c.params.get("text", "")).startswith("Indexed handbook.pdf")
                                for c in fake.calls_to("chat.update", channel=CHANNEL)), timeout=180)


def _ask(fake: FakeSlack, url: str, n: int, *, first: int = 0) -> list[str]:
    asked = []
    for i in range(first, first + n):
        ts = f"{2000 + i}.000100"
        status, _ = post_signed(url, event_callback(mention(CHANNEL, ASKER, QUESTION, ts), event_id=f"Ev0DUR{i:04d}"))
        assert status == 200
        asked.append(ts)
    return asked


def test_a_bot_killed_mid_burst_and_mid_upload_answers_everything_once_after_the_restart(
    tmp_path: Path, fake: FakeSlack
) -> None:
    data = tmp_path / "data"
    first = _bot(fake, data, tmp_path / "first.log")
    try:
        first.wait_ready()
        _index_handbook(fake, first)
        # an upload whose download hangs: killed mid-ingest, with its "Indexing…" status posted
        fake.files.held.add("F0REPORT")
        fake.add_file("F0REPORT", "report.pdf", make_pdf([["1 Results", "Revenue grew by nine percent."]]))
        shared = {"type": "file_shared", "file_id": "F0REPORT", "user_id": UPLOADER, "file": {"id": "F0REPORT"},
                  "channel_id": CHANNEL}
        assert post_signed(first.url, event_callback(shared, event_id="Ev0DURFILE"))[0] == 200
        asked = _ask(fake, first.url, 20)  # all acknowledged
        fake.wait_until(lambda: sum(_answers(fake).values()) >= 5, timeout=180)
    finally:
        first.kill()
    answered_before = sum(_answers(fake).values())
    assert answered_before < 20, "the bot answered everything before the kill: nothing left to test"
    [status] = [c for c in fake.calls_to("chat.postMessage", channel=CHANNEL)
                if c.params["text"] == "Indexing report.pdf…"]
    fake.files.release.set()

    second = _bot(fake, data, tmp_path / "second.log")
    try:
        ready = second.wait_ready()
        fake.wait_until(lambda: set(_answers(fake)) >= set(asked), timeout=AFTER_RESTART_S + LEASE_S)
        fake.wait_until(lambda: any(str(c.params.get("text", "")).startswith("Indexed report.pdf")
                                    for c in fake.calls_to("chat.update", channel=CHANNEL)), timeout=AFTER_RESTART_S)
        took = time.monotonic() - ready
        time.sleep(LEASE_S + 1)  # room for a wrong second answer to show
    finally:
        second.kill()
    assert took < AFTER_RESTART_S
    assert _answers(fake) == Counter({ts: 1 for ts in asked})  # each mention answered exactly once
    assert all(EXPECTED in text for text in _answer_texts(fake))
    updates = [c.params for c in fake.calls_to("chat.update", channel=CHANNEL) if c.params["ts"] == status.reply["ts"]]
    assert updates[-1]["text"].startswith("Indexed report.pdf")  # in the status message the killed bot posted
    assert len([c for c in fake.calls_to("chat.postMessage", channel=CHANNEL)
                if c.params["text"] == "Indexing report.pdf…"]) == 1


def test_the_other_replica_takes_over_the_work_of_a_killed_one(tmp_path: Path, fake: FakeSlack) -> None:
    data = tmp_path / "data"
    a, b = _bot(fake, data, tmp_path / "a.log"), _bot(fake, data, tmp_path / "b.log")
    try:
        a.wait_ready()
        b.wait_ready()
        _index_handbook(fake, a)
        # each replica's one worker is held posting an answer (its reply never comes), so a dies holding claimed
        # work: without the hold, a could die between two items and leave b nothing to take over
        fake.hold_replies["chat.postMessage"] = threading.Event()
        asked = _ask(fake, a.url, 12)  # all to replica a
        fake.wait_until(lambda: sum(_answers(fake).values()) == 2, timeout=180)
        a.kill()
        fake.hold_replies.pop("chat.postMessage").set()
        fake.wait_until(lambda: set(_answers(fake)) >= set(asked), timeout=120)
        time.sleep(LEASE_S + 1)
    finally:
        a.kill()
        b.kill()
    assert _answers(fake) == Counter({ts: 1 for ts in asked})
    assert '"work_taken_over"' in b.log.read_text()  # b did a's work, nobody re-sent it


def test_an_answer_posted_just_before_the_kill_is_not_posted_again_on_slacks_retry(
    tmp_path: Path, fake: FakeSlack
) -> None:
    data = tmp_path / "data"
    first = _bot(fake, data, tmp_path / "first.log")
    try:
        first.wait_ready()
        _index_handbook(fake, first)
        fake.hold_replies["chat.postMessage"] = threading.Event()  # the answer is posted; its reply never comes
        delivery = event_callback(mention(CHANNEL, ASKER, QUESTION, "3000.000100"), event_id="Ev0DURPOSTED")
        assert post_signed(first.url, delivery)[0] == 200
        fake.wait_until(lambda: sum(_answers(fake).values()) == 1, timeout=180)
    finally:
        first.kill()
    fake.hold_replies.pop("chat.postMessage").set()

    second = _bot(fake, data, tmp_path / "second.log")
    try:
        second.wait_ready()
        for retry in (1, 2):  # Slack re-sends the event it saw no ack for... to the restarted bot
            assert post_signed(second.url, delivery, retry_num=retry)[0] == 200
        fake.wait_until(lambda: '"posted_before_found"' in second.log.read_text(), timeout=LEASE_S + 30)
        time.sleep(2)
    finally:
        second.kill()
    assert _answers(fake) == Counter({"3000.000100": 1})
    assert len(_answer_texts(fake)) == 1


def test_a_private_question_acknowledged_before_the_kill_is_answered_after_the_restart(
    tmp_path: Path, fake: FakeSlack
) -> None:
    data = tmp_path / "data"
    first = _bot(fake, data, tmp_path / "first.log")
    try:
        first.wait_ready()
        _index_handbook(fake, first)
        # the one worker is held posting a thread answer (its reply never comes): the command waits behind it
        fake.hold_replies["chat.postMessage"] = threading.Event()
        busy = event_callback(mention(CHANNEL, ASKER, QUESTION, "4000.000100"), event_id="Ev0DURBUSY")
        assert post_signed(first.url, busy)[0] == 200
        fake.wait_until(lambda: sum(_answers(fake).values()) == 1, timeout=180)
        command = {
            "token": "unused", "team_id": TEAM, "channel_id": CHANNEL, "channel_name": "general", "user_id": ASKER,
            "command": "/citebot", "text": QUESTION, "response_url": fake.response_url("private"),
            "trigger_id": "4.5.6",
        }
        status, ack = post_signed(first.url, command, form=True)
        assert status == 200 and b"Searching" in ack  # acknowledged, only to the asker
        time.sleep(1)
        assert not fake.calls_to("response_url")  # not answered before the kill
    finally:
        first.kill()
    fake.hold_replies.pop("chat.postMessage").set()

    second = _bot(fake, data, tmp_path / "second.log")
    try:
        second.wait_ready()
        fake.wait_for("response_url", name="private", timeout=AFTER_RESTART_S + LEASE_S)
        time.sleep(LEASE_S + 1)  # room for a second answer to show
    finally:
        second.kill()
    [private] = [c.params for c in fake.calls_to("response_url")]
    assert private["response_type"] == "ephemeral" and EXPECTED in private["text"]
    assert any(b["type"] == "context_actions" for b in private["blocks"])  # with its 👍/👎
    assert _answers(fake) == Counter({"4000.000100": 1})  # nothing posted for the channel to see


def test_an_answer_killed_mid_stream_is_finished_in_its_own_message_after_the_restart(
    tmp_path: Path, fake: FakeSlack
) -> None:
    """LLM mode (issue 24 item 8): the first sentence is streamed into the thread, the bot is killed while the model
    is still writing; the restarted bot finishes that same message with the whole answer, and posts no other."""
    import json

    from eval.fakes.openai_api import FakeOpenAI, passages_in

    sentence = POLICY[0][1]

    def model(req: dict[str, Any]) -> str:
        chunk = next(cid for cid, text in passages_in(req) if "eighteen weeks" in text)
        return json.dumps({"answerable": True, "citations": [{"n": 1, "chunk_id": chunk, "quote": sentence}],
                           "answer": "Employees get eighteen weeks [1]. The leave is paid [1]."})

    data = tmp_path / "data"
    with FakeOpenAI(model) as llm:
        settings = {"OPENAI_BASE_URL": llm.base_url, "CITEBOT_LLM_MODEL": "fake-model"}
        gate = llm.hold_stream("The leave is")
        first = _bot(fake, data, tmp_path / "first.log", **settings)
        try:
            first.wait_ready()
            _index_handbook(fake, first)
            (root,) = _ask(fake, first.url, 1)
            fake.wait_for("chat.startStream", channel=CHANNEL, thread_ts=root, timeout=180)
            time.sleep(2)  # the stream's ts is journaled as soon as Slack gives it
        finally:
            first.kill()
            gate.set()
        (streamed,) = fake.thread(CHANNEL, root)
        assert streamed["streaming"] and streamed["text"] == r"Employees get eighteen weeks \[1\]."

        second = _bot(fake, data, tmp_path / "second.log", **settings)
        try:
            second.wait_ready()
            fake.wait_until(lambda: sum(_answers(fake).values()) == 1, timeout=LEASE_S + AFTER_RESTART_S)
        finally:
            second.kill()
    (answer,) = fake.thread(CHANNEL, root)
    assert answer["ts"] == streamed["ts"] and not answer["streaming"]
    assert answer["text"].startswith("Employees get eighteen weeks [1]. The leave is paid [1].")
    assert any(b["type"] == "context_actions" for b in answer["blocks"])
    assert len(fake.calls_to("chat.startStream")) == 1 and not _answer_texts(fake)


def test_a_click_on_a_reading_acknowledged_before_the_kill_is_answered_after_the_restart(
    tmp_path: Path, fake: FakeSlack
) -> None:
    """A "which one?" answer's button: the click is journaled before its ack, as a mention is, so a bot killed
    before it answered leaves it to the restarted one, which answers in the thread of the answer clicked, once."""
    data = tmp_path / "data"
    first = _bot(fake, data, tmp_path / "first.log")
    offered_in = "5001.000100"  # the thread of the "which one?" answer clicked
    try:
        first.wait_ready()
        _index_handbook(fake, first)
        # the one worker is held posting a thread answer (its reply never comes): the click waits behind it
        fake.hold_replies["chat.postMessage"] = threading.Event()
        busy = event_callback(mention(CHANNEL, ASKER, QUESTION, "5000.000100"), event_id="Ev0DURCLICK")
        assert post_signed(first.url, busy)[0] == 200
        fake.wait_until(lambda: sum(_answers(fake).values()) == 1, timeout=180)
        click = button_click(user=ASKER, channel=CHANNEL, message_ts="5001.000200", thread_ts=offered_in,
                             action_id="citebot_choice_1", value=QUESTION)
        # acknowledged while the one worker is held: the ack did not wait for an answer
        assert post_interaction(first.url, click)[0] == 200
        time.sleep(1)
        assert _answers(fake)[offered_in] == 0  # not answered before the kill
    finally:
        first.kill()
    fake.hold_replies.pop("chat.postMessage").set()

    second = _bot(fake, data, tmp_path / "second.log")
    try:
        second.wait_ready()
        fake.wait_until(lambda: _answers(fake)[offered_in] == 1, timeout=AFTER_RESTART_S + LEASE_S)
        time.sleep(LEASE_S + 1)  # room for a second answer to show
    finally:
        second.kill()
    assert _answers(fake)[offered_in] == 1
    assert any(EXPECTED in t for t in _answer_texts(fake))


def _readyz(bot: SlackProcess) -> int:
    try:
        with urllib.request.urlopen(f"{bot.base}/readyz", timeout=10) as resp:  # noqa: S310 - loopback
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def _hold_write_lock(path: Path) -> subprocess.Popen[str]:
    """Another process holding the SQLite file's write lock (a stuck replica, a backup) until its stdin closes."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys; db = sqlite3.connect(sys.argv[1], isolation_level=None); "
         "db.execute('BEGIN EXCLUSIVE'); print('held', flush=True); sys.stdin.readline(); db.execute('COMMIT')",
         str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_work_the_journal_cannot_take_is_refused_not_acknowledged_and_done_once_when_re_sent(
    tmp_path: Path, fake: FakeSlack
) -> None:
    """Issue 39 item 3: the journal locked by another process while four mentions, an upload and a click arrive."""
    data = tmp_path / "data"
    bot = _bot(fake, data, tmp_path / "bot.log")
    mentions = [event_callback(mention(CHANNEL, ASKER, QUESTION, f"{6000 + i}.000100"), event_id=f"Ev0LOCK{i}")
                for i in range(4)]
    fake.add_file("F0HANDBOOK", "handbook.pdf", make_pdf(POLICY))
    upload = event_callback({"type": "file_shared", "file_id": "F0HANDBOOK", "user_id": UPLOADER,
                             "file": {"id": "F0HANDBOOK"}, "channel_id": CHANNEL}, event_id="Ev0LOCKFILE")
    clicked_in = "6100.000100"
    click = button_click(user=ASKER, channel=CHANNEL, message_ts="6100.000200", thread_ts=clicked_in,
                         action_id="citebot_choice_1", value=QUESTION)
    try:
        bot.wait_ready()
        holder = _hold_write_lock(data / "state.sqlite3")
        try:
            refused = [post_signed(bot.url, m)[0] for m in mentions]
            refused += [post_signed(bot.url, upload)[0], post_interaction(bot.url, click)[0]]
            ready_while_locked = _readyz(bot)
            still_held = holder.poll() is None  # all of the above happened while the lock was held
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(30)
        fake.wait_until(lambda: _readyz(bot) == 200, timeout=60)  # ready again by itself: nothing re-sent yet
        assert not fake.calls_to("chat.postMessage")  # nothing of the refused work was done
        resent = [post_signed(bot.url, m, retry_num=1)[0] for m in mentions]
        resent += [post_signed(bot.url, upload, retry_num=1)[0], post_interaction(bot.url, click)[0]]
        fake.wait_until(lambda: any(str(c.params.get("text", "")).startswith("Indexed handbook.pdf")
                                    for c in fake.calls_to("chat.update", channel=CHANNEL)), timeout=180)
        threads = {*(m["event"]["ts"] for m in mentions), clicked_in}
        fake.wait_until(lambda: set(_answers(fake)) >= threads, timeout=180)
        time.sleep(2)  # room for a wrong second answer to show
    finally:
        bot.kill()
    assert still_held and refused == [503] * 6 and ready_while_locked == 503
    assert resent == [200] * 6
    assert _answers(fake) == Counter({ts: 1 for ts in threads})  # each answered once
    assert bot.logged("work_not_recorded") >= 1


def test_a_damaged_journal_stops_the_bot_with_a_message_naming_the_file(tmp_path: Path, fake: FakeSlack) -> None:
    from connectors.state_log import StateLog
    from tests.helpers.stores import damage_table

    data = tmp_path / "data"
    state = StateLog(data / "state.sqlite3")
    for n in range(50):
        state.add_work(f"k{n}", kind="slack.answer", payload="x" * 500)
    state.close()
    damage_table(data / "state.sqlite3", "work_items")
    bot = _bot(fake, data, tmp_path / "bot.log")
    try:
        assert bot.proc.wait(300) == 2
    finally:
        bot.kill()
    said = bot.log.read_text()
    assert str(data / "state.sqlite3") in said and "damaged" in said and "SLACK_BOT_TOKEN" not in said


def test_an_item_given_up_after_its_answer_was_posted_still_records_it(tmp_path: Path, fake: FakeSlack) -> None:
    """Issue 39 item 4: three takes died, the third after posting the answer (noted) but before recording it."""
    import json

    from connectors.state_log import StateLog
    from pipelines.models import Answer

    data, root, answer_ts = tmp_path / "data", "7000.000100", "7000.000200"
    body = event_callback(mention(CHANNEL, ASKER, QUESTION, root), event_id="Ev0GIVENUP")
    key = f"slack:answer:{body['team_id']}:{CHANNEL}:{root}"
    state = StateLog(data / "state.sqlite3")
    state.add_work(key, kind="slack.answer", payload=json.dumps({"body": body}))
    for _ in range(3):  # three takes, each process killed before it ended the item
        time.sleep(0.01)
        assert state.take_work(owner="dead", lease_s=0.001, kinds=("slack.answer",))
    state.note_work(key, answer=Answer(text="Employees get eighteen weeks.").model_dump_json(), answer_ts=answer_ts)
    state.close()
    bot = _bot(fake, data, tmp_path / "bot.log")
    try:
        bot.wait_ready()
        fake.wait_until(lambda: bot.logged("work_given_up") == 1, timeout=60)
        follow_up = event_callback(message(CHANNEL, ASKER, "Is it paid?", "7000.000300", thread_ts=root),
                                   event_id="Ev0FOLLOWUP")
        assert post_signed(bot.url, follow_up)[0] == 200
        fake.wait_until(lambda: _answers(fake)[root] == 1, timeout=180)  # the follow-up is answered in the thread
    finally:
        bot.kill()
    state = StateLog(data / "state.sqlite3")
    try:
        assert state.find_answer(platform="slack", message_ref=f"{CHANNEL}:{answer_ts}") is not None
        assert [i.key for i in state.work_items(state="failed")] == [key]
    finally:
        state.close()
    assert not [c for c in fake.calls_to("chat.postMessage") if c.params.get("text", "").startswith("Sorry")]


class _SlowReplies(threading.Event):
    """A held reply that comes after ``delay_s``: each post lands at once but its reply takes that long."""

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s

    def wait(self, timeout: float | None = None) -> bool:
        time.sleep(self.delay_s)
        return True


def test_a_drain_shorter_than_a_post_stops_in_time_and_nothing_is_answered_twice(
    tmp_path: Path, fake: FakeSlack
) -> None:
    """Issue 39 item 1: SIGTERM with 20 acknowledged mentions, CITEBOT_DRAIN_S=2 and posts whose reply takes 6 s."""
    data = tmp_path / "data"
    first = _bot(fake, data, tmp_path / "first.log", CITEBOT_DRAIN_S="2", CITEBOT_SLACK_WORKERS="2")
    try:
        first.wait_ready()
        fake.hold_replies["chat.postMessage"] = _SlowReplies(6.0)
        asked = _ask(fake, first.url, 20)  # all acknowledged
        fake.wait_until(lambda: sum(_answers(fake).values()) >= 1, timeout=180)  # a post is on its way
        first.stop()  # SIGTERM
        exit_code = first.proc.returncode
    finally:
        first.kill()
    fake.hold_replies.pop("chat.postMessage")
    answered_before = sum(_answers(fake).values())
    second = _bot(fake, data, tmp_path / "second.log")
    try:
        second.wait_ready()
        fake.wait_until(lambda: set(_answers(fake)) >= set(asked), timeout=AFTER_RESTART_S + LEASE_S + 60)
        time.sleep(LEASE_S + 1)  # room for a wrong second answer to show
    finally:
        second.kill()
    assert exit_code == 0 and first.logged("drained") == 1
    assert answered_before < 20
    assert _answers(fake) == Counter({ts: 1 for ts in asked})  # each answered once


def test_one_members_burst_never_stalls_a_colleague_and_work_past_the_bound_is_refused_with_a_notice(
    tmp_path: Path, fake: FakeSlack
) -> None:
    """Issue 39 item 6, one worker: the member's first answer is on its way (its reply held) while they send nine
    more DM questions (CITEBOT_MAX_QUEUED_PER_USER=6) and then a colleague asks in a channel."""
    member, colleague, dm = "U0MEMBER", "U0COLLEAGUE", "D0MEMBER"
    bot = _bot(fake, tmp_path / "data", tmp_path / "bot.log", CITEBOT_MAX_QUEUED_PER_USER="6")
    burst = [f"{8000 + i}.000100" for i in range(10)]
    try:
        bot.wait_ready()
        fake.hold_replies["chat.postMessage"] = threading.Event()
        first = event_callback(message(dm, member, QUESTION, burst[0], channel_type="im"), event_id="Ev0BURST0")
        assert post_signed(bot.url, first)[0] == 200
        fake.wait_for("chat.postMessage", channel=dm, timeout=180)  # its answer is on its way
        for i, ts in enumerate(burst[1:], start=1):
            delivery = event_callback(message(dm, member, QUESTION, ts, channel_type="im"), event_id=f"Ev0BURST{i}")
            assert post_signed(bot.url, delivery)[0] == 200  # acknowledged: taken, or refused with a notice
        asked = event_callback(mention(CHANNEL, colleague, QUESTION, "8100.000100"), event_id="Ev0COLLEAGUE")
        assert post_signed(bot.url, asked)[0] == 200
        fake.wait_until(lambda: len(fake.calls_to("chat.postEphemeral", channel=dm)) == 4, timeout=60)
        fake.hold_replies.pop("chat.postMessage").set()
        fake.wait_until(lambda: len(_answer_posts(fake)) == 7, timeout=300)
        time.sleep(2)  # room for a wrong extra answer to show
    finally:
        bot.kill()
    posts = _answer_posts(fake)
    assert posts[:2] == [burst[0], "8100.000100"]  # the colleague's came next, not seventh
    assert sorted(posts[2:]) == burst[1:6]  # the member's five taken, each answered once
    notices = fake.calls_to("chat.postEphemeral", channel=dm)
    assert len(notices) == 4 and all(c.params["user"] == member and "waiting" in c.params["text"] for c in notices)


def _answer_posts(fake: FakeSlack) -> list[str]:
    """The ts of the message each answer the bot posted answers, in the order it posted them."""
    with fake._cond:
        posted = [m for msgs in fake.messages.values() for m in msgs]
    answers = [m for m in posted if (m.get("metadata") or {}).get("event_payload", {}).get("slot") == "answer_ts"]
    return [m["metadata"]["event_payload"]["work"].rsplit(":", 1)[1]
            for m in sorted(answers, key=lambda m: float(m["ts"]))]


def test_a_bot_killed_while_its_stream_start_reply_is_on_its_way_finishes_that_stream_once(
    tmp_path: Path, fake: FakeSlack
) -> None:
    """Issue 39 item 2: the intent is journaled before chat.startStream; the take-over finds the bot's own
    half-written stream in the thread (it carries no metadata) and finishes it instead of starting another."""
    import json

    from eval.fakes.openai_api import FakeOpenAI, passages_in

    sentence = POLICY[0][1]

    def model(req: dict[str, Any]) -> str:
        chunk = next(cid for cid, text in passages_in(req) if "eighteen weeks" in text)
        return json.dumps({"answerable": True, "citations": [{"n": 1, "chunk_id": chunk, "quote": sentence}],
                           "answer": "Employees get eighteen weeks [1]. The leave is paid [1]."})

    data = tmp_path / "data"
    with FakeOpenAI(model) as llm:
        settings = {"OPENAI_BASE_URL": llm.base_url, "CITEBOT_LLM_MODEL": "fake-model"}
        first = _bot(fake, data, tmp_path / "first.log", **settings)
        try:
            first.wait_ready()
            _index_handbook(fake, first)
            fake.hold_replies["chat.startStream"] = threading.Event()  # the stream exists; its ts never arrives
            (root,) = _ask(fake, first.url, 1)
            fake.wait_for("chat.startStream", channel=CHANNEL, thread_ts=root, timeout=180)
        finally:
            first.kill()
            fake.hold_replies.pop("chat.startStream").set()
        (streamed,) = fake.thread(CHANNEL, root)
        assert streamed["streaming"]

        second = _bot(fake, data, tmp_path / "second.log", **settings)
        try:
            second.wait_ready()
            fake.wait_until(lambda: sum(_answers(fake).values()) == 1, timeout=LEASE_S + AFTER_RESTART_S)
            time.sleep(2)  # room for a second message to show
        finally:
            second.kill()
    (answer,) = fake.thread(CHANNEL, root)  # one message in the thread
    assert answer["ts"] == streamed["ts"] and not answer["streaming"]
    assert answer["text"].startswith("Employees get eighteen weeks [1]. The leave is paid [1].")
    assert second.logged("stream_started_before_found") == 1


# --- a data directory that is full or read-only (issue 39 items 3 and 7) ------------------------------------------
# Tests run as root, where chmod does not stop a write; a file system of the bot's own does: a small tmpfs at the data
# directory, in a mount namespace only the bot's process sees (tests.helpers.mounts), filled to its last byte (ENOSPC)
# or remounted read-only (EROFS) while the bot runs.
_NO_MOUNTS = mounts.unavailable()
needs_mounts = pytest.mark.skipif(bool(_NO_MOUNTS), reason=f"a data dir on its own file system: {_NO_MOUNTS}")


def _on_disk(fake: FakeSlack, tmp_path: Path, log: str, start: str = "writable") -> tuple[SlackProcess, DataDisk]:
    disk = DataDisk(tmp_path / "data", start=start)
    models = os.environ.get("CITEBOT_MODELS_DIR", str(tmp_path / "models"))  # never on the small disk
    bot = _bot(fake, disk.path, tmp_path / log, launcher=disk.launcher(), CITEBOT_MODELS_DIR=models)
    disk.attach(bot.proc.pid)
    return bot, disk


@needs_mounts
@pytest.mark.parametrize("start", ["read-only", "full"])
def test_a_data_dir_read_only_or_full_at_start_up_stops_the_bot_naming_it_and_the_cause(
    tmp_path: Path, fake: FakeSlack, start: str
) -> None:
    bot, disk = _on_disk(fake, tmp_path, "bot.log", start)
    try:
        assert bot.proc.wait(300) == 2
    finally:
        bot.kill()
    said = bot.log.read_text()
    assert str(disk.path) in said and "SLACK_BOT_TOKEN" not in said
    if start == "read-only":
        assert "Read-only file system" in said and "CITEBOT_DATA_DIR" in said
    else:
        assert "is full" in said and "free space there" in said


def _burst(fake: FakeSlack, ts: int, tag: str) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any],
                                                     set[str]]:
    """Four mentions, an upload of report.pdf and a click on a reading, and the threads each is answered in."""
    mentions = [event_callback(mention(CHANNEL, ASKER, QUESTION, f"{ts + i}.000100"), event_id=f"Ev0{tag}{i}")
                for i in range(4)]
    fake.add_file("F0REPORT", "report.pdf", make_pdf([["Annual Report", "Revenue grew by nine percent."]]))
    upload = event_callback({"type": "file_shared", "file_id": "F0REPORT", "user_id": UPLOADER,
                             "file": {"id": "F0REPORT"}, "channel_id": CHANNEL}, event_id=f"Ev0{tag}FILE")
    clicked_in = f"{ts + 100}.000100"
    click = button_click(user=ASKER, channel=CHANNEL, message_ts=f"{ts + 100}.000200", thread_ts=clicked_in,
                         action_id="citebot_choice_1", value=QUESTION)
    return mentions, upload, click, {*(m["event"]["ts"] for m in mentions), clicked_in}


def _indexed_updates(fake: FakeSlack) -> list[Any]:
    return [c for c in fake.calls_to("chat.update", channel=CHANNEL)
            if str(c.params.get("text", "")).startswith("Indexed report.pdf")]


def _wait_done(fake: FakeSlack, threads: set[str]) -> None:
    """Until report.pdf is indexed and every thread answered, then a lease more: room for a wrong second answer."""
    fake.wait_until(lambda: bool(_indexed_updates(fake)), timeout=180)
    fake.wait_until(lambda: set(_answers(fake)) >= threads, timeout=180)
    time.sleep(LEASE_S + 1)


@needs_mounts
@pytest.mark.parametrize("how", ["full"])
def test_a_data_dir_that_fills_up_or_turns_read_only_while_running_loses_and_doubles_nothing(
    tmp_path: Path, fake: FakeSlack, how: str
) -> None:
    """Four mentions, an upload and a click arrive while the data dir is full (or read-only): what the journal could
    not take is refused (503: Slack re-sends it), not acknowledged; /readyz is 503 meanwhile; once the disk takes
    writes again the bot is ready by itself, and each re-sent one, and each acknowledged one, is done once."""
    bot, disk = _on_disk(fake, tmp_path, "bot.log")
    mentions, upload, click, threads = _burst(fake, 7000, "DISK")
    try:
        bot.wait_ready()
        _index_handbook(fake, bot)
        disk.fill() if how == "full" else disk.read_only()
        first = [post_signed(bot.url, m)[0] for m in mentions]
        first += [post_signed(bot.url, upload)[0], post_interaction(bot.url, click)[0]]
        ready_meanwhile = _readyz(bot)
        time.sleep(2)  # room for work taken meanwhile to fail
        disk.free() if how == "full" else disk.writable()
        fake.wait_until(lambda: _readyz(bot) == 200, timeout=60)  # ready again by itself
        # Slack re-sends what was not acknowledged (the asker clicks again); never what was
        again = [m for m, status in zip(mentions, first, strict=False) if status != 200]
        resent = [post_signed(bot.url, m, retry_num=1)[0] for m in again]
        if first[4] != 200:
            resent.append(post_signed(bot.url, upload, retry_num=1)[0])
        if first[5] != 200:
            resent.append(post_interaction(bot.url, click)[0])
        _wait_done(fake, threads)
    finally:
        bot.kill()
    assert set(first) <= {200, 503} and 503 in first  # refused, or journaled: never acknowledged and dropped
    assert ready_meanwhile == 503 and resent == [200] * len(resent)
    assert _answers(fake) == Counter({ts: 1 for ts in threads})  # each answered once
    assert len(_indexed_updates(fake)) == 1


_NO_DISK = mounts.disk_unavailable()


@pytest.mark.skipif(bool(_NO_DISK), reason=f"a data dir on an ext4 image that can fail: {_NO_DISK}")
def test_a_data_dir_a_disk_error_turns_read_only_while_running_refuses_work_and_the_next_start_does_it_once(
    tmp_path: Path, fake: FakeSlack
) -> None:
    """The data dir's file system fails while the bot runs and the kernel remounts it read-only (only an unmount and
    e2fsck undo that): four mentions, an upload and a click are refused (503), not acknowledged, /readyz is 503 and
    the bot keeps running; started again on the repaired disk, each re-sent one is done once."""
    image = DataDisk.make_image(tmp_path / "data.img")
    models = os.environ.get("CITEBOT_MODELS_DIR", str(tmp_path / "models"))
    disk = DataDisk(tmp_path / "data", image=image)
    bot = _bot(fake, disk.path, tmp_path / "first.log", launcher=disk.launcher(), CITEBOT_MODELS_DIR=models)
    disk.attach(bot.proc.pid)
    mentions, upload, click, threads = _burst(fake, 7200, "EROFS")
    try:
        bot.wait_ready()
        _index_handbook(fake, bot)
        disk.fail()
        refused = [post_signed(bot.url, m)[0] for m in mentions]
        refused += [post_signed(bot.url, upload)[0], post_interaction(bot.url, click)[0]]
        ready_meanwhile = _readyz(bot)
        alive = bot.proc.poll() is None
    finally:
        bot.kill()
    assert refused == [503] * 6 and ready_meanwhile == 503 and alive
    assert bot.logged("work_not_recorded") >= 1  # SQLite's "disk I/O error": the journal's writes met EROFS
    disk.repair()

    again = _bot(fake, disk.path, tmp_path / "second.log", launcher=disk.launcher(), CITEBOT_MODELS_DIR=models)
    disk.attach(again.proc.pid)
    try:
        again.wait_ready()
        resent = [post_signed(again.url, m, retry_num=1)[0] for m in mentions]
        resent += [post_signed(again.url, upload, retry_num=1)[0], post_interaction(again.url, click)[0]]
        _wait_done(fake, threads)
    finally:
        again.kill()
    assert resent == [200] * 6
    assert _answers(fake) == Counter({ts: 1 for ts in threads})  # each answered once, the handbook still indexed
