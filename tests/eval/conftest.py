"""Fixtures for the eval tests."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from connectors.settings import Settings

RunCli = Callable[[list[str], Settings], int]


@pytest.fixture
def run_cli() -> RunCli:
    """Run ``citebot`` eval/feedback/reindex commands in-process with the given settings."""

    def run(argv: list[str], settings: Settings) -> int:
        from bot.cli import eval_cmds

        parser = argparse.ArgumentParser(prog="citebot")
        eval_cmds.register(parser.add_subparsers(dest="command", required=True))
        args = parser.parse_args(argv)
        return int(args.func(args, settings) or 0)

    return run
