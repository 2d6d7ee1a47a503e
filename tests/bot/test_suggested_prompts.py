"""The assistant pane's suggested prompts: made from a channel's real headings and document titles."""

from __future__ import annotations

import pytest
from haystack import Document

from bot.core import ChatCore, section_title
from connectors.settings import Settings
from connectors.sqlite_store import SQLiteDocumentStore
from connectors.stores import open_state
from pipelines.service import CitebotService

SCOPE = "slack:T1:C1"
MULTICOLUMN = "026-latex-multicolumn_multicolumn.pdf"


def _chunk(doc_id: str, i: int, file: str, section: str) -> Document:
    return Document(id=f"{doc_id}:{i:05d}", content="text", meta={
        "scope": SCOPE, "doc_id": doc_id, "file_name": file, "page_start": 1, "page_end": 1, "section": section,
        "chunk_index": i, "sha256": "0" * 64, "uploaded_by": "", "uploaded_at": "2024-03-01T00:00:00Z",
    })


@pytest.fixture
def core(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path)  # type: ignore[call-arg]
    store = SQLiteDocumentStore(tmp_path / "chunks.sqlite3", embedding_dim=4)
    return ChatCore(CitebotService(settings, store), open_state(settings), settings)


def test_prompts_name_documents_by_title_and_topics_by_real_headings(core: ChatCore) -> None:
    # the section paths the indexer gives ../shared/pdfs/026-latex-multicolumn_multicolumn.pdf, and a handbook
    core.service.store.write_documents([
        _chunk("mc", 0, MULTICOLUMN, "Two-Column Document with Lorem Ipsum > January 3, 2024"),
        _chunk("mc", 1, MULTICOLUMN, "Two-Column Document with Lorem Ipsum > Abstract"),
        _chunk("mc", 2, MULTICOLUMN, "Two-Column Document with Lorem Ipsum > 2 Population by country"),
        _chunk("hb", 0, "halvard_handbook_v3.pdf", "1 Introduction"),
        _chunk("hb", 1, "halvard_handbook_v3.pdf", "4 Leave > 4.2 Parental leave"),
    ])
    prompts = core.suggested_questions([SCOPE])
    assert sorted(prompts) == [
        ("Parental leave", "What do the PDFs say about parental leave?"),
        ("Population by country", "What does “Two-Column Document with Lorem Ipsum” say about population by country?"),
    ]
    assert not any(".pdf" in q or "January" in q for _, q in prompts)


def test_a_titled_document_without_topics_is_asked_about(core: ChatCore) -> None:
    core.service.store.write_documents([
        _chunk("mc", 0, MULTICOLUMN, "Two-Column Document with Lorem Ipsum > January 3, 2024"),
        _chunk("mc", 1, MULTICOLUMN, "Two-Column Document with Lorem Ipsum > Abstract"),
    ])
    assert core.suggested_questions([SCOPE]) == [
        ("Two-Column Document with Lorem Ipsum", "What is “Two-Column Document with Lorem Ipsum” about?")
    ]


@pytest.mark.parametrize("heading", ["January 3, 2024", "3 March 2021", "2023-01-03", "Abstract", "Contents",
                                     "12", "4.2"])
def test_dates_and_front_matter_are_no_topics(heading: str) -> None:
    assert section_title(heading) == ""


@pytest.mark.parametrize(("heading", "topic"), [("4 Leave > 4.2 Parental leave", "Parental leave"),
                                                ("May 2024 results", "May 2024 results"),
                                                ("ARTICLE IV GENERAL PROVISIONS", "General provisions")])
def test_real_headings_are_topics(heading: str, topic: str) -> None:
    assert section_title(heading) == topic
