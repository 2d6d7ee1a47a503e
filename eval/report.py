"""``citebot eval report RUN [--against BASE]`` → ``report.html`` and ``report.md``: the verdict first.

The page opens with a pass/fail banner: every gate of ``eval/gates.toml`` (or ``--gates``) with its figure,
and, given a baseline run, the headline deltas and the cases that regressed. Then the headline metrics, the
charts (:mod:`eval.charts`), the per-category table, the refusal trade-off, and every failing case (a failure
label, or a case score below :data:`eval.metrics.LOW_SCORE`) with an anchor, its full answer and quotes, the
retrieved pages with the gold ones marked, and the judge's reasons when the run was judged. Pages are Jinja2
templates (``eval/templates/``), so everything a run holds is escaped.

For a ``--mode all`` run directory, each mode gets its own report and the top-level page carries the ablation
table and charts. Given several runs, :func:`write_trend` adds ``trend.md``/``trend.html``: the headline metrics
run after run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval import charts
from eval.compare import Comparison, Gates, compare, judged_scope, load_gates, support
from eval.metrics import (
    HEADLINE_K,
    JUDGE_CRITERIA,
    LOW_SCORE,
    MAX_SPAN,
    bucket,
    case_metrics,
    case_score,
    curve_thresholds,
    failure_labels,
    higher_is_better,
    is_relevant,
    refusal_curve,
    summarise,
)
from eval.records import MODES, PAGES, RESULTS_FILE, CaseResult, RunDirError, load_run
from eval.report_tables import (
    ABLATION_CHART_KEYS,
    HEADLINE_KEYS,
    OVERALL_KEYS,
    TREND_KEYS,
    Run,
    ablation_rows,
    category_rows,
    curve_rows,
    metric_keys,
    run_threshold,
    vs_naive,
)
from eval.templating import render

# --- one run: what the page shows ---------------------------------------------------------------------


@dataclass
class QuoteView:
    n: int
    where: str
    quote: str
    verbatim: bool | None
    gold: bool


@dataclass
class HitView:
    rank: int
    where: str
    score: float
    gold: bool


@dataclass
class CaseView:
    """One failing case as the report shows it."""

    id: str
    category: str
    critical: bool
    score: float
    bucket: str
    labels: list[str]
    question: str
    answer: str
    refused: bool
    error: str | None
    quotes: list[QuoteView]
    expected: str
    hits: list[HitView]
    judge: list[tuple[str, float | None, str]]
    base_score: float | None = None
    regressed: bool = False


@dataclass
class Headline:
    metric: str
    value: float | None
    base: float | None
    delta: float | None
    better: bool | None  # the change is good news (None: no change, or no direction)
    basis: str = ""


@dataclass
class Verdict:
    passed: bool | None  # None: no gates were checked
    gates: list[dict[str, Any]]
    against: str  # the baseline's name, "" without one
    regressed: list[tuple[str, str]] = field(default_factory=list)  # (case id, why)
    notes: list[str] = field(default_factory=list)
    judged: str = ""  # what the answers were judged by, and what not (eval.compare.judged_scope)


def _where(file: str, start: int, end: int) -> str:
    return f"{file} p.{start}" + (f"–{end}" if end != start else "")


def _expected(r: CaseResult) -> str:
    if not r.answerable:
        return "unanswerable: the bot should say the PDFs don't answer it"
    src = "; ".join(f"{s.doc} p.{','.join(map(str, s.pages)) or 'any'}" for s in r.sources)
    return f"{r.expected_answer or '(no expected text)'} — {src or 'no sources'}"


def case_labels(r: CaseResult, k: int) -> list[str]:
    """The failure labels, or "low score" for a case below LOW_SCORE with none of them."""
    labels = failure_labels(r, k)
    if not labels and case_score(r, k) < LOW_SCORE:
        labels = ["low score"]
    return labels


def case_view(r: CaseResult, k: int, base: CaseResult | None = None, regressed: bool = False) -> CaseView:
    sources = r.sources if r.answerable else []
    score = case_score(r, k)
    return CaseView(
        id=r.id, category=r.category, critical=r.critical, score=score, bucket=bucket(score),
        labels=case_labels(r, k), question=r.question, answer=r.answer, refused=r.refused, error=r.error,
        quotes=[QuoteView(c.n, _where(c.file, c.page_start, c.page_end), c.quote, c.verbatim,
                          bool(sources) and is_relevant(c, sources, MAX_SPAN)) for c in r.citations],
        expected=_expected(r),
        hits=[HitView(i + 1, _where(h.file, h.page_start, h.page_end), h.score,
                      bool(sources) and is_relevant(h, sources, MAX_SPAN)) for i, h in enumerate(r.hits[:k])],
        judge=[(name, js.score, js.explanation) for name in JUDGE_CRITERIA if (js := r.judge.get(name)) is not None],
        base_score=case_score(base, k) if base is not None else None,
        regressed=regressed,
    )


def verdict(c: Comparison | None, against: str, judged: str = "") -> Verdict:
    if c is None:
        return Verdict(None, [], against, judged=judged)
    gates = [{"status": "SKIP" if g.passed is None else "PASS" if g.passed else "FAIL", "gate": g.gate,
              "detail": g.detail} for g in c.gates]
    regressed = [(r.id, ", ".join(r.new_labels) or f"score {r.base_score:.2f} → {r.new_score:.2f}")
                 for r in c.regressions]
    return Verdict(c.passed if c.gates else None, gates, against, regressed, list(c.notes), c.judged)


def headlines(new: dict[str, Any], base: dict[str, Any] | None, results: list[CaseResult], k: int) -> list[Headline]:
    out: list[Headline] = []
    for key in HEADLINE_KEYS:
        value = new.get(key)
        b = base.get(key) if base is not None else None
        delta = value - b if value is not None and b is not None else None
        direction = higher_is_better(key)
        better = None if delta is None or abs(delta) < 1e-9 or direction is None else (delta > 0) == direction
        n, unit = support(key, results, k) if key != "low_score_share" else (len(results), "cases")
        out.append(Headline(key, value, b, delta, better, f"{n} {unit}"))
    return out


def report_charts(meta: dict[str, Any], results: list[CaseResult], k: int,
                  base: Run | None = None) -> dict[str, str]:
    """The charts of one run's report, by the file name the Markdown report links."""
    s = summarise(results, k)
    cats = list(s["categories"])
    by_cat = {c: [r for r in results if r.category == c] for c in cats}
    scores = [case_score(r, k) for r in results]
    out = {
        "scores.svg": charts.histogram(scores, title="Case score distribution", lo=0.0, hi=1.0,
                                       x_title="case score (0 = failed, 1 = everything right)",
                                       mark=LOW_SCORE, mark_label=f"low-score line ({LOW_SCORE:g})"),
        "categories.svg": charts.grouped_bars(
            cats,
            {
                f"page_hit@{HEADLINE_K}": [s["categories"][c][f"page_hit@{HEADLINE_K}"] for c in cats],
                "refusal correct": [
                    sum(case_metrics(r, k)["refusal_correct"] or 0.0 for r in by_cat[c]) / max(1, len(by_cat[c]))
                    for c in cats
                ],
                "mean case score": [s["categories"][c]["score_mean"] for c in cats],
            },
            counts={
                f"page_hit@{HEADLINE_K}": [support(f"page_hit@{HEADLINE_K}", by_cat[c], k)[0] for c in cats],
                "refusal correct": [len(by_cat[c]) for c in cats],
                "mean case score": [len(by_cat[c]) for c in cats],
            },
            title="Per category", x_title="category", y_title="share of cases (score: mean)", ymax=1.0,
        ),
    }
    lat = [r.latency_ms for r in results if not r.error]
    if lat:
        out["latency.svg"] = charts.histogram(lat, title="Answer latency", lo=0.0, hi=max(lat) * 1.05 or 1.0,
                                              x_title="time to answer (ms)")
    out["categories.svg"] = out.pop("categories.svg")
    threshold = run_threshold(meta)
    rounded = refusal_curve(results, threshold) if threshold is not None else []
    if threshold is not None and rounded:
        dense = sorted({0.0, 1.0, *curve_thresholds(threshold),
                        *(round(r.confidence, 4) for r in results if r.confidence is not None)})
        out["refusal_curve.svg"] = charts.tradeoff_curve(refusal_curve(results, threshold, dense),
                                                         labelled=[p["threshold"] for p in rounded])
    judged = {name: [js.score for r in results if (js := r.judge.get(name)) is not None and js.score is not None]
              for name in JUDGE_CRITERIA}
    if any(judged.values()):
        edges = [i / 5 for i in range(6)]
        bins = [f"{a:.1f}–{b:.1f}" for a, b in zip(edges, edges[1:], strict=False)]
        out["judge.svg"] = charts.grouped_bars(
            bins, {name: [float(sum(1 for v in vals if a <= v < b or (b == 1.0 and v == 1.0)))
                          for a, b in zip(edges, edges[1:], strict=False)] for name, vals in judged.items() if vals},
            title="Judge scores", x_title="judge score (0–1)", y_title="cases", value_labels=True,
        )
    if base is not None:
        b_sum = summarise(base[1], int(base[0].get("k", k)))["overall"]
        keys = [key for key in HEADLINE_KEYS if not key.startswith("latency")]
        out["against.svg"] = charts.grouped_bars(
            keys, {"baseline": [b_sum.get(key) for key in keys], "this run": [s["overall"].get(key) for key in keys]},
            title="This run against the baseline", x_title="metric", y_title="value", ymax=1.0, value_labels=True,
        )
    return out


def build_report(meta: dict[str, Any], results: list[CaseResult], *, base: Run | None = None,
                 gates: Gates | None = None, against: str = "") -> tuple[str, str, dict[str, str]]:
    """(markdown, html, {svg file name: svg}) for one run; ``base`` and ``gates`` make the verdict."""
    k = int(meta.get("k", 5))
    s = summarise(results, k)
    o = s["overall"]
    comparison = compare(base, (meta, results), gates) if (gates is not None or base is not None) else None
    base_sum = comparison.base if comparison is not None else None
    base_cases = {r.id: r for r in base[1]} if base is not None else {}
    regressed = {r.id for r in comparison.regressions} if comparison is not None else set()
    failing = sorted((r for r in results if case_labels(r, k) or r.id in regressed),
                     key=lambda r: (r.id not in regressed, case_score(r, k), r.id))
    cases = [case_view(r, k, base_cases.get(r.id), r.id in regressed) for r in failing]
    threshold = run_threshold(meta)
    curve = refusal_curve(results, threshold) if threshold is not None else []
    charts_ = report_charts(meta, results, k, base)
    cat_header, cat_rows = category_rows(results)
    cat_header.append("score_mean")
    for row in cat_rows:
        row.append(s["categories"][row[0]]["score_mean"])
    deltas = comparison.deltas if comparison is not None else {}
    overall = [(key, o.get(key), (deltas.get(key) or {}).get("base"), (deltas.get(key) or {}).get("delta"))
               for key in metric_keys(OVERALL_KEYS, k)]
    context = {
        "title": f"Eval report — {meta.get('set', '?')} ({meta.get('retrieval_mode', '?')})",
        "verdict": verdict(comparison, against, judged_scope(results)),
        "headlines": headlines(o, base_sum, results, k),
        "n_cases": len(results),
        "n_failing": len(cases),
        "low_score": LOW_SCORE,
        "cases": cases,
        "charts": charts_,
        "overall": overall,
        "has_base": base is not None,
        "buckets": o["buckets"],
        "failures": o["failures"],
        "category_header": cat_header,
        "category_rows": cat_rows,
        "curve": curve_rows(curve) if curve else None,
        "threshold": threshold,
        "k": k,
        "meta": [(key, meta.get(key)) for key in ("started_at", "git_commit", "retrieval_mode", "k", "per_doc", "set",
                                                  "set_sha256", "index_checksum", "prompt_version", "embedding_model",
                                                  "answer_model", "judge_model") if key in meta],
    }
    return render("report.md.j2", **context), render("report.html.j2", **context), charts_


def write_report(run_dir: Path, *, against: Path | None = None, gates_path: Path | None = None,
                 use_gates: bool = True) -> list[Path]:
    """Write report.md/report.html (and the SVGs the Markdown links) into ``run_dir``; returns the reports.

    The verdict uses ``gates_path`` (default: the shipped ``eval/gates.toml``) unless ``use_gates`` is False, and
    ``against`` as the baseline run (drop and critical gates, deltas, regressed cases)."""
    subruns = [m for m in MODES if (run_dir / m / RESULTS_FILE).exists()]
    if not (run_dir / RESULTS_FILE).exists() and subruns:
        written: list[Path] = []
        runs = {}
        for m in subruns:
            if m != PAGES:  # the naive baseline answers nothing: no verdict of its own, a row in the table
                written += write_report(run_dir / m, against=against, gates_path=gates_path, use_gates=use_gates)
            runs[m] = load_run(run_dir / m)
        return write_ablation(run_dir, runs) + written
    if not (run_dir / RESULTS_FILE).exists():
        raise RunDirError(f"{run_dir} holds no {RESULTS_FILE}: make one with `citebot eval run --out {run_dir}`")
    from eval.compare import find_gates

    meta, results = load_run(run_dir)
    base = load_run(against) if against is not None else None
    gates = load_gates(find_gates(gates_path)) if use_gates else None
    md, page, charts_ = build_report(meta, results, base=base, gates=gates,
                                     against=against.name if against is not None else "")
    for old in run_dir.glob("*.svg"):  # a chart this run no longer has (no judge now, say) must not linger
        if old.name not in charts_:
            old.unlink()
    for name, svg in charts_.items():
        (run_dir / name).write_text(svg, encoding="utf-8")
    (run_dir / "report.md").write_text(md, encoding="utf-8")
    (run_dir / "report.html").write_text(page, encoding="utf-8")
    summary = summarise(results, int(meta.get("k", 5)))
    threshold = run_threshold(meta)
    summary["refusal_curve"] = refusal_curve(results, threshold) if threshold is not None else []
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return [run_dir / "report.md", run_dir / "report.html"]


# --- ablation and trend ------------------------------------------------------------------------------


def ablation_charts(runs: dict[str, Run]) -> dict[str, str]:
    """The retrieval modes side by side: the quality metrics (one group per metric, one bar per mode, n per bar)
    and the answer time."""
    k = int(next(iter(runs.values()))[0].get("k", 5)) if runs else 5
    metrics = metric_keys(ABLATION_CHART_KEYS, k)
    sums = {m: summarise(res, int(meta.get("k", k)))["overall"] for m, (meta, res) in runs.items()}
    quality = charts.grouped_bars(
        metrics, {m: [sums[m].get(key) for key in metrics] for m in runs},
        counts={m: [support(key, res, int(meta.get("k", k)))[0] for key in metrics] for m, (meta, res) in runs.items()},
        title="Retrieval modes compared", x_title="metric", y_title="value (higher is better)", ymax=1.0,
    )
    stats = ("latency_p50_ms", "latency_p95_ms")
    latency = charts.grouped_bars(
        ["median (p50)", "slowest 5% (p95)"], {m: [sums[m].get(key) for key in stats] for m in runs},
        counts={m: [support(key, res, k)[0] for key in stats] for m, (_meta, res) in runs.items()},
        title="Answer time by retrieval mode", x_title="statistic", y_title="milliseconds",
    )
    return {"ablation.svg": quality, "ablation_latency.svg": latency}


def write_ablation(run_dir: Path, runs: dict[str, Run]) -> list[Path]:
    header, rows = ablation_rows(runs)
    charts_ = ablation_charts(runs)
    for name, svg in charts_.items():
        (run_dir / name).write_text(svg, encoding="utf-8")
    context = {"title": "Eval ablation", "header": header, "rows": rows, "charts": charts_,
               "modes": [m for m in runs if m != PAGES], "vs_naive": vs_naive(runs)}
    (run_dir / "report.md").write_text(render("ablation.md.j2", **context), encoding="utf-8")
    (run_dir / "report.html").write_text(render("ablation.html.j2", **context), encoding="utf-8")
    return [run_dir / "report.md", run_dir / "report.html"]


def _run_label(run_dir: Path, meta: dict[str, Any]) -> str:
    started = str(meta.get("started_at") or "")[:16].replace("T", " ")
    return f"{run_dir.name} {started}".strip()


def _trend_run(run_dir: Path) -> Run:
    """A run's results; a ``--mode all`` directory stands for its first mode (hybrid when there)."""
    if not (run_dir / RESULTS_FILE).exists():
        for m in MODES:
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
    charts_ = {
        "trend.svg": charts.line_chart(labels, {key: [s.get(key) for s in sums] for key in TREND_KEYS},
                                       title="Headline metrics, run after run", x_title="run",
                                       y_title="value (higher is better)", ymax=1.0),
        "trend_latency.svg": charts.line_chart(
            labels, {key: [s.get(key) for s in sums] for key in ("latency_p50_ms", "latency_p95_ms")},
            title="Answer time, run after run", x_title="run", y_title="milliseconds"),
    }
    header = ["run", "cases", *TREND_KEYS, "latency_p50_ms"]
    rows = [[label, s["n_cases"], *[s.get(key) for key in TREND_KEYS], s.get("latency_p50_ms")]
            for label, s in zip(labels, sums, strict=True)]
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, svg in charts_.items():
        (out_dir / name).write_text(svg, encoding="utf-8")
    context = {"title": "Eval trend", "header": header, "rows": rows, "charts": charts_}
    (out_dir / "trend.md").write_text(render("trend.md.j2", **context), encoding="utf-8")
    (out_dir / "trend.html").write_text(render("trend.html.j2", **context), encoding="utf-8")
    return [out_dir / "trend.md", out_dir / "trend.html"]
