"""``citebot quality``: how the bots are doing, week by week and scope by scope, from the chat state.

It reads what the bots already record (every posted answer with its refusal, quotes and validation counts;
every 👍/👎 with the 👎 form's choice) and reports, per ISO week and per scope: the refusal rate, the 👎 rate
(share of answers someone gave a 👎), the 👎 reasons, the share of quotes dropped by validation, and the
documents and sections most often behind a 👎. ``quality.json`` holds the figures, ``quality.html`` shows them
with charts, the verdict first.

The check (``--check``) looks at the last ``CITEBOT_QUALITY_WINDOW_DAYS`` (the rolling window, 7 by default)
and raises an alarm when a rate is above its ceiling (``CITEBOT_QUALITY_MAX_*``), or has risen by more than
``CITEBOT_QUALITY_MAX_RISE`` over the four windows before it and by more than chance explains (a two-proportion
z-test, z >= 2): a few points of sustained drop in quality, not one bad afternoon or a quiet channel's noise.
A window with fewer than ``CITEBOT_QUALITY_MIN_ANSWERS`` answers is not judged (one refusal out of three
answers is no trend); it says so and passes.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from connectors.settings import Settings
from connectors.state_api import ChatState, FeedbackEntry, RecordedAnswer
from eval import charts
from eval.templating import render

BASELINE_WINDOWS = 4  # the rise is measured against this many windows before the current one
MIN_Z = 2.0  # a rise counts when it is at least this many standard errors (two-proportion z-test)
TOP = 10  # documents and sections listed behind 👎
NO_REASON = "(no reason given)"


@dataclass(frozen=True)
class Thresholds:
    window_days: int = 7
    min_answers: int = 20
    max_refusal_rate: float = 0.40
    max_downvote_rate: float = 0.15
    max_dropped_rate: float = 0.05
    max_rise: float = 0.05

    @classmethod
    def from_settings(cls, s: Settings) -> Thresholds:
        return cls(s.quality_window_days, s.quality_min_answers, s.quality_max_refusal_rate,
                   s.quality_max_downvote_rate, s.quality_max_dropped_rate, s.quality_max_rise)

    def ceiling(self, rate: str) -> float:
        return {"refusal_rate": self.max_refusal_rate, "downvote_rate": self.max_downvote_rate,
                "dropped_rate": self.max_dropped_rate}[rate]


@dataclass
class Tally:
    """What happened to a set of answers: refusals, votes, 👎 reasons, quotes checked and dropped."""

    answers: int = 0
    refused: int = 0
    upvoted: int = 0  # answers with a standing 👍
    downvoted: int = 0  # answers with a standing 👎
    quotes: int = 0  # quotes that went through validation
    dropped: int = 0  # of those, dropped (no such chunk, or not found in it)
    reasons: Counter[str] = field(default_factory=Counter)

    @property
    def refusal_rate(self) -> float | None:
        return self.refused / self.answers if self.answers else None

    @property
    def downvote_rate(self) -> float | None:
        return self.downvoted / self.answers if self.answers else None

    @property
    def dropped_rate(self) -> float | None:
        return self.dropped / self.quotes if self.quotes else None

    def rate(self, name: str) -> float | None:
        value = getattr(self, name)
        return float(value) if value is not None else None

    def to_json(self) -> dict[str, Any]:
        return {"answers": self.answers, "refused": self.refused, "upvoted": self.upvoted,
                "downvoted": self.downvoted, "quotes": self.quotes, "dropped": self.dropped,
                "refusal_rate": self.refusal_rate, "downvote_rate": self.downvote_rate,
                "dropped_rate": self.dropped_rate, "reasons": dict(self.reasons.most_common())}


RATES = ("refusal_rate", "downvote_rate", "dropped_rate")
RATE_NAMES = {"refusal_rate": "refusal rate", "downvote_rate": "👎 rate", "dropped_rate": "quotes dropped"}
# in charts: words, not emoji (matplotlib lays text out with fonts that have no emoji)
CHART_NAMES = {"refusal_rate": "refusal rate", "downvote_rate": "thumbs-down rate", "dropped_rate": "quotes dropped"}


@dataclass
class Finding:
    """One rate of the rolling window against its ceiling and its recent past."""

    rate: str
    value: float | None
    ceiling: float
    baseline: float | None
    rise: float | None
    alarm: bool
    why: str


@dataclass
class Quality:
    now: datetime
    thresholds: Thresholds
    weeks: list[tuple[str, Tally]]  # ISO week ("2026-W47"), oldest first
    scopes: list[tuple[str, Tally]]  # the most answers first
    window: Tally
    baseline: Tally
    findings: list[Finding]
    behind_downvotes: list[tuple[str, str, int]]  # (document, section, answers with a 👎 citing it)
    judged: bool  # the window held enough answers to judge

    @property
    def alarms(self) -> list[Finding]:
        return [f for f in self.findings if f.alarm]

    @property
    def total(self) -> Tally:
        out = Tally()
        for _w, t in self.weeks:
            _add(out, t)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "now": self.now.isoformat(timespec="seconds"),
            "thresholds": self.thresholds.__dict__,
            "verdict": "alarm" if self.alarms else ("ok" if self.judged else "not_enough_data"),
            "window": {"days": self.thresholds.window_days, **self.window.to_json()},
            "baseline": {"windows": BASELINE_WINDOWS, **self.baseline.to_json()},
            "findings": [f.__dict__ for f in self.findings],
            "weeks": {w: t.to_json() for w, t in self.weeks},
            "scopes": {s: t.to_json() for s, t in self.scopes},
            "behind_downvotes": [{"document": d, "section": s, "answers": n} for d, s, n in self.behind_downvotes],
        }


def _add(into: Tally, t: Tally) -> None:
    into.answers += t.answers
    into.refused += t.refused
    into.upvoted += t.upvoted
    into.downvoted += t.downvoted
    into.quotes += t.quotes
    into.dropped += t.dropped
    into.reasons.update(t.reasons)


def _parse(at: str) -> datetime:
    dt = datetime.fromisoformat(at)
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def iso_week(at: datetime) -> str:
    year, week, _day = at.isocalendar()
    return f"{year}-W{week:02d}"


def _count(t: Tally, answer: dict[str, Any], votes: Sequence[FeedbackEntry]) -> None:
    t.answers += 1
    t.refused += bool(answer.get("refused"))
    v = answer.get("validation") or {}
    t.quotes += sum(int(v.get(k) or 0) for k in ("exact", "normalised", "fuzzy", "unknown_chunk", "unmatched"))
    t.dropped += int(v.get("unknown_chunk") or 0) + int(v.get("unmatched") or 0)
    downs = [e for e in votes if e.polarity == "down"]
    t.upvoted += any(e.polarity == "up" for e in votes)
    t.downvoted += bool(downs)
    for e in downs:
        t.reasons[e.choice or NO_REASON] += 1


def measure(answers: Sequence[RecordedAnswer], feedback: Sequence[FeedbackEntry], *, now: datetime,
            thresholds: Thresholds, weeks: int = 8) -> Quality:
    """The report for ``weeks`` ISO weeks up to ``now``, and the check of the rolling window ending at ``now``."""
    votes: dict[tuple[str, str], list[FeedbackEntry]] = {}
    for e in feedback:
        votes.setdefault((e.platform, e.message_ref), []).append(e)
    window_start = now - timedelta(days=thresholds.window_days)
    baseline_start = window_start - timedelta(days=thresholds.window_days * BASELINE_WINDOWS)
    first_week = iso_week(now - timedelta(weeks=weeks - 1))
    by_week: dict[str, Tally] = {}
    by_scope: dict[str, Tally] = {}
    window, baseline = Tally(), Tally()
    behind: Counter[tuple[str, str]] = Counter()
    for a in answers:
        at = _parse(a.at)
        if at > now:
            continue
        doc = json.loads(a.answer_json)
        these = votes.get((a.platform, a.message_ref), [])
        week = iso_week(at)
        if week >= first_week:
            _count(by_week.setdefault(week, Tally()), doc, these)
            _count(by_scope.setdefault(a.scope, Tally()), doc, these)
            if any(e.polarity == "down" for e in these):
                cited = {(str(c.get("file") or ""), str(c.get("section") or "")) for c in doc.get("citations") or []}
                behind.update(cited or {("(refused: nothing quoted)", "")})
        if at >= window_start:
            _count(window, doc, these)
        elif at >= baseline_start:
            _count(baseline, doc, these)
    findings, judged = check(window, baseline, thresholds)
    return Quality(
        now=now, thresholds=thresholds,
        weeks=sorted(by_week.items()),
        scopes=sorted(by_scope.items(), key=lambda kv: (-kv[1].answers, kv[0])),
        window=window, baseline=baseline, findings=findings, judged=judged,
        behind_downvotes=[(d, s, n) for (d, s), n in behind.most_common(TOP)],
    )


def _counts(t: Tally, rate: str) -> tuple[int, int]:
    """(events, out of) behind a rate."""
    return {"refusal_rate": (t.refused, t.answers), "downvote_rate": (t.downvoted, t.answers),
            "dropped_rate": (t.dropped, t.quotes)}[rate]


def z_score(window: Tally, baseline: Tally, rate: str) -> float:
    """How far the window's rate is above the baseline's, in standard errors (a two-proportion z-test): about 2
    or more is beyond what chance moves a rate on these numbers of answers."""
    (k1, n1), (k0, n0) = _counts(window, rate), _counts(baseline, rate)
    if not n1 or not n0:
        return 0.0
    pooled = (k1 + k0) / (n1 + n0)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n0))
    return (k1 / n1 - k0 / n0) / se if se else 0.0


def check(window: Tally, baseline: Tally, th: Thresholds) -> tuple[list[Finding], bool]:
    """Each rate of the window against its ceiling, and against the windows before it: a rise alarms when it is
    more than ``max_rise`` and beyond chance (z >= :data:`MIN_Z`), so a quiet channel's noise pages nobody."""
    judged = window.answers >= th.min_answers
    base_judged = baseline.answers >= th.min_answers
    out: list[Finding] = []
    for rate in RATES:
        value, base = window.rate(rate), baseline.rate(rate) if base_judged else None
        ceiling = th.ceiling(rate)
        rise = value - base if value is not None and base is not None else None
        z = z_score(window, baseline, rate) if rise is not None else 0.0
        over = judged and value is not None and value > ceiling + 1e-12
        rose = judged and rise is not None and rise > th.max_rise + 1e-12 and z >= MIN_Z
        if not judged:
            why = (f"not judged: {window.answers} answers in the last {th.window_days} days "
                   f"(fewer than {th.min_answers})")
        elif value is None:
            why = "no quotes to check" if rate == "dropped_rate" else "nothing to measure"
        else:
            parts = [f"{value:.1%} {'>' if over else '<='} {ceiling:.0%} ceiling"]
            if rise is not None:
                beyond = (f", beyond chance (z = {z:.1f})" if z >= MIN_Z else f", within chance (z = {z:.1f})")
                parts.append(f"{rise * 100:+.1f} points against {base:.1%} in the {BASELINE_WINDOWS} windows before"
                             + (f" (more than {th.max_rise * 100:.0f}{beyond})" if rise > th.max_rise else ""))
            why = "; ".join(parts)
        out.append(Finding(rate, value, ceiling, base, rise, bool(over or rose), why))
    return out, judged


def read(state: ChatState, *, now: datetime, thresholds: Thresholds, weeks: int = 8) -> Quality:
    """:func:`measure` over the chat state: answers of the last ``weeks`` weeks (and the check's baseline)."""
    days = max(weeks * 7, thresholds.window_days * (BASELINE_WINDOWS + 1)) + 7
    since = (now - timedelta(days=days)).isoformat(timespec="seconds")
    return measure(state.answers(since=since), state.feedback(since=since), now=now, thresholds=thresholds,
                   weeks=weeks)


def write(q: Quality, out_dir: Path, *, reason_labels: Mapping[str, str] | None = None) -> list[Path]:
    """``quality.json`` and ``quality.html`` in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    labels = dict(reason_labels or {})
    (out_dir / "quality.json").write_text(json.dumps(q.to_json(), indent=2, ensure_ascii=False), encoding="utf-8")
    page = render("quality.html.j2", q=q, charts=quality_charts(q, labels), labels=labels, rates=RATES,
                  rate_names=RATE_NAMES)
    (out_dir / "quality.html").write_text(page, encoding="utf-8")
    return [out_dir / "quality.html", out_dir / "quality.json"]


def quality_charts(q: Quality, labels: Mapping[str, str]) -> dict[str, str]:
    weeks = [w for w, _t in q.weeks]
    out: dict[str, str] = {}
    if not weeks:
        return out
    years = {w.split("-")[0] for w in weeks}
    week_axis = f"ISO week of {years.pop()}" if len(years) == 1 else "ISO week"
    if week_axis != "ISO week":
        weeks = [w.split("-")[1] for w in weeks]  # "W47": eight of them fit under a chart
    th = q.thresholds
    out["rates"] = charts.line_chart(
        weeks, {CHART_NAMES[r]: [t.rate(r) for _w, t in q.weeks] for r in RATES},
        title="Week by week: refusals, thumbs-down and dropped quotes", x_title=week_axis, y_title="share",
        percent=True, limits={f"{CHART_NAMES[r]} ceiling": th.ceiling(r) for r in RATES},
    )
    out["volume"] = charts.grouped_bars(
        weeks, {"answers": [float(t.answers) for _w, t in q.weeks],
                "with a thumbs-up": [float(t.upvoted) for _w, t in q.weeks],
                "with a thumbs-down": [float(t.downvoted) for _w, t in q.weeks]},
        title="Answers and votes per week", x_title=week_axis, y_title="answers", value_labels=True,
    )
    reasons = q.total.reasons.most_common()
    if reasons:
        out["reasons"] = charts.horizontal_bars(
            [labels.get(r, r) for r, _n in reasons], [float(n) for _r, n in reasons],
            title="Why people gave a thumbs-down", x_title="thumbs-down votes", y_title="reason (from the form)",
        )
    if q.behind_downvotes:
        out["documents"] = charts.horizontal_bars(
            [f"{d} › {s}" if s else d for d, s, _n in q.behind_downvotes],
            [float(n) for _d, _s, n in q.behind_downvotes],
            title="Documents and sections behind a thumbs-down", x_title="answers with a thumbs-down quoting it",
            y_title="document › section",
        )
    return out
