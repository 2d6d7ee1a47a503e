"""``citebot serve slack`` and ``citebot serve teams``: run a chat adapter."""

from __future__ import annotations

import argparse
from typing import Any

from connectors.settings import Settings

METRICS_HELP = ("serve GET /metrics (Prometheus) on this port, with /healthz and /readyz; the bot's own port, "
                "which faces the internet, never serves them (without this option: only Socket Mode's --health-port)")


def register(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run the Slack or Teams bot")
    platforms = serve.add_subparsers(dest="platform", metavar="PLATFORM", required=True)

    slack = platforms.add_parser("slack", help="Slack bot: Socket Mode when SLACK_APP_TOKEN is set, else --http")
    slack.add_argument("--http", action="store_true", help="serve the Events API over HTTP instead of Socket Mode")
    slack.add_argument("--host", default="127.0.0.1")
    slack.add_argument("--port", type=int, default=3000)
    slack.add_argument("--health-port", type=int, default=None,
                       help="Socket Mode: serve GET /healthz, /readyz and /metrics on this port (containers, probes)")
    slack.add_argument("--metrics-port", type=int, default=None, help=METRICS_HELP)
    slack.set_defaults(func=run_slack)

    teams = platforms.add_parser("teams", help="Microsoft Teams bot on /api/messages")
    teams.add_argument("--host", default="127.0.0.1")
    teams.add_argument("--port", type=int, default=3978)
    teams.add_argument("--insecure-local", action="store_true",
                       help="without TEAMS_APP_ID/PASSWORD, accept unsigned requests (Emulator; loopback --host only)")
    teams.add_argument("--metrics-port", type=int, default=None, help=METRICS_HELP)
    teams.set_defaults(func=run_teams)


def run_slack(args: argparse.Namespace, settings: Settings) -> int:
    from bot.slack.server import serve
    from connectors.tracing import configure_tracing

    configure_tracing(settings, service_name="citebot-slack")

    return serve(settings, http=args.http, host=args.host, port=args.port, health_port=args.health_port,
                 metrics_port=args.metrics_port)


def run_teams(args: argparse.Namespace, settings: Settings) -> int:
    from bot.teams.server import serve
    from connectors.tracing import configure_tracing

    configure_tracing(settings, service_name="citebot-teams")

    return serve(settings, host=args.host, port=args.port, insecure_local=args.insecure_local,
                 metrics_port=args.metrics_port)
