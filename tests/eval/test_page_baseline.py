"""The naive page baseline (``--mode pages``): one vector per page of generated multi-page PDFs, scoped per document."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.settings import Settings
from eval.page_baseline import PageBaseline
from tests.helpers.pdfs import make_pdf

HANDBOOK = [
    ["Welcome to Halvorsen", "This handbook describes how the company works and whom to ask."],
    ["Refunds and returns", "Gloves can be returned within 21 days of purchase for a full refund.",
     "Helmets can be returned within 14 days if unused."],
    ["Travel expenses", "Train tickets are reimbursed in second class.", "Hotels up to 120 euros a night."],
]
FILING = [
    ["Annual report 2022", "Letter from the chief executive about the year."],
    ["Consolidated statements of cash flows", "Net cash provided by operating activities 4,512",
     "Purchases of property, plant and equipment (1,230)", "Free cash flow 3,282"],
    ["Board of directors", "The board met eleven times during the year."],
]


@pytest.fixture
def docs(tmp_path: Path) -> tuple[list[Path], dict[str, str]]:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "handbook.pdf").write_bytes(make_pdf(HANDBOOK, size=12, leading=20, left=72, bold=None))
    (folder / "filing.pdf").write_bytes(make_pdf(FILING, size=12, leading=20, left=72, bold=None))
    pdfs = sorted(folder.iterdir())
    return pdfs, {p.name: f"scope:{p.stem}" for p in pdfs}


def test_the_page_that_answers_comes_first_and_only_in_scope(tmp_path: Path, docs: tuple[list[Path], dict[str, str]]
                                                              ) -> None:
    pdfs, scopes = docs
    settings = Settings(data_dir=tmp_path / "data")
    baseline = PageBaseline.build(settings, pdfs, scopes, tmp_path / "index", log=lambda _m: None)
    text = {(p.file, p.number): p.text for p in baseline.pages}
    assert len(text) == 6  # one "chunk" per page, the page's whole text
    assert "within 21 days" in text[("handbook.pdf", 2)] and "14 days" in text[("handbook.pdf", 2)]

    hits = baseline.search("How many days do I have to return gloves?", ["scope:handbook"], k=3)
    assert [(h.file, h.page_start) for h in hits][0] == ("handbook.pdf", 2)
    assert {h.file for h in hits} == {"handbook.pdf"} and len(hits) == 3

    hits = baseline.search("What was the free cash flow?", ["scope:filing"], k=5)
    assert (hits[0].file, hits[0].page_start, hits[0].page_end) == ("filing.pdf", 2, 2)

    # asked across both documents, as in one channel: still the right page, and pages of both are candidates
    hits = baseline.search("What was the free cash flow?", ["scope:filing", "scope:handbook"], k=6)
    assert (hits[0].file, hits[0].page_start) == ("filing.pdf", 2)
    assert {h.file for h in hits} == {"filing.pdf", "handbook.pdf"}
    assert baseline.search("anything", ["scope:elsewhere"], k=5) == []


def test_pages_are_read_and_embedded_once_per_index(tmp_path: Path, docs: tuple[list[Path], dict[str, str]]) -> None:
    pdfs, scopes = docs
    settings = Settings(data_dir=tmp_path / "data")
    first = PageBaseline.build(settings, pdfs, scopes, tmp_path / "index", log=lambda _m: None)
    for p in pdfs:
        p.write_bytes(b"not read again")  # a second build over the same index loads what the first kept
    said: list[str] = []
    again = PageBaseline.build(settings, pdfs, scopes, tmp_path / "index", log=said.append)
    assert said == [] and again.pages == first.pages
    assert (again.vectors == first.vectors).all()


def test_an_unreadable_pdf_is_named_and_left_out(tmp_path: Path, docs: tuple[list[Path], dict[str, str]]) -> None:
    pdfs, scopes = docs
    (pdfs[0].parent / "broken.pdf").write_bytes(b"%PDF-1.4 broken")
    said: list[str] = []
    baseline = PageBaseline.build(Settings(data_dir=tmp_path / "data"), [*pdfs, pdfs[0].parent / "broken.pdf"],
                                  {**scopes, "broken.pdf": "scope:broken"}, tmp_path / "index", log=said.append)
    assert any("broken.pdf could not be read" in m for m in said)
    assert {p.file for p in baseline.pages} == {"handbook.pdf", "filing.pdf"}
