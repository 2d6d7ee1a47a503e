"""The store round trips of a first @mention question after an upload, through the real Bolt app and the fake Slack:
the walk ARCHITECTURE.md's "Every trip to the stores" lists, call for call."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from bot.core import ChatContext, ChatCore
from connectors.state_api import ChatState
from eval.fakes.slack_api import TEAM, FakeSlack, mention
from pipelines.models import slack_scope
from tests.helpers.pdfs import LEAVE_PAGES, make_pdf
from tests.helpers.slack import SlackHarness
from tests.helpers.stores import count_calls

pytestmark = pytest.mark.slow

CHANNEL, MEMBER = "C0TRIPS", "U0MEMBER"


def test_a_first_question_after_an_upload(tmp_path: Path, shared_models_dir: Path) -> None:
    fake = FakeSlack().start()
    fake.memberships = {MEMBER: [CHANNEL]}
    settings = SlackHarness.settings(tmp_path / "data", fake, slack_workers=1, models_dir=shared_models_dir)
    core = ChatCore.from_settings(settings)
    upload = core.upload(ChatContext("slack", slack_scope(TEAM, CHANNEL), MEMBER), file_name="leave_policy.pdf",
                         data=make_pdf(LEAVE_PAGES))
    assert upload.status == "indexed"
    core.service.warm_up()  # as `citebot serve` does before it takes events
    ended = threading.Event()
    end_work = core.state.end_work

    def end_and_tell(*args: Any, **kwargs: Any) -> Any:
        try:
            return end_work(*args, **kwargs)
        finally:
            ended.set()

    core.state.end_work = end_and_tell  # type: ignore[method-assign]
    state, chunks = count_calls(core.state, ChatState, polls=("take_work",)), count_calls(core.service.store)
    try:
        with SlackHarness.serving(settings, core, fake) as slack:
            assert slack.send(mention(CHANNEL, MEMBER, "How many weeks of parental leave do I get?", "500.1")) == 200
            posted = fake.wait_for("chat.postMessage", channel=CHANNEL, thread_ts="500.1")
            assert ended.wait(60), "the worker did not finish the item"
            answered = list(state)
    finally:
        fake.stop()
    assert "eighteen weeks" in str(posted[-1].params)
    # the asker's waiting work is counted as the item is written, and the answer recorded as the item ends: one
    # transaction each
    assert answered == ["add_work", "take_work", "note_work", "note_work", "end_work"]
    # The status line ("Searching 1 PDF…", on the UI pool) and the answer share one listing of the channel's
    # documents: whichever comes first lists them (a first listing is its own chunk count: no count before it); the
    # other reuses the listing (counting first only when the listing is over 2 s old, as on a slow machine it may
    # be). All of the question's words are looked up in one call.
    assert [c for c in chunks if c != "count_in_scopes"] == ["list_documents", "embedding_search", "bm25_search",
                                                             "document_vectors", "bm25_matches_each"]
    assert chunks.count("count_in_scopes") <= 1
