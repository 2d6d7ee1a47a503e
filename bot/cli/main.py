"""``citebot``: the one command line in front of ingestion, answers, chat servers, eval and benchmarks.

One-shot commands log warnings and errors only (``-v``: info, ``-vv``: debug; an explicit
``CITEBOT_LOG_LEVEL`` wins over the default); ``serve`` logs at ``CITEBOT_LOG_LEVEL`` (info).
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
from typing import Any

from bot.version import version

# Modules that register top-level commands, in help order.
COMMAND_MODULES = [
    "bot.cli.demo_cmd",  # demo
    "bot.cli.ingest_cmd",  # ingest
    "bot.cli.ask_cmd",  # ask
    "bot.cli.docs_cmds",  # docs, forget
    "bot.cli.serve_cmds",  # serve slack | teams
    "bot.cli.teams_cmds",  # teams package
    "bot.cli.eval_cmds",  # eval run|report|compare|promote, feedback, reindex
    "bot.cli.quality_cmd",  # quality
    "bot.cli.models_cmd",  # models prepare
]
# Modules that register `citebot bench <name>` benchmarks: under eval/bench/, and here those that drive a bot.
BENCH_MODULES = [
    "eval.bench.ingest",
    "eval.bench.query",
    "eval.bench.retrieval",
    "eval.bench.vectors",
    "eval.bench.slack",
    "bot.cli.bench_teams",
]


DESCRIPTION = "Citebot answers questions about your PDFs with quotes checked against the source."
EXAMPLES = """\
examples, in the order people use them:
  citebot demo                                   index the sample PDFs and answer four sample questions
  citebot ingest ~/contracts                     index your own PDFs (files or folders) into scope 'local'
  citebot ask "What is the notice period?"       an answer with quotes checked against the PDFs
  citebot docs                                   what is indexed;  citebot forget FILE  removes one
  citebot serve slack                            run the Slack bot (see README: Slack set-up)
  citebot eval run                               measure answers on the sample eval set

`citebot COMMAND --help` tells more about each command; -v shows the log (info), -vv debug.
"""

# Errors of ours whose messages are written for people (what is wrong, which setting or path): shown as they are.
# Any other error is shown by type and place, then its message with anything that looks like a credential redacted
# (a library may have put a URL with its password there), on the terminal only: the log line keeps type and place.
READABLE_ERRORS = (
    "connectors.embedding.EmbeddingModelError",
    "connectors.settings.SettingsError",
    "connectors.store_api.ScopeRequiredError",
    "eval.runner.EvalRunError",
    "eval.cases.EvalSetError",
    "eval.records.RunDirError",
    "eval.compare.GatesError",
    "eval.reindex.ReindexError",
    "pipelines.reading.isolation.MemoryLimitTooLowError",
    "bot.teams.package.PackageError",
)


def _readable(error: BaseException) -> bool:
    names = {f"{c.__module__}.{c.__qualname__}" for c in type(error).__mro__}
    return bool(names & set(READABLE_ERRORS))


def _add_verbose(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """``-v``/``--verbose`` on the top level and on every (sub)command, so it works before or after the command."""
    parser.add_argument("-v", "--verbose", action="count", default=0 if top else argparse.SUPPRESS,
                        help="show the log: -v info, -vv debug (default: warnings and errors only)")
    for action in parser._actions:  # noqa: SLF001 - argparse offers no public walk of subparsers
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for child in action.choices.values():
                _add_verbose(child)


def log_level(args: argparse.Namespace, settings: Any) -> str:
    """The level this command logs at: ``-v``/``-vv``; else ``CITEBOT_LOG_LEVEL`` when set; else info for the
    servers and warning for one-shot commands (a person at a terminal wants the answer, not the log)."""
    verbose = getattr(args, "verbose", 0) or 0
    if verbose:
        return "debug" if verbose > 1 else "info"
    if args.command == "serve" or "log_level" in settings.model_fields_set:
        return str(settings.log_level)
    return "warning"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="citebot", description=DESCRIPTION,
                                     epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"citebot {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    bench = sub.add_parser("bench", help="benchmarks (ratios side by side in one run)")
    bench_sub = bench.add_subparsers(dest="bench", metavar="BENCH", required=True)
    for name in BENCH_MODULES:
        importlib.import_module(name).register(bench_sub)
    _add_verbose(parser, top=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
    from connectors.embedding import defer_torch_imports

    defer_torch_imports()  # torch loads only where a command needs it (most of a cold start otherwise)
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):  # `citebot` alone: what it can do, not a usage error
        parser.print_help()
        return 0
    args = parser.parse_args(argv)
    from connectors.log import configure_logging
    from connectors.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError as e:
        print(f"citebot: {e}", file=sys.stderr)
        return 2
    configure_logging(log_level(args, settings), settings.log_format)
    blank = _blank_scope(args)
    if blank:
        print(f"citebot {args.command}: {blank}", file=sys.stderr)
        return 2
    if args.command != "serve":
        # a one-shot command tells of an unreachable Elasticsearch in one line (the StoreError below); its
        # client's warning per retry is for a server's log, not for a person at a terminal
        import logging

        logging.getLogger("elastic_transport").setLevel(logging.ERROR)
    from connectors.store_api import ScopeRequiredError, StoreError

    try:
        status = int(args.func(args, settings) or 0)
        sys.stdout.flush()  # a reader that went away (`| head`) shows here, not at exit
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:  # Ctrl-C: one line, no traceback (every store write is all or nothing)
        note = getattr(args, "interrupted", None) or INTERRUPTED.get(args.command, "")  # a command's own, if it set one
        print(f"\ncitebot {args.command}: interrupted{note}", file=sys.stderr)
        return 130
    except ScopeRequiredError as e:
        print(f"citebot {args.command}: {e}", file=sys.stderr)
        return 2
    except StoreError as e:  # its message is written for people: which store, what to check
        print(f"citebot {args.command}: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - no raw traceback: its messages can carry a store URL's password
        from connectors.log import error_fields, get_logger

        fields = error_fields(e)
        if _readable(e):  # said in full below; a log line would repeat it
            print(f"citebot {args.command}: {e}", file=sys.stderr)
        else:
            get_logger(__name__).error("command_failed", command=args.command, **fields)
            print(f"citebot {args.command}: failed with {fields['error']} at {fields['where'] or 'an unknown place'}"
                  f"{_said(e)}", file=sys.stderr)
        return 1
    return status


MAX_MESSAGE_CHARS = 300


def _said(error: BaseException) -> str:
    """``": <message>"`` of an unexpected error for the person at the terminal, credentials redacted, one line."""
    from connectors.log import redact

    message = " ".join(str(redact(str(error))).split())
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 1] + "…"
    return f": {message}" if message else ""


INTERRUPTED = {
    "ingest": "; nothing was indexed",  # until it starts on the first file (then it says which: ingest_cmd)
    "reindex": "; run `citebot reindex` again to go on where it stopped",
    "eval": "; the cases done so far are saved, the same command goes on where it stopped",
}


def _blank_scope(args: argparse.Namespace) -> str:
    """The message for a blank ``--scope`` (``""``, ``" "``), which would otherwise be a scope of its own."""
    scope = getattr(args, "scope", None)
    values = [scope] if isinstance(scope, str) else list(scope or [])
    if any(isinstance(v, str) and not v.strip() for v in values):
        return "a scope is required: --scope must name one (e.g. 'local'), not be blank"
    return ""


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
