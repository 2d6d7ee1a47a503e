"""'page 1' means the page a reader sees numbered 1: PDFs that label their pages (front matter i, ii, then
1, 2...) are indexed with the labels, and page references route by them, as PDF viewers show them."""

from __future__ import annotations

import io

import pypdf
import pytest
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

from connectors.settings import Settings
from connectors.stores import open_store
from pipelines.indexing import Indexer
from pipelines.query import QueryEngine

pytestmark = pytest.mark.slow

PAGES = [
    "Preface. This guide was written for the field teams of the Orchid survey.",
    "Contents. Chapter one describes sampling; chapter two the interviews.",
    "Sampling. Interviewers visit every seventh household on the route.",
    "Interviews. Each interview takes about forty minutes and is recorded on a tablet.",
]


def _labelled_pdf(*, labels: bool) -> bytes:
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4, invariant=True)
    for text in PAGES:
        c.setFont("Helvetica", 11)
        c.drawString(60, 780, text)
        c.showPage()
    c.save()
    if not labels:
        return buf.getvalue()
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(buf.getvalue())))
    writer.set_page_label(0, 1, style="/r")  # i, ii
    writer.set_page_label(2, 3, style="/D", start=1)  # 1, 2
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.mark.parametrize(("labels", "page"), [(True, 3), (False, 1)])
def test_a_page_number_means_the_page_label_where_the_pdf_has_labels(tmp_path, labels, page):
    settings = Settings(data_dir=tmp_path, ocr_enabled=False)
    store = open_store(settings)
    assert Indexer(settings, store).ingest(_labelled_pdf(labels=labels), file_name="guide.pdf",
                                           scope="local").status == "indexed"
    engine = QueryEngine(settings, store)
    answer = engine.answer("What does page 1 say?", ["local"])
    assert not answer.refused
    assert {c.page_start for c in answer.citations} == {page}


CHAPTERS = [
    "Cover. The Orchid survey field guide, second edition.",
    "Contents. Sampling, interviews, recording, safety.",
    "Sampling. Interviewers visit every seventh household on the route.",
    "Interviews. Each interview takes about forty minutes and is recorded on a tablet.",
    "Recording. Tablets upload their recordings every evening over the office network.",
    "Safety. Interviewers work in pairs after dark and carry a charged phone.",
]


def _printed_numbers_pdf(footer: str) -> bytes:
    """Unnumbered cover and contents, then pages whose footer prints ``footer`` formatted with 1, 2, 3..."""
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4, invariant=True)
    for i, text in enumerate(CHAPTERS):
        c.setFont("Helvetica", 11)
        for k in range(8):  # enough text that each page is a chunk of its own
            c.drawString(60, 780 - 16 * k, f"{text} Rule {k + 1} of this part applies to every team.")
        if i >= 2:
            c.setFont("Helvetica", 9)
            c.drawString(280, 30, footer.format(i - 1))
        c.showPage()
    c.save()
    return buf.getvalue()


@pytest.mark.parametrize(("footer", "page"), [("{}", 4), ("Orchid field guide | {}", 4), ("Orchid survey 2023", 2)])
def test_a_page_number_means_the_number_printed_on_the_page_where_the_pdf_declares_none(tmp_path, footer, page):
    """A report whose cover and contents are unnumbered prints "2" on its fourth page: "page 2" is that page. A
    footer that prints the same year on every page is not a page number."""
    settings = Settings(data_dir=tmp_path, ocr_enabled=False)
    store = open_store(settings)
    assert Indexer(settings, store).ingest(_printed_numbers_pdf(footer), file_name="guide.pdf",
                                           scope="local").status == "indexed"
    answer = QueryEngine(settings, store).answer("What does page 2 say?", ["local"])
    assert not answer.refused
    assert {c.page_start for c in answer.citations} == {page}
