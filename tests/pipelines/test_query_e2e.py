"""The extractive path end to end on the generated sample PDFs, through the real indexer and store."""

from __future__ import annotations

import pytest

from connectors.settings import Settings
from eval.sample_pdfs import CONTRACT, HANDBOOK, sample_bytes
from pipelines.service import CitebotService

pytestmark = pytest.mark.slow

HB_SCOPE, CT_SCOPE = "slack:T1:CHB", "slack:T1:CCT"


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    # OCR off keeps this fast; the scanned page is the indexer's tests' business
    s = Settings(data_dir=tmp_path_factory.mktemp("e2e"), ocr_enabled=False)
    svc = CitebotService(s)
    assert svc.ingest(sample_bytes(HANDBOOK), file_name=HANDBOOK, scope=HB_SCOPE).status == "indexed"
    assert svc.ingest(sample_bytes(CONTRACT), file_name=CONTRACT, scope=CT_SCOPE).status == "indexed"
    return svc


def _verbatim(service, answer, scope):
    for c in answer.citations:
        chunks = service.store.fetch(
            scopes=[scope], filters={"field": "meta.doc_id", "operator": "==", "value": c.doc_id}
        )
        content = {f"{d.meta['doc_id']}:{d.meta['chunk_index']:05d}": d.content for d in chunks}[c.chunk_id]
        assert c.quote in content


@pytest.mark.parametrize(
    ("question", "needle", "page"),
    [
        ("How many days per week may employees work remotely?", "up to 3 days per week", 6),
        ("What is the mileage rate for business journeys in your own car?", "45 pence per mile", 8),
        ("How many days of annual leave does an employee with 10 or more years of service get?", "10 or more | 31", 4),
        (
            "According to section 12.2, how long do I have to appeal a disciplinary outcome?",
            "within 10 working days",
            13,
        ),
    ],
)
def test_answers_with_verbatim_quotes_on_the_right_page(service, question, needle, page):
    a = service.answer(question, HB_SCOPE)
    assert not a.refused and a.mode == "extractive"
    hit = [c for c in a.citations if needle in c.quote]
    assert hit and hit[0].page_start == page and hit[0].file == HANDBOOK
    _verbatim(service, a, HB_SCOPE)


def test_table_question_quotes_the_table(service):
    a = service.answer("Which year in table 2 has the highest revenue?", HB_SCOPE)
    rows = [c for c in a.citations if "2022 | 118.6" in c.quote]  # the row, under its quoted header
    assert len(a.citations) == 2 and rows and rows[0].page_start == 9 and "Revenue" in a.citations[0].quote


def test_page_range_question_quotes_those_pages(service):
    a = service.answer("Summarize pages 4-5 of the employee handbook.", HB_SCOPE)
    assert a.citations and {c.page_start for c in a.citations} <= {4, 5}
    assert a.text.startswith("From pages 4–5")
    _verbatim(service, a, HB_SCOPE)


@pytest.mark.parametrize(
    "question",
    ["Are dogs allowed in the Manchester office?", "Which cryptocurrency wallets are supported for payroll?"],
)
def test_refuses_what_the_pdfs_do_not_say(service, question):
    a = service.answer(question, HB_SCOPE)
    assert a.refused and not a.citations and HANDBOOK in a.text


def test_contract_questions_never_see_the_handbook_and_vice_versa(service):
    a = service.answer("What is the initial term of the agreement?", CT_SCOPE)
    assert not a.refused and "36 months" in a.citations[0].quote
    assert all(r.file == CONTRACT for r in a.retrieved)
    b = service.answer("What is the initial term of the agreement?", HB_SCOPE)
    assert all(r.file == HANDBOOK for r in b.retrieved) and not any("36 months" in c.quote for c in b.citations)
