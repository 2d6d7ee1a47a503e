"""``citebot serve teams``: the aiohttp app with a ``CloudAdapter`` at ``/api/messages``.

With ``TEAMS_APP_ID`` unset the adapter runs unauthenticated, as the Bot Framework Emulator does:
inbound requests carry no token and outbound Bot Connector calls are made without one (the
connector's anonymous path), so local tests and the Emulator never reach a Microsoft sign-in
address. A warning says so at start-up.
"""

from __future__ import annotations

import sys
from typing import Any

import structlog
from aiohttp import web
from botbuilder.core import TurnContext
from botbuilder.integration.aiohttp import CloudAdapter, ConfigurationBotFrameworkAuthentication
from botframework.connector.auth import BotFrameworkAuthentication

from bot.core import APOLOGY, ChatCore
from bot.teams import render
from bot.teams.bot import CitebotTeamsBot
from connectors.settings import Settings

log = structlog.get_logger("citebot.teams")

BOT_KEY: web.AppKey[CitebotTeamsBot] = web.AppKey("citebot_teams_bot", CitebotTeamsBot)
ADAPTER_KEY: web.AppKey[CloudAdapter] = web.AppKey("citebot_teams_adapter", CloudAdapter)


class _BotConfig:
    """The attribute names ``ConfigurationBotFrameworkAuthentication`` reads."""

    def __init__(self, settings: Settings) -> None:
        self.APP_ID = settings.teams_app_id or ""
        self.APP_PASSWORD = settings.teams_app_password.get_secret_value() if settings.teams_app_password else ""
        self.APP_TYPE = settings.teams_app_type
        self.APP_TENANTID = settings.teams_app_tenant_id or ""


def bot_authentication(settings: Settings) -> BotFrameworkAuthentication:
    """Bot Framework authentication from the settings (anonymous when no app id is set)."""
    if settings.teams_app_type == "SingleTenant" and settings.teams_app_id and not settings.teams_app_tenant_id:
        raise ValueError("TEAMS_APP_TYPE=SingleTenant needs TEAMS_APP_TENANT_ID (the bot's Entra tenant id)")
    if settings.teams_app_id and not settings.teams_app_password:
        raise ValueError("TEAMS_APP_ID is set but TEAMS_APP_PASSWORD is not; set both (or neither for local tests)")
    return ConfigurationBotFrameworkAuthentication(_BotConfig(settings))


def anonymous_authentication() -> BotFrameworkAuthentication:
    """No inbound token check, no outbound token: the Emulator / local-test mode."""

    class _Anonymous:
        APP_ID = ""
        APP_PASSWORD = ""
        APP_TYPE = "MultiTenant"

    return ConfigurationBotFrameworkAuthentication(_Anonymous())


def build_app(
    settings: Settings,
    core: ChatCore,
    *,
    auth: BotFrameworkAuthentication | None = None,
    workers: int = 4,
) -> web.Application:
    """The aiohttp app (``/api/messages``, ``/healthz``); ``auth`` overrides the settings' authentication."""
    if auth is None and not settings.teams_app_id:
        log.warning(
            "teams_unauthenticated",
            detail="TEAMS_APP_ID is not set: /api/messages accepts unauthenticated requests "
            "(Bot Framework Emulator / local testing only; never expose this to the internet)",
        )
    adapter = CloudAdapter(auth or bot_authentication(settings))
    bot = CitebotTeamsBot(core, settings, workers=workers)

    async def on_error(context: TurnContext, error: Exception) -> None:
        log.error("teams_adapter_error", error_type=type(error).__name__)
        try:
            await context.send_activity(render.text_activity(APOLOGY))
        except Exception:  # noqa: BLE001 - the apology itself may be what failed
            log.warning("teams_apology_failed")

    adapter.on_turn_error = on_error

    async def messages(request: web.Request) -> web.StreamResponse:
        response = await adapter.process(request, bot)
        return response if response is not None else web.Response(status=201)

    async def healthz(_request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "authenticated": bool(settings.teams_app_id)})

    async def on_cleanup(_app: web.Application) -> None:
        await bot.drain()
        bot.close()

    app = web.Application()
    app[BOT_KEY] = bot
    app[ADAPTER_KEY] = adapter
    app.router.add_post("/api/messages", messages)
    app.router.add_get("/healthz", healthz)
    app.on_cleanup.append(on_cleanup)
    return app


def serve(settings: Settings, *, host: str, port: int, **_: Any) -> int:
    try:
        bot_authentication(settings)
    except ValueError as e:
        print(f"citebot: {e}", file=sys.stderr)
        return 2
    core = ChatCore.from_settings(settings)
    log.info("teams_warming_up")
    core.service.warm_up()
    app = build_app(settings, core)
    log.info("teams_listening", host=host, port=port, path="/api/messages")
    web.run_app(app, host=host, port=port, print=None)
    return 0
