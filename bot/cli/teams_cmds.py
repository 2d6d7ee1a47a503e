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
    package.set_defaults(func=run_package)


def run_package(args: argparse.Namespace, settings: Settings) -> int:
    from bot.teams.package import PackageError, build_package

    try:
        out = build_package(settings.teams_app_id or "", args.out)
    except PackageError as e:
        print(f"citebot: {e}", file=sys.stderr)
        return 2
    print(f"Wrote {out} — upload it in Teams: Apps > Manage your apps > Upload an app.")
    return 0
