"""Two Slack bot replicas behind one load balancer answer every question exactly once.

Two real ``citebot`` Slack processes in HTTP mode share one embedded store and chat state (SQLite in one
``CITEBOT_DATA_DIR``: several processes on one host are safe) — or, when ``CITEBOT_TEST_ELASTICSEARCH_URL`` is
set, one Elasticsearch index and its ``citebot-state-*`` indices. Slack's deliveries are sent to both, as a
load balancer that retries on the other replica would: an upload, then 50 mentions, each with Slack's two
retries, all racing from several threads. Then every answer gets a vote: a 👍 reaction (delivered to both,
retried) or a 👎 button on one replica whose "What was wrong?" form is sent to the other.

Each upload is indexed once, each question answered once, and each vote lands once in the shared log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from bot.slack.render import FEEDBACK_ACTION
from connectors.settings import Settings
from connectors.stores import open_state, open_store
from eval.fakes.slack_api import (
    BOT_TOKEN,
    BOT_USER,
    SIGNING_SECRET,
    TEAM,
    FakeSlack,
    event_callback,
    feedback_click,
    mention,
    post_interaction,
    post_signed,
    view_submission,
)
from tests.helpers.pdfs import make_pdf
from tests.helpers.stores import ES_SKIP_REASON, ES_URL

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CHANNEL, ASKER, FAN, CRITIC, FILE_ID = "C0REPLICA", "U0ASKER", "U0FAN", "U0CRITIC", "F0POLICY"
N_QUESTIONS = 50
POLICY = [
    ["4 Leave", "4.2 Parental leave",
     "Employees may take eighteen weeks of paid parental leave after the birth or adoption of a child."],
    ["7 Travel", "Hotels are reimbursed up to one hundred and twenty pounds a night."],
]
QUESTIONS = [
    ("How many weeks of parental leave do employees get?", "eighteen weeks"),
    ("How much is reimbursed for a hotel night?", "one hundred and twenty pounds"),
]

REPLICA = textwrap.dedent(
    """
    import json, os, sys, threading
    control = os.fdopen(os.dup(1), "w")  # stdout answers the test; logs go to stderr (a file)
    os.dup2(2, 1)
    import bot
    from bot.core import ChatCore
    from bot.slack.app import build_bot
    from bot.slack.server import make_http_server
    from connectors.settings import Settings

    settings = Settings(_env_file=None, **json.loads(sys.argv[1]))
    core = ChatCore.from_settings(settings)
    core.service.warm_up()  # as `citebot serve slack` does before it listens
    slack = build_bot(settings, core)
    server = make_http_server(slack.app, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"port": server.server_address[1], "code": bot.__file__}), file=control, flush=True)
    for line in sys.stdin:  # "idle": answer once every submitted job has ended
        print("idle" if slack.wait_idle(300) else "busy", file=control, flush=True)
    """
)


class Replica:
    def __init__(self, cfg: dict[str, Any], cwd: Path, name: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO), "HAYSTACK_TELEMETRY_ENABLED": "False"}
        self.log = cwd / f"{name}.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", REPLICA, json.dumps(cfg)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=log, text=True, env=env, cwd=cwd,
            )
        self.url = ""

    def started(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the replica exited before it listened: {self.log.read_text()[-2000:]}"
        info = json.loads(line)
        assert info["code"].startswith(str(REPO))  # the code under test, not another checkout
        self.url = f"http://127.0.0.1:{info['port']}/slack/events"

    def idle(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("idle\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "idle"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


@pytest.fixture(params=["sqlite", pytest.param("elasticsearch", marks=[
    pytest.mark.integration, pytest.mark.skipif(not ES_URL, reason=ES_SKIP_REASON)])])
def shared_cfg(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    cfg: dict[str, Any] = {"data_dir": str(tmp_path / "data"), "ocr_enabled": False, "slack_workers": 2,
                           "max_queued_per_user": 1000}  # one asker stands for many here: no per-person bound
    if request.param == "elasticsearch":
        suffix = uuid.uuid4().hex[:12]
        cfg.update(elasticsearch_url=ES_URL, elasticsearch_index=f"citebot-test-{suffix}",
                   elasticsearch_state_prefix=f"citebot-test-state-{suffix}")
    yield cfg
    if request.param == "elasticsearch":
        settings = Settings(_env_file=None, **cfg)  # type: ignore[call-arg]
        store, state = open_store(settings), open_state(settings)
        store.drop_index()  # type: ignore[attr-defined]
        state.drop()  # type: ignore[attr-defined]


def test_two_replicas_answer_each_question_once_and_log_each_vote_once(
    shared_cfg: dict[str, Any], tmp_path: Path
) -> None:
    with FakeSlack() as fake:
        cfg = {**shared_cfg, "slack_bot_token": BOT_TOKEN, "slack_signing_secret": SIGNING_SECRET,
               "slack_api_url": fake.url}
        replicas = [Replica(cfg, tmp_path, "replica-a"), Replica(cfg, tmp_path, "replica-b")]
        try:
            for r in replicas:
                r.started()
            _run(fake, replicas, Settings(_env_file=None, **cfg))  # type: ignore[call-arg]
        finally:
            for r in replicas:
                r.stop()


def _deliver_everywhere(replicas: list[Replica], payload: dict[str, Any], pool: ThreadPoolExecutor) -> list[Any]:
    """The first delivery and Slack's two retries, each to both replicas, all at once."""
    return [pool.submit(post_signed, r.url, payload, retry_num=retry) for retry in (None, 1, 2) for r in replicas]


def _run(fake: FakeSlack, replicas: list[Replica], settings: Settings) -> None:
    a, b = replicas
    with ThreadPoolExecutor(max_workers=12) as pool:
        # --- an upload, delivered to both with retries: indexed once
        fake.add_file(FILE_ID, "policy.pdf", make_pdf(POLICY))
        shared = event_callback(
            {"type": "file_shared", "file_id": FILE_ID, "user_id": ASKER, "file": {"id": FILE_ID},
             "channel_id": CHANNEL}
        )
        assert [j.result()[0] for j in _deliver_everywhere(replicas, shared, pool)] == [200] * 6
        for r in replicas:
            r.idle()
        [indexing] = fake.calls_to("chat.postMessage", channel=CHANNEL)
        assert indexing.params["text"] == "Indexing policy.pdf…"
        assert len(fake.calls_to("file.download", file=FILE_ID)) == 1
        done = fake.calls_to("chat.update", channel=CHANNEL)[-1].params["text"]
        assert done.startswith("Indexed policy.pdf: 2 pages")

        # --- 50 mentions, each with its retries to both replicas, racing
        asked: dict[str, tuple[str, str]] = {}
        jobs = []
        for i in range(N_QUESTIONS):
            ts = f"{1000 + i}.000100"
            question, expected = QUESTIONS[i % len(QUESTIONS)]
            asked[ts] = (question, expected)
            jobs += _deliver_everywhere(replicas, event_callback(mention(CHANNEL, ASKER, question, ts)), pool)
        assert Counter(j.result()[0] for j in jobs) == {200: 6 * N_QUESTIONS}
        for r in replicas:
            r.idle()

    answers: dict[str, list[Any]] = {ts: [] for ts in asked}
    for call in fake.calls_to("chat.postMessage", channel=CHANNEL):
        if call.params.get("thread_ts") in answers and call.params.get("blocks"):
            answers[call.params["thread_ts"]].append(call)
    assert {ts: len(calls) for ts, calls in answers.items()} == {ts: 1 for ts in asked}  # once each
    for ts, [call] in answers.items():
        assert asked[ts][1] in call.params["text"], (ts, call.params["text"])  # and from the PDF

    # --- votes: 👍 reactions to both replicas (with retries); 👎 buttons on one, the form on the other
    up, down = sorted(answers)[: N_QUESTIONS // 2], sorted(answers)[N_QUESTIONS // 2 :]
    with ThreadPoolExecutor(max_workers=12) as pool:
        jobs = []
        for ts in up:
            item = {"type": "message", "channel": CHANNEL, "ts": answers[ts][0].reply["ts"]}
            reaction = {"type": "reaction_added", "user": FAN, "reaction": "+1", "item": item,
                        "item_user": BOT_USER}
            jobs += _deliver_everywhere(replicas, event_callback(reaction), pool)
        for n, ts in enumerate(down):
            click = feedback_click(user=CRITIC, channel=CHANNEL, message_ts=answers[ts][0].reply["ts"],
                                   thread_ts=ts, value="down", action_id=FEEDBACK_ACTION,
                                   trigger_id=f"trigger-{n}")
            jobs.append(pool.submit(post_interaction, replicas[n % 2].url, click))
        assert {j.result()[0] for j in jobs} == {200}
    fake.wait_for("views.open", count=len(down))
    forms = {c.params["trigger_id"]: c.params["view"] for c in fake.calls_to("views.open")}
    assert len(forms) == len(down) == len(fake.calls_to("views.open"))  # one form per 👎
    values = {
        "choice": {"choice": {"type": "radio_buttons", "selected_option": {"value": "wrong_passage"}}},
        "comment": {"comment": {"type": "plain_text_input", "value": "Quoted the wrong section."}},
    }
    for n in range(len(down)):  # each form is sent to the replica that did not open it
        status, _ = post_interaction(replicas[(n + 1) % 2].url,
                                     view_submission(forms[f"trigger-{n}"], user=CRITIC, values=values))
        assert status == 200
    for r in replicas:
        r.idle()

    state = open_state(settings)
    entries = state.feedback()
    refs = {ts: f"{CHANNEL}:{answers[ts][0].reply['ts']}" for ts in answers}
    assert Counter((e.message_ref, e.user) for e in entries) == Counter(
        [(refs[ts], FAN) for ts in up] + [(refs[ts], CRITIC) for ts in down]
    )  # every vote once, none lost, none doubled
    for e in entries:
        assert e.scope == f"slack:{TEAM}:{CHANNEL}" and e.question in {q for q, _ in QUESTIONS}
        if e.user == FAN:
            assert (e.polarity, e.comment) == ("up", "")
        else:
            assert (e.polarity, e.choice, e.comment) == ("down", "wrong_passage", "Quoted the wrong section.")
    state.close()
