"""Defect 1 of the security review: the Slack bot token goes only to Slack's file host, and downloads never
reach into the network the bot runs in.

An "outside" server listens on 127.0.0.2: another host name than the fake Slack's 127.0.0.1, standing in for
a Google Drive link, an attacker's server or a cloud metadata endpoint.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import connectors.download as dl
from bot.core import ChatCore
from connectors.download import BlockedAddressError, DownloadError, download
from eval.fakes.slack_api import TEAM, FakeSlack, event_callback, message, post_signed
from tests.helpers.slack import SlackHarness

PDF = b"%PDF-1.7\n" + b"x" * 2000


class _Recorder(BaseHTTPRequestHandler):
    """Serves a PDF (or a redirect, or a slow drip) and records every request's headers."""

    seen: list[tuple[str, dict[str, str]]]
    redirect_to: str = ""

    def do_GET(self) -> None:  # noqa: N802 - http.server's API
        type(self).seen.append((self.path, dict(self.headers)))
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", type(self).redirect_to)
            self.end_headers()
            return
        if self.path.startswith("/drip"):  # 12 bytes over ~2.4 s: every single read is quick
            self.send_response(200)
            self.send_header("Content-Length", "12")
            self.end_headers()
            for b in b"%PDF-1.7\nxyz":
                self.wfile.write(bytes([b]))
                self.wfile.flush()
                threading.Event().wait(0.2)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(PDF)))
        self.end_headers()
        self.wfile.write(PDF)

    def log_message(self, *args: object) -> None:
        pass


def _serve(host: str) -> tuple[ThreadingHTTPServer, type[_Recorder]]:
    handler = type("Handler", (_Recorder,), {"seen": []})
    server = ThreadingHTTPServer((host, 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, handler


@pytest.fixture
def servers() -> Iterator[tuple[str, type[_Recorder], str, type[_Recorder]]]:
    home, home_seen = _serve("127.0.0.1")
    away, away_seen = _serve("127.0.0.2")
    yield (f"http://127.0.0.1:{home.server_address[1]}", home_seen,
           f"http://127.0.0.2:{away.server_address[1]}", away_seen)
    for s in (home, away):
        s.shutdown()
        s.server_close()


TOKEN = {"Authorization": "Bearer xoxb-secret"}


def test_token_is_not_sent_to_a_host_it_was_not_issued_for(servers: Any) -> None:
    _home, _, away, away_seen = servers
    data = download(f"{away}/x.pdf", headers=TOKEN, max_bytes=10_000, timeout_s=5,
                    credential_hosts={"127.0.0.1"}, trusted_hosts={"127.0.0.1", "127.0.0.2"})
    assert data == PDF
    assert "Authorization" not in away_seen.seen[-1][1]


def test_a_redirect_to_another_host_drops_the_token(servers: Any) -> None:
    home, home_seen, away, away_seen = servers
    home_seen.redirect_to = f"{away}/x.pdf"
    data = download(f"{home}/redirect", headers=TOKEN, max_bytes=10_000, timeout_s=5,
                    credential_hosts={"127.0.0.1"}, trusted_hosts={"127.0.0.1", "127.0.0.2"})
    assert data == PDF
    assert home_seen.seen[-1][1]["Authorization"] == "Bearer xoxb-secret"
    assert "Authorization" not in away_seen.seen[-1][1]


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:9/x.pdf",  # loopback
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata (link-local)
    "http://10.0.0.7/x.pdf",  # private
    "http://[::1]/x.pdf",
    "http://[::ffff:127.0.0.1]/x.pdf",  # loopback dressed as IPv6
    "file:///etc/passwd",
])
def test_private_and_metadata_addresses_are_refused_before_connecting(url: str) -> None:
    with pytest.raises(BlockedAddressError):
        download(url, max_bytes=10_000, timeout_s=5)


def test_a_redirect_into_the_private_network_is_refused(servers: Any) -> None:
    home, home_seen, _away, _ = servers
    home_seen.redirect_to = "http://169.254.169.254/latest/meta-data/iam"
    with pytest.raises(BlockedAddressError):
        download(f"{home}/redirect", max_bytes=10_000, timeout_s=5, trusted_hosts={"127.0.0.1"})


def test_an_address_that_changes_after_the_check_is_refused_at_connect(
    servers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: the name looked public when checked, then connects to loopback. The socket's peer is
    checked again before a byte is sent."""
    home, home_seen, _away, _ = servers
    monkeypatch.setattr(dl, "check_url", lambda url, trusted=(): "rebound.example")
    with pytest.raises(BlockedAddressError):
        download(f"{home}/x.pdf", headers=TOKEN, max_bytes=10_000, timeout_s=5)
    assert home_seen.seen == []


def test_the_timeout_bounds_the_whole_download_not_each_read(servers: Any) -> None:
    home, _, _away, _ = servers
    with pytest.raises(DownloadError, match="longer than"):
        download(f"{home}/drip.pdf", max_bytes=10_000, timeout_s=1, trusted_hosts={"127.0.0.1"})


# --- through the real Slack app ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def slack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeSlack, Any, str]]:
    data_dir: Path = tmp_path_factory.mktemp("slack-tokens")
    fake = FakeSlack().start()
    settings = SlackHarness.settings(data_dir, fake, slack_workers=1)
    with SlackHarness.serving(settings, ChatCore.from_settings(settings), fake) as harness:
        yield fake, harness.bot, harness.url
    fake.stop()


@pytest.mark.parametrize("external", [True, False])
def test_files_stored_outside_slack_are_never_fetched_with_the_token(
    slack: tuple[FakeSlack, Any, str], servers: Any, external: bool
) -> None:
    """A remote file (files.remote.add, a Drive link) carries its outside URL in url_private; a file whose
    download URL is not on Slack's file host is treated the same way."""
    fake, bot, url = slack
    _home, _, away, away_seen = servers
    channel = f"C0REMOTE{int(external)}"
    file_obj = {"id": f"F0REMOTE{int(external)}", "name": "quarterly.pdf", "filetype": "pdf",
                "mimetype": "application/pdf", "size": 2000, "url_private": f"{away}/quarterly.pdf"}
    if external:
        file_obj |= {"is_external": True, "external_type": "gdrive", "mode": "external"}
    else:
        file_obj["url_private_download"] = f"{away}/download/quarterly.pdf"
    event = message(channel, "U0MEMBER", "", "300.000001") | {"subtype": "file_share", "files": [file_obj]}
    status, _ = post_signed(url, event_callback(event, team=TEAM))
    assert status == 200
    (posted,) = fake.wait_for("chat.postMessage", channel=channel)
    assert bot.wait_idle(30)
    assert posted.params["text"].startswith("I can only read files uploaded to Slack")
    assert away_seen.seen == []  # not even a request without the token


@pytest.mark.parametrize(
    ("url", "allowed"),
    [("https://files.slack.com/f", True), ("http://files.slack.com/f", False),  # a token never goes in clear
     ("http://127.0.0.1:8080/f", True),  # a configured local endpoint
     ("https://smba.trafficmanager.net/emea/", True), ("https://eu.smba.trafficmanager.net/x", True),
     ("http://smba.trafficmanager.net/x", False), ("https://smba.trafficmanager.net.evil.example/x", False),
     ("https://evilsmba.trafficmanager.net/x", False), ("https://attacker.example/f", False)],
)
def test_one_rule_says_where_a_credential_may_go(url: str, allowed: bool) -> None:
    """Slack's file token and the Teams bot's Bot Connector token follow the same rule: exact hosts, a domain's
    subdomains, HTTPS except to a configured local endpoint."""
    from connectors.download import may_receive_credentials

    hosts = {"files.slack.com", "127.0.0.1"}
    assert may_receive_credentials(url, hosts, {"127.0.0.1"}, ["smba.trafficmanager.net"]) is allowed


LOOK_ALIKES = ["https://evil-slack.com/f/q.pdf", "https://files.slack.com.evil.net/f/q.pdf",
               "https://evilfiles.slack.com/f/q.pdf", "https://files-slack.com/f/q.pdf",
               "https://files.slack.com@evil.net/f/q.pdf", "https://evil-botframework.com/v3/",
               "https://smba.trafficmanager.net.evil.net/emea/", "https://botframework.com.evil.net/v3/",
               "https://evilsmba.trafficmanager.net/emea/", "https://teams.microsoft.com.evil.net/v3/"]


@pytest.mark.parametrize("lookalike", LOOK_ALIKES)
def test_a_look_alike_host_gets_no_slack_token(slack: tuple[FakeSlack, Any, str], lookalike: str) -> None:
    """The Slack caller of the one rule: a file whose download link only looks like Slack's file host is refused
    before anything is fetched (the rule is asked before "Indexing…" is posted), so the token never leaves."""
    fake, bot, url = slack
    channel = f"C0LOOK{LOOK_ALIKES.index(lookalike):02d}"
    file_obj = {"id": f"F0LOOK{channel[-2:]}", "name": "quarterly.pdf", "filetype": "pdf",
                "mimetype": "application/pdf", "size": 2000, "url_private": lookalike,
                "url_private_download": lookalike}
    event = message(channel, "U0MEMBER", "", "301.000001") | {"subtype": "file_share", "files": [file_obj]}
    assert post_signed(url, event_callback(event, team=TEAM))[0] == 200
    (posted,) = fake.wait_for("chat.postMessage", channel=channel)
    assert bot.wait_idle(30)
    assert posted.params["text"].startswith("I can only read files uploaded to Slack")


@pytest.mark.parametrize("lookalike", LOOK_ALIKES)
def test_a_look_alike_host_gets_no_teams_token(lookalike: str) -> None:
    """The Teams caller of the same rule: the Bot Connector's token goes to Microsoft's connector hosts and their
    subdomains (Teams' serviceUrl is regional), never to a host that only looks like one."""
    from bot.teams.auth import TeamsAuth
    from connectors.settings import Settings

    auth = TeamsAuth.from_settings(Settings(_env_file=None, teams_app_id="app", teams_app_password="pw"))  # type: ignore[call-arg]
    assert not auth.may_receive_token(lookalike)
    for service_url in ("https://smba.trafficmanager.net/emea/", "https://smba.infra.gcc.teams.microsoft.com/",
                        "https://smba.infra.gov.teams.microsoft.us/"):
        assert auth.may_receive_token(service_url), service_url
