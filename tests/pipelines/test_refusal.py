"""Refusal: weak retrieval or 'not answerable' -> say so and point at up to three closest passages."""

from __future__ import annotations

import pytest
from haystack import Document

from pipelines.components.refusal import REFUSAL_TEXT, RefusalCheck, confidence, numbers_held, refusal_text


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


@pytest.mark.parametrize(
    ("anchors", "passages", "share", "missing"),
    [
        (["2001", "New York"], ["Land rezoned in 2003: 23% of New York's area."], 0.0, ["2001"]),
        (["2021", "2022"], ["Year | Revenue\n2021 | 88.0\n2022 | 97.5"], 1.0, []),
        (["2285222"], ["Purchases of short-term investments | (2,285,222)"], 1.0, []),  # as filings print it
        (["15"], ["Ranked 150th of all apps in 2015."], 0.0, ["15"]),  # a number inside a longer one is not it
        (["3.5", "2019"], ["Growth was 3.5% in 2018."], 0.5, ["2019"]),
        (["2022"], ["Users online, 2013-2022 (share of adults)"], 0.0, ["2022"]),  # a range is not the year
        (["Clinton", "Obama"], ["Nothing numeric here."], 1.0, []),  # only numbers are checked near the topic
        ([], ["anything"], 1.0, []),
    ],
)
def test_numbers_held_by_the_best_passages(anchors, passages, share, missing):
    assert numbers_held(anchors, passages) == (pytest.approx(share), missing)


def test_a_refusal_for_a_missing_term_names_it():
    text = refusal_text(DOCS, unmentioned=["2031"])
    assert text.startswith(REFUSAL_TEXT + " Nothing I found about it mentions “2031”.")
    assert text.count("• ") == 3  # the closest passages are still offered
    assert "mentions “2031”, “Osprey” or “Q9”." in refusal_text(DOCS, unmentioned=["2031", "Osprey", "Q9", "x"])
    assert refusal_text(DOCS) == RefusalCheck(threshold=0.35).run(relevance=0.1, documents=DOCS)["text"]


def test_confidence_falls_for_each_missing_kind_of_term():
    full = confidence(0.5, 1.0, 1.0, 1.0)
    assert full == 0.5
    assert confidence(0.5, 0.5, 1.0, 1.0) < confidence(0.5, 1.0, 0.5, 1.0) < full  # a name counts more than a word
    assert confidence(0.5, 1.0, 1.0, 0.0) < 0.14 < confidence(0.5, 1.0, 0.5, 1.0)  # a number not near refuses
