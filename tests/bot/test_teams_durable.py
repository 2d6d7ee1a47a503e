"""Nothing acknowledged is lost on Teams either: the real ``citebot serve teams``, killed with SIGKILL mid-work.

The Bot Framework sends an activity once; after the bot's 200 it never sends it again. Each test runs the command
line itself as a process group on one data directory (``--insecure-local`` on 127.0.0.1: a Bot Framework token can
only be signed by Microsoft, so inbound requests go unauthenticated as with the Emulator), with the activities'
``serviceUrl`` pointing at the local Bot Connector stand-in (:class:`eval.fakes.microsoft.FakeMicrosoft`), and kills
the group as the OOM killer or a node failure would. The restarted bot (or the other replica) is sent nothing
again: what was acknowledged is in the work journal, and its lease running out is all it takes.

Answers go through an LLM (the local OpenAI stand-in, quoting the passage it is given), and the kill lands while
the bot waits for one, as it spends most of an answer in production. Not inside a post's own round trip: the Bot
Connector cannot be asked afterwards what a bot posted, so a kill there may post that one answer again after the
restart (logged as ``teams_post_outcome_unknown``).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from bot.teams.activity import FILE_DOWNLOAD_INFO
from eval.fakes.microsoft import Call, FakeMicrosoft
from eval.fakes.openai_api import FakeOpenAI, passages_in, quoting_responder
from tests.helpers.pdfs import make_pdf
from tests.helpers.teams import PDF_LAYOUT, TeamsProcess, cited_files

pytestmark = pytest.mark.slow

BOT = {"id": "28:citebot-durable", "name": "Citebot"}
TENANT = "tenant-durable"
CHAT = "a:1durable-alice"
POLICY = ["Staff Handbook", "4 Leave", "Employees may take eighteen weeks of paid parental leave after the birth "
          "of a child."]
QUESTION = "How many weeks of parental leave do employees get?"
LEASE_S = 4.0
AFTER_RESTART_S = 30.0  # the promise: all of it within 30 s of the restart
_ids = itertools.count(1_800_000_000_000)


class _DownloadsHeld(dict):  # type: ignore[type-arg]
    """FakeMicrosoft's hosted files; downloads of the files in ``held`` wait (the bot is mid-ingest) until
    ``release``."""

    def __init__(self) -> None:
        super().__init__()
        self.held: set[str] = set()
        self.release = threading.Event()

    def get(self, key: Any, default: Any = None) -> Any:
        if key in self.held:
            self.release.wait(120)
        return super().get(key, default)


class _LlmHeldAfter:
    """The LLM stand-in's responder: the answer calls (the ones given passages, and no tools: triage's rounds
    offer tools and come before the answer is written) after the first ``n`` wait until ``release``; ``waiting``
    is set when one does (the bot is mid-answer)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.answers = 0
        self.waiting = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> str:
        if passages_in(request) and not request.get("tools"):
            with self._lock:
                self.answers += 1
                held = self.answers > self.n
            if held and not self.release.is_set():
                self.waiting.set()
                self.release.wait(120)
        return quoting_responder(request)


@pytest.fixture
def llm() -> Iterator[tuple[FakeOpenAI, _LlmHeldAfter]]:
    held = _LlmHeldAfter(3)
    with FakeOpenAI(held) as f:
        yield f, held
        held.release.set()


@pytest.fixture
def fake() -> Iterator[FakeMicrosoft]:
    with FakeMicrosoft() as f:
        f.files = _DownloadsHeld()
        yield f
        f.files.release.set()


def _bot(fake: FakeMicrosoft, llm: FakeOpenAI, data_dir: Path, log: Path, **settings: str) -> TeamsProcess:
    """``citebot serve teams --insecure-local`` with a short lease, one worker."""
    return TeamsProcess(fake, llm, data_dir, log, **{"CITEBOT_WORK_LEASE_S": str(LEASE_S),
                                                     "CITEBOT_WORK_SCAN_S": "0.5", "CITEBOT_TEAMS_WORKERS": "1",
                                                     # one asker stands for many here: no per-person bound
                                                     "CITEBOT_MAX_QUEUED_PER_USER": "1000", **settings})


def _message(fake: FakeMicrosoft, text: str, *, attachments: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A personal-chat message activity as Teams sends it."""
    return {
        "type": "message",
        "id": str(next(_ids)),
        "channelId": "msteams",
        "serviceUrl": fake.service_url,
        "from": {"id": "29:alice", "name": "Alice"},
        "recipient": BOT,
        "conversation": {"id": CHAT, "conversationType": "personal", "tenantId": TENANT},
        "channelData": {"tenant": {"id": TENANT}},
        "text": text,
        "attachments": attachments or [],
    }


def _file(fake: FakeMicrosoft, name: str, data: bytes) -> dict[str, Any]:
    fake.files[name] = data
    return {
        "contentType": FILE_DOWNLOAD_INFO,
        "contentUrl": f"https://contoso-my.sharepoint.com/personal/alice/Documents/{name}",
        "name": name,
        "content": {"downloadUrl": fake.file_url(name), "uniqueId": name, "fileType": "pdf"},
    }


def _send(bot: TeamsProcess, activity: dict[str, Any]) -> None:
    assert requests.post(bot.url, json=activity, timeout=60).status_code in (200, 201)  # acknowledged


def _is_answer(c: Call) -> bool:
    return c.conversation_id == CHAT and c.type == "message" and bool(c.body.get("entities"))


def _answers(fake: FakeMicrosoft) -> Counter[str]:
    """How many answers (messages with citations) each question got, by the activity they reply to."""
    return Counter(c.reply_to_id for c in fake.connector_calls() if _is_answer(c))


def _texts(fake: FakeMicrosoft, kind: str) -> list[Call]:
    return [c for c in fake.connector_calls() if c.conversation_id == CHAT and c.kind == kind]


def _index_handbook(fake: FakeMicrosoft, bot: TeamsProcess) -> None:
    _send(bot, _message(fake, "", attachments=[_file(fake, "handbook.pdf", make_pdf([POLICY], **PDF_LAYOUT))]))
    fake.wait_for(lambda c: c.conversation_id == CHAT and c.text.startswith("Indexed handbook.pdf"), timeout=180)


def test_a_bot_killed_mid_burst_and_mid_upload_answers_everything_once_after_the_restart(
    tmp_path: Path, fake: FakeMicrosoft, llm: tuple[FakeOpenAI, _LlmHeldAfter]
) -> None:
    data = tmp_path / "data"
    first = _bot(fake, llm[0], data, tmp_path / "first.log")
    try:
        first.wait_ready()
        _index_handbook(fake, first)
        # an upload whose download hangs: killed mid-ingest, with its "Indexing…" status posted
        fake.files.held.add("report.pdf")
        report = make_pdf([["Annual Report", "1 Results", "Revenue grew by nine percent."]], **PDF_LAYOUT)
        _send(first, _message(fake, "", attachments=[_file(fake, "report.pdf", report)]))
        asked = []
        for _ in range(12):  # a burst, every one acknowledged
            question = _message(fake, QUESTION)
            _send(first, question)
            asked.append(question["id"])
        assert llm[1].waiting.wait(180), first.log.read_text()[-3000:]  # three answered, the fourth mid-answer
    finally:
        first.kill()
    assert sum(_answers(fake).values()) == 3
    [status] = [c for c in _texts(fake, "reply") if c.text.startswith("Indexing report.pdf")]
    fake.files.release.set()
    llm[1].release.set()

    second = _bot(fake, llm[0], data, tmp_path / "second.log")
    try:
        ready = second.wait_ready()
        fake.wait_for(lambda c: set(_answers(fake)) >= set(asked), timeout=AFTER_RESTART_S + LEASE_S)
        fake.wait_for(lambda c: c.kind == "update" and c.text.startswith("Indexed report.pdf"),
                      timeout=AFTER_RESTART_S)
        took = time.monotonic() - ready
        time.sleep(LEASE_S + 1)  # room for a wrong second answer to show
    finally:
        second.kill()
    assert took < AFTER_RESTART_S
    assert _answers(fake) == Counter({activity_id: 1 for activity_id in asked})  # each answered exactly once
    assert all(cited_files(c) == {"handbook.pdf"} for c in fake.connector_calls() if _is_answer(c))
    # the upload finished in the status message the killed bot posted, and only one was ever posted
    updates = [c for c in _texts(fake, "update") if c.activity_id == status.response_id]
    assert updates[-1].text.startswith("Indexed report.pdf")
    assert len([c for c in _texts(fake, "reply") if c.text.startswith("Indexing report.pdf")]) == 1
    assert second.logged("work_taken_over") >= 1
    assert second.logged("teams_post_outcome_unknown") == 0


def test_the_other_replica_takes_over_the_work_of_a_killed_one(tmp_path: Path, fake: FakeMicrosoft) -> None:
    data = tmp_path / "data"
    a_held = _LlmHeldAfter(1)  # replica a's LLM holds its second answer; b's answers at once
    with FakeOpenAI(a_held) as a_llm, FakeOpenAI() as b_llm:
        a, b = _bot(fake, a_llm, data, tmp_path / "a.log"), _bot(fake, b_llm, data, tmp_path / "b.log")
        try:
            a.wait_ready()
            b.wait_ready()
            _index_handbook(fake, a)
            asked = []
            for _ in range(10):  # all to replica a
                question = _message(fake, QUESTION)
                _send(a, question)
                asked.append(question["id"])
            assert a_held.waiting.wait(180), a.log.read_text()[-3000:]  # a is mid-answer
            a.kill()
            a_held.release.set()
            fake.wait_for(lambda c: set(_answers(fake)) >= set(asked), timeout=AFTER_RESTART_S + LEASE_S)
            time.sleep(LEASE_S + 1)
        finally:
            a_held.release.set()
            a.kill()
            b.kill()
    assert _answers(fake) == Counter({activity_id: 1 for activity_id in asked})
    assert b.logged("work_taken_over") >= 1  # b did a's work, nobody re-sent it


def test_an_activity_sent_again_after_its_answer_and_a_kill_is_not_answered_again(
    tmp_path: Path, fake: FakeMicrosoft, llm: tuple[FakeOpenAI, _LlmHeldAfter]
) -> None:
    """The Bot Framework re-sends an activity whose 200 it did not see; the restarted bot finds it journaled and
    its answer noted."""
    llm[1].release.set()
    data = tmp_path / "data"
    first = _bot(fake, llm[0], data, tmp_path / "first.log")
    question = _message(fake, QUESTION)
    try:
        first.wait_ready()
        _index_handbook(fake, first)
        _send(first, question)
        deadline = time.monotonic() + 180
        while not first.logged("teams_answer_posted"):  # posted, and its id noted in the journal
            assert time.monotonic() < deadline, first.log.read_text()[-3000:]
            time.sleep(0.1)
    finally:
        first.kill()

    second = _bot(fake, llm[0], data, tmp_path / "second.log")
    try:
        second.wait_ready()
        _send(second, question)
        deadline = time.monotonic() + 30
        while not second.logged("teams_duplicate_ignored"):
            assert time.monotonic() < deadline, second.log.read_text()[-3000:]
            time.sleep(0.1)
        time.sleep(LEASE_S + 1)
    finally:
        second.kill()
    assert _answers(fake) == Counter({question["id"]: 1})


def test_sigterm_drains_within_its_budget_and_hands_the_rest_to_the_next_start(
    tmp_path: Path, fake: FakeMicrosoft
) -> None:
    """The bounded stop: SIGTERM stops intake, running work gets ``CITEBOT_DRAIN_S``, the rest goes back to the
    journal as pending, so the next start takes it at once (no lease to wait for)."""
    data = tmp_path / "data"
    held = _LlmHeldAfter(1)
    with FakeOpenAI(held) as llm:
        first = _bot(fake, llm, data, tmp_path / "first.log", CITEBOT_DRAIN_S="2")
        try:
            first.wait_ready()
            _index_handbook(fake, first)
            asked = []
            for _ in range(4):
                question = _message(fake, QUESTION)
                _send(first, question)
                asked.append(question["id"])
            assert held.waiting.wait(180), first.log.read_text()[-3000:]  # the second answer waits for its LLM
            stopped = time.monotonic()
            os.killpg(first.proc.pid, signal.SIGTERM)
            assert first.proc.wait(30) == 0
            took_to_stop = time.monotonic() - stopped
        finally:
            held.release.set()
            first.kill()
        assert sum(_answers(fake).values()) == 1
        assert '"handed_back": 1' in first.log.read_text()  # the one running; the rest never left the journal

        second = _bot(fake, llm, data, tmp_path / "second.log", CITEBOT_WORK_LEASE_S="60")  # no lease runs out
        try:
            ready = second.wait_ready()
            fake.wait_for(lambda c: set(_answers(fake)) >= set(asked), timeout=AFTER_RESTART_S)
            took = time.monotonic() - ready
            time.sleep(2)
        finally:
            second.kill()
    assert took_to_stop < 2 + 10  # the budget, and the process's own exit
    assert took < AFTER_RESTART_S
    assert _answers(fake) == Counter({activity_id: 1 for activity_id in asked})


@pytest.mark.parametrize("stopped", [False, True], ids=["open", "stopped"])
def test_a_bot_killed_mid_stream_ends_that_stream_with_the_answer_after_the_restart(
    tmp_path: Path, fake: FakeMicrosoft, stopped: bool
) -> None:
    """Issue 39: killed while a personal-chat answer streams (its first update shown, the stream's id noted, the
    model still writing): the restarted bot ends that stream with the answer (a ``final`` carrying its
    ``streamId``), and posts no second message of its own. ``stopped``: the asker pressed Stop before the restart
    (or Teams' time limit ended the stream), so Teams refuses the final: the answer comes as a message of its
    own, once."""
    first_sentence, second_sentence = "Employees get eighteen weeks [1].", "Notice is four weeks [1]."

    def two_sentences(request: dict[str, Any]) -> str:  # streamed a sentence at a time, each citing the policy
        reply = json.loads(quoting_responder(request))
        if reply.get("answerable"):
            reply["answer"] = f"{first_sentence} {second_sentence}"
        return json.dumps(reply)

    data = tmp_path / "data"
    with FakeOpenAI(two_sentences) as llm:
        first = _bot(fake, llm, data, tmp_path / "first.log")
        gate = llm.hold_stream("Notice is")  # the model stops writing after the first sentence
        try:
            first.wait_ready()
            _index_handbook(fake, first)
            question = _message(fake, QUESTION)
            _send(first, question)
            deadline = time.monotonic() + 180
            while not first.logged("teams_stream_started"):  # the first update shown, the stream's id noted
                assert time.monotonic() < deadline, first.log.read_text()[-3000:]
                time.sleep(0.1)
        finally:
            first.kill()
            gate.set()
        [shown] = [c for c in fake.connector_calls() if c.reply_to_id == question["id"] and _stream_info(c)]
        stream_id = shown.response_id
        assert shown.type == "typing" and _stream_info(shown)["streamType"] == "streaming"
        assert shown.text == first_sentence  # what the asker saw when the bot died
        if stopped:
            fake.stop_stream(stream_id)

        second = _bot(fake, llm, data, tmp_path / "second.log")
        try:
            second.wait_ready()
            fake.wait_for(lambda c: c.reply_to_id == question["id"] and c.type == "message",
                          timeout=AFTER_RESTART_S + LEASE_S)
            time.sleep(LEASE_S + 1)  # room for a wrong second answer to show
        finally:
            second.kill()
    messages = [c for c in fake.connector_calls() if c.reply_to_id == question["id"] and c.type == "message"]
    refused = [_stream_info(c) for c in fake.calls if c.method == "POST#refused"]
    final = {"type": "streaminfo", "streamType": "final", "streamId": stream_id}
    if stopped:  # the final refused once, then the answer on its own
        assert refused == [final] and [_stream_info(c) for c in messages] == [{}]
    else:  # one answer: the stream's end
        assert refused == [] and [_stream_info(c) for c in messages] == [final]
    assert cited_files(messages[0]) == {"handbook.pdf"} and first_sentence in messages[0].text
    assert [sid for sid, s in fake.streams.items() if not s["ended"]] == []  # no stream left open
    assert second.logged("work_taken_over") == 1


def _stream_info(call: Call) -> dict[str, Any]:
    return next((e for e in call.body.get("entities") or [] if e.get("type") == "streaminfo"), {})
