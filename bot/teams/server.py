"""``citebot serve teams``: the aiohttp app with the Microsoft 365 Agents SDK's ``CloudAdapter`` at ``/api/messages``.

Every inbound activity must carry a Bot Framework token signed for ``TEAMS_APP_ID`` (:mod:`bot.teams.auth`: keys
from the configured OpenID metadata, issuer, audience, ``serviceUrl``). Without credentials the server does not
start, except with ``--insecure-local`` on a loopback address: then the adapter runs unauthenticated, as the Bot
Framework Emulator does (inbound requests carry no token, outbound Bot Connector calls are made without one), for
local testing only, and a warning says so.

A valid token says the Bot Framework delivered the activity, not that Teams wrote it: the bot then serves only
``channelId == "msteams"`` (plus the Emulator's channel in ``--insecure-local``), and a SingleTenant bot only its
own tenant (``bot.teams.activity.refusal``).

The endpoint faces the internet, so every connection is bounded before a token is looked at (aiohttp's defaults
bound none of these):

* **Time.** A request's line and headers must arrive within ``REQUEST_TIMEOUT_S`` of the connection opening (or of
  the previous answer on a keep-alive connection; an idle one is closed then too), and its body within as long
  again (408): a deadline, so a client dripping a byte a second is cut off.
* **Size.** A body over ``MAX_BODY_BYTES`` gets 413; a body too deeply nested to parse gets 400.
* **Concurrency.** At most ``MAX_CONNECTIONS`` connections are open at once (:func:`listen`); more get 503 and
  are closed at once, so slow or many clients cannot use up the process's file descriptors.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import sys
import threading
from typing import Any

import aiohttp
import pydantic
import structlog
from aiohttp import web
from microsoft_agents.activity import Activity
from microsoft_agents.hosting.aiohttp import CloudAdapter
from microsoft_agents.hosting.core import (
    AuthenticationConstants,
    ChannelServiceClientFactoryBase,
    ClaimsIdentity,
    ConnectorClientBase,
    TeamsConnectorClient,
    TurnContext,
    UserTokenClient,
)

from bot.core import ChatCore
from bot.health import HEALTH_PATH, METRICS_PATH, READY_PATH, Health, serve_health
from bot.journal import NotRecorded
from bot.teams import render
from bot.teams.auth import NoToken, TeamsAuth, Unauthorized, anonymous
from bot.teams.bot import CitebotTeamsBot
from bot.teams.work import CONNECTOR_TIMEOUT_S
from bot.texts import APOLOGY, NOT_RECORDED
from connectors.log import error_fields
from connectors.settings import Settings
from connectors.state_api import StateError
from connectors.store_api import StoreError

log = structlog.get_logger(__name__)

BOT_KEY: web.AppKey[CitebotTeamsBot] = web.AppKey("citebot_teams_bot", CitebotTeamsBot)
ADAPTER_KEY: web.AppKey[CloudAdapter] = web.AppKey("citebot_teams_adapter", CloudAdapter)
WARM_UP_KEY: web.AppKey[asyncio.Task[None]] = web.AppKey("citebot_warm_up", asyncio.Task)


MAX_CONNECTIONS = 256  # open at once; the Bot Connector's requests are answered in milliseconds each
REQUEST_TIMEOUT_S = 10.0  # for the request line and headers, and again for the body; an idle keep-alive too
MAX_BODY_BYTES = 1024**2  # activities are a few kB
_OVERLOADED = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
)


class TeamsConfigError(ValueError):
    """The Teams credentials are missing or inconsistent; the message names the variables to set."""


NO_CREDENTIALS = (
    "TEAMS_APP_ID and TEAMS_APP_PASSWORD are not set (Bot Framework's MicrosoftAppId / MicrosoftAppPassword work "
    "too): without them anyone could post to /api/messages. Set both, or for local testing with the Bot Framework "
    "Emulator run `citebot serve teams --insecure-local` on a loopback address."
)


def check_credentials(settings: Settings) -> bool:
    """True when the app id and password are both set; False when neither is; otherwise TeamsConfigError."""
    if settings.teams_app_password is not None and not settings.teams_app_id:
        raise TeamsConfigError("TEAMS_APP_PASSWORD is set but TEAMS_APP_ID is not: set both "
                               "(or MicrosoftAppPassword and MicrosoftAppId)")
    if settings.teams_app_id and settings.teams_app_password is None:
        raise TeamsConfigError("TEAMS_APP_ID is set but TEAMS_APP_PASSWORD is not: set both "
                               "(or MicrosoftAppId and MicrosoftAppPassword)")
    if settings.teams_app_type == "SingleTenant" and settings.teams_app_id and not settings.teams_app_tenant_id:
        raise TeamsConfigError("TEAMS_APP_TYPE=SingleTenant needs TEAMS_APP_TENANT_ID (the bot's Entra tenant id)")
    return bool(settings.teams_app_id)


def bot_authentication(settings: Settings) -> TeamsAuth:
    """Bot Framework authentication from the settings; TeamsConfigError when the credentials are incomplete."""
    if not check_credentials(settings):
        raise TeamsConfigError(NO_CREDENTIALS)
    return TeamsAuth.from_settings(settings)


def is_loopback_host(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def anonymous_authentication() -> TeamsAuth:
    """No inbound token check, no outbound token: the Emulator / local-test mode."""
    return anonymous()


class _ConnectorClients(ChannelServiceClientFactoryBase):
    """The Bot Connector clients the adapter posts through: the bot's token only where :class:`TeamsAuth` lets it
    go, a deadline on every call. The user-token service (sign-in flows) is never used: its client has no token."""

    def __init__(self, auth: TeamsAuth) -> None:
        self.auth = auth

    async def create_connector_client(
        self, context: TurnContext | None, claims_identity: ClaimsIdentity, service_url: str, audience: str,
        scopes: list[str] | None = None, use_anonymous: bool = False,
    ) -> ConnectorClientBase:
        token = await self.auth.connector_token(service_url)
        endpoint = service_url if service_url.endswith("/") else service_url + "/"
        session = aiohttp.ClientSession(base_url=endpoint, timeout=aiohttp.ClientTimeout(total=CONNECTOR_TIMEOUT_S))
        return TeamsConnectorClient(endpoint=endpoint, token=token, session=session)

    async def create_user_token_client(
        self, context: TurnContext, claims_identity: ClaimsIdentity, use_anonymous: bool = False
    ) -> UserTokenClient:
        return UserTokenClient(AuthenticationConstants.AGENTS_SDK_OAUTH_URL, "", app_id=self.auth.app_id or "citebot")


def build_app(
    settings: Settings,
    core: ChatCore,
    *,
    auth: TeamsAuth | None = None,
    insecure_local: bool = False,
    workers: int | None = None,
    health: Health | None = None,
) -> web.Application:
    """The aiohttp app (``/api/messages``, ``/healthz``, ``/readyz``).

    ``health`` (default: ready at once) says when activities may be handled: until then they get 503.

    Authentication comes from the settings' credentials; without any, TeamsConfigError, unless
    ``insecure_local`` (the caller guarantees a loopback address) asks for the Emulator's unauthenticated mode.
    ``auth`` overrides both (tests).
    """
    emulator = False
    if auth is None:
        if check_credentials(settings):
            auth = bot_authentication(settings)
        elif insecure_local:
            log.warning(
                "teams_unauthenticated",
                detail="--insecure-local: /api/messages accepts unauthenticated requests on this loopback address "
                "(Bot Framework Emulator / local testing only)",
            )
            auth = anonymous_authentication()
            # Unauthenticated anyway, so refusing the Emulator's channel would protect nothing; with
            # credentials only Teams itself (channelId "msteams") is served.
            emulator = True
        else:
            raise TeamsConfigError(NO_CREDENTIALS)
    adapter = CloudAdapter(channel_service_client_factory=_ConnectorClients(auth))
    bot = CitebotTeamsBot(core, settings, workers=workers, allow_emulator=emulator)

    async def on_error(context: TurnContext, error: Exception) -> None:
        log.error("teams_adapter_error", **error_fields(error))
        text = NOT_RECORDED if isinstance(error, NotRecorded) else APOLOGY  # not journaled: say it was not started
        try:
            await context.send_activity(render.text_activity(text))
        except Exception as e:  # noqa: BLE001 - the apology itself may be what failed
            log.warning("teams_apology_failed", **error_fields(e))

    adapter.on_turn_error = on_error

    # this port faces the internet: it never serves /metrics (``serve``'s --metrics-port does)
    probe = (health if health is not None else Health("teams", ready=True)).metrics_elsewhere()
    probe.require("journal", lambda: bot.work.journal.writable)

    async def messages(request: web.Request) -> web.StreamResponse:
        if not probe.ready:  # still loading the model: the Bot Connector retries
            return web.Response(status=503, headers={"Retry-After": "5"})
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_S):  # the body's deadline; the headers' is keepalive_timeout
                raw = await request.read()
        except TimeoutError:
            log.warning("teams_bad_request", reason="the body took too long to arrive")
            return web.Response(status=408, headers={"Connection": "close"})
        try:
            body = json.loads(raw)
            activity = Activity.model_validate(body) if isinstance(body, dict) else None
        except (ValueError, RecursionError, pydantic.ValidationError):  # too deeply nested to parse: no activity
            activity = None
        if activity is None or not activity.type or not activity.conversation:
            log.warning("teams_bad_request", reason="body is not a JSON activity")
            return web.Response(status=400, text="400: the body is not a JSON activity")
        try:
            identity = await auth.authenticate(request.headers.get("Authorization"), activity)
        except Unauthorized as e:
            if not isinstance(e, NoToken):
                log.warning("teams_unauthorized", reason=str(e))
            return web.Response(status=401, text="401: Unauthorized")
        try:
            invoke = await adapter.process_activity(identity, activity, bot.on_turn)
        except PermissionError as e:  # the bot's token may not go to this serviceUrl
            log.warning("teams_unauthorized", **error_fields(e))
            return web.Response(status=401, text="401: Unauthorized")
        if activity.type == "invoke":
            status = int(invoke.status or 501) if invoke is not None else 501
            return web.json_response(invoke.body if invoke is not None else None, status=status)
        return web.Response(status=201)

    async def healthz(request: web.Request) -> web.Response:
        status, body = probe.readiness() if request.path == READY_PATH else probe.live()
        return web.json_response({**body, "authenticated": bool(settings.teams_app_id)}, status=status)

    async def metrics(request: web.Request) -> web.Response:
        code, body, content_type = probe.respond(METRICS_PATH) or (404, b"", "text/plain")
        return web.Response(status=code, body=body, headers={"Content-Type": content_type})

    async def bind_if_ready(_app: web.Application) -> None:
        """The journal's workers start once the model is loaded (``serve`` binds after its warm-up); they take
        over at once what a killed bot left."""
        if probe.ready:
            bot.bind(adapter, asyncio.get_running_loop())

    async def on_shutdown(_app: web.Application) -> None:
        probe.set_not_ready()  # intake stops; what was acknowledged is journaled

    async def on_cleanup(_app: web.Application) -> None:
        log.info("draining", budget_s=settings.drain_s)
        await bot.stop(settings.drain_s)  # the bounded stop: the rest is taken over by another replica or restart
        bot.close()

    # keepalive_timeout: aiohttp closes a connection still waiting for a whole request line and headers this long
    # after it opened or after its last answer (its default is an hour)
    app = web.Application(client_max_size=MAX_BODY_BYTES, handler_args={"keepalive_timeout": REQUEST_TIMEOUT_S})
    app[BOT_KEY] = bot
    app[ADAPTER_KEY] = adapter
    app.router.add_post("/api/messages", messages)
    app.router.add_get(HEALTH_PATH, healthz)
    app.router.add_get(READY_PATH, healthz)
    if probe.metrics:
        app.router.add_get(METRICS_PATH, metrics)
    app.on_startup.append(bind_if_ready)
    app.on_shutdown.append(on_shutdown)
    app.on_cleanup.append(on_cleanup)
    return app


class _Overloaded(asyncio.Protocol):
    """A connection beyond ``MAX_CONNECTIONS``: 503, closed at once, nothing read."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(_OVERLOADED)
        transport.close()


class _ConnectionCap:
    """The protocol factory asyncio's server calls for each accepted connection: aiohttp's handler while fewer
    than ``limit`` connections are open, else :class:`_Overloaded`."""

    def __init__(self, server: web.Server, limit: int) -> None:
        self.server, self.limit, self._warned = server, limit, 0.0

    def __call__(self) -> asyncio.BaseProtocol:
        if len(self.server.connections) < self.limit:
            return self.server()
        now = asyncio.get_running_loop().time()
        if now - self._warned > 10:  # one line per burst, not one per refused connection
            self._warned = now
            log.warning("teams_http_overloaded", max_connections=self.limit)
        return _Overloaded()


async def listen(runner: web.AppRunner, host: str, port: int) -> asyncio.Server:
    """Serve ``runner``'s app on ``host:port`` with at most ``MAX_CONNECTIONS`` connections open (aiohttp's
    ``TCPSite`` has no cap); ``port=0`` picks a free one. The caller closes the server before ``runner.cleanup()``."""
    assert runner.server is not None, "runner.setup() first"
    return await asyncio.get_running_loop().create_server(
        _ConnectionCap(runner.server, MAX_CONNECTIONS), host, port, backlog=256)


def run_app(app: web.Application, *, host: str, port: int) -> None:
    """``web.run_app`` with the connection cap of :func:`listen`: until SIGINT/SIGTERM, then aiohttp's shutdown
    and cleanup (the app's drain)."""

    async def main() -> None:
        runner = web.AppRunner(app, handle_signals=True, access_log=None)
        await runner.setup()
        server = None
        try:
            server = await listen(runner, host, port)
            await asyncio.Event().wait()
        finally:
            if server is not None:
                server.close()
            await runner.cleanup()

    with contextlib.suppress(web.GracefulExit, KeyboardInterrupt):
        asyncio.run(main())


def serve(
    settings: Settings, *, host: str, port: int, insecure_local: bool = False, metrics_port: int | None = None,
    **_: Any,
) -> int:
    """Run the Teams bot until interrupted. ``/metrics`` is served only on ``metrics_port`` (with the health
    paths, by a small server of its own) when that is given, never on ``port``, which faces the internet."""
    try:
        authenticated = check_credentials(settings)
    except TeamsConfigError as e:
        print(f"citebot: {e}", file=sys.stderr)
        return 2
    if not authenticated and not insecure_local:
        print(f"citebot: {NO_CREDENTIALS}", file=sys.stderr)
        return 2
    if not authenticated and not is_loopback_host(host):
        print(f"citebot: --insecure-local only binds to a loopback address (127.0.0.1, ::1), not {host}",
              file=sys.stderr)
        return 2
    try:
        core = ChatCore.from_settings(settings)
    except (StoreError, StateError) as e:  # their messages name the file to fix (read-only, damaged, locked)
        print(f"citebot: {e}", file=sys.stderr)
        return 2
    health = Health("teams")
    metrics_server = serve_health(health, host, metrics_port) if metrics_port is not None else None
    app = build_app(settings, core, insecure_local=insecure_local and not authenticated, health=health)

    async def warm_up(_app: web.Application) -> None:
        """Listen at once (probes see "starting"), load the model beside, then report ready."""

        async def load() -> None:
            log.info("teams_warming_up")
            await asyncio.get_running_loop().run_in_executor(None, core.service.warm_up)
            health.set_ready()
            _app[BOT_KEY].bind(_app[ADAPTER_KEY], asyncio.get_running_loop())
            log.info("teams_ready")

        _app[WARM_UP_KEY] = asyncio.get_running_loop().create_task(load())

    app.on_startup.append(warm_up)
    log.info("teams_listening", host=host, port=port, path="/api/messages")
    if metrics_server is not None:
        threading.Thread(target=metrics_server.serve_forever, daemon=True).start()
    try:
        run_app(app, host=host, port=port)
    finally:
        if metrics_server is not None:
            metrics_server.shutdown()
            metrics_server.server_close()
    return 0
