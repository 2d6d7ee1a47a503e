"""The figures of a run as plain tables: which metrics each view shows, and the markdown the terminal prints
(``citebot eval run``'s summary, the ablation table, the naive-baseline line, the refusal trade-off). The pages of
:mod:`eval.report` show the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eval.metrics import HEADLINE_K, refusal_curve, summarise
from eval.records import HYBRID_MODES, PAGES, RETRIEVAL_ONLY, CaseResult
from eval.templating import fmt

Run = tuple[dict[str, Any], list[CaseResult]]

OVERALL_KEYS = ("doc_hit@{k}", "page_hit@5", "page_hit@{k}", "page_hit_any_span@5", "recall@{k}", "mrr",
                "ndcg@10", "citation_validity", "citation_page_precision", "cited_gold_page", "refusal_precision",
                "refusal_recall", "refusal_f1", "answer_rate", "exact_match", "contains_match", "token_f1",
                "answer_shown", "short_answer_cases", "judge_groundedness", "judge_completeness",
                "judge_correctness", "latency_p50_ms", "latency_p95_ms", "score_mean", "low_score_share")
# the figures a release manager reads first, in the banner's order
HEADLINE_KEYS = ("page_hit@5", "cited_gold_page", "citation_validity", "refusal_f1", "answer_rate", "answer_shown",
                 "score_mean", "low_score_share", "latency_p50_ms")
ABLATION_KEYS = ("doc_hit@{k}", "page_hit@5", "recall@{k}", "mrr", "ndcg@10", "citation_validity",
                 "citation_page_precision", "cited_gold_page", "refusal_f1", "answer_rate", "answer_shown",
                 "token_f1", "latency_p50_ms", "latency_p95_ms")
ABLATION_CHART_KEYS = ("page_hit@5", "recall@{k}", "mrr", "citation_validity", "cited_gold_page", "refusal_f1",
                       "answer_rate")
TREND_KEYS = ("page_hit@5", "citation_validity", "cited_gold_page", "refusal_f1", "answer_rate", "answer_shown",
              "score_mean")


def metric_keys(template: Sequence[str], k: int) -> list[str]:
    """Metric names at this run's k, without repeats (at k=5, page_hit@{k} is page_hit@5)."""
    return list(dict.fromkeys(key.format(k=k) for key in template))


def _md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A Markdown table for the terminal (``eval run``'s summary)."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(fmt(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return out


def ablation_rows(runs: dict[str, Run]) -> tuple[list[str], list[list[Any]]]:
    """One row per retrieval mode. ``answer_ms_mean``: mean time of ``service.answer``; ``wall_ms_per_case``: the
    run's wall time per case (answer + depth-10 ranking + quote recheck + judge), when the run was not resumed."""
    k = 5
    rows: list[list[Any]] = []
    for mode, (meta, results) in runs.items():
        k = int(meta.get("k", 5))
        o = summarise(results, k)["overall"]
        lat = [r.latency_ms for r in results if not r.error]
        ran, wall = meta.get("cases_run_now"), meta.get("wall_seconds_this_invocation")
        rows.append([mode, *[o[key] for key in metric_keys(ABLATION_KEYS, k)], sum(lat) / len(lat) if lat else None,
                     wall * 1000 / ran if ran and wall else None])
    header = ["mode", *metric_keys(ABLATION_KEYS, k), "answer_ms_mean", "wall_ms_per_case"]
    return header, rows


def ablation_markdown(runs: dict[str, Run]) -> str:
    header, rows = ablation_rows(runs)
    line = vs_naive(runs)
    return "\n".join([*_md_table(header, rows), *(["", line] if line else [])])


def vs_naive(runs: dict[str, Run]) -> str:
    """How far each hybrid mode's page-hit@5 is above the naive page baseline's (``--mode pages``) in the same
    run: the floor the issue asks every run to show; "" without a pages run or a hybrid one."""
    if PAGES not in runs:
        return ""
    key = f"page_hit@{HEADLINE_K}"

    def hit(mode: str) -> float | None:
        meta, results = runs[mode]
        value = summarise(results, int(meta.get("k", 5)))["overall"][key]
        return float(value) if value is not None else None

    naive = hit(PAGES)
    parts = []
    for mode in runs:
        ours = hit(mode) if mode in HYBRID_MODES else None
        if ours is not None and naive is not None:
            parts.append(f"{mode} {ours - naive:+.3f} ({ours:.3f} vs {naive:.3f})")
    return f"vs naive ({key}, our hybrid minus the one-vector-per-page baseline): {'; '.join(parts)}" if parts else ""


def run_threshold(meta: dict[str, Any]) -> float | None:
    """The refusal threshold the run answered with (from its recorded settings)."""
    value = (meta.get("settings") or {}).get("refusal_threshold")
    return float(value) if isinstance(value, int | float) else None


def category_rows(results: Sequence[CaseResult]) -> tuple[list[str], list[list[Any]]]:
    """Per category, what a user notices: how often an answerable question is answered, whether a page holding
    the answer is among the first five passages (chunks spanning at most two pages), whether an answer cites
    such a page, for unanswerable questions how often the bot refuses, and how often a short expected answer is
    on the screen (``answer_shown``) with the number of short-answer cases it rests on."""
    groups: dict[str, list[CaseResult]] = {}
    for r in results:
        groups.setdefault(r.category, []).append(r)
    header = ["category", "cases", "answer_rate", f"page_hit@{HEADLINE_K}", "cited_gold_page", "refused_unanswerable",
              "answer_shown", "short_answers"]
    rows: list[list[Any]] = []
    for name, rs in sorted(groups.items()):
        o = summarise(rs)["overall"]
        unanswerable = [r for r in rs if not r.answerable]
        refused = (sum(1 for r in unanswerable if r.refused or r.error) / len(unanswerable)) if unanswerable else None
        if all(r.answer_mode == RETRIEVAL_ONLY for r in rs):
            refused = None
        rows.append([name, len(rs), o["answer_rate"], o[f"page_hit@{HEADLINE_K}"], o["cited_gold_page"], refused,
                     o["answer_shown"], o["short_answer_cases"]])
    return header, rows


def curve_rows(points: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    header = ["threshold", "answer_rate", "refusal_recall", "refusal_precision", "refusal_f1", ""]
    rows = [[f"{p['threshold']:.3f}", p["answer_rate"], p["refusal_recall"], p["refusal_precision"], p["refusal_f1"],
             "◀ current" if p["current"] else ""] for p in points]
    return header, rows


def run_summary_markdown(runs: dict[str, Run]) -> str:
    """What ``eval run`` prints: the ablation table, then per mode the by-category table and the refusal
    trade-off at round thresholds around the run's own."""
    out = [ablation_markdown(runs)]
    for mode, (meta, results) in runs.items():
        header, rows = category_rows(results)
        out += ["", f"By category ({mode}):", *_md_table(header, rows)]
        threshold = run_threshold(meta)
        answers = any(r.answer_mode != RETRIEVAL_ONLY for r in results)
        points = refusal_curve(results, threshold) if threshold is not None and answers else []
        if points:
            header, rows = curve_rows(points)
            out += ["", f"Refusal trade-off ({mode}; the run used {threshold:.3f}):", *_md_table(header, rows)]
    return "\n".join(out)
