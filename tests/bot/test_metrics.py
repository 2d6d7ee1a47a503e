"""``GET /metrics`` of a running bot counts what happened: questions, uploads, votes, quotes, its queue.

A real ``citebot serve slack --http --metrics-port`` process, with Slack's Web API served by the local fake:
signed deliveries of two uploads (one a broken PDF), three questions (one the PDF cannot answer), a 👍 reaction
and a 👎 button; then one scrape, parsed with prometheus-client's own parser, must say exactly that.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.slack.render import FEEDBACK_ACTION
from connectors import metrics
from connectors.settings import Settings
from connectors.stores import open_state, open_store
from eval.fakes.slack_api import (
    BOT_USER,
    TEAM,
    FakeSlack,
    event_callback,
    feedback_click,
    mention,
    message,
    post_interaction,
    post_signed,
)
from pipelines.models import slack_scope
from tests.helpers.pdfs import LEAVE_PAGES, make_pdf
from tests.helpers.process import free_port
from tests.helpers.slack import SlackProcess

pytestmark = pytest.mark.slow

CHANNEL, USER, FAN, CRITIC = "C0METRICS", "U0ASKER", "U0FAN", "U0CRITIC"
QUESTIONS = [
    ("How many weeks of parental leave do employees get?", "300.000001"),
    ("How far in advance must parental leave be requested?", "300.000002"),
    ("What is the boiling point of tungsten on Mars?", "300.000003"),
]


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - loopback only
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, "", ""
    except OSError:
        return 0, "", ""


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(scrape: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return scrape.get((name, frozenset(labels.items())), 0.0)


def scraped(bot: SlackProcess) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    status, content_type, body = get(f"http://127.0.0.1:{bot.metrics_port}/metrics")
    assert status == 200 and content_type.startswith("text/plain"), (status, content_type)
    return samples(body)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[FakeSlack, SlackProcess]]:
    with FakeSlack() as fake:
        bot = SlackProcess(fake, tmp_path / "data", tmp_path / "bot.log", metrics_port=free_port())
        try:
            bot.wait_ready()
            yield fake, bot
        finally:
            bot.stop()


def _share(fake: FakeSlack, url: str, file_id: str, name: str, data: bytes, ts: str) -> None:
    file_obj = fake.add_file(file_id, name, data)
    event = message(CHANNEL, USER, "", ts) | {"subtype": "file_share", "files": [file_obj]}
    assert post_signed(url, event_callback(event))[0] == 200


def test_metrics_count_questions_uploads_votes_and_quotes(
    running: tuple[FakeSlack, SlackProcess], tmp_path: Path
) -> None:
    fake, bot = running
    events = bot.url
    before = scraped(bot)
    assert value(before, "citebot_questions_total", platform="slack", mode="extractive", outcome="answered") == 0
    # the bot's own port, which a public Ingress may reach, does not show them with --metrics-port
    assert get(f"{bot.base}/metrics")[0] == 404

    _share(fake, events, "F0GOOD", "handbook.pdf", make_pdf(LEAVE_PAGES), "290.000001")
    _share(fake, events, "F0BAD", "broken.pdf", b"%PDF-1.4\n%no objects at all\n" * 20, "290.000002")
    fake.wait_until(lambda: sum(c.params["text"].startswith(("Indexed", "I couldn't"))
                                for c in fake.calls_to("chat.update", channel=CHANNEL)) == 2, timeout=120)
    for question, ts in QUESTIONS:
        assert post_signed(events, event_callback(mention(CHANNEL, USER, question, ts)))[0] == 200
    for _question, ts in QUESTIONS:
        fake.wait_for("chat.postMessage", channel=CHANNEL, thread_ts=ts, timeout=60)
    answers = {ts: fake.calls_to("chat.postMessage", channel=CHANNEL, thread_ts=ts)[-1] for _q, ts in QUESTIONS}
    # an answer is recorded just after its post, and a vote counts only on a recorded answer: vote once the
    # questions' work is done (the queue empty), as a person reading the answer first would
    deadline = time.monotonic() + 120
    while value(scraped(bot), "citebot_queue_depth", platform="slack") != 0:
        assert time.monotonic() < deadline, "the questions' work never finished"
        time.sleep(0.2)

    liked, disliked = answers["300.000001"].reply["ts"], answers["300.000002"].reply["ts"]
    item = {"type": "message", "channel": CHANNEL, "ts": liked}
    reaction = {"type": "reaction_added", "user": FAN, "reaction": "+1", "item": item, "item_user": BOT_USER}
    assert post_signed(events, event_callback(reaction))[0] == 200
    click = feedback_click(user=CRITIC, channel=CHANNEL, message_ts=disliked, thread_ts="300.000002", value="down",
                           action_id=FEEDBACK_ACTION)
    assert post_interaction(events, click)[0] == 200

    deadline = time.monotonic() + 60
    while True:
        scrape = scraped(bot)
        votes = sum(value(scrape, "citebot_feedback_total", platform="slack", polarity=p) for p in ("up", "down"))
        idle = value(scrape, "citebot_queue_depth", platform="slack") == 0
        if (votes == 2 and idle) or time.monotonic() > deadline:
            break
        time.sleep(0.2)

    def q(outcome: str) -> float:
        return value(scrape, "citebot_questions_total", platform="slack", mode="extractive", outcome=outcome)

    assert (q("answered"), q("refused"), q("failed")) == (2, 1, 0)
    assert value(scrape, "citebot_answer_seconds_count", platform="slack", outcome="answered") == 2
    assert value(scrape, "citebot_answer_seconds_count", platform="slack", outcome="refused") == 1
    assert value(scrape, "citebot_feedback_total", platform="slack", polarity="up") == 1
    assert value(scrape, "citebot_feedback_total", platform="slack", polarity="down") == 1
    assert value(scrape, "citebot_queue_depth", platform="slack") == 0

    assert value(scrape, "citebot_ingests_total", platform="slack", outcome="indexed") == 1
    assert value(scrape, "citebot_ingests_total", platform="slack", outcome="failed") == 1
    assert value(scrape, "citebot_ingest_failures_total", platform="slack", reason="truncated") == 1  # no %%EOF
    assert value(scrape, "citebot_ingest_seconds_count", platform="slack", outcome="indexed") == 1
    settings = Settings(_env_file=None, data_dir=tmp_path / "data")  # type: ignore[call-arg]
    (doc,) = open_store(settings).list_documents(scopes=[slack_scope(TEAM, CHANNEL)])
    assert value(scrape, "citebot_pages_indexed_total", platform="slack") == doc.pages == 2
    assert value(scrape, "citebot_chunks_indexed_total", platform="slack") == doc.chunks

    # every quote shown was checked: the exact matches are the citations the bot recorded
    state = open_state(settings)
    quoted = 0
    for _q, ts in QUESTIONS:
        posted = state.find_answer(platform="slack", message_ref=f"{CHANNEL}:{answers[ts].reply['ts']}")
        assert posted is not None
        quoted += len(json.loads(posted.answer_json)["citations"])
    assert quoted >= 2
    assert value(scrape, "citebot_citations_total", platform="slack", outcome="exact") == quoted
    assert value(scrape, "citebot_citations_total", platform="slack", outcome="dropped") == 0

    # labels stay bounded: no channel, user, question or file name ever becomes a label value
    allowed = {*metrics.PLATFORMS, *metrics.ANSWER_MODES, *metrics.QUESTION_OUTCOMES, *metrics.INGEST_OUTCOMES,
               *metrics.CITATION_OUTCOMES, *metrics.POLARITIES, *metrics.INGEST_FAILURE_REASONS, metrics.OTHER}
    for (name, labels), _v in scrape.items():
        if name.startswith("citebot_"):
            assert {v for k, v in labels if k != "le"} <= allowed, (name, labels)
