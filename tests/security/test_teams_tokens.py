"""The Teams endpoint acts only on activities whose Bot Framework token checks out, and the bot's own token goes
only to the Bot Connector.

The real app with credentials: ``CITEBOT_TEAMS_OPENID_URL`` points at a local OpenID metadata server (issuer
``https://api.botframework.com``, one RSA key endorsing ``msteams``), tokens are signed here with that key or with
another one, and the Bot Connector and the Entra token endpoint are the local fake Microsoft.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.core import ChatCore
from bot.teams.auth import CONNECTOR_SCOPE
from bot.teams.server import build_app
from eval.fakes.microsoft import FAKE_TOKEN, AppThread, FakeMicrosoft
from tests.helpers.teams import APP_ID, APP_PASSWORD, BOT, TeamsHarness

pytestmark = pytest.mark.slow

ISSUER = "https://api.botframework.com"
TENANT = "tenant-tokens"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@dataclass
class OpenId:
    """OpenID metadata and its JWKS on 127.0.0.1."""

    url: str
    server: ThreadingHTTPServer


def _serve_openid(key: rsa.RSAPrivateKey, kid: str, endorsements: list[str]) -> OpenId:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": kid, "use": "sig", "endorsements": endorsements})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's API
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            body = {"issuer": ISSUER, "jwks_uri": f"{base}/keys"} if self.path == "/openid" else {"keys": [jwk]}
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return OpenId(f"http://127.0.0.1:{server.server_address[1]}/openid", server)


def _message(world: TeamsHarness, text: str, *, service_url: str | None = None,
             channel_id: str = "msteams") -> dict[str, Any]:
    assert world.fake is not None
    activity_id = str(time.time_ns())
    return {
        "type": "message", "id": activity_id, "channelId": channel_id,
        "serviceUrl": service_url or world.fake.service_url,
        "from": {"id": "29:alice"}, "recipient": BOT,
        "conversation": {"id": f"a:1tokens-{activity_id}", "conversationType": "personal", "tenantId": TENANT},
        "channelData": {"tenant": {"id": TENANT}}, "text": text,
    }


def _token(activity: dict[str, Any], key: rsa.RSAPrivateKey, **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": APP_ID, "serviceurl": activity["serviceUrl"], "nbf": now - 5,
            "exp": now + 3600, **claims}
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": "key-1"})


def _sent(world: TeamsHarness, activity: dict[str, Any], token: str | None) -> tuple[int, list[str]]:
    """Post ``activity``; the HTTP status and the texts the bot sent to its conversation because of it."""
    assert world.fake is not None
    resp = world.post(activity, token=token)
    conv = activity["conversation"]["id"]
    if resp.status_code < 300:
        world.fake.wait_for(lambda c: c.conversation_id == conv, timeout=30)
    return resp.status_code, [c.text for c in world.fake.connector_calls() if c.conversation_id == conv]


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    """The key the OpenID metadata endorses."""
    return _key()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, key: rsa.RSAPrivateKey) -> Iterator[TeamsHarness]:
    openid = _serve_openid(key, "key-1", ["msteams"])
    data_dir: Path = tmp_path_factory.mktemp("teams-tokens")
    try:
        with FakeMicrosoft(client_id=APP_ID, client_secret=APP_PASSWORD) as fake:
            settings = TeamsHarness.app_settings(data_dir, fake, teams_openid_url=openid.url)
            core = ChatCore.from_settings(settings)
            with AppThread(build_app(settings, core)) as app:
                yield TeamsHarness(core, settings, fake, app)
    finally:
        openid.server.shutdown()
        openid.server.server_close()


def test_a_token_signed_by_the_metadatas_key_is_served_and_the_reply_carries_the_bots_token(
    world: TeamsHarness, key: rsa.RSAPrivateKey
) -> None:
    activity = _message(world, "help")
    status, texts = _sent(world, activity, _token(activity, key))
    assert status in (200, 201)
    assert any("Citebot" in t for t in texts)
    (reply,) = [c for c in world.fake.connector_calls() if c.conversation_id == activity["conversation"]["id"]]
    assert reply.authorization == f"Bearer {FAKE_TOKEN}"  # from the configured sign-in endpoint...
    assert CONNECTOR_SCOPE in world.fake.token_scopes  # ...for the Bot Connector


@pytest.mark.parametrize(
    "case",
    ["no token", "another key", "another audience", "another issuer", "expired", "another serviceurl",
     "a channel the key does not endorse"],
)
def test_a_token_that_does_not_check_out_gets_401_and_no_reply(
    world: TeamsHarness, key: rsa.RSAPrivateKey, case: str
) -> None:
    activity = _message(world, "help", channel_id="webchat" if "endorse" in case else "msteams")
    claims: dict[str, Any] = {
        "another audience": {"aud": "someone-elses-app"},
        "another issuer": {"iss": "https://sts.windows.net/attacker/"},
        "expired": {"exp": int(time.time()) - 3600, "nbf": int(time.time()) - 7200},
        "another serviceurl": {"serviceurl": "https://smba.trafficmanager.net/emea/"},
    }.get(case, {})
    token = None if case == "no token" else _token(activity, _key() if case == "another key" else key,
                                                     **claims)
    status, texts = _sent(world, activity, token)
    assert status == 401
    assert texts == []


def test_the_bots_token_never_goes_to_a_service_url_outside_the_bot_connector(
    world: TeamsHarness, key: rsa.RSAPrivateKey
) -> None:
    """Even with a valid signature (a token minted for another host): a serviceUrl that is not the Bot Connector's
    is refused before the bot asks for a token or posts anything."""
    outside = "https://attacker.example/api/"
    activity = _message(world, "help", service_url=outside)
    tokens_before, calls_before = world.fake.token_requests, len(world.fake.calls)
    resp = requests.post(f"{world.app.url}/api/messages", json=activity, timeout=60,
                         headers={"Authorization": f"Bearer {_token(activity, key)}"})
    assert resp.status_code == 401
    assert world.fake.token_requests == tokens_before and len(world.fake.calls) == calls_before


def test_a_slow_signing_key_fetch_does_not_hold_up_the_bots_replies(world: TeamsHarness) -> None:
    """An inbound token check that waits on Microsoft's key server (here: one that hangs) must not stop the bot
    from getting the token its replies need: the two fetches do not share one lock."""
    from bot.teams.auth import TeamsAuth, Unauthorized

    arrived, release = threading.Event(), threading.Event()

    class Hanging(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's API
            arrived.set()
            release.wait(60)
            self.send_response(503)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    hanging = ThreadingHTTPServer(("127.0.0.1", 0), Hanging)
    threading.Thread(target=hanging.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{hanging.server_address[1]}/openid"
    auth = TeamsAuth(app_id=APP_ID, password=APP_PASSWORD, openid_url=url, token_url=world.fake.token_url,
                     trusted_hosts=frozenset({"127.0.0.1"}), anonymous=False)
    checking = threading.Thread(target=lambda: pytest.raises(Unauthorized, auth._key, "key-1"), daemon=True)
    got: list[str] = []
    try:
        checking.start()
        assert arrived.wait(30)  # the key fetch is under way, under its lock (it hangs until released)
        replying = threading.Thread(target=lambda: got.append(auth._connector_token()), daemon=True)
        replying.start()
        replying.join(30)
        assert got == [FAKE_TOKEN] and checking.is_alive()  # the reply's token came while the key fetch still hung
    finally:
        release.set()
        checking.join(30)
        hanging.shutdown()
        hanging.server_close()
