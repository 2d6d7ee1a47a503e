"""Layered eval metrics: retrieval, citations, refusals, answer text (and whether a short expected answer is
shown: :func:`answer_shown`), judge scores, latency.

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

import ast
import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation, localcontext
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


# --- answer shown: is the expected answer on the screen? -----------------------------------------------
#
# A short expected answer (a figure, or a text of at most SHORT_WORDS words and SHORT_CHARS characters after
# normalisation) is *shown* when the answer text or a quote found verbatim in its chunk prints it. A figure may
# be printed in the document's own format: thousands separators, a currency sign, `%`, `(1,577)` for -1,577, a
# scale word or a table in thousands/millions (any power of 1000 from 10^-9 to 10^9), and more digits than the
# expected (rounded to the expected's last digit). See eval/README.md, "What counts as shown".

SHORT_WORDS = 6
SHORT_CHARS = 40
# Powers of 1000 a shown figure may be off by (a table "in millions" prints $1,577 million as 1,577).
SCALE_STEPS = range(-3, 4)
_SCALE_WORDS = {"thousand": 3, "million": 6, "mn": 6, "billion": 9, "bn": 9, "trillion": 12}
_FIGURE = (
    r"(?P<open>\()?(?P<sign>[-\u2212])?(?P<cur>[$\u20ac\u00a3\u00a5]|(?:US\$|USD|EUR|GBP)\s?)?(?P<sign2>[-\u2212])?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?P<close>\))?"
    r"(?:\s?(?P<pct>%|percent\b))?(?:\s?(?P<scale>thousand|million|mn|billion|bn|trillion)\b)?"
)
_FIGURE_IN_TEXT = re.compile(r"(?<![\w.,])" + _FIGURE, re.IGNORECASE)
_FIGURE_ALONE = re.compile(r"^\s*(?:about|approximately|approx\.?|~)?\s*" + _FIGURE + r"\s*\.?\s*$", re.IGNORECASE)
_YES_NO = ("yes", "no")


@dataclass(frozen=True)
class Figure:
    """A number as a page prints it: ``value`` with its scale word applied, ``written`` without it, how many
    significant digits it was written with, and whether it reads as a year (a bare 1900..2100) or a percentage."""

    value: Decimal
    written: Decimal
    significant: int
    year: bool = False
    percent: bool = False


def _figure(m: re.Match[str]) -> Figure | None:
    digits = m["num"].replace(",", "")
    try:
        written = Decimal(digits)
    except InvalidOperation:
        return None
    negative = bool(m["sign"] or m["sign2"]) or bool(m["open"] and m["close"])
    if negative:
        written = -written
    power = _SCALE_WORDS.get((m["scale"] or "").casefold(), 0)
    significant = digits.replace(".", "").lstrip("0")
    if "." not in digits:
        significant = significant.rstrip("0")
    year = (len(m["num"]) == 4 and m["num"].isdigit() and 1900 <= int(digits) <= 2100 and not negative
            and not (m["cur"] or m["pct"] or m["scale"] or m["open"] or m["close"]))
    return Figure(value=written.scaleb(power), written=written, significant=max(1, len(significant)), year=year,
                  percent=bool(m["pct"]))


def _figures(text: str) -> list[Figure]:
    return [f for m in _FIGURE_IN_TEXT.finditer(CITATION_MARKER.sub(" ", text)) if (f := _figure(m)) is not None]


def figures_in(text: str) -> list[Decimal]:
    """Every number ``text`` prints, as a value: ``(1,577)`` is -1577, ``$27.165 billion`` 27165000000,
    ``1.9%`` 1.9. Citation markers (``[1]``) are not numbers; nor is the year in ``FY2022``."""
    return [f.value for f in _figures(text)]


def parse_figure(expected: str) -> Figure | None:
    """The figure ``expected`` is, when it is one number and nothing else (a currency, ``%`` or scale word
    around it allowed: ``$1,577 million``, ``-3.7``, ``1.9%``); None for any other text."""
    m = _FIGURE_ALONE.match(expected)
    return _figure(m) if m else None


def _matches(expected: Figure, shown: Figure) -> bool:
    """Whether ``shown`` prints ``expected``. A year matches only the same year. Exactly equal (with or without
    its scale word: "5 million" shows 5 and 5,000,000) always matches. An expected of two or more significant
    digits also matches a figure that, times a power of 1000 (not for a percentage), rounds to it at its last
    digit. A negative expected is shown by its magnitude too (a fall is often written in words: "decreased
    3.7%")."""
    if expected.year or shown.year:
        return expected.year and shown.year and expected.value == shown.value
    candidates = [shown] if expected.value >= 0 else [
        shown, Figure(-shown.value, -shown.written, shown.significant, percent=shown.percent)]
    if any(expected.value in (s.value, s.written) for s in candidates):
        return True
    exponent = expected.value.as_tuple().exponent
    if expected.significant < 2 or not isinstance(exponent, int):
        return False
    if exponent < 0 and expected.value == expected.value.to_integral_value():
        exponent = 0  # "$5466.00": a set's format for whole millions, not a precision of cents
    quantum = Decimal(1).scaleb(exponent)
    steps = (0,) if expected.percent else SCALE_STEPS
    with localcontext() as ctx:
        ctx.prec = 60
        for s in candidates:
            for k in steps:
                try:
                    if s.value.scaleb(3 * k).quantize(quantum, rounding=ROUND_HALF_UP) == expected.value:
                        return True
                except InvalidOperation:
                    continue
    return False


def _answer_parts(expected: str) -> list[str]:
    """The parts a user must see: the items of a list written as a Python list (``"['a', 'b']"``), the
    ``;``-separated parts of a multi-part answer, else the answer itself."""
    text = expected.strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            items = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            items = None
        if isinstance(items, list | tuple):
            return [str(i).strip() for i in items if str(i).strip()]
    return [p.strip() for p in text.split(";") if p.strip()]


def _short_part(part: str) -> bool:
    if parse_figure(part) is not None:
        return True
    words = normalise_answer(part).split()
    return 0 < len(words) <= SHORT_WORDS and len(" ".join(words)) <= SHORT_CHARS and words[0] not in _YES_NO


def is_short_answer(expected: str | None) -> bool:
    """Whether ``expected`` can be looked for on the screen: a figure, or a text of at most :data:`SHORT_WORDS`
    words and :data:`SHORT_CHARS` characters after normalisation, not starting with yes/no (a verdict, not
    something a page prints); a list or a multi-part answer when every item is. A computation sentence or an
    explanation is not short."""
    if not expected:
        return False
    parts = _answer_parts(expected)
    return bool(parts) and all(_short_part(p) for p in parts)


def _part_shown(part: str, texts: Sequence[str]) -> bool:
    figure = parse_figure(part)
    if figure is not None:
        return any(_matches(figure, s) for t in texts for s in _figures(t))
    wanted = f" {normalise_answer(part)} "
    return any(wanted in f" {normalise_answer(t)} " for t in texts)


def answer_shown(expected: str | None, shown_texts: Sequence[str]) -> float | None:
    """1.0 when every part of a short expected answer is printed by one of ``shown_texts`` (a figure in any of
    the formats :func:`_matches` accepts, a text contained after normalisation), else 0.0; None when the
    expected answer is not short (:func:`is_short_answer`) or absent."""
    if expected is None or not is_short_answer(expected):
        return None
    return 1.0 if all(_part_shown(p, shown_texts) for p in _answer_parts(expected)) else 0.0


def shown_texts(r: CaseResult) -> list[str]:
    """What a user sees of an answer: its text and every quote not found wrong by the verbatim recheck; nothing
    for a refusal or an error."""
    if r.refused or r.error:
        return []
    return [r.answer, *(c.quote for c in r.citations if c.quote and c.verbatim is not False)]


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
        "answer_shown": None,
    }
    if r.error:
        out["refusal_correct"] = 0.0
    if r.answerable and r.expected_answer:
        text = "" if r.refused else r.shown_text()
        out["exact_match"] = exact_match(text, r.expected_answer)
        out["contains_match"] = contains_match(text, r.expected_answer)
        out["token_f1"] = token_f1(text, r.expected_answer)
        out["answer_shown"] = answer_shown(r.expected_answer, shown_texts(r))
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


FAILURE_LABELS = ("error", "retrieval miss", "refused answerable", "answered unanswerable", "unsupported answer",
                  "answer without citation")


def failure_labels(r: CaseResult, k: int = 5) -> list[str]:
    """Why a case failed, by type: retrieval miss (no relevant chunk in the top k), refused answerable (the PDFs
    hold the answer and the bot said they don't), answered unanswerable (the bot answered what the PDFs don't
    say), unsupported answer (a quote not verbatim in its chunk, no citation on an expected page, or judge
    groundedness < 0.5), answer without citation."""
    labels: list[str] = []
    if r.error:
        return ["error"]
    m = case_metrics(r, k)
    if r.answerable and m[f"page_hit@{k}"] == 0.0:
        labels.append("retrieval miss")
    if r.refused and r.answerable:
        labels.append("refused answerable")
    if not r.refused and not r.answerable:
        labels.append("answered unanswerable")
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
               "answer_shown", *(f"judge_{name}" for name in JUDGE_CRITERIA))


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
    for key in ("exact_match", "contains_match", "token_f1", "answer_shown"):
        out[key] = _mean(m[key] for m in per_case)
    out["short_answer_cases"] = sum(1 for m in per_case if m["answer_shown"] is not None)
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
        out["short_answer_cases"] = 0
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
    "answer_shown",
    "judge_",
    "score_mean",
)


def higher_is_better(metric: str) -> bool | None:
    if metric.startswith(HIGHER_IS_BETTER_PREFIXES):
        return True
    if metric.startswith(("latency_", "low_score_share")):
        return False
    return None
