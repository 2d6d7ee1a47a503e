"""Layered eval metrics: retrieval, citations, refusals, answer text, judge scores, latency.

Pure functions over :class:`eval.records.CaseResult`; nothing here touches a store, model or file.

Relevance: a retrieved chunk is *relevant* when its file is an expected document and its page range
``page_start..page_end`` overlaps that document's expected pages (a source listing no pages makes any
chunk of that document relevant). The headline page-hit (``page_hit@5``) and ``cited_gold_page`` also
ignore chunks spanning more than :data:`MAX_SPAN` pages: a chunk covering a whole chapter would "hit"
almost any page without pointing the user anywhere. Every per-case metric is ``None`` where it does not apply (e.g.
page-hit on an unanswerable case); run and category figures are means over the cases where it applies,
except citation validity and citation-page precision, which are shares over all quotes shown.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from eval.cases import Source
from eval.records import RETRIEVAL_ONLY, CaseResult, CitedQuote, Hit

JUDGE_CRITERIA = ("groundedness", "completeness", "correctness")
HIGH, MEDIUM = 0.8, 0.5
# A case scoring below this is a "low score" case: the gates cap their share (``[low_score]`` in gates.toml).
LOW_SCORE = 0.6
# Chunks spanning more pages than this never count as a page hit or a citation on a gold page.
MAX_SPAN = 2
# The headline page-hit depth, reported whatever --k the answers used.
HEADLINE_K = 5

# --- relevance -------------------------------------------------------------------------------------


def _fold(name: str) -> str:
    return name.strip().casefold()


def _expected(sources: Sequence[Source]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for s in sources:
        out.setdefault(_fold(s.doc), set()).update(s.pages)
    return out


def _pages_of(file: str, page_start: int, page_end: int, expected: dict[str, set[int]]) -> set[int] | None:
    """Expected pages this chunk covers; None when the chunk is not from an expected document."""
    pages = expected.get(_fold(file))
    if pages is None:
        return None
    covered = set(range(page_start, max(page_start, page_end) + 1))
    return covered & pages if pages else covered


def span(hit: Hit | CitedQuote) -> int:
    """How many pages a chunk covers."""
    return max(hit.page_start, hit.page_end) - hit.page_start + 1


def is_relevant(hit: Hit | CitedQuote, sources: Sequence[Source], max_span: int | None = None) -> bool:
    """From an expected document and on an expected page; never when the chunk spans more than ``max_span``."""
    if max_span is not None and span(hit) > max_span:
        return False
    expected = _expected(sources)
    covered = _pages_of(hit.file, hit.page_start, hit.page_end, expected)
    return bool(covered)


# --- retrieval -------------------------------------------------------------------------------------


def doc_hit_at_k(retrieved: Sequence[Hit], sources: Sequence[Source], k: int) -> float | None:
    if not sources:
        return None
    docs = set(_expected(sources))
    return 1.0 if any(_fold(h.file) in docs for h in retrieved[:k]) else 0.0


def page_hit_at_k(retrieved: Sequence[Hit], sources: Sequence[Source], k: int,
                  max_span: int | None = None) -> float | None:
    """A relevant chunk among the first ``k``; with ``max_span``, wider chunks keep their rank but never hit."""
    if not sources:
        return None
    return 1.0 if any(is_relevant(h, sources, max_span) for h in retrieved[:k]) else 0.0


def recall_at_k(retrieved: Sequence[Hit], sources: Sequence[Source], k: int) -> float | None:
    """Share of expected (document, page) pairs covered by the top-k chunks."""
    wanted = {(_fold(s.doc), p) for s in sources for p in s.pages}
    if not wanted:
        return None
    got = {(_fold(h.file), p) for h in retrieved[:k] for p in range(h.page_start, max(h.page_start, h.page_end) + 1)}
    return len(wanted & got) / len(wanted)


def reciprocal_rank(retrieved: Sequence[Hit], sources: Sequence[Source], k: int = 10) -> float | None:
    if not sources:
        return None
    for rank, h in enumerate(retrieved[:k], 1):
        if is_relevant(h, sources):
            return 1.0 / rank
    return 0.0


def ndcg_at_k(retrieved: Sequence[Hit], sources: Sequence[Source], k: int = 10) -> float | None:
    """nDCG with novelty: a chunk gains the number of expected pages it covers that no higher-ranked chunk
    covered (so three chunks of one page do not count three times). The ideal ranking covers one new
    expected page per rank; the score is capped at 1 (a chunk spanning two expected pages may beat it).
    A source without pages counts as one unit, covered by any chunk of that document."""
    expected = _expected(sources)
    if not expected:
        return None
    n_units = sum(len(pages) or 1 for pages in expected.values())
    seen: set[tuple[str, int]] = set()
    dcg = 0.0
    for rank, h in enumerate(retrieved[:k], 1):
        covered = _pages_of(h.file, h.page_start, h.page_end, expected)
        if covered is None:
            continue
        doc = _fold(h.file)
        new = {(doc, p) for p in covered} if expected[doc] else {(doc, 0)}
        new -= seen
        seen |= new
        dcg += len(new) / math.log2(rank + 1)
    ideal = sum(1.0 / math.log2(r + 1) for r in range(1, min(n_units, k) + 1))
    return min(1.0, dcg / ideal)


# --- citations -------------------------------------------------------------------------------------


def citation_validity(citations: Sequence[CitedQuote]) -> tuple[int, int]:
    """(quotes found verbatim in their cited chunk, quotes checked)."""
    checked = [c for c in citations if c.verbatim is not None]
    return sum(1 for c in checked if c.verbatim), len(checked)


def citation_page_hits(citations: Sequence[CitedQuote], sources: Sequence[Source]) -> tuple[int, int]:
    """(citations on an expected document and page, citations); (0, 0) when there is nothing to judge."""
    if not sources or not citations:
        return 0, 0
    return sum(1 for c in citations if is_relevant(c, sources)), len(citations)


def cited_gold_page(r: CaseResult) -> float | None:
    """For an answered, answerable case with sources: 1 when a citation is on a gold page (its chunk spanning
    at most :data:`MAX_SPAN` pages), else 0; None for every other case."""
    if r.error or r.refused or not r.answerable or not r.sources:
        return None
    return 1.0 if any(is_relevant(c, r.sources, MAX_SPAN) for c in r.citations) else 0.0


# --- refusals --------------------------------------------------------------------------------------


def refusal_prf(pairs: Iterable[tuple[bool, bool]]) -> dict[str, float | None]:
    """Refusal as the positive class over (refused, answerable) pairs: a refusal is right iff the case is
    unanswerable. All three are None when there is no unanswerable case and no refusal."""
    tp = fp = fn = 0
    for refused, answerable in pairs:
        if refused and not answerable:
            tp += 1
        elif refused and answerable:
            fp += 1
        elif not refused and not answerable:
            fn += 1
    if tp + fp + fn == 0:
        return {"precision": None, "recall": None, "f1": None}
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def answers_at(r: CaseResult, threshold: float, current: float) -> bool:
    """Whether the case would be answered with the refusal threshold at ``threshold`` (the run used ``current``).

    A refusal threshold refuses below it, so: answered iff ``confidence >= threshold``, except that a case refused
    although its confidence reached ``current`` was refused for another reason (no quotable sentence, the LLM
    said the passages don't answer) and stays refused. Exact at and above ``current``; below it, a case the
    threshold refused is assumed to be answered (for extractive answers that holds whenever the passages had a
    sentence to quote). Errors are never answered; a result without a confidence keeps its outcome."""
    if r.error:
        return False
    if r.confidence is None:
        return not r.refused
    if r.refused and r.confidence >= current:
        return False
    return r.confidence >= threshold


def curve_thresholds(current: float, *, step: float = 0.05, width: float = 0.25) -> list[float]:
    """Multiples of ``step`` within ``width`` of ``current`` (clipped to 0..1), plus ``current`` itself."""
    lo, hi = max(0.0, current - width), min(1.0, current + width)
    grid = {round(i * step, 4) for i in range(math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9) + 1)}
    return sorted(grid | {round(current, 4)})


def refusal_curve(results: Sequence[CaseResult], current: float,
                  thresholds: Sequence[float] | None = None) -> list[dict[str, Any]]:
    """The refusal trade-off: for each threshold, the answer rate on answerable cases and refusal recall,
    precision and F1 (refusal = positive class) on the recorded confidences (see :func:`answers_at`).
    ``current`` marks the run's own threshold, whose point matches the run's figures. Empty when no result
    recorded a confidence (runs made before confidences were recorded)."""
    if not any(r.confidence is not None for r in results):
        return []
    points: list[dict[str, Any]] = []
    answerable = [r for r in results if r.answerable]
    unanswerable = [r for r in results if not r.answerable]
    for t in thresholds if thresholds is not None else curve_thresholds(current):
        answered = {r.id for r in results if answers_at(r, t, current)}
        prf = refusal_prf((r.id not in answered, r.answerable) for r in results)
        points.append({
            "threshold": t,
            "current": abs(t - current) < 1e-9,
            "answer_rate": sum(1 for r in answerable if r.id in answered) / len(answerable) if answerable else None,
            "refusal_recall": (sum(1 for r in unanswerable if r.id not in answered) / len(unanswerable)
                               if unanswerable else None),
            "refusal_precision": prf["precision"],
            "refusal_f1": prf["f1"],
        })
    return points


# --- answer text (SQuAD-style normalisation) -------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans({c: " " for c in string.punctuation + "“”‘’–—…"})
CITATION_MARKER = re.compile(r"\[\d+\]")


def normalise_answer(text: str) -> str:
    text = CITATION_MARKER.sub(" ", text.casefold()).translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, expected: str) -> float:
    return 1.0 if normalise_answer(prediction) == normalise_answer(expected) else 0.0


def contains_match(prediction: str, expected: str) -> float:
    """Share of the expected answer's parts (``;``-separated, for multi-part questions) found in the prediction."""
    pred = f" {normalise_answer(prediction)} "
    parts = [p for p in (normalise_answer(x) for x in expected.split(";")) if p]
    if not parts:
        return 0.0
    return sum(1 for p in parts if f" {p} " in pred) / len(parts)


def token_f1(prediction: str, expected: str) -> float:
    pred, gold = normalise_answer(prediction).split(), normalise_answer(expected).split()
    if not pred or not gold:
        return 1.0 if pred == gold else 0.0
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    p, r = common / len(pred), common / len(gold)
    return 2 * p * r / (p + r)


# --- latency ---------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), ``q`` in 0..100."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


# --- per case --------------------------------------------------------------------------------------


def case_metrics(r: CaseResult, k: int = 5) -> dict[str, float | None]:
    answerable_with_sources = r.answerable and bool(r.sources)
    sources = r.sources if answerable_with_sources else []
    valid, checked = citation_validity(r.citations)
    on_page, cited = citation_page_hits(r.citations, sources)
    out: dict[str, float | None] = {
        f"doc_hit@{k}": doc_hit_at_k(r.hits, sources, k),
        f"page_hit@{HEADLINE_K}": page_hit_at_k(r.hits, sources, HEADLINE_K, MAX_SPAN),
        f"page_hit@{k}": page_hit_at_k(r.hits, sources, k, MAX_SPAN),
        f"page_hit_any_span@{HEADLINE_K}": page_hit_at_k(r.hits, sources, HEADLINE_K),
        f"recall@{k}": recall_at_k(r.hits, sources, k),
        "mrr": reciprocal_rank(r.hits, sources, 10),
        "ndcg@10": ndcg_at_k(r.hits, sources, 10),
        "citation_validity": valid / checked if checked else None,
        "citation_page_precision": on_page / cited if cited else None,
        "cited_gold_page": cited_gold_page(r),
        "refusal_correct": 1.0 if r.refused == (not r.answerable) else 0.0,
        "exact_match": None,
        "contains_match": None,
        "token_f1": None,
    }
    if r.error:
        out["refusal_correct"] = 0.0
    if r.answerable and r.expected_answer:
        text = "" if r.refused else r.shown_text()
        out["exact_match"] = exact_match(text, r.expected_answer)
        out["contains_match"] = contains_match(text, r.expected_answer)
        out["token_f1"] = token_f1(text, r.expected_answer)
    for name in JUDGE_CRITERIA:
        js = r.judge.get(name)
        out[f"judge_{name}"] = js.score if js is not None else None
    return out


def case_score(r: CaseResult, k: int = 5) -> float:
    """One 0..1 quality figure per case, for the high/medium/low counts and the worst-cases list.

    Unanswerable: 1 if refused, else 0. Answerable and refused (or errored): 0. Otherwise the mean of
    page-hit@k, citation validity (0 when no citation is shown), citation-page precision, the answer match
    (max of contains-match and token-F1) and the judge scores, over those that apply.
    """
    if r.error:
        return 0.0
    if not r.answerable:
        return 1.0 if r.refused else 0.0
    if r.refused:
        return 0.0
    m = case_metrics(r, k)
    parts: list[float] = []
    for key in (f"page_hit@{k}", "citation_page_precision"):
        if m[key] is not None:
            parts.append(float(m[key]))  # type: ignore[arg-type]
    parts.append(float(m["citation_validity"]) if m["citation_validity"] is not None else 0.0)
    if m["token_f1"] is not None:
        parts.append(max(float(m["token_f1"]), float(m["contains_match"] or 0.0)))
    parts.extend(float(m[f"judge_{n}"]) for n in JUDGE_CRITERIA if m[f"judge_{n}"] is not None)  # type: ignore[arg-type]
    return sum(parts) / len(parts)


def bucket(score: float) -> str:
    return "high" if score >= HIGH else "medium" if score >= MEDIUM else "low"


FAILURE_LABELS = ("error", "retrieval miss", "wrong refusal", "unsupported answer", "answer without citation")


def failure_labels(r: CaseResult, k: int = 5) -> list[str]:
    """Why a case failed, by type: retrieval miss (no relevant chunk in the top k), wrong refusal (refused an
    answerable case or answered an unanswerable one), unsupported answer (a quote not verbatim in its chunk,
    no citation on an expected page, or judge groundedness < 0.5), answer without citation."""
    labels: list[str] = []
    if r.error:
        return ["error"]
    m = case_metrics(r, k)
    if r.answerable and m[f"page_hit@{k}"] == 0.0:
        labels.append("retrieval miss")
    if r.refused == r.answerable:
        labels.append("wrong refusal")
    if not r.refused:
        grounded = r.judge.get("groundedness")
        if (
            (m["citation_validity"] is not None and m["citation_validity"] < 1.0)
            or m["citation_page_precision"] == 0.0
            or (grounded is not None and grounded.score is not None and grounded.score < 0.5)
        ):
            labels.append("unsupported answer")
        if not r.citations:
            labels.append("answer without citation")
    return labels


# --- per run ---------------------------------------------------------------------------------------

def _mean(values: Iterable[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


# What only an answer has: empty for a retrieval-only run (the naive page baseline).
ANSWER_KEYS = ("citation_validity", "citation_page_precision", "cited_gold_page", "refusal_precision",
               "refusal_recall", "refusal_f1", "answer_rate", "exact_match", "contains_match", "token_f1",
               *(f"judge_{name}" for name in JUDGE_CRITERIA))


def aggregate(results: Sequence[CaseResult], k: int = 5) -> dict[str, Any]:
    """Run-level metrics for ``results``: the same keys for a whole run and for one category."""
    per_case = [case_metrics(r, k) for r in results]
    out: dict[str, Any] = {"n_cases": len(results), "n_errors": sum(1 for r in results if r.error)}
    for key in dict.fromkeys((f"doc_hit@{k}", f"page_hit@{HEADLINE_K}", f"page_hit@{k}",
                              f"page_hit_any_span@{HEADLINE_K}", f"recall@{k}", "mrr", "ndcg@10")):
        out[key] = _mean(m[key] for m in per_case)
    valid = checked = on_page = cited = 0
    for r in results:
        v, c = citation_validity(r.citations)
        valid, checked = valid + v, checked + c
        p, n = citation_page_hits(r.citations, r.sources if r.answerable else [])
        on_page, cited = on_page + p, cited + n
    out["citation_validity"] = valid / checked if checked else None
    out["citation_page_precision"] = on_page / cited if cited else None
    out["cited_gold_page"] = _mean(m["cited_gold_page"] for m in per_case)
    out["quotes_checked"] = checked
    prf = refusal_prf((r.refused or bool(r.error), r.answerable) for r in results)
    out["refusal_precision"], out["refusal_recall"], out["refusal_f1"] = prf["precision"], prf["recall"], prf["f1"]
    answerable = [r for r in results if r.answerable]
    out["answer_rate"] = (
        sum(1 for r in answerable if not r.refused and not r.error) / len(answerable) if answerable else None
    )
    for key in ("exact_match", "contains_match", "token_f1"):
        out[key] = _mean(m[key] for m in per_case)
    for name in JUDGE_CRITERIA:
        out[f"judge_{name}"] = _mean(m[f"judge_{name}"] for m in per_case)
    latencies = [r.latency_ms for r in results if not r.error]
    out["latency_p50_ms"] = percentile(latencies, 50)
    out["latency_p95_ms"] = percentile(latencies, 95)
    scores = [case_score(r, k) for r in results]
    out["score_mean"] = _mean(scores)
    out["low_score_share"] = sum(1 for s in scores if s < LOW_SCORE) / len(scores) if scores else None
    out["buckets"] = {b: sum(1 for s in scores if bucket(s) == b) for b in ("high", "medium", "low")}
    labels = Counter(label for r in results for label in failure_labels(r, k))
    out["failures"] = {label: labels.get(label, 0) for label in FAILURE_LABELS}
    if results and all(r.answer_mode == RETRIEVAL_ONLY for r in results):  # a baseline that ranks, never answers
        for key in ANSWER_KEYS:
            out[key] = None
    return out


def summarise(results: Sequence[CaseResult], k: int = 5) -> dict[str, Any]:
    """``{"overall": {...}, "categories": {name: {...}}}``."""
    categories: dict[str, list[CaseResult]] = {}
    for r in results:
        categories.setdefault(r.category, []).append(r)
    return {
        "k": k,
        "overall": aggregate(results, k),
        "categories": {name: aggregate(rs, k) for name, rs in sorted(categories.items())},
    }


# Metrics where a higher value is better (everything else, e.g. latency, is lower-is-better or a count).
HIGHER_IS_BETTER_PREFIXES = (
    "doc_hit@",
    "page_hit@",
    "page_hit_any_span@",
    "recall@",
    "mrr",
    "ndcg@",
    "citation_validity",
    "citation_page_precision",
    "cited_gold_page",
    "refusal_",
    "answer_rate",
    "exact_match",
    "contains_match",
    "token_f1",
    "judge_",
    "score_mean",
)


def higher_is_better(metric: str) -> bool | None:
    if metric.startswith(HIGHER_IS_BETTER_PREFIXES):
        return True
    if metric.startswith(("latency_", "low_score_share")):
        return False
    return None
