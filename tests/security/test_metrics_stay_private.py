"""Issue 40 row 8: ``serve teams`` and ``serve slack --http`` served unauthenticated ``/metrics`` on the public bot
port unless ``--metrics-port`` was given, and the Dockerfile's documented commands did not give it. The bot's port
never serves them now; every documented or deployed HTTP-mode command gives ``--metrics-port``."""

from __future__ import annotations

import re
import threading
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from bot.core import ChatCore
from bot.health import Health, serve_health
from bot.teams.server import build_app
from connectors.settings import Settings
from eval.fakes.microsoft import AppThread
from eval.fakes.slack_api import FakeSlack
from tests.helpers.slack import SlackHarness

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - loopback only
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return e.code


def test_the_teams_port_never_serves_metrics(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, data_dir=tmp_path)  # type: ignore[call-arg]
    health = Health("teams", ready=True)  # what `serve teams` builds the app with, --metrics-port or not
    with AppThread(build_app(settings, ChatCore.from_settings(settings), insecure_local=True, health=health)) as app:
        assert _status(f"{app.url}/metrics") == 404
        assert _status(f"{app.url}/readyz") == 200


def test_the_slack_events_port_never_serves_metrics(tmp_path: Path) -> None:
    fake = FakeSlack().start()
    settings = SlackHarness.settings(tmp_path, fake, slack_workers=1)
    try:
        with SlackHarness.serving(settings, ChatCore.from_settings(settings), fake) as slack:
            root = slack.url.removesuffix("/slack/events")
            assert _status(f"{root}/metrics") == 404
            assert _status(f"{root}/readyz") == 200
    finally:
        fake.stop()


def test_the_metrics_port_and_socket_modes_health_port_serve_them() -> None:
    server = serve_health(Health("slack", ready=True), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert _status(f"http://127.0.0.1:{server.server_address[1]}/metrics") == 200
    finally:
        server.shutdown()
        server.server_close()


def _commands() -> list[tuple[str, list[str]]]:
    """Every `serve` command the deployment runs or documents: the Dockerfile's comments and CMD, compose, k8s."""
    found: list[tuple[str, list[str]]] = []
    for line in (DEPLOY / "Dockerfile").read_text(encoding="utf-8").splitlines():
        if m := re.match(r"#\s+(serve \S+.*?)\s{2,}", line):
            found.append(("Dockerfile", m.group(1).split()))
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text(encoding="utf-8"))
    found += [(f"compose {n}", s["command"]) for n, s in compose["services"].items() if "command" in s
              and s["command"][0] == "serve"]
    for name in ("slack.yaml", "teams.yaml"):
        for doc in yaml.safe_load_all((DEPLOY / "k8s" / name).read_text(encoding="utf-8")):
            if doc and doc.get("kind") == "Deployment":
                for c in doc["spec"]["template"]["spec"]["containers"]:
                    found.append((f"k8s {name}", c["args"]))
    return found


def test_every_http_mode_command_gives_a_metrics_port() -> None:
    commands = _commands()
    assert any(where == "Dockerfile" for where, _ in commands)
    for where, args in commands:
        http_mode = args[1] == "teams" or "--http" in args
        if http_mode:
            assert "--metrics-port" in args, (where, args)
            port = args[args.index("--port") + 1] if "--port" in args else ""
            assert args[args.index("--metrics-port") + 1] != port, (where, args)
