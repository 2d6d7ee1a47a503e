"""A channel holding many PDFs: the question's company and period pick the filing, and "figure 2" means the
figure of the document the question is about, not every document's figure 2 (real store, real embeddings)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from haystack import Document
from haystack.document_stores.types import DuplicatePolicy

from connectors.embedding import embed
from connectors.settings import Settings
from connectors.sqlite_store import SQLiteDocumentStore
from pipelines.query import QueryEngine

pytestmark = pytest.mark.slow

CH = "slack:T1:CFIN"


def _chunk(file: str, i: int, page: int, content: str, *, label: str = "") -> Document:
    doc_id = file.split(".")[0].lower()
    return Document(
        id=f"{doc_id}:{i:05d}",
        content=content,
        meta={
            "scope": CH, "doc_id": doc_id, "file_name": file, "page_start": page, "page_end": page,
            "section": "", "section_id": "", "element_type": "table" if "|" in content else "text",
            "label": label, "chunk_index": i, "sha256": "0" * 64, "uploaded_by": "",
            "uploaded_at": "2024-03-01T00:00:00Z",
        },
    )


def _statement(company: str, year: int, cash: int, capex: int) -> str:
    return (f"{company}\nCONSOLIDATED STATEMENTS OF CASH FLOWS (in millions)\nFiscal year | {year} | {year - 1}\n"
            f"Net cash provided by operating activities | {cash:,} | {cash - 40:,}\n"
            f"Purchases of property and equipment | ({capex}) | ({capex - 5})")


CORPUS = [
    # three filings of one company, one of another: same statements, other numbers
    _chunk("WALMART_2021_10K.pdf", 0, 55, _statement("Walmart Inc.", 2021, 36074, 10264)),
    _chunk("WALMART_2022_10K.pdf", 0, 57, _statement("Walmart Inc.", 2022, 24181, 13106)),
    _chunk("WALMART_2023_10K.pdf", 0, 56, _statement("Walmart Inc.", 2023, 28841, 16857)),
    _chunk("HOMEDEPOT_2022_10K.pdf", 0, 44, _statement("The Home Depot, Inc.", 2022, 14615, 3119)),
    # two reports, each with a figure 2
    _chunk("seniors_tech_use.pdf", 0, 6, "Figure 2: Smartphone ownership among adults 65 and older rose to 18%.",
           label="Figure 2"),
    _chunk("seniors_tech_use.pdf", 1, 7, "Broadband adoption among seniors reached 47% of adults over 65."),
    _chunk("coral_reefs.pdf", 0, 3, "Figure 2: Bleaching events on the Great Barrier Reef, 1998 to 2020.",
           label="Figure 2"),
    _chunk("coral_reefs.pdf", 1, 4, "Mass bleaching struck the reef in 2016, 2017 and 2020."),
]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    settings = Settings(data_dir=tmp_path_factory.mktemp("busy"))
    vecs = embed([d.content for d in CORPUS], path=settings.resolved_model_path)
    store = SQLiteDocumentStore(settings.sqlite_path, embedding_dim=settings.embedding_dim)
    store.write_documents([replace(d, embedding=v) for d, v in zip(CORPUS, vecs, strict=True)],
                          DuplicatePolicy.OVERWRITE)
    e = QueryEngine(settings, store)
    e.warm_up()
    return e


@pytest.mark.parametrize(
    ("question", "file"),
    [
        ("What were Walmart's FY2022 purchases of property and equipment?", "WALMART_2022_10K.pdf"),
        ("How much net cash did Walmart's operating activities provide in FY2021?", "WALMART_2021_10K.pdf"),
        ("What were Home Depot's FY2022 purchases of property and equipment?", "HOMEDEPOT_2022_10K.pdf"),
    ],
)
def test_the_company_and_year_pick_the_filing(engine, question, file):
    answer = engine.answer(question, [CH])
    assert not answer.refused
    assert answer.retrieved[0].file == file
    assert answer.citations[0].file == file  # later filings may follow: they repeat the year as a comparative


def test_a_company_without_a_period_keeps_all_its_filings(engine):
    files = [r.file for r in engine.answer("What did Walmart spend on property and equipment?", [CH]).retrieved]
    assert set(files) == {"WALMART_2021_10K.pdf", "WALMART_2022_10K.pdf", "WALMART_2023_10K.pdf"}


def test_figure_2_is_the_figure_of_the_document_asked_about(engine):
    answer = engine.answer("What does figure 2 show about smartphone ownership among seniors?", [CH])
    assert [c.file for c in answer.citations] == ["seniors_tech_use.pdf"]
    assert "18%" in answer.citations[0].quote
