"""The Teams bot under test: the real app (``bot.teams.server.build_app``) behind the local fake Microsoft (Bot
Connector, Graph, the token endpoint) and posted real Activity JSON (:class:`TeamsHarness`), a turn run in this
process through a recording adapter (:meth:`TeamsHarness.run`), or ``citebot serve teams`` as a process of its own
(:class:`TeamsProcess`)."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from microsoft_agents.activity import Activity, ActivityTypes, ConversationReference, ResourceResponse
from microsoft_agents.hosting.core import ChannelServiceAdapter, TurnContext

from bot.core import ChatCore
from bot.teams.activity import FILE_DOWNLOAD_INFO
from bot.teams.bot import CitebotTeamsBot
from connectors.settings import Settings
from eval.fakes.microsoft import AppThread, Call, FakeMicrosoft
from eval.fakes.openai_api import FakeOpenAI
from tests.helpers.process import CitebotProcess

APP_ID = "0b7f9a3c-1d2e-4f50-8a6b-9c0d1e2f3a4b"
APP_PASSWORD = "fake-app-password"  # noqa: S105
BOT = {"id": f"28:{APP_ID}", "name": "Citebot"}
TENANT = "tenant-one"
OTHER_TENANT = "tenant-two"
TEAM_ID = "19:team-ops@thread.tacv2"
GROUP_ID = "9f1c2d3e-0000-4000-8000-00000000aaaa"
CHANNEL_A = "19:channel-a@thread.tacv2"
CHANNEL_B = "19:channel-b@thread.tacv2"
# How the Teams tests lay out their documents (``make_pdf(pages, **PDF_LAYOUT)``).
PDF_LAYOUT: dict[str, Any] = {"size": 12, "leading": 24, "top": 800}

_ids = itertools.count(1_700_000_000_000)


def new_id() -> str:
    return str(next(_ids))


def wire(activity: Activity) -> dict[str, Any]:
    """The activity as the Bot Connector receives it (JSON, camelCase keys)."""
    return activity.model_dump(mode="json", by_alias=True, exclude_none=True)


class RecordingAdapter(ChannelServiceAdapter):
    """Keeps what the bot sends, in the turn and proactively, in ``activity_buffer`` instead of posting it."""

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type] - no connector clients: nothing leaves the process
        self.activity_buffer: list[Activity] = []
        self._ids = itertools.count(1)

    async def send_activities(self, context: TurnContext, activities: list[Activity]) -> list[ResourceResponse]:
        for activity in activities:
            if activity.type == ActivityTypes.invoke_response:
                context.turn_state[self.INVOKE_RESPONSE_KEY] = activity
            self.activity_buffer.append(activity)
        return [ResourceResponse(id=f"sent-{next(self._ids)}") for _ in activities]

    async def update_activity(self, context: TurnContext, activity: Activity) -> ResourceResponse:
        self.activity_buffer.append(activity)
        return ResourceResponse(id=activity.id)

    async def delete_activity(self, context: TurnContext, reference: ConversationReference) -> None:
        return None

    async def continue_conversation(  # type: ignore[override]
        self, agent_app_id: str, continuation_activity: Activity, callback: Any
    ) -> None:
        await self.run_pipeline(TurnContext(self, continuation_activity), callback)


@dataclass
class Turn:
    in_turn: list[Activity]  # sent while the turn ran
    later: list[Activity]  # sent proactively after it


@dataclass
class TeamsHarness:
    """The Teams bot over ``core``: served by ``app`` with the fake Microsoft ``fake`` behind it, or (``bot``
    alone) run one turn at a time in this process."""

    core: ChatCore
    settings: Settings
    fake: FakeMicrosoft | None = None
    app: AppThread | None = None
    bot: CitebotTeamsBot | None = None

    @staticmethod
    def app_settings(data_dir: Path, fake: FakeMicrosoft, **more: Any) -> Settings:
        """Settings for the app with the test app id and password, Graph and sign-in at ``fake``."""
        return Settings(data_dir=data_dir, teams_app_id=APP_ID, teams_app_password=APP_PASSWORD,
                        teams_graph_url=fake.graph_url, teams_token_url=fake.token_url, **more)

    # --- a turn in this process ---------------------------------------------------------------------
    def run(self, activity: Activity) -> Turn:
        """Run ``activity``'s turn through a :class:`RecordingAdapter`, then the work it left for later."""
        assert self.bot is not None, "a harness without a bot of its own serves over HTTP: post instead"
        bot = self.bot
        adapter = RecordingAdapter()

        async def go() -> Turn:
            ctx = TurnContext(adapter, activity)
            await adapter.run_pipeline(ctx, bot.on_turn)
            n = len(adapter.activity_buffer)
            await bot.drain()
            return Turn(list(adapter.activity_buffer[:n]), list(adapter.activity_buffer[n:]))

        return asyncio.run(go())

    # --- activities, as Teams sends them to the app -------------------------------------------------
    def channel_message(
        self,
        text: str,
        *,
        channel: str = CHANNEL_A,
        tenant: str = TENANT,
        mention: bool = True,
        user: str = "29:alice",
        group_id: str | None = GROUP_ID,
        activity_id: str | None = None,
    ) -> dict[str, Any]:
        assert self.fake is not None
        activity_id = activity_id or new_id()
        team: dict[str, Any] = {"id": TEAM_ID}
        if group_id:
            team["aadGroupId"] = group_id
        return {
            "type": "message",
            "id": activity_id,
            "channelId": "msteams",
            "serviceUrl": self.fake.service_url,
            "from": {"id": user, "name": user},
            "recipient": BOT,
            "conversation": {
                "id": f"{channel};messageid={activity_id}",
                "conversationType": "channel",
                "isGroup": True,
                "tenantId": tenant,
            },
            "channelData": {"channel": {"id": channel}, "team": team, "tenant": {"id": tenant}},
            "text": f"<at>Citebot</at> {text}" if mention else text,
            "entities": [{"type": "mention", "text": "<at>Citebot</at>", "mentioned": BOT}] if mention else [],
        }

    def chat_message(
        self,
        text: str,
        *,
        chat: str = "a:1personal-alice",
        tenant: str = TENANT,
        user: str = "29:alice",
        kind: str = "personal",
        attachments: list[dict[str, Any]] | None = None,
        activity_id: str | None = None,
    ) -> dict[str, Any]:
        assert self.fake is not None
        return {
            "type": "message",
            "id": activity_id or new_id(),
            "channelId": "msteams",
            "serviceUrl": self.fake.service_url,
            "from": {"id": user, "name": user},
            "recipient": BOT,
            "conversation": {"id": chat, "conversationType": kind, "tenantId": tenant, "isGroup": kind != "personal"},
            "channelData": {"tenant": {"id": tenant}},
            "text": text,
            "attachments": attachments or [],
        }

    def file_attachment(self, name: str, data: bytes) -> dict[str, Any]:
        assert self.fake is not None
        key = f"{new_id()}-{name}"
        self.fake.files[key] = data
        return {
            "contentType": FILE_DOWNLOAD_INFO,
            "contentUrl": f"https://contoso-my.sharepoint.com/personal/alice/Documents/{name}",
            "name": name,
            "content": {"downloadUrl": self.fake.file_url(key), "uniqueId": key, "fileType": name.rsplit(".", 1)[-1]},
        }

    # --- over HTTP ----------------------------------------------------------------------------------
    def post(self, activity: dict[str, Any], *, token: str | None = None) -> requests.Response:
        """POST ``activity`` to the app's ``/api/messages``, with ``token`` as its Bot Framework bearer token."""
        assert self.app is not None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return requests.post(f"{self.app.url}/api/messages", json=activity, headers=headers, timeout=60)

    def replies(self, conversation_id: str) -> list[Call]:
        assert self.fake is not None
        return [c for c in self.fake.connector_calls() if c.conversation_id == conversation_id]

    def wait_answer(self, activity: dict[str, Any], *, timeout: float = 60) -> Call:
        """The answer to ``activity``: a message with entities replying to it in its conversation."""
        assert self.fake is not None
        conv, activity_id = activity["conversation"]["id"], activity["id"]
        return self.fake.wait_for(
            lambda c: (
                c.conversation_id == conv
                and c.reply_to_id == activity_id
                and c.type == "message"
                and bool(c.body.get("entities"))
            ),
            timeout=timeout,
        )[-1]

    def wait_reply(self, activity: dict[str, Any], *, timeout: float = 60) -> Call:
        """The last message replying to ``activity`` in its conversation (an answer, or a plain text)."""
        assert self.fake is not None
        conv, activity_id = activity["conversation"]["id"], activity["id"]
        return self.fake.wait_for(
            lambda c: c.conversation_id == conv and c.reply_to_id == activity_id and c.type == "message",
            timeout=timeout,
        )[-1]

    def wait_text(self, conversation_id: str, needle: str, *, since: float = 0.0, timeout: float = 90) -> Call:
        assert self.fake is not None
        return self.fake.wait_for(
            lambda c: c.conversation_id == conversation_id and needle in c.text and c.at >= since, timeout=timeout
        )[-1]

    def ask(self, activity: dict[str, Any]) -> Call:
        assert self.post(activity).status_code in (200, 201)
        return self.wait_answer(activity)


def citations(call: Call) -> list[dict[str, Any]]:
    (entity,) = [e for e in call.body["entities"] if e.get("@type") == "Message"]
    return list(entity.get("citation") or [])


def cited_files(call: Call) -> set[str]:
    return {c["appearance"]["name"] for c in citations(call)}


class TeamsProcess(CitebotProcess):
    """``citebot serve teams --insecure-local`` in its own process group; activities' ``serviceUrl`` is the fake's
    Bot Connector, answers go through the LLM stand-in ``llm``; ``url`` is where activities are posted."""

    def __init__(self, fake: FakeMicrosoft, llm: FakeOpenAI, data_dir: Path, log: Path, **settings: str) -> None:
        # the fake's host is a configured endpoint, so its file downloads are allowed on a loopback address
        super().__init__(["serve", "teams", "--insecure-local"], data_dir, log,
                         {"CITEBOT_TEAMS_GRAPH_URL": fake.graph_url, "OPENAI_BASE_URL": llm.base_url, **settings})
        self.url = f"{self.base}/api/messages"
