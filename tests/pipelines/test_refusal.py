"""Refusal: weak retrieval or 'not answerable' -> say so and point at up to three closest passages."""

from __future__ import annotations

import pytest
from haystack import Document

from pipelines.components.refusal import REFUSAL_TEXT, RefusalCheck


def _doc(i, file, page, section=""):
    return Document(
        id=f"d:{i}", content="x", meta={"file_name": file, "page_start": page, "page_end": page, "section": section}
    )


DOCS = [
    _doc(1, "a.pdf", 3, "4 Leave > 4.2 Parental leave"),
    _doc(2, "a.pdf", 3, "4 Leave > 4.2 Parental leave"),
    _doc(3, "b.pdf", 1),
    _doc(4, "a.pdf", 7),
    _doc(5, "c.pdf", 2),
]


class TestRefusalCheck:
    def test_init_validates(self):
        with pytest.raises(ValueError, match="threshold"):
            RefusalCheck(threshold=1.5)
        with pytest.raises(ValueError, match="max_pointers"):
            RefusalCheck(threshold=0.3, max_pointers=-1)

    def test_to_dict(self):
        assert RefusalCheck(threshold=0.4).to_dict() == {
            "type": "pipelines.components.refusal.RefusalCheck",
            "init_parameters": {"threshold": 0.4, "max_pointers": 3},
        }

    def test_from_dict(self):
        assert RefusalCheck.from_dict(RefusalCheck(threshold=0.25, max_pointers=2).to_dict()).max_pointers == 2

    @pytest.mark.parametrize(
        ("relevance", "answerable", "docs", "refused", "reason"),
        [
            (0.8, True, DOCS, False, ""),
            (0.2, True, DOCS, True, "weak_retrieval"),
            (0.8, False, DOCS, True, "not_answerable"),
            (0.9, True, [], True, "no_passages"),
        ],
    )
    def test_run(self, relevance, answerable, docs, refused, reason):
        out = RefusalCheck(threshold=0.35).run(relevance=relevance, documents=docs, answerable=answerable)
        assert out["refused"] is refused
        assert out["reason"] == reason

    def test_run_lists_three_distinct_closest_passages(self):
        text = RefusalCheck(threshold=0.35).run(relevance=0.1, documents=DOCS)["text"]
        assert text.startswith(REFUSAL_TEXT)
        assert text.count("• ") == 3
        assert "• a.pdf · p. 3 · 4.2 Parental leave" in text and "• b.pdf · p. 1" in text and "• a.pdf · p. 7" in text
        assert "c.pdf" not in text
