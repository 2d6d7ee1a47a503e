"""``citebot eval report RUN_DIR`` → ``report.md`` and ``report.html`` (charts are inline SVG drawn here).

For a ``--mode all`` run directory, each mode gets its own report and the top-level report carries the
ablation table and chart. Given several runs, ``write_trend`` adds ``trend.md``/``trend.html``: the headline
metrics run after run. Every chart has titled axes, round tick values, and each bar says how many cases it
rests on (``n=…``).
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval.compare import support
from eval.metrics import (
    HEADLINE_K,
    bucket,
    case_metrics,
    case_score,
    curve_thresholds,
    failure_labels,
    refusal_curve,
    summarise,
)
from eval.records import MODES_ORDER, RESULTS_FILE, CaseResult, RunDirError, load_run

PALETTE = ("#3b6ea5", "#e07b39", "#5a9e6f", "#b04a5a", "#7d6bb3", "#8c8c8c")

# --- SVG ------------------------------------------------------------------------------------------


def _svg(width: int, height: int, body: list[str], title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11" role="img" '
        f'aria-label="{html.escape(title)}"><title>{html.escape(title)}</title>'
        f'<rect width="{width}" height="{height}" fill="#fff"/>'
        f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="13" font-weight="bold">'
        f"{html.escape(title)}</text>" + "".join(body) + "</svg>"
    )


def nice_ticks(lo: float, hi: float, target: int = 5, *, integers: bool = False, cover: bool = False) -> list[float]:
    """Round tick values within ``lo..hi`` (steps of 1, 2, 2.5 or 5 times a power of ten), about ``target`` of
    them; whole numbers only when ``integers``; with ``cover`` the last tick is at or above ``hi`` (an axis)."""
    span = hi - lo
    if span <= 0:
        return [lo, lo + 1] if cover else [lo]
    raw = span / max(1, target)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw - 1e-12)
    if integers:
        step = max(1.0, math.ceil(step))
    ticks: list[float] = []
    t = math.ceil(lo / step - 1e-9) * step
    while t <= hi + step * 1e-6:
        ticks.append(round(t, 10))
        t += step
    if cover and ticks[-1] < hi - step * 1e-6:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def tick_label(value: float, step: float) -> str:
    """A tick value with the decimals its step needs (step 0.25 → "0.50", step 200 → "1,000")."""
    if step >= 1 and float(step).is_integer():
        return f"{value:,.0f}"
    decimals = len(f"{step:.3f}".rstrip("0").split(".")[1]) or 1
    return f"{value:.{decimals}f}"


def _axes(left: float, top: float, pw: float, ph: float, *, x_title: str, y_title: str, height: float,
          y_ticks: Sequence[tuple[float, str]]) -> list[str]:
    """Frame, horizontal grid lines at the y ticks (y given in pixels) and both axis titles."""
    body = [f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#333"/>',
            f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#333"/>']
    for y, label in y_ticks:
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#e3e3e3"/>')
        body.append(f'<line x1="{left - 4}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" stroke="#333"/>')
        body.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{html.escape(label)}</text>')
    body.append(f'<text x="{left + pw / 2:.1f}" y="{height - 8}" text-anchor="middle" font-size="12">'
                f"{html.escape(x_title)}</text>")
    body.append(f'<text x="14" y="{top + ph / 2:.1f}" text-anchor="middle" font-size="12" '
                f'transform="rotate(-90 14 {top + ph / 2:.1f})">{html.escape(y_title)}</text>')
    return body


def _legend(names: Sequence[str], left: float, right_edge: float) -> tuple[list[str], float]:
    """Colour keys for ``names`` in rows that fit before ``right_edge``; returns the elements and the y where
    the plot may start below them."""
    body: list[str] = []
    x, y = left, 26.0
    for i, name in enumerate(names):
        item = 24 + 6.5 * len(name)
        if x > left and x + item > right_edge:
            x, y = left, y + 16
        body.append(f'<rect x="{x:.0f}" y="{y:.0f}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
                    f'<text x="{x + 14:.0f}" y="{y + 9:.0f}">{html.escape(name)}</text>')
        x += item
    return body, y + 24


def histogram_svg(values: Sequence[float], *, title: str, lo: float, hi: float, bins: int = 10,
                  x_title: str, y_title: str = "cases", width: int = 460, height: int = 260) -> str:
    """Vertical bars counting ``values`` in ``bins`` equal bins over ``lo..hi`` (the last bin is closed), each bar
    labelled with its count; both axes titled, ticks at round values."""
    counts = [0] * bins
    span = (hi - lo) or 1.0
    for v in values:
        i = int((min(max(v, lo), hi) - lo) / span * bins)
        counts[min(i, bins - 1)] += 1
    left, right, top, bottom = 58, 14, 30, 56
    pw, ph = width - left - right, height - top - bottom
    y_ticks = nice_ticks(0, max(counts) or 1, 4, integers=True, cover=True)
    y_max = y_ticks[-1]
    y_step = y_ticks[1] - y_ticks[0] if len(y_ticks) > 1 else 1
    body = _axes(left, top, pw, ph, x_title=x_title, y_title=y_title, height=height,
                 y_ticks=[(top + ph * (1 - t / y_max), tick_label(t, y_step)) for t in y_ticks])
    bw = pw / bins
    for i, c in enumerate(counts):
        h = ph * c / y_max
        x = left + i * bw
        a, b = lo + span * i / bins, lo + span * (i + 1) / bins
        body.append(f'<rect x="{x + 1:.1f}" y="{top + ph - h:.1f}" width="{bw - 2:.1f}" height="{h:.1f}" '
                    f'fill="{PALETTE[0]}"><title>{c} case(s) from {a:g} to {b:g}</title></rect>')
        if c:
            body.append(f'<text x="{x + bw / 2:.1f}" y="{top + ph - h - 3:.1f}" text-anchor="middle" '
                        f'font-size="10">{c}</text>')
    x_ticks = nice_ticks(lo, hi, 5)
    x_step = x_ticks[1] - x_ticks[0] if len(x_ticks) > 1 else 1.0
    for t in x_ticks:
        x = left + pw * (t - lo) / span
        body.append(f'<line x1="{x:.1f}" y1="{top + ph}" x2="{x:.1f}" y2="{top + ph + 4}" stroke="#333"/>')
        body.append(f'<text x="{x:.1f}" y="{top + ph + 17}" text-anchor="middle">{tick_label(t, x_step)}</text>')
    return _svg(width, height, body, title)


def _label_lines(label: str, room: float, size: float = 11.0) -> list[str]:
    """``label`` in at most two lines that fit ``room`` pixels (about 0.6 em a character), clipped with "…"."""
    per_line = max(4, int(room / (0.6 * size)))
    words: list[str] = []
    for w in label.split():  # a long name breaks after "_" or "-" ("citation_" / "validity", "scanned-" / "table")
        words += [p for p in re.split(r"(?<=[_-])", w) if p] if len(w) > per_line else [w]
    lines: list[str] = []
    cur = ""
    for w in words:
        glue = "" if cur.endswith(("_", "-")) else " "
        if cur and len(cur) + len(glue) + len(w) > per_line:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur}{glue}{w}" if cur else w
    lines.append(cur)
    if len(lines) > 2:
        lines = [lines[0], " ".join(lines[1:])]
    return [ln if len(ln) <= per_line else ln[: per_line - 1] + "…" for ln in lines]


def bar_chart_svg(groups: Sequence[str], series: dict[str, Sequence[float | None]], *, title: str,
                  counts: dict[str, Sequence[int | None]] | None = None, x_title: str = "category",
                  y_title: str = "share of cases", width: int = 640, height: int = 300, vmax: float = 1.0) -> str:
    """Grouped vertical bars: one group per label, one bar per series (None = no bar). ``counts[series][i]`` is
    how many cases bar ``i`` rests on, written above it as ``n=…``."""
    width = max(width, 70 + 110 * len(groups))  # room for each group's label and its n= labels
    left, right, bottom = 58, 14, 62
    legend, top = _legend(list(series), left, width - right)
    height += int(top - 50)  # a second legend row takes room from nothing else
    pw, ph = width - left - right, height - top - bottom
    n_series = max(1, len(series))
    gw = pw / max(1, len(groups))
    bw = max(2.0, (gw - 12) / n_series)
    ticks = nice_ticks(0.0, vmax, 4, cover=True)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else vmax
    vmax = ticks[-1]
    body = _axes(left, top, pw, ph, x_title=x_title, y_title=y_title, height=height,
                 y_ticks=[(top + ph * (1 - t / vmax), tick_label(t, step)) for t in ticks]) + legend
    for gi, g in enumerate(groups):
        gx = left + gi * gw + 6
        for si, (name, values) in enumerate(series.items()):
            v = values[gi]
            if v is None:
                continue
            h = ph * min(max(v, 0.0), vmax) / vmax
            bx = gx + si * bw
            n = (counts or {}).get(name, [None] * len(groups))[gi]
            tip = f"{g} — {name}: {v:.3f}" + (f" over {n} case(s)" if n is not None else "")
            body.append(f'<rect x="{bx:.1f}" y="{top + ph - h:.1f}" width="{bw - 1:.1f}" height="{h:.1f}" '
                        f'fill="{PALETTE[si % len(PALETTE)]}"><title>{html.escape(tip)}</title></rect>')
            if n is not None:
                body.append(f'<text x="{bx + (bw - 1) / 2:.1f}" y="{top + ph - h - 3:.1f}" text-anchor="middle" '
                            f'font-size="9" fill="#444">n={n}</text>')
        for li, line in enumerate(_label_lines(g, gw - 8)):
            body.append(f'<text x="{gx + (gw - 12) / 2:.1f}" y="{top + ph + 15 + 13 * li}" text-anchor="middle">'
                        f"<title>{html.escape(g)}</title>{html.escape(line)}</text>")
    return _svg(width, height, body, title)


def line_chart_svg(x_labels: Sequence[str], series: dict[str, Sequence[float | None]], *, title: str,
                   y_title: str, x_title: str = "run", vmin: float = 0.0, vmax: float | None = None,
                   width: int = 640, height: int = 320) -> str:
    """One line per series over ``x_labels`` (runs in order), a dot and its value at every point."""
    values = [v for vs in series.values() for v in vs if v is not None]
    top_value = vmax if vmax is not None else (max(values) * 1.1 if values else 1.0) or 1.0
    left, right, bottom = 64, 20, 64
    width = max(width, 120 + 90 * len(x_labels))
    legend, top = _legend(list(series), left, width - right)
    height += int(top - 50)
    pw, ph = width - left - right, height - top - bottom
    ticks = nice_ticks(vmin, top_value, 4, cover=True)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    top_value = ticks[-1]
    body = _axes(left, top, pw, ph, x_title=x_title, y_title=y_title, height=height,
                 y_ticks=[(top + ph * (1 - (t - vmin) / (top_value - vmin)), tick_label(t, step)) for t in ticks])
    body += legend
    gap = pw / max(1, len(x_labels))

    def xy(i: int, v: float) -> tuple[float, float]:
        return left + gap * (i + 0.5), top + ph * (1 - (v - vmin) / (top_value - vmin))

    for i, label in enumerate(x_labels):
        x = left + gap * (i + 0.5)
        body.append(f'<line x1="{x:.1f}" y1="{top + ph}" x2="{x:.1f}" y2="{top + ph + 4}" stroke="#333"/>')
        for li, line in enumerate(_label_lines(label, gap - 4, 10)):
            body.append(f'<text x="{x:.1f}" y="{top + ph + 16 + 12 * li}" text-anchor="middle" font-size="10">'
                        f"<title>{html.escape(label)}</title>{html.escape(line)}</text>")
    for si, (name, vs) in enumerate(series.items()):
        color = PALETTE[si % len(PALETTE)]
        pts = [(i, v) for i, v in enumerate(vs) if v is not None]
        if len(pts) > 1:
            line = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, v in pts))
            body.append(f'<polyline points="{line}" fill="none" stroke="{color}" stroke-width="2"/>')
        for i, v in pts:
            x, y = xy(i, v)
            body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}">'
                        f"<title>{html.escape(x_labels[i])} — {html.escape(name)}: {v:.3f}</title></circle>")
    return _svg(width, height, body, title)


def refusal_curve_svg(points: Sequence[dict[str, Any]], *, labelled: Sequence[float] = (),
                      title: str = "Refusal trade-off as the threshold moves",
                      width: int = 520, height: int = 420) -> str:
    """Answer rate on answerable cases (y) against refusal recall on unanswerable cases (x), one point per
    threshold (``points`` from :func:`eval.metrics.refusal_curve`, any order); thresholds in ``labelled`` get a
    dot and their value, the run's own threshold a red dot."""
    pts = sorted((p for p in points if p["answer_rate"] is not None and p["refusal_recall"] is not None),
                 key=lambda p: p["threshold"])
    left, right, top, bottom = 60, 44, 34, 52
    pw, ph = width - left - right, height - top - bottom

    def xy(p: dict[str, Any]) -> tuple[float, float]:
        return left + pw * float(p["refusal_recall"]), top + ph * (1 - float(p["answer_rate"]))

    body: list[str] = []
    for i in range(6):
        frac = i / 5
        x, y = left + pw * frac, top + ph * (1 - frac)
        body.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#e3e3e3"/>')
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#e3e3e3"/>')
        body.append(f'<text x="{x:.1f}" y="{top + ph + 15}" text-anchor="middle">{frac:.1f}</text>')
        body.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{frac:.1f}</text>')
    body += [f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>',
             f'<text x="{left + pw / 2}" y="{height - 12}" text-anchor="middle" font-size="12">'
             "Refusal recall on unanswerable cases</text>",
             f'<text x="16" y="{top + ph / 2}" text-anchor="middle" font-size="12" '
             f'transform="rotate(-90 16 {top + ph / 2})">Answer rate on answerable cases</text>']
    if pts:
        line = " ".join(f"{x:.1f},{y:.1f}" for x, y in map(xy, pts))
        body.append(f'<polyline points="{line}" fill="none" stroke="{PALETTE[0]}" stroke-width="2"/>')
    marks = {round(t, 4) for t in labelled}
    placed: list[tuple[float, float]] = []  # labels already drawn; a point on top of one gets a dot only
    for p in sorted(pts, key=lambda p: not p["current"]):
        x, y = xy(p)
        tip = (f"threshold {p['threshold']:.3f}: answer rate {p['answer_rate']:.3f}, "
               f"refusal recall {p['refusal_recall']:.3f}")
        crowded = any(abs(x - px) < 22 and abs(y - py) < 12 for px, py in placed)
        if p["current"] or (round(p["threshold"], 4) in marks and not crowded):
            placed.append((x, y))
        if p["current"]:
            body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{PALETTE[3]}"><title>{tip} (current)'
                        f'</title></circle><text x="{x + 8:.1f}" y="{y - 8:.1f}" fill="{PALETTE[3]}" '
                        f'font-weight="bold">current {p["threshold"]:.3f}</text>')
        elif round(p["threshold"], 4) in marks:
            body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{PALETTE[0]}"><title>{tip}</title></circle>')
            if not crowded:
                ly = y + 13 if y + 13 < top + ph - 2 else y - 5  # above the point near the x axis
                body.append(f'<text x="{x + 5:.1f}" y="{ly:.1f}" font-size="10" fill="#555">'
                            f'{p["threshold"]:.2f}</text>')
    return _svg(width, height, body, title)


CSS = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
       "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
       "text-align:left}th{background:#f3f3f3}.case{border-left:4px solid #b04a5a;padding-left:1em;"
       "margin:1em 0}.charts svg{margin:4px;vertical-align:top}.wide{overflow-x:auto}")

# --- tables ---------------------------------------------------------------------------------------

OVERALL_KEYS = ("doc_hit@{k}", "page_hit@5", "page_hit@{k}", "page_hit_any_span@5", "recall@{k}", "mrr",
                "ndcg@10", "citation_validity", "citation_page_precision", "cited_gold_page", "refusal_precision",
                "refusal_recall", "refusal_f1", "answer_rate", "exact_match", "contains_match", "token_f1",
                "judge_groundedness", "judge_completeness", "judge_correctness", "latency_p50_ms",
                "latency_p95_ms", "score_mean")
CATEGORY_KEYS = ("n_cases", "answer_rate", "page_hit@5", "recall@{k}", "mrr", "citation_validity",
                 "citation_page_precision", "cited_gold_page", "refusal_f1", "contains_match", "token_f1",
                 "latency_p50_ms", "score_mean")
ABLATION_KEYS = ("doc_hit@{k}", "page_hit@5", "recall@{k}", "mrr", "ndcg@10", "citation_validity",
                 "citation_page_precision", "cited_gold_page", "refusal_f1", "answer_rate", "token_f1",
                 "latency_p50_ms", "latency_p95_ms")


def _keys(template: Sequence[str], k: int) -> list[str]:
    """Metric names at this run's k, without repeats (at k=5, page_hit@{k} is page_hit@5)."""
    return list(dict.fromkeys(key.format(k=k) for key in template))


def fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.0f}"
    return str(v)


def _md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(fmt(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return out


def _html_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<div class='wide'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def ablation_rows(runs: dict[str, tuple[dict[str, Any], list[CaseResult]]]) -> tuple[list[str], list[list[Any]]]:
    """One row per retrieval mode. ``answer_ms_mean``: mean time of ``service.answer``; ``wall_ms_per_case``: the
    run's wall time per case (answer + depth-10 ranking + quote recheck + judge), when the run was not resumed."""
    k = 5
    rows: list[list[Any]] = []
    for mode, (meta, results) in runs.items():
        k = int(meta.get("k", 5))
        o = summarise(results, k)["overall"]
        lat = [r.latency_ms for r in results if not r.error]
        ran, wall = meta.get("cases_run_now"), meta.get("wall_seconds_this_invocation")
        rows.append([mode, *[o[key] for key in _keys(ABLATION_KEYS, k)], sum(lat) / len(lat) if lat else None,
                     wall * 1000 / ran if ran and wall else None])
    header = ["mode", *_keys(ABLATION_KEYS, k), "answer_ms_mean", "wall_ms_per_case"]
    return header, rows


def ablation_markdown(runs: dict[str, tuple[dict[str, Any], list[CaseResult]]]) -> str:
    header, rows = ablation_rows(runs)
    return "\n".join(_md_table(header, rows))


def run_threshold(meta: dict[str, Any]) -> float | None:
    """The refusal threshold the run answered with (from its recorded settings)."""
    value = (meta.get("settings") or {}).get("refusal_threshold")
    return float(value) if isinstance(value, int | float) else None


def category_rows(results: Sequence[CaseResult]) -> tuple[list[str], list[list[Any]]]:
    """Per category, what a user notices: how often an answerable question is answered, whether a page holding
    the answer is among the first five passages (chunks spanning at most two pages), whether an answer cites
    such a page, and for unanswerable questions how often the bot refuses."""
    groups: dict[str, list[CaseResult]] = {}
    for r in results:
        groups.setdefault(r.category, []).append(r)
    header = ["category", "cases", "answer_rate", f"page_hit@{HEADLINE_K}", "cited_gold_page", "refused_unanswerable"]
    rows: list[list[Any]] = []
    for name, rs in sorted(groups.items()):
        o = summarise(rs)["overall"]
        unanswerable = [r for r in rs if not r.answerable]
        refused = (sum(1 for r in unanswerable if r.refused or r.error) / len(unanswerable)) if unanswerable else None
        rows.append([name, len(rs), o["answer_rate"], o[f"page_hit@{HEADLINE_K}"], o["cited_gold_page"], refused])
    return header, rows


def curve_rows(points: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    header = ["threshold", "answer_rate", "refusal_recall", "refusal_precision", "refusal_f1", ""]
    rows = [[f"{p['threshold']:.3f}", p["answer_rate"], p["refusal_recall"], p["refusal_precision"], p["refusal_f1"],
             "◀ current" if p["current"] else ""] for p in points]
    return header, rows


def run_summary_markdown(runs: dict[str, tuple[dict[str, Any], list[CaseResult]]]) -> str:
    """What ``eval run`` prints: the ablation table, then per mode the by-category table and the refusal
    trade-off at round thresholds around the run's own."""
    out = [ablation_markdown(runs)]
    for mode, (meta, results) in runs.items():
        header, rows = category_rows(results)
        out += ["", f"By category ({mode}):", *_md_table(header, rows)]
        threshold = run_threshold(meta)
        points = refusal_curve(results, threshold) if threshold is not None else []
        if points:
            header, rows = curve_rows(points)
            out += ["", f"Refusal trade-off ({mode}; the run used {threshold:.3f}):", *_md_table(header, rows)]
    return "\n".join(out)


# --- one run --------------------------------------------------------------------------------------


def _pages(r: CaseResult, k: int) -> str:
    return ", ".join(
        f"{h.file} p.{h.page_start}" + (f"-{h.page_end}" if h.page_end != h.page_start else "")
        for h in r.hits[:k]
    ) or "(none)"


def _expected(r: CaseResult) -> str:
    if not r.answerable:
        return "(unanswerable: should refuse)"
    src = "; ".join(f"{s.doc} p.{','.join(map(str, s.pages)) or 'any'}" for s in r.sources)
    return f"{r.expected_answer or '(no expected text)'} — {src or 'no sources'}"


def _judge_text(r: CaseResult) -> str:
    return " ".join(f"{name}: {fmt(js.score)} ({js.explanation})" for name, js in r.judge.items()) or "—"


def _short(text: str, n: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def build_report(meta: dict[str, Any], results: list[CaseResult]) -> tuple[str, str, dict[str, str]]:
    """(markdown, html, {svg file name: svg}) for one run."""
    k = int(meta.get("k", 5))
    s = summarise(results, k)
    o = s["overall"]
    scores = [case_score(r, k) for r in results]
    cats = list(s["categories"])
    by_cat = {c: [r for r in results if r.category == c] for c in cats}
    charts = {
        "scores.svg": histogram_svg(scores, title="Case score distribution", lo=0.0, hi=1.0,
                                    x_title="case score (0 = failed, 1 = everything right)"),
        "categories.svg": bar_chart_svg(
            cats,
            {
                f"page_hit@{k}": [s["categories"][c][f"page_hit@{k}"] for c in cats],
                "refusal correct": [
                    sum(case_metrics(r, k)["refusal_correct"] or 0.0 for r in by_cat[c]) / max(1, len(by_cat[c]))
                    for c in cats
                ],
                "score": [s["categories"][c]["score_mean"] for c in cats],
            },
            counts={
                f"page_hit@{k}": [support(f"page_hit@{k}", by_cat[c], k)[0] for c in cats],
                "refusal correct": [len(by_cat[c]) for c in cats],
                "score": [len(by_cat[c]) for c in cats],
            },
            title="Per category",
            y_title="share of cases (score: mean)",
        ),
    }
    lat = [r.latency_ms for r in results if not r.error]
    if lat:
        hi = nice_ticks(0.0, max(lat) * 1.05 or 1.0, 5, cover=True)[-1]  # the axis ends on a round value
        charts["latency.svg"] = histogram_svg(lat, title="Answer latency", lo=0.0, hi=hi, x_title="time to answer (ms)")
    for name in ("groundedness", "completeness", "correctness"):
        vals = [js.score for r in results if (js := r.judge.get(name)) is not None and js.score is not None]
        if vals:
            charts[f"judge_{name}.svg"] = histogram_svg(vals, title=f"Judge {name}", lo=0.0, hi=1.0, bins=5,
                                                        x_title=f"judge {name} score (0–1)")

    threshold = run_threshold(meta)
    curve = refusal_curve(results, threshold) if threshold is not None else []
    if curve and threshold is not None:
        dense = sorted({0.0, 1.0, *curve_thresholds(threshold),
                        *(round(r.confidence, 4) for r in results if r.confidence is not None)})
        charts["refusal_curve.svg"] = refusal_curve_svg(refusal_curve(results, threshold, dense),
                                                        labelled=[p["threshold"] for p in curve])
    curve_header, curve_table = curve_rows(curve)
    # the ten lowest case scores whatever they are: a run where every case scores 1.0 still shows ten
    worst = sorted(results, key=lambda r: (case_score(r, k), r.id))[:10]
    worst_note = ("The ten lowest case scores, lowest first" + (" (every case here scores 1.00)."
                  if worst and case_score(worst[0], k) >= 1.0 else "."))

    meta_rows = [[key, meta.get(key)] for key in ("started_at", "git_commit", "retrieval_mode", "k", "per_doc",
                                                  "set", "set_sha256", "index_checksum", "prompt_version",
                                                  "embedding_model", "answer_model", "judge_model")
                 if key in meta]
    overall_rows = [[key, o[key]] for key in _keys(OVERALL_KEYS, k)]
    cat_header = ["category", *_keys(CATEGORY_KEYS, k)]
    cat_rows = [[c, *[s["categories"][c][key] for key in _keys(CATEGORY_KEYS, k)]] for c in cats]
    curve_note = (f"Answer rate on answerable cases and refusal recall on unanswerable cases if the refusal threshold "
                  f"were moved (this run: {threshold}), from each case's recorded confidence. Exact at and above "
                  "the run's threshold; below it, a case the threshold refused is assumed answered.")
    bucket_rows = [[b, o["buckets"][b]] for b in ("high", "medium", "low")]
    failure_rows = [[label, n] for label, n in o["failures"].items()]

    md: list[str] = [f"# Eval report — {meta.get('set', '?')} ({meta.get('retrieval_mode', '?')})", ""]
    md += _md_table(["run", "value"], meta_rows) + [""]
    md += ["## Overall", ""] + _md_table(["metric", "value"], overall_rows) + [""]
    md += ["## Confidence", "", "Case score ≥ 0.8 high, ≥ 0.5 medium, else low.", ""]
    md += _md_table(["bucket", "cases"], bucket_rows) + [""]
    md += ["## Failures by type", ""] + _md_table(["label", "cases"], failure_rows) + [""]
    md += ["## Per category", ""] + _md_table(cat_header, cat_rows) + [""]
    if curve:
        md += ["## Refusal trade-off", "", curve_note, ""] + _md_table(curve_header, curve_table)
        md += ["", "![refusal_curve.svg](refusal_curve.svg)", ""]
    other_charts = {n: svg for n, svg in charts.items() if n != "refusal_curve.svg"}  # shown with its table
    md += ["## Charts", ""] + [f"![{n}]({n})" for n in other_charts] + [""]
    md += ["## Ten worst cases", "", worst_note, ""]
    for r in worst:
        labels = ", ".join(failure_labels(r, k)) or ("no failure" if case_score(r, k) >= 1.0 else "low score")
        md += [
            f"### {r.id} — score {case_score(r, k):.2f} ({bucket(case_score(r, k))}) — {labels}",
            "",
            f"- **Question:** {r.question}",
            f"- **Answer:** {'(refused) ' if r.refused else ''}{_short(r.error or r.shown_text())}",
            f"- **Expected:** {_expected(r)}",
            f"- **Retrieved (top {k}):** {_pages(r, k)}",
            f"- **Judge:** {_judge_text(r)}",
            "",
        ]

    h: list[str] = [f"<!doctype html><html><head><meta charset='utf-8'><title>Eval report</title>"
                    f"<style>{CSS}</style></head><body>",
                    f"<h1>Eval report — {html.escape(str(meta.get('set', '?')))} "
                    f"({html.escape(str(meta.get('retrieval_mode', '?')))})</h1>",
                    _html_table(["run", "value"], meta_rows),
                    "<h2>Overall</h2>", _html_table(["metric", "value"], overall_rows),
                    "<h2>Confidence</h2><p>Case score ≥ 0.8 high, ≥ 0.5 medium, else low.</p>",
                    _html_table(["bucket", "cases"], bucket_rows),
                    "<h2>Failures by type</h2>", _html_table(["label", "cases"], failure_rows),
                    "<h2>Per category</h2>", _html_table(cat_header, cat_rows),
                    *([f"<h2>Refusal trade-off</h2><p>{html.escape(curve_note)}</p>",
                       _html_table(curve_header, curve_table), charts["refusal_curve.svg"]] if curve else []),
                    "<h2>Charts</h2><div class='charts'>", *other_charts.values(), "</div>",
                    f"<h2>Ten worst cases</h2><p>{html.escape(worst_note)}</p>"]
    for r in worst:
        labels = ", ".join(failure_labels(r, k)) or ("no failure" if case_score(r, k) >= 1.0 else "low score")
        shown = html.escape(_short(r.error or r.shown_text()))
        h.append(
            f"<div class='case'><h3>{html.escape(r.id)} — score {case_score(r, k):.2f} "
            f"({bucket(case_score(r, k))}) — {html.escape(labels)}</h3><dl>"
            f"<dt>Question</dt><dd>{html.escape(r.question)}</dd>"
            f"<dt>Answer</dt><dd>{'(refused) ' if r.refused else ''}{shown}</dd>"
            f"<dt>Expected</dt><dd>{html.escape(_expected(r))}</dd>"
            f"<dt>Retrieved (top {k})</dt><dd>{html.escape(_pages(r, k))}</dd>"
            f"<dt>Judge</dt><dd>{html.escape(_judge_text(r))}</dd></dl></div>"
        )
    h.append("</body></html>")
    return "\n".join(md), "\n".join(h), charts


def write_report(run_dir: Path) -> list[Path]:
    """Write report.md/report.html (and the SVGs the markdown links) into ``run_dir``; returns the reports."""
    subruns = [m for m in MODES_ORDER if (run_dir / m / RESULTS_FILE).exists()]
    if not (run_dir / RESULTS_FILE).exists() and subruns:
        written: list[Path] = []
        runs = {}
        for m in subruns:
            written += write_report(run_dir / m)
            runs[m] = load_run(run_dir / m)
        table = ablation_markdown(runs)
        links = "\n".join(f"- [{m}]({m}/report.md)" for m in subruns)
        charts = ablation_charts(runs)
        for name, svg in charts.items():
            (run_dir / name).write_text(svg, encoding="utf-8")
        images = "\n".join(f"![{n}]({n})" for n in charts)
        md = f"# Eval ablation\n\n{table}\n\n{images}\n\n{links}\n"
        header, rows = ablation_rows(runs)
        page = (f"<!doctype html><html><head><meta charset='utf-8'><title>Eval ablation</title>"
                f"<style>{CSS}</style></head><body>"
                f"<h1>Eval ablation</h1>{_html_table(header, rows)}<div class='charts'>{''.join(charts.values())}"
                "</div><ul>"
                + "".join(f"<li><a href='{m}/report.html'>{m}</a></li>" for m in subruns)
                + "</ul></body></html>")
        (run_dir / "report.md").write_text(md, encoding="utf-8")
        (run_dir / "report.html").write_text(page, encoding="utf-8")
        return [run_dir / "report.md", run_dir / "report.html", *written]
    if not (run_dir / RESULTS_FILE).exists():
        raise RunDirError(f"{run_dir} holds no {RESULTS_FILE}: make one with `citebot eval run --out {run_dir}`")
    meta, results = load_run(run_dir)
    md, page, charts = build_report(meta, results)
    for name, svg in charts.items():
        (run_dir / name).write_text(svg, encoding="utf-8")
    (run_dir / "report.md").write_text(md, encoding="utf-8")
    (run_dir / "report.html").write_text(page, encoding="utf-8")
    summary = summarise(results, int(meta.get("k", 5)))
    threshold = run_threshold(meta)
    summary["refusal_curve"] = refusal_curve(results, threshold) if threshold is not None else []
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return [run_dir / "report.md", run_dir / "report.html"]


# --- ablation and trend ------------------------------------------------------------------------------

ABLATION_CHART_KEYS = ("page_hit@5", "recall@{k}", "mrr", "citation_validity", "cited_gold_page", "refusal_f1",
                       "answer_rate")
TREND_KEYS = ("page_hit@5", "citation_validity", "cited_gold_page", "refusal_f1", "answer_rate", "score_mean")


def ablation_charts(runs: dict[str, tuple[dict[str, Any], list[CaseResult]]]) -> dict[str, str]:
    """The retrieval modes side by side: the quality metrics (one group per metric, one bar per mode, n per bar)
    and the answer time."""
    k = int(next(iter(runs.values()))[0].get("k", 5)) if runs else 5
    metrics = _keys(ABLATION_CHART_KEYS, k)
    sums = {m: summarise(res, int(meta.get("k", k)))["overall"] for m, (meta, res) in runs.items()}
    quality = bar_chart_svg(
        metrics,
        {m: [sums[m].get(key) for key in metrics] for m in runs},
        counts={m: [support(key, res, int(meta.get("k", k)))[0] for key in metrics]
                for m, (meta, res) in runs.items()},
        title="Retrieval modes compared", x_title="metric", y_title="value (higher is better)",
    )
    stats = ("latency_p50_ms", "latency_p95_ms")
    latency = bar_chart_svg(
        ["median (p50)", "slowest 5% (p95)"],
        {m: [sums[m].get(key) for key in stats] for m in runs},
        counts={m: [support(key, res, k)[0] for key in stats] for m, (_meta, res) in runs.items()},
        title="Answer time by retrieval mode", x_title="statistic", y_title="milliseconds",
        vmax=max([v for m in runs for key in stats if (v := sums[m].get(key))] or [1.0]) * 1.1,
        width=420,
    )
    return {"ablation.svg": quality, "ablation_latency.svg": latency}


def _run_label(run_dir: Path, meta: dict[str, Any]) -> str:
    started = str(meta.get("started_at") or "")[:16].replace("T", " ")
    return f"{run_dir.name} {started}".strip()


def _trend_run(run_dir: Path) -> tuple[dict[str, Any], list[CaseResult]]:
    """A run's results; a ``--mode all`` directory stands for its first mode (hybrid when there)."""
    if not (run_dir / RESULTS_FILE).exists():
        for m in MODES_ORDER:
            if (run_dir / m / RESULTS_FILE).exists():
                return load_run(run_dir / m)
    return load_run(run_dir)


def write_trend(run_dirs: Sequence[Path], out_dir: Path) -> list[Path]:
    """``trend.md``/``trend.html`` (and their SVGs) in ``out_dir``: the headline metrics of several runs, oldest
    first (by ``started_at``; in the order given when a run lacks it)."""
    loaded = [(d, *_trend_run(d)) for d in run_dirs]
    if all(meta.get("started_at") for _d, meta, _r in loaded):
        loaded.sort(key=lambda x: str(x[1]["started_at"]))
    labels = [_run_label(d, meta) for d, meta, _r in loaded]
    sums = [summarise(res, int(meta.get("k", 5)))["overall"] for _d, meta, res in loaded]
    quality = line_chart_svg(labels, {key: [s.get(key) for s in sums] for key in TREND_KEYS},
                             title="Headline metrics, run after run", y_title="value (higher is better)", vmax=1.0)
    latency = line_chart_svg(labels, {key: [s.get(key) for s in sums] for key in ("latency_p50_ms", "latency_p95_ms")},
                             title="Answer time, run after run", y_title="milliseconds")
    charts = {"trend.svg": quality, "trend_latency.svg": latency}
    header = ["run", "cases", *TREND_KEYS, "latency_p50_ms"]
    rows = [[label, s["n_cases"], *[s.get(key) for key in TREND_KEYS], s.get("latency_p50_ms")]
            for label, s in zip(labels, sums, strict=True)]
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, svg in charts.items():
        (out_dir / name).write_text(svg, encoding="utf-8")
    md = ["# Eval trend", "", *_md_table(header, rows), "", *[f"![{n}]({n})" for n in charts], ""]
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>Eval trend</title><style>{CSS}</style>"
            f"</head><body><h1>Eval trend</h1>{_html_table(header, rows)}<div class='charts'>"
            + "".join(charts.values()) + "</div></body></html>")
    (out_dir / "trend.md").write_text("\n".join(md), encoding="utf-8")
    (out_dir / "trend.html").write_text(page, encoding="utf-8")
    return [out_dir / "trend.md", out_dir / "trend.html"]
