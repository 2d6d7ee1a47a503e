"""The generated sample PDFs are reproducible and their ground truth points at the right pages."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pypdf

from eval import sample_pdfs


def _page_text(data: bytes, page: int) -> str:
    text = pypdf.PdfReader(io.BytesIO(data)).pages[page - 1].extract_text() or ""
    text = re.sub(r"-\n", "", text)
    return re.sub(r"\s+", " ", text)


def test_write_samples_writes_the_same_bytes_every_time(tmp_path: Path) -> None:
    first = {p.name: p.read_bytes() for p in sample_pdfs.write_samples(tmp_path / "a")}
    second = {p.name: p.read_bytes() for p in sample_pdfs.write_samples(tmp_path / "b")}
    assert set(first) == set(sample_pdfs.SAMPLE_FILES)
    assert first == second
    assert all(data.startswith(b"%PDF-") for data in first.values())


def test_page_counts_match_the_brief() -> None:
    counts = sample_pdfs.page_counts()
    assert 12 <= counts[sample_pdfs.HANDBOOK] <= 15
    assert 6 <= counts[sample_pdfs.CONTRACT] <= 8


def test_every_text_fact_is_on_its_page_and_scan_facts_have_no_text_layer() -> None:
    facts = sample_pdfs.facts()
    assert len(facts) >= 30
    assert len({f.id for f in facts}) == len(facts)
    for fact in facts:
        text = _page_text(sample_pdfs.sample_bytes(fact.file), fact.pages[0])
        if fact.kind == "ocr":
            assert fact.answer not in text, fact.id
            assert len(text.strip()) == 0, "the scanned page must carry no text layer"
        else:
            assert fact.answer in text, fact.id


def test_the_scanned_memo_is_the_only_place_with_the_stipend_amount() -> None:
    data = sample_pdfs.sample_bytes(sample_pdfs.HANDBOOK)
    n = len(pypdf.PdfReader(io.BytesIO(data)).pages)
    assert not any("45 pounds per month" in _page_text(data, p) for p in range(1, n + 1))
