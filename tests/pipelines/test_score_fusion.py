"""ScoreFusion: weighted, distribution-normalised fusion of the BM25 and dense rankings, page-diverse."""

from __future__ import annotations

import pytest
from haystack import Document

from pipelines.components.score_fusion import ScoreFusion


def _doc(i: str, score: float, page: int = 1) -> Document:
    return Document(id=i, content=i, score=score, meta={"doc_id": "d", "page_start": page, "page_end": page})


class TestScoreFusion:
    def test_init_to_dict_from_dict(self):
        f = ScoreFusion(weights=[0.5, 1.0], diverse_top=3)
        data = f.to_dict()
        assert data["init_parameters"] == {"weights": [0.5, 1.0], "diverse_top": 3}
        g = ScoreFusion.from_dict(data)
        assert (g.weights, g.diverse_top) == ([0.5, 1.0], 3)

    @pytest.mark.parametrize("kwargs", [{"weights": []}, {"weights": [-1.0, 1.0]}, {"diverse_top": -1}])
    def test_init_rejects_bad_settings(self, kwargs):
        with pytest.raises(ValueError, match="weights|diverse_top"):
            ScoreFusion(**kwargs)

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
