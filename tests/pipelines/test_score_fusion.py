"""ScoreFusion: weighted, distribution-normalised fusion of the BM25 and dense rankings, or reciprocal rank fusion;
page-diverse either way."""

from __future__ import annotations

import pytest
from haystack import Document

from pipelines.components.score_fusion import FusionMode, ScoreFusion


def _doc(i: str, score: float, page: int = 1) -> Document:
    return Document(id=i, content=i, score=score, meta={"doc_id": "d", "page_start": page, "page_end": page})


class TestScoreFusion:
    def test_init_to_dict_from_dict(self):
        f = ScoreFusion(weights=[0.5, 1.0], diverse_top=3)
        data = f.to_dict()
        assert data["init_parameters"] == {"weights": [0.5, 1.0], "diverse_top": 3, "fusion": "weighted"}
        g = ScoreFusion.from_dict(data)
        assert (g.weights, g.diverse_top, g.fusion) == ([0.5, 1.0], 3, FusionMode.WEIGHTED)

    def test_rrf_round_trips(self):
        data = ScoreFusion(diverse_top=5, fusion="rrf").to_dict()
        assert data["init_parameters"] == {"weights": None, "diverse_top": 5, "fusion": "rrf"}
        assert ScoreFusion.from_dict(data).fusion is FusionMode.RRF

    @pytest.mark.parametrize("kwargs", [{"weights": []}, {"weights": [-1.0, 1.0]}, {"diverse_top": -1},
                                        {"fusion": "max"}, {"weights": [0.0, 0.0], "fusion": "rrf"}])
    def test_init_rejects_bad_settings(self, kwargs):
        with pytest.raises(ValueError, match="weights|diverse_top|fusion"):
            ScoreFusion(**kwargs)

    def test_rrf_and_weighted_disagree_where_the_scores_matter(self):
        """BM25's first is far ahead on score; dense ranks it last. Weighted fusion keeps it first; RRF, which
        sees only ranks, puts first the chunk both retrievers ranked second."""
        dense = [_doc("a", 0.60, 1), _doc("b", 0.59, 2), _doc("c", 0.58, 3), _doc("x", 0.57, 9)]
        bm25 = [_doc("x", 40.0, 9), _doc("b", 4.0, 2), _doc("e", 3.9, 5), _doc("f", 3.8, 6)]
        weighted = ScoreFusion(weights=[0.5, 1.0], fusion="weighted").run(documents=[dense, bm25])["documents"]
        rrf = ScoreFusion(fusion="rrf").run(documents=[dense, bm25])["documents"]
        assert weighted[0].id == "x"
        assert rrf[0].id == "b"  # 1/62 + 1/62 beats x's 1/64 + 1/61
        assert [d.id for d in weighted] != [d.id for d in rrf]
        assert sorted(d.id for d in rrf) == ["a", "b", "c", "e", "f", "x"]  # each chunk once

    def test_rrf_is_page_diverse_too(self):
        same_page = [_doc("a", 9.0, 4), _doc("b", 8.0, 4), _doc("c", 7.0, 4), _doc("d", 2.0, 9)]
        ranked = ScoreFusion(diverse_top=2, fusion="rrf").run(documents=[same_page])["documents"]
        assert [d.id for d in ranked] == ["a", "d", "b", "c"]

    def test_a_clear_bm25_winner_beats_a_marginal_dense_one(self):
        """Rank fusion would tie dense's first and BM25's first; the scores say BM25's is far ahead."""
        dense = [_doc("a", 0.52, 1), _doc("b", 0.51, 2), _doc("c", 0.50, 3), _doc("d", 0.49, 4)]
        bm25 = [_doc("c", 30.0, 3), _doc("e", 6.0, 5), _doc("f", 5.5, 6), _doc("g", 5.0, 7)]
        ranked = ScoreFusion(weights=[0.5, 1.0]).run(documents=[dense, bm25])["documents"]
        assert ranked[0].id == "c"  # found by both, and BM25's clear first
        assert {d.id for d in ranked} == {"a", "b", "c", "d", "e", "f", "g"}
        assert ranked[0].score is not None and ranked[0].score > ranked[1].score

    def test_the_first_results_hold_one_chunk_per_page(self):
        same_page = [_doc("a", 9.0, 4), _doc("b", 8.0, 4), _doc("c", 7.0, 4), _doc("d", 2.0, 9)]
        ranked = ScoreFusion(weights=[1.0], diverse_top=2).run(documents=[same_page])["documents"]
        assert [d.id for d in ranked] == ["a", "d", "b", "c"]

    def test_lists_and_weights_must_match(self):
        with pytest.raises(ValueError, match="2 lists for 1 weights"):
            ScoreFusion(weights=[1.0]).run(documents=[[_doc("a", 1.0)], [_doc("b", 1.0)]])
