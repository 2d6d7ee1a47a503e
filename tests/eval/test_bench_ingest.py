"""The generated inputs of ``citebot bench ingest`` and its report."""

from __future__ import annotations

import pypdfium2 as pdfium

from eval.bench.ingest import _collect, filing_pdf


def test_the_filing_has_the_pages_asked_for_with_notes_and_tables():
    data = filing_pdf(4)
    assert filing_pdf(4) == data  # deterministic
    doc = pdfium.PdfDocument(data)
    try:
        assert len(doc) == 4
        first = doc[0].get_textpage().get_text_range()
        assert "Item 1. Business" in first and "Note 1." in first
        assert "(in millions, except per share)" in first and "%" in first
    finally:
        doc.close()


def test_a_generated_filing_comes_after_the_given_files(tmp_path):
    (tmp_path / "a.pdf").write_bytes(filing_pdf(1))
    names = [n for n, _ in _collect([str(tmp_path)], 0, 2)]
    assert names == ["a.pdf", "filing-2-pages.pdf"]
