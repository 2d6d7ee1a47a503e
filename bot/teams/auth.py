"""Who may post to ``/api/messages``, and where the bot's own token may go.

**Inbound.** Every activity carries a Bot Framework token (``Authorization: Bearer …``): an RS256 JWT whose
signing key is one of those the OpenID metadata at ``CITEBOT_TEAMS_OPENID_URL`` lists (Bot Framework's by
default), issued by that metadata's ``issuer`` (``https://api.botframework.com``), for the audience
``TEAMS_APP_ID``, within its lifetime (5 minutes' leeway). As Bot Framework's own channel validation does, the key
must endorse the activity's ``channelId`` when it lists endorsements, and the token's ``serviceurl`` claim must be
the activity's ``serviceUrl``: a token lifted from one conversation cannot direct replies elsewhere.

**Outbound.** Replies go to the activity's ``serviceUrl`` with an app-only token from the Entra token endpoint
(``CITEBOT_TEAMS_TOKEN_URL``, client credentials, scope ``https://api.botframework.com/.default``). That token goes
only to the Bot Connector's hosts (:data:`CONNECTOR_HOSTS`, over HTTPS) or to an endpoint the admin configured;
an activity naming any other ``serviceUrl`` is refused before the bot acts on it.

``anonymous``: no credentials (``--insecure-local``, the Emulator, tests): no inbound check, no token outbound.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import jwt
from microsoft_agents.activity import Activity
from microsoft_agents.hosting.core import ClaimsIdentity

from connectors.download import DownloadError, fetch, host_of, may_receive_credentials
from connectors.settings import Settings

CONNECTOR_SCOPE = "https://api.botframework.com/.default"
# The Bot Connector's hosts (Teams' serviceUrl is https://smba.trafficmanager.net/...); a subdomain counts.
CONNECTOR_HOSTS = ("smba.trafficmanager.net", "botframework.com", "teams.microsoft.com", "teams.microsoft.us",
                   "botframework.azure.us")
_TIMEOUT_S = 10.0
_MAX_JSON_BYTES = 1_000_000
_KEYS_TTL_S = 24 * 3600.0
_REFRESH_GAP_S = 300.0  # an unknown key id refetches the keys at most this often
_LEEWAY_S = 300


class Unauthorized(Exception):
    """The request may not be acted on; ``str(e)`` is a short reason for the log (never the token)."""


class NoToken(Unauthorized):
    """The request carries no bearer token at all (a scanner, a misconfigured client): refused without a log line."""


@dataclass
class _Keys:
    issuer: str
    keys: dict[str, tuple[jwt.PyJWK, tuple[str, ...]]]  # kid -> (key, endorsed channels)
    fetched_at: float


@dataclass
class TeamsAuth:
    """The bot's credentials and the rules above; ``anonymous`` when there are none."""

    app_id: str = ""
    password: str = field(default="", repr=False)
    token_tenant: str = "botframework.com"  # noqa: S105 - the tenant a MultiTenant bot signs in through
    openid_url: str = ""
    token_url: str = ""
    trusted_hosts: frozenset[str] = frozenset()  # configured endpoints: reachable on private addresses (tests' fakes)
    token_hosts: frozenset[str] = frozenset()  # configured Teams endpoints that may receive the token
    plain_hosts: frozenset[str] = frozenset()  # ...of which these were configured as http:// (local fakes)
    anonymous: bool = True
    _keys: _Keys | None = field(default=None, repr=False)
    _token: tuple[str, float] | None = field(default=None, repr=False)
    # one lock each: a slow key fetch (an inbound check) never holds up the token an answer is waiting for
    _keys_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _token_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> TeamsAuth:
        password = settings.teams_app_password.get_secret_value() if settings.teams_app_password else ""
        single = settings.teams_app_tenant_id if settings.teams_app_type == "SingleTenant" else None
        teams_urls = (settings.teams_graph_url, settings.teams_token_url.replace("{tenant}", "t"),
                      settings.teams_openid_url)
        return cls(
            app_id=settings.teams_app_id or "",
            password=password,
            token_tenant=single or "botframework.com",
            openid_url=settings.teams_openid_url,
            token_url=settings.teams_token_url,
            trusted_hosts=settings.configured_hosts,
            token_hosts=frozenset(host_of(u) for u in teams_urls) - {""},
            plain_hosts=frozenset(host_of(u) for u in teams_urls if urlsplit(u).scheme == "http") - {""},
            anonymous=False,
        )

    # --- inbound -----------------------------------------------------------------------------------
    async def authenticate(self, authorization: str | None, activity: Activity) -> ClaimsIdentity:
        """The claims of a valid token for ``activity``; :class:`Unauthorized` otherwise."""
        if self.anonymous:
            return ClaimsIdentity({}, authentication_type="anonymous")
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or any(ch.isspace() for ch in token):
            raise NoToken("no bearer token")
        claims = await asyncio.get_running_loop().run_in_executor(None, self._validate, token, activity)
        if not self.may_receive_token(activity.service_url or ""):
            raise Unauthorized("serviceUrl is not a Bot Connector host")
        return ClaimsIdentity(claims, authentication_type="Bearer", security_token=token)

    def _validate(self, token: str, activity: Activity) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as e:
            raise Unauthorized("not a JWT") from e
        if header.get("alg") != "RS256":
            raise Unauthorized("not signed with RS256")
        issuer, key, endorsements = self._key(str(header.get("kid") or ""))
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key=key, algorithms=["RS256"], audience=self.app_id, issuer=issuer, leeway=_LEEWAY_S,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as e:
            raise Unauthorized(f"token refused: {type(e).__name__}") from e
        channel = str(activity.channel_id or "")
        if endorsements and channel not in endorsements:
            raise Unauthorized("the signing key does not endorse this channel")
        if claims.get("serviceurl") != activity.service_url:
            raise Unauthorized("the token's serviceurl is not the activity's")
        return claims

    def _key(self, kid: str) -> tuple[str, jwt.PyJWK, tuple[str, ...]]:
        with self._keys_lock:
            now = time.monotonic()
            keys = self._keys
            stale = keys is None or now - keys.fetched_at > _KEYS_TTL_S
            unknown = keys is not None and kid not in keys.keys and now - keys.fetched_at > _REFRESH_GAP_S
            if stale or unknown:
                keys = self._keys = self._fetch_keys()
            assert keys is not None
            if kid not in keys.keys:
                raise Unauthorized("signed with an unknown key")
            key, endorsements = keys.keys[kid]
            return keys.issuer, key, endorsements

    def _fetch_keys(self) -> _Keys:
        metadata = self._get_json(self.openid_url)
        jwks_uri = str(metadata.get("jwks_uri") or "")
        issuer = str(metadata.get("issuer") or "")
        if not jwks_uri or not issuer:
            raise Unauthorized("the OpenID metadata names no jwks_uri or issuer")
        keys: dict[str, tuple[jwt.PyJWK, tuple[str, ...]]] = {}
        for raw in self._get_json(jwks_uri).get("keys") or []:
            if not isinstance(raw, dict) or not raw.get("kid"):
                continue
            try:
                key = jwt.PyJWK(raw, algorithm="RS256")
            except jwt.PyJWTError:
                continue
            endorsements = tuple(str(e) for e in raw.get("endorsements") or [])
            keys[str(raw["kid"])] = (key, endorsements)
        return _Keys(issuer=issuer, keys=keys, fetched_at=time.monotonic())

    def _get_json(self, url: str) -> dict[str, Any]:
        try:
            got = fetch(url, max_bytes=_MAX_JSON_BYTES, timeout_s=_TIMEOUT_S, trusted_hosts=self.trusted_hosts)
            body = json.loads(got.body) if got.status == 200 else None
        except (DownloadError, ValueError) as e:
            raise Unauthorized("the signing keys could not be read") from e
        if not isinstance(body, dict):
            raise Unauthorized("the signing keys could not be read")
        return body

    # --- outbound ----------------------------------------------------------------------------------
    def may_receive_token(self, service_url: str) -> bool:
        """The bot's token may go to ``service_url``: a Bot Connector host or a configured Teams endpoint, over
        HTTPS (plain HTTP only where that endpoint was configured so: a local fake)."""
        return may_receive_credentials(service_url, self.token_hosts, self.plain_hosts, CONNECTOR_HOSTS)

    async def connector_token(self, service_url: str) -> str:
        """The token for a Bot Connector call to ``service_url`` ("" when anonymous); PermissionError when the
        token may not go there."""
        if self.anonymous:
            return ""
        if not self.may_receive_token(service_url):
            raise PermissionError("the bot's token goes only to the Bot Connector")
        return await asyncio.get_running_loop().run_in_executor(None, self._connector_token)

    def _connector_token(self) -> str:
        with self._token_lock:
            if self._token is not None and time.monotonic() < self._token[1]:
                return self._token[0]
            url = self.token_url.format(tenant=self.token_tenant)
            form = {"grant_type": "client_credentials", "client_id": self.app_id, "client_secret": self.password,
                    "scope": CONNECTOR_SCOPE}
            try:
                got = fetch(url, method="POST", data=form, max_bytes=_MAX_JSON_BYTES, timeout_s=_TIMEOUT_S,
                            trusted_hosts=self.trusted_hosts)
                body = json.loads(got.body) if got.status == 200 else {}
            except (DownloadError, ValueError) as e:
                raise PermissionError("Microsoft sign-in could not be reached") from e
            token = body.get("access_token") if isinstance(body, dict) else None
            if not token:
                raise PermissionError(f"Microsoft sign-in refused the bot's credentials (HTTP {got.status})")
            lifetime = float(body.get("expires_in") or 3600)
            self._token = (str(token), time.monotonic() + max(60.0, lifetime - 300.0))
            return self._token[0]


def anonymous() -> TeamsAuth:
    """No inbound token check, no outbound token: the Emulator / local-test mode."""
    return TeamsAuth()
