"""``citebot teams package``: build the Microsoft Teams app package (manifest + icons, zipped)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from connectors.settings import Settings


def register(sub: Any) -> None:
    teams = sub.add_parser("teams", help="Microsoft Teams app tools")
    cmds = teams.add_subparsers(dest="teams_command", metavar="COMMAND", required=True)
    package = cmds.add_parser("package", help="build the Teams app package zip (upload it in Teams > Apps)")
    package.add_argument("--out", type=Path, default=Path("citebot-teams.zip"), help="zip to write")
    publisher = package.add_argument_group(
        "publisher", "who publishes the app, as Teams shows it to the people who install it (default: the setting "
        "named, else the template's placeholder)")
    publisher.add_argument("--developer-name", help="your organisation's name, at most 32 characters "
                           "(CITEBOT_TEAMS_DEVELOPER_NAME)")
    publisher.add_argument("--website-url", help="https:// address of your website (CITEBOT_TEAMS_WEBSITE_URL)")
    publisher.add_argument("--privacy-url", help="https:// address of your privacy statement for this bot "
                           "(CITEBOT_TEAMS_PRIVACY_URL; the README's Privacy section says what Citebot stores)")
    publisher.add_argument("--terms-url", help="https:// address of your terms of use (CITEBOT_TEAMS_TERMS_URL)")
    package.set_defaults(func=run_package)


def run_package(args: argparse.Namespace, settings: Settings) -> int:
    from bot.teams.package import PackageError, Publisher, build_package

    try:
        publisher = Publisher(
            name=args.developer_name or settings.teams_developer_name,
            website_url=args.website_url or settings.teams_website_url,
            privacy_url=args.privacy_url or settings.teams_privacy_url,
            terms_url=args.terms_url or settings.teams_terms_url,
        )
        out = build_package(settings.teams_app_id or "", args.out, publisher=publisher)
    except PackageError as e:
        print(f"citebot teams package: {e}", file=sys.stderr)
        return 2
    print(f"Wrote {out} — upload it in Teams: Apps > Manage your apps > Upload an app.")
    unset = publisher.placeholders()
    if unset:  # fine for trying it in a test team; not what an organisation's people should be shown
        print(f"The package names the template's placeholder publisher where these are unset: {', '.join(unset)}. "
              "Set them before your organisation's people install it.", file=sys.stderr)
    return 0
