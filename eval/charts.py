"""The charts of the HTML reports (``eval report``, ``citebot quality``), drawn by matplotlib as inline SVG.

Every chart has a title, both axis titles and a legend whenever it shows more than one series; bars say
how many cases they rest on (``n=…``) where that matters. Axes fit the data they show (a curve that moves
between 0.8 and 1.0 is not drawn in a tenth of a 0–1 frame). Text stays text in the SVG (searchable,
small, testable), and the output is deterministic: the same data gives the same bytes.

matplotlib's object API (``Figure``) is used without pyplot: no global state, no GUI backend, safe in
threads and on a machine without a display.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from typing import Any

from matplotlib import rc_context
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

PALETTE = ("#3b6ea5", "#e07b39", "#5a9e6f", "#b04a5a", "#7d6bb3", "#8c8c8c")
WIDTH_IN, HEIGHT_IN, WIDE_IN = 6.4, 3.4, 11.0
_RC: dict[str, Any] = {
    "svg.fonttype": "none",  # text as <text>, not glyph paths
    "font.family": "sans-serif",
    "font.size": 9,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e3e3e3",
    "axes.axisbelow": True,
    "legend.frameon": False,
    "text.parse_math": False,  # file names and headings are users' text: `$...$` in them is not TeX math
}


def _figure(width: float = WIDTH_IN, height: float = HEIGHT_IN) -> tuple[Figure, Any]:
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.subplots()


def _svg(fig: Figure, title: str) -> str:
    """The figure as an ``<svg>`` element for inline HTML (no XML prologue, no metadata), labelled ``title``."""
    out = io.StringIO()
    with rc_context({**_RC, "svg.hashsalt": title}):  # type: ignore[dict-item]  # ids unique per chart, stable
        fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    svg = out.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, count=1, flags=re.S)
    return svg.replace("<svg ", f'<svg role="img" aria-label="{_attr(title)}" ', 1)


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def _finish(ax: Any, *, title: str, x_title: str, y_title: str, legend: bool) -> None:
    ax.figure.suptitle(title, fontsize=11, fontweight="bold")  # over the whole figure: never clipped by long ticks
    ax.set_xlabel(x_title)
    ax.set_ylabel(y_title)
    if legend:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)


def _draw(fn: Any) -> Any:
    """Build the chart inside the report's style (rcParams apply while artists are made)."""
    def wrapper(*args: Any, **kwargs: Any) -> str:
        with rc_context(_RC):  # type: ignore[arg-type]
            return str(fn(*args, **kwargs))

    wrapper.__doc__ = fn.__doc__
    wrapper.__name__ = fn.__name__
    return wrapper


@_draw
def histogram(values: Sequence[float], *, title: str, x_title: str, lo: float, hi: float, bins: int = 10,
              y_title: str = "cases", mark: float | None = None, mark_label: str = "") -> str:
    """Counts of ``values`` in ``bins`` equal bins over ``lo..hi`` (values outside are clipped into the end bins),
    each bar labelled with its count; ``mark`` draws a dashed vertical line with ``mark_label`` in the legend."""
    fig, ax = _figure()
    clipped = [min(max(v, lo), hi) for v in values]
    counts, edges, bars = ax.hist(clipped, bins=bins, range=(lo, hi), color=PALETTE[0], edgecolor="white")
    ax.bar_label(bars, labels=[f"{int(c)}" if c else "" for c in counts], fontsize=8, padding=2)
    ax.set_xlim(lo, hi)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, max(1.0, float(max(counts, default=0))) * 1.15)
    if mark is not None:
        ax.axvline(mark, color=PALETTE[3], linestyle="--", linewidth=1.2, label=mark_label)
    _finish(ax, title=title, x_title=x_title, y_title=y_title, legend=mark is not None)
    return _svg(fig, title)


@_draw
def grouped_bars(groups: Sequence[str], series: dict[str, Sequence[float | None]], *, title: str, x_title: str,
                 y_title: str, counts: dict[str, Sequence[int | None]] | None = None, ymax: float | None = None,
                 value_labels: bool = False) -> str:
    """One group of bars per label of ``groups``, one bar per series (None: no bar). ``counts[series][i]`` is how
    many cases bar ``i`` rests on, written above it as ``n=…``; ``value_labels`` writes the value instead."""
    wide = len(groups) * max(1, len(series)) > 12
    fig, ax = _figure(width=WIDE_IN if wide else WIDTH_IN, height=HEIGHT_IN + (0.4 if wide else 0.0))
    n = max(1, len(series))
    bar_w = 0.8 / n
    top = 0.0
    for si, (name, values) in enumerate(series.items()):
        xs = [gi + (si - (n - 1) / 2) * bar_w for gi, v in enumerate(values) if v is not None]
        ys = [float(v) for v in values if v is not None]
        top = max([top, *ys])
        bars = ax.bar(xs, ys, width=bar_w * 0.95, color=PALETTE[si % len(PALETTE)], label=name)
        if value_labels:
            ax.bar_label(bars, labels=[_short_number(y) for y in ys], fontsize=7, padding=2, color="#444")
    limit = ymax if ymax is not None else (top * 1.15 or 1.0)
    if counts is not None:
        _count_labels(ax, groups, series, counts, bar_w, limit)
    ax.set_xticks(range(len(groups)), [_wrap(g, 14) for g in groups])
    ax.set_ylim(0, limit * 1.12)
    ax.grid(axis="x", visible=False)
    _finish(ax, title=title, x_title=x_title, y_title=y_title, legend=len(series) > 1)
    return _svg(fig, title)


def _count_labels(ax: Any, groups: Sequence[str], series: dict[str, Sequence[float | None]],
                  counts: dict[str, Sequence[int | None]], bar_w: float, limit: float) -> None:
    """``n=…`` above each bar; once above the group when all its bars rest on the same number of cases."""
    n = max(1, len(series))
    for gi in range(len(groups)):
        bars = [(si, float(values[gi]), counts.get(name, [None] * len(groups))[gi])  # type: ignore[arg-type]
                for si, (name, values) in enumerate(series.items()) if values[gi] is not None]
        ns = {c for _si, _v, c in bars if c is not None}
        if not bars or not ns:
            continue
        if len(ns) == 1:
            top = max(v for _si, v, _c in bars)
            ax.text(gi, top + limit * 0.02, f"n={ns.pop()}", ha="center", va="bottom", fontsize=7, color="#444")
            continue
        for si, v, c in bars:
            if c is not None:
                ax.text(gi + (si - (n - 1) / 2) * bar_w, v + limit * 0.02, f"n={c}", ha="center", va="bottom",
                        fontsize=7, color="#444", rotation=90)


@_draw
def horizontal_bars(labels: Sequence[str], values: Sequence[float], *, title: str, x_title: str, y_title: str,
                    note: Sequence[str] | None = None) -> str:
    """One horizontal bar per label, the largest first (top), its value (or ``note``) at its end."""
    height = max(2.2, 0.9 + 0.32 * len(labels))
    fig, ax = _figure(height=min(height, 9.0))
    ys = list(range(len(labels)))[::-1]
    bars = ax.barh(ys, list(values), color=PALETTE[0])
    ax.bar_label(bars, labels=list(note) if note is not None else [_short_number(v) for v in values], fontsize=8,
                 padding=3)
    ax.set_yticks(ys, [_wrap(label, 40) for label in labels])
    ax.set_xlim(0, (max(values, default=0) or 1) * 1.2)
    ax.xaxis.set_major_locator(MaxNLocator(integer=all(float(v).is_integer() for v in values)))
    ax.grid(axis="y", visible=False)
    _finish(ax, title=title, x_title=x_title, y_title=y_title, legend=False)
    return _svg(fig, title)


@_draw
def line_chart(x_labels: Sequence[str], series: dict[str, Sequence[float | None]], *, title: str, x_title: str,
               y_title: str, percent: bool = False, ymin: float | None = None, ymax: float | None = None,
               limits: dict[str, float] | None = None) -> str:
    """One line per series over ``x_labels`` (in order), a dot at every point; ``limits`` draws each named
    threshold as a dashed line (in the legend). The y axis fits the data (and the limits) unless given."""
    fig, ax = _figure()
    xs = list(range(len(x_labels)))
    seen: list[float] = []
    for si, (name, values) in enumerate(series.items()):
        pts = [(x, float(v)) for x, v in zip(xs, values, strict=True) if v is not None]
        if not pts:
            continue
        seen += [y for _x, y in pts]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=4, linewidth=1.8,
                color=PALETTE[si % len(PALETTE)], label=name)
    for li, (name, y) in enumerate((limits or {}).items()):
        seen.append(y)
        ax.axhline(y, linestyle="--", linewidth=1.0, color=PALETTE[li % len(PALETTE)], label=name)  # as its series
    lo, hi = _fit(seen, floor=0.0 if ymin is None else ymin, ceiling=ymax)
    ax.set_ylim(lo, hi)
    ax.set_xticks(xs, [_wrap(x, 12) for x in x_labels])
    if len(xs) == 1:
        ax.set_xlim(-0.5, 0.5)
    if percent:
        ax.yaxis.set_major_formatter(lambda v, _pos: f"{v * 100:.0f}%")
    _finish(ax, title=title, x_title=x_title, y_title=y_title, legend=len(series) + len(limits or {}) > 1)
    return _svg(fig, title)


@_draw
def tradeoff_curve(points: Sequence[dict[str, Any]], *, labelled: Sequence[float] = (),
                   title: str = "Refusal trade-off as the threshold moves") -> str:
    """Answer rate on answerable cases (y) against refusal recall on unanswerable cases (x), one point per
    threshold (``points`` from :func:`eval.metrics.refusal_curve`, any order); thresholds in ``labelled`` get a dot
    and their value, the run's own threshold (``current``) a red dot. The axes fit the curve."""
    pts = sorted((p for p in points if p["answer_rate"] is not None and p["refusal_recall"] is not None),
                 key=lambda p: p["threshold"])
    fig, ax = _figure(width=5.6, height=4.2)
    xs = [float(p["refusal_recall"]) for p in pts]
    ys = [float(p["answer_rate"]) for p in pts]
    ax.plot(xs, ys, color=PALETTE[0], linewidth=1.8, label="every threshold")
    marks = {round(t, 4) for t in labelled}
    shown = [p for p in pts if round(p["threshold"], 4) in marks and not p["current"]]
    ax.scatter([p["refusal_recall"] for p in shown], [p["answer_rate"] for p in shown], s=14, color=PALETTE[0],
               zorder=3, label="round thresholds")
    placed: list[tuple[float, float]] = []
    current = [p for p in pts if p["current"]]
    xlo, xhi = _fit(xs, floor=0.0, ceiling=1.0)
    ylo, yhi = _fit(ys, floor=0.0, ceiling=1.0)
    for p in current:
        x, y = float(p["refusal_recall"]), float(p["answer_rate"])
        ax.scatter([x], [y], s=40, color=PALETTE[3], zorder=4, label=f"current {p['threshold']:.3f}")
        near_top, near_right = y > yhi - (yhi - ylo) * 0.12, x > xhi - (xhi - xlo) * 0.3
        ax.annotate(f"current {p['threshold']:.3f}", (x, y), textcoords="offset points",
                    xytext=(-8 if near_right else 6, -14 if near_top else 6), ha="right" if near_right else "left",
                    color=PALETTE[3], fontweight="bold", fontsize=8)
        placed.append((x, y))
    for p in shown:
        x, y = float(p["refusal_recall"]), float(p["answer_rate"])
        if any(abs(x - px) < (xhi - xlo) * 0.06 and abs(y - py) < (yhi - ylo) * 0.05 for px, py in placed):
            continue
        placed.append((x, y))
        ax.annotate(f"{p['threshold']:.2f}", (x, y), textcoords="offset points", xytext=(4, -10), fontsize=7,
                    color="#555")
    ax.set_xlim(xlo, xhi)
    ax.set_ylim(ylo, yhi)
    _finish(ax, title=title, x_title="Refusal recall on unanswerable cases", y_title="Answer rate on answerable cases",
            legend=True)
    return _svg(fig, title)


def _fit(values: Sequence[float], *, floor: float | None = 0.0, ceiling: float | None = None) -> tuple[float, float]:
    """Axis limits around ``values`` with a margin, on a 0.05 (or, above 5, a round) grid, within floor..ceiling."""
    if not values:
        return (floor or 0.0, ceiling if ceiling is not None else 1.0)
    lo, hi = min(values), max(values)
    span = (hi - lo) or max(abs(hi) * 0.2, 0.1)
    step = 0.05 if hi <= 5 else 10 ** math.floor(math.log10(max(hi, 1)))
    lo = math.floor((lo - span * 0.12) / step) * step
    hi = math.ceil((hi + span * 0.12) / step) * step
    if floor is not None:
        lo = max(lo, floor)
    if ceiling is not None:
        hi = min(hi, ceiling + (0.02 if ceiling == 1.0 else 0))
    return lo, hi


def _wrap(label: str, width: int) -> str:
    """A tick label in at most two lines (breaking at spaces, or after ``_``/``-`` in long names)."""
    if len(label) <= width:
        return label
    cut = max(label.rfind(c, 0, width + 1) for c in " _-/")
    if cut <= 0:
        cut = width - 1
    first, rest = label[: cut + 1].rstrip(), label[cut + 1 :].lstrip()
    return f"{first}\n{rest if len(rest) <= width else rest[: width - 1] + '…'}"


def _short_number(v: float) -> str:
    if float(v).is_integer():
        return f"{int(v)}"
    return f"{v:.2f}" if abs(v) < 10 else f"{v:.0f}"
