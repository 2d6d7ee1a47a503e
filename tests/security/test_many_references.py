"""Defect 11 of the security review: a question naming many sections must not crash the answer.

Before the fix about 1,000 "section N" references became one OR term each in the store's filter, past
SQLite's expression depth: ``OperationalError: Expression tree is too large`` instead of an answer.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from haystack import Document
from haystack.document_stores.types import DuplicatePolicy

from connectors.embedding import embed
from connectors.settings import Settings
from pipelines.service import MAX_QUESTION_CHARS, NOTE_QUESTION_CUT, CitebotService

pytestmark = pytest.mark.slow

SCOPE = "slack:T1:C1"
SECTIONS = [
    ("1", "1 Introduction", "The company was founded in 1994 in Leeds and employs 1,240 people."),
    ("2", "2 Working Hours", "The standard working week is 37.5 hours. Core hours are 10:00 to 15:00."),
    ("4.2", "4 Leave > 4.2 Parental leave", "The primary carer receives 26 weeks of parental leave on full pay."),
    ("7", "7 Finance", "Revenue grew from 70.4 million pounds in 2019 to 97.5 million pounds in 2022."),
]


def _chunks(settings: Settings) -> list[Document]:
    docs = [
        Document(
            id=f"hb:{i:05d}",
            content=f"{section}\n{text}",
            meta={
                "scope": SCOPE, "doc_id": "hb", "file_name": "handbook.pdf", "page_start": i + 1, "page_end": i + 1,
                "section": section, "section_id": sid, "element_type": "text", "label": "", "chunk_index": i,
                "sha256": "hb" * 32, "uploaded_by": "U1", "uploaded_at": "2026-01-01T00:00:00Z",
            },
        )
        for i, (sid, section, text) in enumerate(SECTIONS)
    ]
    vecs = embed([d.content or "" for d in docs], path=settings.resolved_model_path)
    return [replace(d, embedding=v) for d, v in zip(docs, vecs, strict=True)]


@pytest.fixture
def service(any_store: Any, any_store_settings: Settings) -> CitebotService:
    any_store.write_documents(_chunks(any_store_settings), DuplicatePolicy.OVERWRITE)
    return CitebotService(any_store_settings, any_store)


def test_a_question_naming_a_thousand_sections_is_answered(service: CitebotService) -> None:
    refs = "".join(f"§{n}" for n in range(1, 1001))
    question = f"How many weeks of parental leave does the primary carer get (§4.2)? {refs}"
    assert len(question) <= MAX_QUESTION_CHARS  # not cut: the references themselves must be handled
    answer = service.answer(question, SCOPE)
    assert not answer.refused
    assert any("26 weeks of parental leave" in c.quote for c in answer.citations)
    assert answer.note == ""


def test_an_overlong_question_is_cut_and_the_answer_says_so(service: CitebotService) -> None:
    question = "How many weeks of parental leave does the primary carer get? " + " ".join(
        f"See also section {n}." for n in range(1, 1001)
    )
    assert len(question) > MAX_QUESTION_CHARS
    answer = service.answer(question, SCOPE)
    assert answer.text
    assert answer.note.startswith(NOTE_QUESTION_CUT)


def test_a_filter_on_two_thousand_values_reads_the_matching_chunks(any_store: Any) -> None:
    """The store-level half: an ``in`` filter with thousands of values is one lookup, in both stores."""
    docs = [
        Document(id=f"d:{i:05d}", content=f"chunk {i}", meta={"scope": SCOPE, "doc_id": "d", "section_id": str(i),
                                                               "chunk_index": i})
        for i in range(5)
    ]
    any_store.write_documents(docs)
    wanted = [str(n) for n in range(3, 2003)]
    for op, expected in (("in", ["d:00003", "d:00004"]), ("not in", ["d:00000", "d:00001", "d:00002"])):
        got = any_store.fetch(scopes=[SCOPE], filters={"field": "meta.section_id", "operator": op, "value": wanted})
        assert [d.id for d in got] == expected
