"""``citebot quality``: refusals, 👎 and dropped quotes week by week and per scope, with ``--check`` for alarms."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from connectors.settings import Settings


def _when(value: str) -> datetime:
    try:
        dt = datetime.fromisoformat(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{value!r} is not a date: use YYYY-MM-DD or YYYY-MM-DDTHH:MM") from e
    return (dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)).astimezone(UTC)


def register(sub: Any) -> None:
    q = sub.add_parser(
        "quality", help="how the bots are doing week by week: refusals, 👎 and reasons, dropped quotes (HTML, JSON)",
        description="Reads the chat state and feedback log. --check exits 1 when a rate of the last "
        "CITEBOT_QUALITY_WINDOW_DAYS is above its CITEBOT_QUALITY_MAX_* ceiling or rose by more than "
        "CITEBOT_QUALITY_MAX_RISE over the four windows before (a CronJob's alarm).",
    )
    q.add_argument("--weeks", type=int, default=8, help="ISO weeks in the report (default 8)")
    q.add_argument("--out", type=Path, help="folder for quality.html and quality.json (default DATA_DIR/quality)")
    q.add_argument("--until", type=_when, help="report as of this date instead of now (UTC), e.g. a past week")
    q.add_argument("--json", action="store_true", help="print the figures as JSON instead of the summary")
    q.add_argument("--check", action="store_true", help="exit 1 when a rate crossed its threshold")
    q.set_defaults(func=run_quality_cmd)


def run_quality_cmd(args: argparse.Namespace, settings: Settings) -> int:
    from bot.texts import FEEDBACK_CHOICES
    from connectors.stores import open_state
    from eval.quality import RATE_NAMES, Thresholds, read, write

    if args.weeks < 1:
        print("citebot quality: --weeks must be at least 1", file=sys.stderr)
        return 2
    now = args.until or datetime.now(UTC)
    q = read(open_state(settings), now=now, thresholds=Thresholds.from_settings(settings), weeks=args.weeks)
    paths = write(q, args.out or settings.data_dir / "quality", reason_labels=FEEDBACK_CHOICES)
    if args.json:
        print(json.dumps(q.to_json(), indent=2, ensure_ascii=False))
    else:
        print(f"{'week':<10} {'answers':>8} {'refused':>8} {'👎 rate':>8} {'dropped':>8}")
        for week, t in q.weeks:
            print(f"{week:<10} {t.answers:>8} {_pct(t.refusal_rate):>8} {_pct(t.downvote_rate):>8} "
                  f"{_pct(t.dropped_rate):>8}")
        if not q.weeks:
            print("(no answers in these weeks)")
        print()
        verdict = "ALARM" if q.alarms else "OK" if q.judged else "NOT ENOUGH DATA"
        print(f"Last {q.thresholds.window_days} days: {verdict}")
        for f in q.findings:
            print(f"  {'ALARM' if f.alarm else 'ok':<5} {RATE_NAMES[f.rate]}: {f.why}")
        for p in paths:
            print(p)
    return 1 if args.check and q.alarms else 0


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:.1%}"
