"""``citebot serve slack`` and ``citebot serve teams``: run a chat adapter."""

from __future__ import annotations

import argparse
import errno
import socket
import sys
from typing import Any

from connectors.settings import Settings

METRICS_HELP = ("serve GET /metrics (Prometheus) on this port, with /healthz and /readyz; the bot's own port, "
                "which faces the internet, never serves them (without this option: only Socket Mode's --health-port)")


def port_number(text: str) -> int:
    """argparse type: a TCP port, 0 (any free one) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0-65535)")
    return port


def port_problem(host: str, port: int, option: str) -> str:
    """"" when ``host:port`` can be listened on now, else one line saying why not, naming the option to change.
    Checked before anything loads or says it listens, so a busy port is said first and plainly (the servers bind
    later, after the model's warm-up has begun)."""
    if port == 0:
        return ""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        return f"cannot listen on {host}: the host name does not resolve ({e.strerror}); check --host"
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as both servers bind: TIME_WAIT is fine
            try:
                probe.bind(address)
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    return (f"port {port} is already in use on {host}: stop what listens there, "
                            f"or choose another {option}")
                return f"cannot listen on {host} port {port} ({e.strerror}); check --host and {option}"
    return ""


def slack_missing(args: argparse.Namespace, settings: Settings) -> str:
    """"" when the Slack variables this mode needs are set, else one line naming every one that is missing."""
    missing = []
    if settings.slack_bot_token is None:
        missing.append("SLACK_BOT_TOKEN (the Bot User OAuth Token, xoxb-...)")
    if args.http and settings.slack_signing_secret is None:
        missing.append("SLACK_SIGNING_SECRET (for --http)")
    elif not args.http and settings.slack_app_token is None and settings.slack_signing_secret is None:
        missing.append("SLACK_APP_TOKEN (xapp-..., Socket Mode), or SLACK_SIGNING_SECRET with --http")
    if not missing:
        return ""
    return "set " + " and ".join(missing) + " (README: Connect to Slack in five minutes)"


def _start_problem(args: argparse.Namespace, settings: Settings) -> str:
    """What stops a bot before it loads anything: a port it cannot listen on, an OCR language Tesseract lacks."""
    from bot.cli.notices import ocr_language_problem

    return _ports_problem(args) or ocr_language_problem(settings)


def _ports_problem(args: argparse.Namespace) -> str:
    ports = [(args.port, "--port")] if args.platform == "teams" or args.http else []
    ports += [(getattr(args, "health_port", None), "--health-port"), (args.metrics_port, "--metrics-port")]
    for port, option in ports:
        problem = port_problem(args.host, port, option) if port is not None else ""
        if problem:
            return problem
    return ""


def register(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run the Slack or Teams bot")
    platforms = serve.add_subparsers(dest="platform", metavar="PLATFORM", required=True)

    slack = platforms.add_parser("slack", help="Slack bot: Socket Mode when SLACK_APP_TOKEN is set, else --http")
    slack.add_argument("--http", action="store_true", help="serve the Events API over HTTP instead of Socket Mode")
    slack.add_argument("--host", default="127.0.0.1",
                       help="--http: the address to listen on; 0.0.0.0 for every interface (default: %(default)s)")
    slack.add_argument("--port", type=port_number, default=3000,
                       help="--http: the port of POST /slack/events, /healthz and /readyz (default: %(default)s)")
    slack.add_argument("--health-port", type=port_number, default=None,
                       help="Socket Mode: serve GET /healthz, /readyz and /metrics on this port (containers, probes)")
    slack.add_argument("--metrics-port", type=port_number, default=None, help=METRICS_HELP)
    slack.set_defaults(func=run_slack)

    teams = platforms.add_parser("teams", help="Microsoft Teams bot on /api/messages")
    teams.add_argument("--host", default="127.0.0.1",
                       help="the address to listen on; 0.0.0.0 for every interface (default: %(default)s)")
    teams.add_argument("--port", type=port_number, default=3978,
                       help="the port of POST /api/messages, /healthz and /readyz (default: %(default)s)")
    teams.add_argument("--insecure-local", action="store_true",
                       help="without TEAMS_APP_ID/PASSWORD, accept unsigned requests (Emulator; loopback --host only)")
    teams.add_argument("--metrics-port", type=port_number, default=None, help=METRICS_HELP)
    teams.set_defaults(func=run_teams)


def run_slack(args: argparse.Namespace, settings: Settings) -> int:
    from bot.slack.server import serve
    from connectors.tracing import configure_tracing

    problem = slack_missing(args, settings) or _start_problem(args, settings)
    if problem:
        print(f"citebot serve slack: {problem}", file=sys.stderr)
        return 2
    configure_tracing(settings, service_name="citebot-slack")

    return serve(settings, http=args.http, host=args.host, port=args.port, health_port=args.health_port,
                 metrics_port=args.metrics_port)


def run_teams(args: argparse.Namespace, settings: Settings) -> int:
    from bot.teams.server import serve
    from connectors.tracing import configure_tracing

    problem = _start_problem(args, settings)
    if problem:
        print(f"citebot serve teams: {problem}", file=sys.stderr)
        return 2
    configure_tracing(settings, service_name="citebot-teams")

    return serve(settings, host=args.host, port=args.port, insecure_local=args.insecure_local,
                 metrics_port=args.metrics_port)
