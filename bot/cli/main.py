"""``citebot``: the one command line in front of ingestion, answers, chat servers, eval and benchmarks.

Each command lives in its own module exposing ``register(subparsers)``; the handler set with
``set_defaults(func=...)`` takes ``(args, settings)`` and returns the exit status. Handlers import
heavy libraries themselves so ``citebot --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from bot.version import version

# Modules that register top-level commands, in help order.
COMMAND_MODULES = [
    "bot.cli.docs_cmds",  # docs, forget
    "bot.cli.ingest_cmd",  # ingest
    "bot.cli.serve_cmds",  # serve slack | teams
    "bot.cli.ask_cmd",  # ask
    "bot.cli.demo_cmd",  # demo
    "bot.cli.teams_cmds",  # teams package
    "bot.cli.models_cmd",  # models prepare
    "bot.cli.eval_cmds",  # eval run|report|compare|promote, feedback, reindex
    "bot.cli.quality_cmd",  # quality
]
# Modules that register `citebot bench <name>` benchmarks (they live under eval/).
BENCH_MODULES = [
    "eval.bench.ingest",
    "eval.bench.query",
    "eval.bench.retrieval",
    "eval.bench.slack",
    "eval.bench.teams",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="citebot", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"citebot {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    bench = sub.add_parser("bench", help="benchmarks (ratios side by side in one run)")
    bench_sub = bench.add_subparsers(dest="bench", metavar="BENCH", required=True)
    for name in BENCH_MODULES:
        importlib.import_module(name).register(bench_sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
    from connectors.embedding import defer_torch_imports

    defer_torch_imports()  # torch loads only where a command needs it (most of a cold start otherwise)
    args = build_parser().parse_args(argv)
    from connectors.log import configure_logging
    from connectors.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError as e:
        print(f"citebot: {e}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    if args.command != "serve":
        # a one-shot command tells of an unreachable Elasticsearch in one line (the StoreError below); its
        # client's warning per retry is for a server's log, not for a person at a terminal
        import logging

        logging.getLogger("elastic_transport").setLevel(logging.ERROR)
    from connectors.store_api import StoreError

    try:
        status = int(args.func(args, settings) or 0)
        sys.stdout.flush()  # a reader that went away (`| head`) shows here, not at exit
    except BrokenPipeError:
        return _reader_gone()
    except StoreError as e:  # its message is written for people: which store, what to check
        print(f"citebot {args.command}: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - no raw traceback: its messages can carry a store URL's password
        from connectors.log import error_fields, get_logger

        fields = error_fields(e)
        get_logger("citebot.cli").error("command_failed", command=args.command, **fields)
        print(f"citebot {args.command}: failed with {fields['error']} at {fields['where'] or 'an unknown place'}",
              file=sys.stderr)
        return 1
    return status


def _reader_gone() -> int:
    """``citebot ... | head``: the reader stopped reading. That is no error; end quietly (and keep Python from
    complaining when it flushes stdout at exit)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no real file (tests): nothing left to flush into a closed pipe
        pass
    finally:
        os.close(devnull)
    return 0


if __name__ == "__main__":
    sys.exit(main())
