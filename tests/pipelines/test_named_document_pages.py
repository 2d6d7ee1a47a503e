"""'Page N of X' with several PDFs in one channel: the page of the document the asker named, not another's."""

from __future__ import annotations

import pytest

from connectors.settings import Settings
from pipelines.service import CitebotService
from tests.helpers import SHARED_PDFS

pytestmark = pytest.mark.slow

# four PDFs of ../shared/pdfs that all have a page 3
_FILES = (
    "004-pdflatex-4-pages_pdflatex-4-pages.pdf",
    "006-pdflatex-outline_pdflatex-outline.pdf",
    "014-outlines_mistitled_outlines_example.pdf",
    "026-latex-multicolumn_multicolumn.pdf",
)
MULTICOLUMN = _FILES[3]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    if not all((SHARED_PDFS / f).is_file() for f in _FILES):
        pytest.skip(f"{SHARED_PDFS} is not present on this machine")
    svc = CitebotService(Settings(data_dir=tmp_path_factory.mktemp("named"), ocr_enabled=False))
    for f in _FILES:
        assert svc.ingest((SHARED_PDFS / f).read_bytes(), file_name=f, scope="local").status == "indexed"
    return svc


@pytest.mark.parametrize(
    "question", ["What is on page 3 of the multicolumn document?", "What is on page 3 of multicolumn?"]
)
def test_page_of_the_named_document_is_quoted(service, question):
    answer = service.answer(question, scopes=["local"])
    assert not answer.refused and answer.citations
    assert {(c.file, c.page_start) for c in answer.citations} == {(MULTICOLUMN, 3)}
