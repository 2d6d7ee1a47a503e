"""``citebot eval run|report|compare|promote``, ``citebot feedback`` and ``citebot reindex``: the admin side."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from connectors.settings import Settings
from eval.records import MODES

EVAL_DIR = Path(__file__).resolve().parents[2] / "eval"
DEMO_SET = EVAL_DIR / "sets" / "demo.jsonl"
DEMO_GATES = EVAL_DIR / "gates.toml"


def _since(value: str) -> str:
    """An ISO date or date-time, normalised to the form the feedback log stores (UTC)."""
    try:
        dt = datetime.fromisoformat(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{value!r} is not a date: use YYYY-MM-DD or YYYY-MM-DDTHH:MM") from e
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).isoformat(timespec="seconds")


def _names(value: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give one or more names separated by commas")
    return names


def register(sub: Any) -> None:
    ev = sub.add_parser("eval", help="evaluate answers on an eval set; reports, gates, feedback promotion")
    ev_sub = ev.add_subparsers(dest="eval_command", metavar="EVAL", required=True)

    r = ev_sub.add_parser("run", help="index a folder of PDFs and run an eval set through the answer pipeline")
    r.add_argument("--set", type=Path, default=DEMO_SET, help="eval set JSONL (default: the demo set)")
    r.add_argument("--docs", type=Path, help="folder of PDFs (default: the generated sample PDFs)")
    r.add_argument("--out", type=Path, help="run directory (default: DATA_DIR/eval/runs/<time>); reuse to resume")
    r.add_argument("--mode", choices=[*MODES, "all"],
                   default="hybrid",
                   help="hybrid: CITEBOT_FUSION's fusion; hybrid-weighted/hybrid-rrf: that fusion; pages: the naive "
                   "baseline (one vector per page, dense only, no answers); all: hybrid, the other fusion, bm25, "
                   "dense and pages")
    r.add_argument("--k", type=int, default=5,
                   help="passages the answer sees, and the depth of the @k metrics (page_hit@5 is always reported)")
    r.add_argument("--per-doc", action="store_true", help="one scope per PDF; ask each case in its source's scope")
    r.add_argument("--neutral-names", action="store_true",
                   help="index the PDFs as doc-001.pdf... (name order), the set's documents mapped alike: measure "
                        "routing by what documents say they are, not by their names")
    r.add_argument("--judge", action="store_true", help="LLM judge (needs OPENAI_* and CITEBOT_JUDGE_MODEL)")
    r.add_argument("--limit", type=int, help="run only N cases, spread over the categories (smoke runs)")
    r.add_argument("--fresh", action="store_true",
                   help="discard earlier results in --out instead of resuming (the index is kept and reused)")
    r.add_argument("--cases", type=_names, metavar="ID,ID", help="run only these case ids")
    r.add_argument("--category", type=_names, metavar="CAT,CAT", help="run only cases in these categories")
    r.add_argument("--json", action="store_true", help="print the summary as JSON")
    r.set_defaults(func=run_eval_cmd)

    rep = ev_sub.add_parser("report", help="report.html and report.md for a run: the gates' verdict first; several "
                            "runs: a trend")
    rep.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR",
                     help="a run directory; give several for trend.md/trend.html across them (oldest first)")
    rep.add_argument("--against", type=Path, metavar="BASE_RUN",
                     help="the baseline run: deltas, regressed cases, and the drop and critical-case gates")
    rep.add_argument("--gates", type=Path, help="gates TOML for the verdict (default: the shipped eval/gates.toml)")
    rep.add_argument("--no-gates", action="store_true", help="no verdict: the report without gates")
    rep.add_argument("--out", type=Path, help="where the trend report goes (default: the newest run's directory)")
    rep.set_defaults(func=run_report_cmd)

    c = ev_sub.add_parser("compare", help="metric deltas and case regressions between two runs; gates for CI")
    c.add_argument("runs", type=Path, nargs="+", metavar="RUN", help="BASE_RUN NEW_RUN (or NEW_RUN alone: floors)")
    c.add_argument("--gates", type=Path,
                   help=f"gates TOML (default: the shipped {DEMO_GATES.relative_to(EVAL_DIR.parent)}, found from any "
                   "directory)")
    c.add_argument("--no-gates", action="store_true", help="compare only: check no gates (exit 0)")
    c.add_argument("--allow-different", action="store_true",
                   help="compare runs asked in another retrieval mode, eval set, k or scoping (named either way)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=run_compare_cmd)

    p = ev_sub.add_parser("promote", help="turn 👍/👎 from chat into eval cases (👎 go to FILE.review.jsonl)")
    p.add_argument("--set", type=Path, help="eval set to extend (default: DATA_DIR/eval/feedback.jsonl)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--since", type=_since, help="only feedback given on or after this date (UTC)")
    when.add_argument("--days", type=int, metavar="N",
                      help="only feedback of the last N days (the weekly loop: --days 7)")
    p.set_defaults(func=run_promote_cmd)

    f = sub.add_parser("feedback", help="list 👍/👎 feedback from chat")
    f.add_argument("--json", action="store_true", help="print a JSON array")
    f.add_argument("--since", type=_since, help="only feedback given on or after this date (UTC)")
    f.add_argument("--polarity", choices=["up", "down"])
    f.set_defaults(func=run_feedback_cmd)

    ri = sub.add_parser("reindex", help="re-embed every stored document with the current model (resumable)")
    ri.add_argument("--scope", action="append", help="only this scope (repeatable; default: every scope)")
    ri.add_argument("--restart", action="store_true", help="forget progress of an earlier run and redo everything")
    ri.add_argument("--check", action="store_true",
                    help="only say whether the store's vectors match the configured model and backend (exit 1: no)")
    ri.add_argument("--from", dest="source", type=Path, metavar="FILE",
                    help="copy an embedded store (a data dir's chunks.sqlite3) into the configured store, e.g. "
                    "Elasticsearch: every document whole in its scope, its vectors kept when the configured model "
                    "made them (resumable)")
    ri.set_defaults(func=run_reindex_cmd)


def run_eval_cmd(args: argparse.Namespace, settings: Settings) -> int:
    from eval.cases import EvalSetError
    from eval.report_tables import ablation_rows, run_summary_markdown, run_threshold
    from eval.runner import EvalRunError, RunOptions, all_modes, run_eval

    docs = args.docs
    if docs is None:
        from eval.sample_pdfs import write_samples

        docs = settings.data_dir / "eval" / "samples"
        write_samples(docs)
    out = args.out or settings.data_dir / "eval" / "runs" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    from bot.cli.progress import TerminalProgress

    modes = all_modes(settings) if args.mode == "all" else [args.mode]
    progress = TerminalProgress(sys.stderr, print_log=(lambda m: print(m, file=sys.stderr)) if args.json else print)
    try:
        runs = run_eval(settings, RunOptions(set_path=args.set, docs_dir=docs, out_dir=out, modes=modes, k=args.k,
                                             per_doc=args.per_doc, judge=args.judge, limit=args.limit,
                                             fresh=args.fresh, case_ids=args.cases, categories=args.category,
                                             neutral_names=args.neutral_names),
                        log=progress.log, progress=progress)
    except (EvalSetError, EvalRunError) as e:
        print(f"citebot eval run: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        from eval.judge import JudgeError

        if isinstance(e, JudgeError):
            print(f"citebot eval run: {e}", file=sys.stderr)
            return 2
        raise
    finally:
        progress.clear()  # an interrupted run leaves no half-drawn line before the error
    if args.json:
        from eval.metrics import refusal_curve, summarise

        def mode_summary(meta: dict[str, Any], res: list[Any]) -> dict[str, Any]:
            threshold = run_threshold(meta)
            curve = refusal_curve(res, threshold) if threshold is not None else []
            return {**summarise(res, args.k), "refusal_curve": curve}

        header, rows = ablation_rows(runs)
        print(json.dumps({"out": str(out), "modes": {m: mode_summary(meta, res) for m, (meta, res) in runs.items()},
                          "ablation": [dict(zip(header, row, strict=True)) for row in rows]}, indent=2))
    else:
        print(run_summary_markdown(runs))
        print(f"\nRun directory: {out}\nNext: citebot eval report {out}")
    errors = sum(1 for _m, res in runs.values() for r in res if r.error)
    return 1 if errors and errors == sum(len(res) for _m, res in runs.values()) else 0


def run_report_cmd(args: argparse.Namespace, settings: Settings) -> int:
    from eval.compare import CompareError, GatesError
    from eval.records import RunDirError
    from eval.report import write_report, write_trend

    if args.no_gates and args.gates:
        print("citebot eval report: --gates and --no-gates exclude each other", file=sys.stderr)
        return 2
    try:
        paths = [p for d in args.run_dirs for p in write_report(d, against=args.against, gates_path=args.gates,
                                                                 use_gates=not args.no_gates)]
        if len(args.run_dirs) > 1:
            paths = write_trend(args.run_dirs, args.out or _newest(args.run_dirs)) + paths
    except (RunDirError, GatesError, CompareError) as e:
        print(f"citebot eval report: {e}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0


def _newest(run_dirs: list[Path]) -> Path:
    """The run directory whose run started last (by its meta.json), else the last one given."""
    def started(d: Path) -> str:
        for meta in (d / "meta.json", *(d / m / "meta.json" for m in ("hybrid", "bm25", "dense"))):
            if meta.exists():
                return str(json.loads(meta.read_text(encoding="utf-8")).get("started_at") or "")
        return ""

    return max(reversed(run_dirs), key=started)


def run_compare_cmd(args: argparse.Namespace, settings: Settings) -> int:
    from eval.compare import CompareError, GatesError, find_gates, run_compare
    from eval.records import RunDirError

    if len(args.runs) > 2:
        print("citebot eval compare: give BASE_RUN NEW_RUN, or NEW_RUN alone", file=sys.stderr)
        return 2
    if args.no_gates and args.gates:
        print("citebot eval compare: --gates and --no-gates exclude each other", file=sys.stderr)
        return 2
    base, new = (args.runs[0], args.runs[1]) if len(args.runs) == 2 else (None, args.runs[0])
    try:
        gates = None if args.no_gates else find_gates(args.gates)
        return run_compare(base, new, gates, as_json=args.json, allow_different=args.allow_different)
    except (GatesError, RunDirError, CompareError) as e:
        print(f"citebot eval compare: {e}", file=sys.stderr)
        return 2


def run_promote_cmd(args: argparse.Namespace, settings: Settings) -> int:
    from bot.texts import FEEDBACK_CHOICES
    from connectors.stores import open_state
    from eval.cases import EvalSetError
    from eval.promote import promote, review_path

    set_path = args.set or settings.data_dir / "eval" / "feedback.jsonl"
    since = args.since
    if args.days is not None:
        if args.days < 1:
            print("citebot eval promote: --days must be at least 1", file=sys.stderr)
            return 2
        since = (datetime.now(UTC) - timedelta(days=args.days)).isoformat(timespec="seconds")
    try:
        res = promote(open_state(settings), set_path, since=since)
    except EvalSetError as e:
        print(f"citebot eval promote: {e}", file=sys.stderr)
        return 2
    print(f"{len(res.added)} case(s) added to {set_path}; {len(res.review)} to review in {review_path(set_path)}; "
          f"{res.skipped} already present")
    if res.clusters:
        print("To review, by reason and document (largest first):")
        for c in res.clusters:
            reason = FEEDBACK_CHOICES.get(c.reason, c.reason)
            print(f"  {reason} — {c.document}: {len(c.case_ids)} case(s): {', '.join(c.case_ids)}")
    return 0


def run_feedback_cmd(args: argparse.Namespace, settings: Settings) -> int:
    from connectors.state_log import feedback_as_json
    from connectors.stores import open_state

    entries = open_state(settings).feedback(since=args.since, polarity=args.polarity)
    if args.json:
        print(feedback_as_json(entries))
        return 0
    if not entries:
        print("No feedback yet." if not (args.since or args.polarity) else "No feedback matches.")
    from bot.texts import FEEDBACK_CHOICES

    for e in entries:
        mark = "👍" if e.polarity == "up" else "👎"
        print(f"{e.at} {mark} {e.platform} {e.scope} {e.user}: {e.question}")
        said = [f"what was wrong: {FEEDBACK_CHOICES.get(e.choice, e.choice)}"] if e.choice else []
        if e.comment:
            said.append(f"“{' '.join(e.comment.split())}”")
        if said:
            print("    " + " — ".join(said))
    return 0


def run_reindex_cmd(args: argparse.Namespace, settings: Settings) -> int:
    from bot.cli.progress import TerminalProgress
    from connectors.embedding import require_model
    from connectors.stores import open_store, stored_backend
    from eval.reindex import ReindexError, reindex, reindex_status

    require_model(settings.resolved_model_path)  # a missing model is that, not "a reindex is needed"
    store = open_store(settings)
    uses = stored_backend(store)
    stored, current = reindex_status(settings, store)
    backend = settings.embedding_backend
    if args.check:
        if stored == current:
            print(f"The store's vectors were made with {uses or backend} ({current}), the configured embedding: "
                  "no reindex needed.")
            return 0
        if not settings.embedding_backend_chosen and stored.removesuffix("-int8") == current.removesuffix("-int8"):
            # the same model at another precision, and no backend configured: the store keeps answering with its own
            print(f"The store's vectors were made with {uses} ({stored}) and it keeps using {uses}; `citebot "
                  f"reindex` moves it to {backend} ({current}), the default for new stores.")
            return 0
        print(f"Reindex needed: the store's vectors were made with {uses} ({stored}), the configuration "
              f"({backend}) makes {current}. Run `citebot reindex` (or set CITEBOT_EMBEDDING_BACKEND back).")
        return 1
    source = None
    if args.source is not None:
        from connectors.sqlite_store import SQLiteDocumentStore

        if not args.source.is_file():
            print(f"citebot reindex: no embedded store at {args.source} (give a data dir's chunks.sqlite3)",
                  file=sys.stderr)
            return 2
        if args.source.resolve() == Path(str(getattr(store, "path", ""))).resolve():
            print("citebot reindex: --from names the configured store itself; set CITEBOT_ELASTICSEARCH_URL (or "
                  "another CITEBOT_DATA_DIR) for the store to copy into", file=sys.stderr)
            return 2
        source = SQLiteDocumentStore(args.source)
    progress = TerminalProgress(sys.stderr)
    try:
        res = reindex(settings, store, scopes=args.scope, restart=args.restart, log=progress.log,
                      progress=progress, source=source)
    except ReindexError as e:
        print(f"citebot reindex: {e}", file=sys.stderr)
        return 1
    finally:
        progress.clear()
    if source is not None:
        print(f"Copied {res.documents} document(s), {res.chunks} chunks in {res.scopes} scope(s) from {args.source};"
              f" {res.skipped} already copied.")
        return 0
    print(f"Re-embedded {res.documents} document(s), {res.chunks} chunks in {res.scopes} scope(s) with {backend}; "
          f"{res.skipped} already done with this model.")
    return 0
