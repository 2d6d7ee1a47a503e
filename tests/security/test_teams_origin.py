"""Defect 3 of the security review: the Teams bot trusted the tenant and channel that ``channelData`` names.

On Web Chat or Direct Line the client writes ``channelData`` itself, so a stranger with a valid Bot Framework
token could name a victim's tenant and channel and read that channel's PDFs (``docs``, answers) or make the
bot sync them through Microsoft Graph. The app here runs without token checks (``anonymous_authentication``),
standing in for a request whose token was valid: what is tested is what the bot does with the activity after
authentication. Replies and Graph calls go to the local fake Microsoft.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from bot.core import ChatContext, ChatCore
from bot.teams.server import anonymous_authentication, build_app
from connectors.settings import Settings
from eval.fakes.microsoft import AppThread, ChannelFolder, FakeMicrosoft
from tests.helpers.pdfs import make_pdf
from tests.helpers.teams import APP_ID, APP_PASSWORD, BOT, TeamsHarness

pytestmark = pytest.mark.slow

VICTIM_TENANT = "victim-tenant"
VICTIM_CHANNEL = "19:board-minutes@thread.tacv2"
VICTIM_GROUP = "9f1c2d3e-0000-4000-8000-00000000bbbb"
VICTIM_FILE = "board_minutes.pdf"
ATTACKER_TENANT = "attacker-tenant"
ATTACKER_CHANNEL = "19:attackers-own@thread.tacv2"

_ids = itertools.count(1_800_000_000_000)


VICTIM_LINES = ["Board minutes: the merger with Halvard closes in March."]


def activity(
    text: str,
    *,
    channel_id: str = "msteams",
    conversation: str = VICTIM_CHANNEL,
    conversation_type: str = "channel",
    conversation_tenant: str | None = VICTIM_TENANT,
    data_tenant: str | None = VICTIM_TENANT,
    data_channel: str | None = VICTIM_CHANNEL,
    service_url: str,
) -> dict[str, Any]:
    """A message mentioning the bot; every field a client could set is a parameter."""
    activity_id = str(next(_ids))
    conv: dict[str, Any] = {"id": f"{conversation};messageid={activity_id}" if conversation_type == "channel"
                            else conversation, "conversationType": conversation_type}
    if conversation_tenant:
        conv["tenantId"] = conversation_tenant
    data: dict[str, Any] = {}
    if data_tenant:
        data["tenant"] = {"id": data_tenant}
    if data_channel:
        data["channel"] = {"id": data_channel}
        data["team"] = {"id": data_channel, "aadGroupId": VICTIM_GROUP}
    return {
        "type": "message", "id": activity_id, "channelId": channel_id, "serviceUrl": service_url,
        "from": {"id": "29:mallory"}, "recipient": BOT, "conversation": conv, "channelData": data,
        "text": f"<at>Citebot</at> {text}",
        "entities": [{"type": "mention", "text": "<at>Citebot</at>", "mentioned": BOT}],
    }


def _settings(world: TeamsHarness, **overrides: Any) -> Settings:
    """The app's settings (credentials, the fake's Graph and sign-in), with ``overrides``."""
    assert world.fake is not None
    return TeamsHarness.app_settings(world.settings.data_dir, world.fake, **overrides)


def _sent(world: TeamsHarness, app: AppThread, body: dict[str, Any]) -> list[str]:
    """Post ``body`` to ``app``; the activities the bot sent anywhere because of it (in the turn and after), as
    JSON."""
    assert world.fake is not None
    before = len(world.fake.calls)
    requests.post(f"{app.url}/api/messages", json=body, timeout=60)
    app.run(app.app[_bot_key()].drain())
    return [json.dumps(c.body, ensure_ascii=False) for c in world.fake.calls[before:] if c.path.startswith("/v3/")]


def _graph_calls(world: TeamsHarness) -> list[str]:
    assert world.fake is not None
    return [c.path for c in world.fake.calls if c.path.startswith("/v1.0/")]


def _bot_key() -> Any:
    from bot.teams.server import BOT_KEY

    return BOT_KEY


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamsHarness]:
    data_dir = tmp_path_factory.mktemp("teams-origin")
    with FakeMicrosoft(client_id=APP_ID, client_secret=APP_PASSWORD) as fake:
        core = ChatCore.from_settings(Settings(data_dir=data_dir))
        victim = ChatContext(platform="teams", scope=f"teams:{VICTIM_TENANT}:{VICTIM_CHANNEL}", user="29:victim")
        minutes = make_pdf([VICTIM_LINES], size=12, top=800, bold=None)
        assert core.upload(victim, file_name=VICTIM_FILE, data=minutes).status == "indexed"
        fake.files[VICTIM_FILE] = minutes
        fake.channel_folders[(VICTIM_GROUP, VICTIM_CHANNEL)] = ChannelFolder("drive-v", "folder-v", [VICTIM_FILE])
        yield TeamsHarness(core, TeamsHarness.app_settings(data_dir, fake), fake)


@pytest.fixture(scope="module")
def multi_tenant(world: TeamsHarness) -> Iterator[AppThread]:
    with AppThread(build_app(_settings(world), world.core, auth=anonymous_authentication())) as app:
        yield app


def test_the_victims_own_channel_still_gets_its_documents(world: TeamsHarness, multi_tenant: AppThread) -> None:
    """The control: the same request from Teams, in the channel it names, is answered."""
    texts = _sent(world, multi_tenant, activity("docs", service_url=world.fake.service_url))
    assert any(VICTIM_FILE in t for t in texts)


@pytest.mark.parametrize("channel_id", ["webchat", "directline", "emulator", "test"])
def test_activities_from_channels_other_than_teams_are_refused(
    world: TeamsHarness, multi_tenant: AppThread, channel_id: str
) -> None:
    """Web Chat / Direct Line pass the client's channelData through: nothing answers them, not even help."""
    for text in ("docs", "help"):
        body = activity(text, channel_id=channel_id, service_url=world.fake.service_url)
        assert _sent(world, multi_tenant, body) == []


def test_direct_line_client_naming_a_victims_channel_learns_nothing(
    world: TeamsHarness, multi_tenant: AppThread
) -> None:
    """The attack as sent: a Direct Line conversation of the attacker's own, channelData naming the victim."""
    body = activity("What does the board say about the merger?", channel_id="directline",
                    conversation="dl-attacker-conversation", conversation_type="personal",
                    conversation_tenant=None, service_url=world.fake.service_url)
    sent = _sent(world, multi_tenant, body)
    assert not any("Halvard" in t or VICTIM_FILE in t for t in sent)


def test_tenant_fields_that_disagree_are_refused(world: TeamsHarness, multi_tenant: AppThread) -> None:
    body = activity("docs", conversation_tenant=ATTACKER_TENANT, data_tenant=VICTIM_TENANT,
                    service_url=world.fake.service_url)
    assert _sent(world, multi_tenant, body) == []


@pytest.mark.parametrize(
    ("conversation", "conversation_type"),
    [(ATTACKER_CHANNEL, "channel"), ("a:1personal-mallory", "personal"), ("19:mallory-chat@thread.v2", "groupChat")],
)
def test_channel_data_naming_another_channel_than_the_conversation_is_refused(
    world: TeamsHarness, multi_tenant: AppThread, conversation: str, conversation_type: str
) -> None:
    """Same tenant, but channelData names the victim's channel while the activity is in the attacker's own
    channel or chat: the reply would carry the victim's documents there."""
    body = activity("docs", conversation=conversation, conversation_type=conversation_type,
                    service_url=world.fake.service_url)
    assert _sent(world, multi_tenant, body) == []


def test_sync_never_reads_a_channel_the_activity_is_not_in(world: TeamsHarness, multi_tenant: AppThread) -> None:
    """Graph's Files.Read.All reaches every channel of the tenant: sync must only read the activity's own."""
    before = len(_graph_calls(world))
    body = activity("sync", conversation=ATTACKER_CHANNEL, service_url=world.fake.service_url)
    texts = _sent(world, multi_tenant, body)
    assert _graph_calls(world)[before:] == []
    assert not any("Synced" in t for t in texts)


def test_a_single_tenant_bot_refuses_other_tenants(world: TeamsHarness) -> None:
    settings = _settings(world, teams_app_type="SingleTenant", teams_app_tenant_id=VICTIM_TENANT)
    with AppThread(build_app(settings, world.core, auth=anonymous_authentication())) as app:
        tokens_before, graph_before = world.fake.token_requests, len(_graph_calls(world))
        for text in ("help", "docs", "sync"):
            body = activity(text, conversation=ATTACKER_CHANNEL, conversation_tenant=ATTACKER_TENANT,
                            data_tenant=ATTACKER_TENANT, data_channel=ATTACKER_CHANNEL,
                            service_url=world.fake.service_url)
            assert _sent(world, app, body) == [], text
        assert world.fake.token_requests == tokens_before
        assert _graph_calls(world)[graph_before:] == []
        # its own tenant is served
        assert any("Citebot" in t for t in _sent(world, app, activity("help", service_url=world.fake.service_url)))


def test_the_emulator_is_served_only_in_insecure_local_mode(world: TeamsHarness, tmp_path: Path) -> None:
    """--insecure-local is unauthenticated anyway, so refusing the Emulator there would protect nothing; a
    bot with credentials serves Teams only (checked above with channelId "emulator")."""
    local = Settings(data_dir=tmp_path)
    with AppThread(build_app(local, ChatCore.from_settings(local), insecure_local=True)) as app:
        body = activity("help", channel_id="emulator", conversation="emulator-conversation",
                        conversation_type="personal", conversation_tenant=None, data_tenant=None, data_channel=None,
                        service_url=world.fake.service_url)
        assert any("Citebot" in t for t in _sent(world, app, body))
