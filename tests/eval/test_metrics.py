"""Metric functions on hand-made cases whose values are worked out by hand in the comments."""

from __future__ import annotations

import math

import pytest

from eval.cases import Source
from eval.metrics import (
    aggregate,
    bucket,
    case_metrics,
    case_score,
    citation_page_hits,
    citation_validity,
    cited_gold_page,
    contains_match,
    curve_thresholds,
    doc_hit_at_k,
    exact_match,
    failure_labels,
    ndcg_at_k,
    page_hit_at_k,
    percentile,
    recall_at_k,
    reciprocal_rank,
    refusal_curve,
    refusal_prf,
    summarise,
    token_f1,
)
from eval.records import CaseResult, CitedQuote, Hit, JudgeScore


def hit(file: str, start: int, end: int | None = None) -> Hit:
    return Hit(chunk_id=f"{file}:{start}", file=file, page_start=start, page_end=end or start, score=0.5)


def quote(file: str, page: int, verbatim: bool | None = True, text: str = "") -> CitedQuote:
    return CitedQuote(chunk_id=f"{file}:{page}", file=file, page_start=page, page_end=page, quote=text,
                      verbatim=verbatim)


SRC = [Source(doc="a.pdf", pages=[3, 4])]
# rank 1: other doc; rank 2: a.pdf p1 (wrong page); rank 3: a.pdf p3-3; rank 4: a.pdf p3 again; rank 5: a.pdf p4
RANKED = [hit("b.pdf", 3), hit("a.pdf", 1), hit("a.pdf", 3), hit("a.pdf", 3), hit("a.pdf", 4)]


class TestRetrieval:
    def test_doc_hit(self) -> None:
        assert doc_hit_at_k(RANKED, SRC, 1) == 0.0
        assert doc_hit_at_k(RANKED, SRC, 2) == 1.0
        assert doc_hit_at_k(RANKED, [], 5) is None

    def test_page_hit_needs_an_overlapping_page(self) -> None:
        assert page_hit_at_k(RANKED, SRC, 2) == 0.0
        assert page_hit_at_k(RANKED, SRC, 3) == 1.0
        # a chunk spanning pages 2-3 overlaps expected page 3
        assert page_hit_at_k([hit("a.pdf", 2, 3)], SRC, 1) == 1.0
        # file names compare case-insensitively
        assert page_hit_at_k([hit("A.PDF", 4)], SRC, 1) == 1.0

    def test_headline_page_hit_ignores_chunks_spanning_more_than_two_pages(self) -> None:
        # a 3-page chunk covering expected page 3 keeps its rank but is no hit; a 2-page one still is
        wide = [hit("a.pdf", 2, 4), hit("b.pdf", 1)]
        assert page_hit_at_k(wide, SRC, 5) == 1.0
        assert page_hit_at_k(wide, SRC, 5, max_span=2) == 0.0
        assert page_hit_at_k([hit("a.pdf", 3, 4)], SRC, 5, max_span=2) == 1.0
        m = case_metrics(result(retrieved=wide))
        assert m["page_hit@5"] == 0.0 and m["page_hit_any_span@5"] == 1.0

    def test_page_hit_at_5_uses_the_first_five_hits_whatever_k(self) -> None:
        # k=10: the answer saw ten passages, the relevant one at rank 6
        ranked = [hit("b.pdf", p) for p in range(1, 6)] + [hit("a.pdf", 3)] + [hit("b.pdf", 9)] * 4
        m = case_metrics(result(retrieved=ranked), k=10)
        assert m["page_hit@5"] == 0.0 and m["page_hit@10"] == 1.0
        assert summarise([result(retrieved=ranked)], k=10)["overall"]["page_hit@5"] == 0.0

    def test_source_without_pages_means_any_page_of_the_doc(self) -> None:
        src = [Source(doc="a.pdf")]
        assert page_hit_at_k([hit("a.pdf", 9)], src, 1) == 1.0
        assert recall_at_k([hit("a.pdf", 9)], src, 1) is None

    def test_recall_over_expected_pages(self) -> None:
        assert recall_at_k(RANKED, SRC, 3) == 0.5  # page 3 of {3, 4}
        assert recall_at_k(RANKED, SRC, 5) == 1.0
        assert recall_at_k([hit("a.pdf", 2, 5)], SRC, 1) == 1.0

    def test_reciprocal_rank(self) -> None:
        assert reciprocal_rank(RANKED, SRC) == pytest.approx(1 / 3)
        assert reciprocal_rank([hit("b.pdf", 1)], SRC) == 0.0

    def test_ndcg_counts_each_expected_page_once(self) -> None:
        # gains: 0, 0, 1 (page 3), 0 (page 3 again), 1 (page 4) -> DCG = 1/log2(4) + 1/log2(6)
        # ideal: two units -> 1/log2(2) + 1/log2(3)
        expected = (1 / math.log2(4) + 1 / math.log2(6)) / (1 + 1 / math.log2(3))
        assert ndcg_at_k(RANKED, SRC) == pytest.approx(expected)
        assert ndcg_at_k([hit("a.pdf", 3), hit("a.pdf", 4)], SRC) == pytest.approx(1.0)
        assert ndcg_at_k([hit("a.pdf", 3, 4)], SRC) == 1.0  # capped
        assert ndcg_at_k([], SRC) == 0.0
        assert ndcg_at_k(RANKED, []) is None


class TestAnswers:
    def test_citation_validity_counts_checked_quotes(self) -> None:
        assert citation_validity([quote("a.pdf", 3), quote("a.pdf", 4, False), quote("a.pdf", 4, None)]) == (1, 2)

    def test_citation_page_precision(self) -> None:
        assert citation_page_hits([quote("a.pdf", 3), quote("a.pdf", 9), quote("b.pdf", 3)], SRC) == (1, 3)
        assert citation_page_hits([], SRC) == (0, 0)

    def test_cited_gold_page_among_answered_cases(self) -> None:
        assert cited_gold_page(result(answer="x", citations=[quote("b.pdf", 3), quote("a.pdf", 4)])) == 1.0
        assert cited_gold_page(result(answer="x", citations=[quote("a.pdf", 9)])) == 0.0
        assert cited_gold_page(result(answer="x", citations=[])) == 0.0  # answered without citing
        wide = CitedQuote(chunk_id="a:1", file="a.pdf", page_start=1, page_end=6, quote="q", verbatim=True)
        assert cited_gold_page(result(answer="x", citations=[wide])) == 0.0
        assert cited_gold_page(result(refused=True)) is None  # refused: not among answered
        assert cited_gold_page(result(answerable=False, sources=[], answer="x")) is None

    def test_refusal_prf(self) -> None:
        # (refused, answerable): TP=2, FP=1, FN=1, TN=1 -> P=2/3, R=2/3, F1=2/3
        pairs = [(True, False), (True, False), (True, True), (False, False), (False, True)]
        prf = refusal_prf(pairs)
        assert prf["precision"] == pytest.approx(2 / 3)
        assert prf["recall"] == pytest.approx(2 / 3)
        assert prf["f1"] == pytest.approx(2 / 3)
        assert refusal_prf([(False, True)]) == {"precision": None, "recall": None, "f1": None}
        assert refusal_prf([(False, False)]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}

    @pytest.mark.parametrize(
        ("pred", "gold", "em", "contains", "f1"),
        [
            ("The answer is 25 days [1].", "25 days", 0.0, 1.0, 2 * (2 / 4) * 1 / (2 / 4 + 1)),
            ("25 Days.", "25 days", 1.0, 1.0, 1.0),
            ("250 days", "25 days", 0.0, 0.0, 0.5),
            ("nothing", "25 days", 0.0, 0.0, 0.0),
            ("26 weeks for the primary carer", "26 weeks; 6 weeks", 0.0, 0.5, 2 * (2 / 5) * (2 / 4) / (2 / 5 + 2 / 4)),
        ],
    )
    def test_text_matches(self, pred: str, gold: str, em: float, contains: float, f1: float) -> None:
        assert exact_match(pred, gold) == em
        assert contains_match(pred, gold) == contains
        assert token_f1(pred, gold) == pytest.approx(f1)

    def test_percentile_interpolates(self) -> None:
        assert percentile([10, 20, 30, 40], 50) == 25
        assert percentile([10, 20, 30, 40], 95) == pytest.approx(38.5)
        assert percentile([], 50) is None


def result(**kw: object) -> CaseResult:
    base: dict[str, object] = {"id": "c", "question": "q?", "sources": SRC, "retrieved": RANKED}
    base.update(kw)
    return CaseResult.model_validate(base)


class TestCases:
    def test_good_answer_scores_high(self) -> None:
        r = result(answer="Staff get 25 days.", expected_answer="25 days", citations=[quote("a.pdf", 3)])
        # page_hit 1, citation page precision 1, validity 1, max(contains 1, f1) = 1
        assert case_score(r) == 1.0
        assert bucket(case_score(r)) == "high"
        assert failure_labels(r) == []

    def test_failure_labels(self) -> None:
        miss = result(retrieved=[hit("b.pdf", 1)], answer="x", citations=[quote("b.pdf", 1)])
        assert failure_labels(miss) == ["retrieval miss", "unsupported answer"]
        assert failure_labels(result(refused=True)) == ["refused answerable"]
        assert failure_labels(result(answerable=False, sources=[], answer="made up")) == [
            "answered unanswerable", "answer without citation"]
        forged = result(answer="x", citations=[quote("a.pdf", 3, verbatim=False)])
        assert failure_labels(forged) == ["unsupported answer"]
        ungrounded = result(answer="x", citations=[quote("a.pdf", 3)],
                            judge={"groundedness": JudgeScore(score=0.2, explanation="not in quote")})
        assert failure_labels(ungrounded) == ["unsupported answer"]
        assert failure_labels(result(error="boom")) == ["error"]

    def test_answer_text_includes_the_quotes_shown(self) -> None:
        # an extractive answer is a lead line plus quotes: the expected answer is matched against both
        r = result(answer="Here is what the PDFs say [1]:", expected_answer="25 days",
                   citations=[quote("a.pdf", 3, text="Staff get 25 days of leave.")])
        m = case_metrics(r)
        assert m["contains_match"] == 1.0 and m["exact_match"] == 0.0
        assert m["token_f1"] == pytest.approx(2 * (2 / 11) * 1 / (2 / 11 + 1))  # 11 tokens shown, 2 match

    def test_ranking_metrics_use_the_deep_ranking_when_recorded(self) -> None:
        # the answer used 2 passages (neither relevant); the depth-10 ranking has page 3 at rank 4
        r = result(retrieved=[hit("b.pdf", 1), hit("b.pdf", 2)],
                   ranking=[hit("b.pdf", 1), hit("b.pdf", 2), hit("a.pdf", 1), hit("a.pdf", 3)])
        m = case_metrics(r, k=2)
        assert m["page_hit@2"] == 0.0 and m["mrr"] == 0.25

    def test_case_score_mixes_the_layers(self) -> None:
        # page_hit 1, citation page precision 1/2, validity 1/2 -> (1 + 0.5 + 0.5) / 3
        r = result(answer="x", citations=[quote("a.pdf", 3), quote("b.pdf", 1, verbatim=False)])
        assert case_score(r) == pytest.approx(2 / 3)
        assert bucket(case_score(r)) == "medium"
        assert case_score(result(answerable=False, sources=[], refused=True)) == 1.0
        assert case_score(result(refused=True)) == 0.0


def test_aggregate_per_run_and_category() -> None:
    results = [
        result(id="1", category="lookup", answer="25 days", expected_answer="25 days",
               citations=[quote("a.pdf", 3)], latency_ms=10),
        result(id="2", category="lookup", retrieved=[hit("b.pdf", 1)], answer="no", expected_answer="25 days",
               citations=[quote("b.pdf", 1), quote("b.pdf", 1, verbatim=False)], latency_ms=30),
        result(id="3", category="unanswerable", answerable=False, sources=[], refused=True, latency_ms=20),
        result(id="4", category="unanswerable", answerable=False, sources=[], answer="made up", latency_ms=40),
    ]
    s = summarise(results)
    o = s["overall"]
    assert o["n_cases"] == 4
    assert o["page_hit@5"] == 0.5 and o["doc_hit@5"] == 0.5
    assert o["citation_validity"] == pytest.approx(2 / 3)  # 3 quotes checked, 2 verbatim
    assert o["citation_page_precision"] == pytest.approx(1 / 3)
    # refusals: TP=1 (case 3), FP=0, FN=1 (case 4) -> P=1, R=0.5
    assert o["refusal_precision"] == 1.0 and o["refusal_recall"] == 0.5
    assert o["refusal_f1"] == pytest.approx(2 / 3)
    assert o["answer_rate"] == 1.0
    assert o["exact_match"] == 0.5
    assert o["latency_p50_ms"] == 25
    assert o["buckets"] == {"high": 2, "medium": 0, "low": 2}
    assert o["failures"]["answered unanswerable"] == 1 and o["failures"]["refused answerable"] == 0
    assert o["failures"]["retrieval miss"] == 1
    assert s["categories"]["lookup"]["page_hit@5"] == 0.5
    assert s["categories"]["unanswerable"]["page_hit@5"] is None
    assert s["categories"]["unanswerable"]["refusal_recall"] == 0.5
    assert aggregate([])["n_cases"] == 0


class TestRefusalCurve:
    # current threshold 0.5. Answerable: a1 answered at 0.9, a2 answered at 0.55, a3 refused by the threshold
    # at 0.4, a4 refused for another reason although 0.7 >= 0.5 (no quotable sentence). Unanswerable: u1
    # refused at 0.3, u2 refused at 0.45, u3 wrongly answered at 0.6.
    RESULTS = [
        result(id="a1", confidence=0.9, answer="x"),
        result(id="a2", confidence=0.55, answer="x"),
        result(id="a3", confidence=0.4, refused=True),
        result(id="a4", confidence=0.7, refused=True),
        result(id="u1", confidence=0.3, refused=True, answerable=False, sources=[]),
        result(id="u2", confidence=0.45, refused=True, answerable=False, sources=[]),
        result(id="u3", confidence=0.6, answer="x", answerable=False, sources=[]),
    ]

    def point(self, t: float) -> dict[str, object]:
        (p,) = refusal_curve(self.RESULTS, 0.5, [t])
        return p

    def test_the_current_threshold_reproduces_the_run(self) -> None:
        o = aggregate(self.RESULTS)
        p = self.point(0.5)
        assert p["current"] is True
        assert p["answer_rate"] == o["answer_rate"] == 0.5
        assert p["refusal_recall"] == o["refusal_recall"] == pytest.approx(2 / 3)
        assert p["refusal_f1"] == pytest.approx(o["refusal_f1"])

    def test_moving_the_threshold(self) -> None:
        # 0.62: a2 (0.55) and u3 (0.6) are now refused -> answered {a1}; refused unanswerable 3/3
        assert (self.point(0.62)["answer_rate"], self.point(0.62)["refusal_recall"]) == (0.25, 1.0)
        # 0.35: a3 (0.4) and u2 (0.45) become answered; a4 stays refused -> answered {a1, a2, a3}, refused {u1}
        assert self.point(0.35)["answer_rate"] == 0.75
        assert self.point(0.35)["refusal_recall"] == pytest.approx(1 / 3)
        assert self.point(0.35)["current"] is False
        # 0: everything the threshold refused is answered
        assert (self.point(0.0)["answer_rate"], self.point(0.0)["refusal_recall"]) == (0.75, 0.0)

    def test_errors_never_answer_and_old_runs_have_no_curve(self) -> None:
        errored = [*self.RESULTS, result(id="e", error="boom")]
        (p,) = refusal_curve(errored, 0.5, [0.0])
        assert p["answer_rate"] == pytest.approx(3 / 5)
        assert refusal_curve([result(id="old", answer="x")], 0.5) == []

    def test_default_thresholds_are_round_steps_around_the_current_one(self) -> None:
        ts = curve_thresholds(0.571)
        assert ts == [0.35, 0.4, 0.45, 0.5, 0.55, 0.571, 0.6, 0.65, 0.7, 0.75, 0.8]
        assert curve_thresholds(0.1)[0] == 0.0 and curve_thresholds(0.9)[-1] == 1.0
        points = refusal_curve(self.RESULTS, 0.571)
        assert [p["threshold"] for p in points if p["current"]] == [0.571]
