"""Defect 5 of the second security review: Teams ``sync`` made the syncing member the uploader of every channel
file, so they could ``forget`` those files and the file's real owner could not.

Now a synced file belongs to the user Microsoft Graph names as its ``createdBy`` (matched to a message's
``from.aadObjectId``): the member who typed ``sync`` is told they may not remove a colleague's file, the file's
author removes it, and a file an app added belongs to no one who could forget it in chat. Driven through the
real aiohttp app, the Bot Connector and Graph stand-in (``eval.fakes.microsoft``) on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bot.core import ChatCore
from bot.teams.server import anonymous_authentication, build_app
from connectors.settings import Settings
from eval.fakes.microsoft import AppThread, ChannelFolder, FakeMicrosoft
from tests.helpers.pdfs import ZEPHYR_LINES, make_pdf
from tests.helpers.teams import APP_ID, APP_PASSWORD, CHANNEL_A, GROUP_ID, PDF_LAYOUT, TENANT
from tests.helpers.teams import TeamsHarness as World

pytestmark = pytest.mark.slow

SCOPE = f"teams:{TENANT}:{CHANNEL_A}"
CAROLS = "zephyr_budget.pdf"  # Carol put it in the channel's Files tab
APPS = "wiki_export.pdf"  # a connector app put it there


def _message(world: World, text: str, *, user: str, aad: str) -> dict[str, Any]:
    activity = world.channel_message(text, user=user)
    activity["from"]["aadObjectId"] = aad
    return activity


def _say(world: World, activity: dict[str, Any], needle: str) -> str:
    assert world.post(activity).status_code in (200, 201)
    return world.wait_text(activity["conversation"]["id"], needle, timeout=300).text


@pytest.fixture
def world(tmp_path: Any) -> Iterator[World]:
    with FakeMicrosoft(client_id=APP_ID, client_secret=APP_PASSWORD) as fake:
        settings = Settings(data_dir=tmp_path / "data", teams_app_id=APP_ID, teams_app_password=APP_PASSWORD,
                            teams_graph_url=fake.graph_url, teams_token_url=fake.token_url, download_timeout_s=15)
        core = ChatCore.from_settings(settings)
        core.service.warm_up()  # the model (and its first ONNX export) before the clock of any reply starts
        app = build_app(settings, core, auth=anonymous_authentication())
        with AppThread(app) as thread:
            yield World(fake=fake, app=thread, core=core, settings=settings)


def test_a_synced_file_is_its_authors_not_the_syncing_members(world: World) -> None:
    fake = world.fake
    fake.files[CAROLS] = make_pdf([ZEPHYR_LINES], **PDF_LAYOUT)
    fake.files[APPS] = make_pdf([["Wiki export", "The wiki moved to the intranet in May."]], **PDF_LAYOUT)
    fake.file_authors[CAROLS] = "oid-carol"
    fake.channel_folders[(GROUP_ID, CHANNEL_A)] = ChannelFolder("drive-1", "folder-a", [CAROLS, APPS])

    _say(world, _message(world, "sync", user="29:alice", aad="oid-alice"), "Synced 2 PDFs")
    owners = {d.file: d.uploaded_by for d in world.core.documents([SCOPE])}
    assert owners == {CAROLS: "aad:oid-carol", APPS: "teams-files"}

    # Alice typed sync; the files are not hers to remove
    for name in (CAROLS, APPS):
        reply = _say(world, _message(world, f"forget {name}", user="29:alice", aad="oid-alice"), "Only the person")
        assert name in reply
    assert {d.file for d in world.core.documents([SCOPE])} == {CAROLS, APPS}

    # Carol, whose file it is, removes it (her Teams id is another form of the id Graph gave)
    reply = _say(world, _message(world, f"forget {CAROLS}", user="29:carol", aad="oid-carol"), "Removed")
    assert CAROLS in reply
    assert {d.file for d in world.core.documents([SCOPE])} == {APPS}

    # a second sync by someone else changes no owner and replaces nothing of Carol's under a new name
    _say(world, _message(world, "sync", user="29:bob", aad="oid-bob"), "Synced 2 PDFs")
    owners = {d.file: d.uploaded_by for d in world.core.documents([SCOPE])}
    assert owners == {CAROLS: "aad:oid-carol", APPS: "teams-files"}
