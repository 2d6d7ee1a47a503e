"""Citation validation: quotes must be spans of their chunk; the shown quote is the exact source span."""

from __future__ import annotations

import pytest
from haystack import Document

from pipelines.components.citation_validator import CitationValidator, match_quote, normalise

SOURCE = (
    "4 Leave > 4.2 Parental leave\n"
    "The primary carer receives 26 weeks of parental leave on full pay. The secondary\n"
    "carer receives 6 weeks of paid parental leave. Employees must give “at least eight weeks’ ”\n"
    "notice—in writing—before the leave starts. The infor-\nmation pack is well-\nknown to managers."
)


def _doc(content: str = SOURCE, doc_id: str = "d1", i: int = 3) -> Document:
    return Document(
        id=f"{doc_id}:{i:05d}",
        content=content,
        meta={
            "scope": "local",
            "doc_id": doc_id,
            "chunk_index": i,
            "file_name": "handbook.pdf",
            "page_start": 5,
            "page_end": 5,
            "section": "4 Leave > 4.2 Parental leave",
        },
    )


class TestCitationValidator:
    def test_init_validates_threshold(self):
        assert CitationValidator().fuzzy_threshold == 0.9
        with pytest.raises(ValueError, match="fuzzy_threshold"):
            CitationValidator(fuzzy_threshold=0.2)

    def test_to_dict(self):
        assert CitationValidator(fuzzy_threshold=0.95).to_dict() == {
            "type": "pipelines.components.citation_validator.CitationValidator",
            "init_parameters": {"fuzzy_threshold": 0.95},
        }

    def test_from_dict(self):
        v = CitationValidator.from_dict(CitationValidator(fuzzy_threshold=0.92).to_dict())
        assert v.fuzzy_threshold == 0.92

    @pytest.mark.parametrize(
        ("quote", "outcome", "shown"),
        [
            ("The primary carer receives 26 weeks of parental leave on full pay.", "exact", None),
            # case, line breaks inside the quote, typographic quote and dash forms
            (
                "the secondary carer receives 6 WEEKS of paid parental leave",
                "normalised",
                "The secondary\ncarer receives 6 weeks of paid parental leave",
            ),
            (
                'give "at least eight weeks\' " notice-in writing-before the leave starts',
                "normalised",
                "give “at least eight weeks’ ”\nnotice—in writing—before the leave starts",
            ),
            # line-break hyphenation in the source
            ("The information pack is well-known to managers.", "normalised", None),
            # a paraphrase close enough to be the same span (one wrong digit and a dropped word)
            ("The primary carer receives 25 weeks of parental leave on pay", "fuzzy", None),
        ],
    )
    def test_run_accepts_and_shows_source_span(self, quote, outcome, shown):
        out = CitationValidator().run(citations=[{"n": 1, "chunk_id": "d1:00003", "quote": quote}], documents=[_doc()])
        assert out["failures"] == []
        assert getattr(out["validation"], outcome) == 1
        cit = out["citations"][0]
        assert cit.quote in SOURCE  # always an exact span of the source
        if shown is not None:
            assert cit.quote == shown
        assert (cit.file, cit.page_start, cit.doc_id, cit.chunk_id) == ("handbook.pdf", 5, "d1", "d1:00003")

    @pytest.mark.parametrize(
        ("citation", "reason"),
        [
            ({"n": 1, "chunk_id": "d1:00003", "quote": "Staff get 52 weeks of sabbatical each year."}, "unmatched"),
            ({"n": 1, "chunk_id": "d9:00001", "quote": "The primary carer receives 26 weeks"}, "unknown_chunk"),
            ({"n": 1, "chunk_id": "d1:00003", "quote": "leave"}, "unmatched"),  # too short to prove anything
            ({"n": "x", "chunk_id": "d1:00003", "quote": "The primary carer receives"}, "unknown_chunk"),
        ],
    )
    def test_run_rejects(self, citation, reason):
        out = CitationValidator().run(citations=[citation], documents=[_doc()])
        assert out["citations"] == []
        assert out["failures"][0]["reason"] == reason
        assert getattr(out["validation"], reason) == 1

    def test_quote_from_another_chunk_is_not_accepted(self):
        other = _doc("Unrelated text about parking spaces in Aberdeen.", i=4)
        out = CitationValidator().run(
            citations=[{"n": 1, "chunk_id": "d1:00004", "quote": "The primary carer receives 26 weeks"}],
            documents=[_doc(), other],
        )
        assert out["validation"].unmatched == 1 and out["citations"] == []

    def test_counts_every_outcome_and_does_not_mutate_inputs(self):
        doc = _doc()
        cits = [
            {"n": 1, "chunk_id": "d1:00003", "quote": "The primary carer receives 26 weeks of parental leave"},
            {"n": 2, "chunk_id": "d1:00003", "quote": "THE PRIMARY CARER receives 26 weeks"},
            {"n": 3, "chunk_id": "nope", "quote": "The primary carer receives 26 weeks"},
            {"n": 4, "chunk_id": "d1:00003", "quote": "Nothing like this appears in the chunk at all."},
        ]
        before = [dict(c) for c in cits]
        out = CitationValidator().run(citations=cits, documents=[doc], retried=True)
        v = out["validation"]
        assert (v.exact, v.normalised, v.fuzzy, v.unknown_chunk, v.unmatched, v.retried) == (1, 1, 0, 1, 1, True)
        assert cits == before and doc.content == SOURCE


def test_normalise_maps_back_to_source():
    n = normalise("A  “Quote”—here\nﬁne")
    assert n.text == 'a "quote"-here fine'
    assert len(n.index) == len(n.text)


def test_match_quote_fuzzy_below_threshold_is_unmatched():
    assert match_quote("The tertiary carer gets nothing whatsoever", SOURCE).outcome == "unmatched"
