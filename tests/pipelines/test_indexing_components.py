"""One class per indexing component: init validation, to_dict/from_dict, and run on generated PDFs."""

from __future__ import annotations

import copy
import dataclasses
import io
import time
import unicodedata
import zlib
from pathlib import Path

import pytest
from haystack import Document

from connectors.settings import Settings
from eval import sample_pdfs
from eval.bench.reading import OcrFallback, PdfGuard, PdfParser
from pipelines.components.chunker import StructureChunker, load_token_counter
from pipelines.components.embedder import PassageEmbedder, passage_text
from pipelines.components.isolated_reader import IsolatedPdfReader
from pipelines.components.structure import (
    StructureDetector,
    caption_label,
    heading_numbering,
    strip_running_lines,
)
from pipelines.reading.layout import Element, IngestError, Line, Page, ParsedPdf
from pipelines.reading.text import repair_letter_spacing
from tests.helpers.pdfs import remapped_pdf, to_control_chars, to_math_bold

MODEL_PATH = str(Settings().resolved_model_path)


def _parsed(name: str) -> object:
    return PdfParser().run(sample_pdfs.sample_bytes(name))["parsed"]


@pytest.fixture(scope="module")
def handbook_elements() -> list[Element]:
    parsed = PdfParser().run(sample_pdfs.sample_bytes(sample_pdfs.HANDBOOK))["parsed"]
    return StructureDetector().run(parsed)["elements"]


@pytest.fixture(scope="module")
def contract_elements() -> list[Element]:
    parsed = PdfParser().run(sample_pdfs.sample_bytes(sample_pdfs.CONTRACT))["parsed"]
    return StructureDetector().run(parsed)["elements"]


@pytest.fixture(scope="module")
def count_tokens():  # noqa: ANN201
    return load_token_counter(Path(MODEL_PATH))


def _pdf_with_stream(payload_stream: bytes) -> bytes:
    """A minimal valid PDF whose page content stream is ``payload_stream`` (Flate-compressed)."""
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(payload_stream) + payload_stream + b"\nendstream",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n")
    offsets = []
    for i, body in enumerate(objs, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % i + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1))
    for off in offsets:
        out.write(b"%010d 00000 n \n" % off)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref))
    return out.getvalue()


def zeros_bomb(megabytes: int) -> bytes:
    comp = zlib.compressobj(9)
    block = bytes(1024 * 1024)
    body = b"".join(comp.compress(block) for _ in range(megabytes)) + comp.flush()
    return _pdf_with_stream(body)


class TestPdfGuard:
    def test_init_validates(self) -> None:
        with pytest.raises(ValueError, match="max_pages"):
            PdfGuard(max_pages=0)
        with pytest.raises(ValueError, match="max_file_mb"):
            PdfGuard(max_file_mb=0)

    def test_to_dict_from_dict(self) -> None:
        guard = PdfGuard(max_file_mb=5, max_pages=10, max_stream_mb=8, max_total_inflated_mb=64)
        data = guard.to_dict()
        assert data == {
            "type": "eval.bench.reading.PdfGuard",
            "init_parameters": {"max_file_mb": 5, "max_pages": 10, "max_stream_mb": 8, "max_total_inflated_mb": 64},
        }
        again = PdfGuard.from_dict(data)
        assert again.max_pages == 10 and again.max_stream_mb == 8

    def test_accepts_a_pdf_and_counts_pages(self) -> None:
        out = PdfGuard().run(sample_pdfs.sample_bytes(sample_pdfs.CONTRACT))
        assert out["pages"] == sample_pdfs.page_counts()[sample_pdfs.CONTRACT]

    @pytest.mark.parametrize(
        ("data", "kwargs", "code", "words"),
        [
            (b"", {}, "empty", "empty"),
            (b"GIF89a" + bytes(200), {}, "not_pdf", "not a PDF"),
            (b"hello, this is a text file saved as .pdf\n", {}, "not_pdf", "not a PDF"),
            (None, {"max_file_mb": 0.002}, "too_large", "limit"),
            ("truncated", {}, "truncated", "truncated"),
            ("bomb", {"max_stream_mb": 2, "max_total_inflated_mb": 4}, "bomb", "decompression bomb"),
            ("pages", {"max_pages": 3}, "too_many_pages", "page limit"),
        ],
    )
    def test_refuses_bad_input_with_a_reason(self, data: object, kwargs: dict, code: str, words: str) -> None:
        good = sample_pdfs.sample_bytes(sample_pdfs.CONTRACT)
        if data is None or data == "pages":
            data = good
        elif data == "truncated":
            data = good[: len(good) // 2]
        elif data == "bomb":
            data = zeros_bomb(3)
        with pytest.raises(IngestError) as err:
            PdfGuard(**kwargs).run(data)  # type: ignore[arg-type]
        assert err.value.code == code
        assert words in err.value.reason

    def test_a_small_flate_stream_is_not_a_bomb(self) -> None:
        data = _pdf_with_stream(zlib.compress(b"BT /F1 12 Tf 72 700 Td (hello) Tj ET"))
        assert PdfGuard(max_stream_mb=1, max_total_inflated_mb=1).run(data)["pages"] == 1


class TestPdfParser:
    def test_init_and_serialisation(self) -> None:
        with pytest.raises(ValueError, match="ocr_min_chars"):
            PdfParser(ocr_min_chars=-1)
        data = PdfParser(ocr_min_chars=12).to_dict()
        assert data == {"type": "eval.bench.reading.PdfParser", "init_parameters": {"ocr_min_chars": 12}}
        assert PdfParser.from_dict(data).ocr_min_chars == 12

    def test_flags_only_the_scanned_page_for_ocr(self) -> None:
        parsed = _parsed(sample_pdfs.HANDBOOK)
        scan_page = next(f.pages[0] for f in sample_pdfs.facts() if f.kind == "ocr")
        assert [p.number for p in parsed.pages if p.needs_ocr] == [scan_page]

    def test_two_column_page_reads_left_column_first(self) -> None:
        parsed = _parsed(sample_pdfs.HANDBOOK)
        page = next(f.pages[0] for f in sample_pdfs.facts() if f.id == "hb-mileage")
        text = " ".join(ln.text for ln in parsed.pages[page - 1].lines)
        assert text.index("mileage rate") < text.index("Hotel costs") < text.index("meal allowance")

    def test_table_rows_come_back_as_cells(self) -> None:
        parsed = _parsed(sample_pdfs.HANDBOOK)
        cells = [ln.cells for p in parsed.pages for ln in p.lines if ln.cells]
        assert ("2022", "118.6", "1,180", "4") in cells

    def test_letter_spaced_heading_is_repaired(self) -> None:
        parsed = _parsed(sample_pdfs.CONTRACT)
        lines = [ln.text for p in parsed.pages for ln in p.lines]
        assert "3.4 Payment Schedule" in lines

    def test_letters_outside_the_bmp_come_back_whole(self) -> None:
        # pdfium reports each mathematical bold letter as two UTF-16 halves
        data = remapped_pdf([["Inconsistency is the", "Number of Conflicts over all pairs."]], to_math_bold,
                            remap_pages={1})
        lines = [ln.text for p in PdfParser().run(data)["parsed"].pages for ln in p.lines]
        assert all(not any("\ud800" <= c <= "\udfff" for c in t) for t in lines), lines
        assert [unicodedata.normalize("NFKC", t) for t in lines] == [
            "Inconsistency is the", "Number of Conflicts over all pairs."]

    def test_font_scaled_by_the_text_matrix_keeps_words_and_sizes(self) -> None:
        # many producers write "1 Tf" and scale with the text matrix; read as 1-pt text, every glyph gap split
        # the words ("C o r p o r a t e") and no heading was found (16 of the 45 dev-set PDFs)
        from reportlab.pdfgen import canvas

        buf = io.BytesIO()
        c = canvas.Canvas(buf)
        y = 700.0
        for size, line in [(16, "Corporate Governance"), (11, "The governance process should ensure that these"),
                           (11, "resources are utilised in a manner that meets")]:
            text = c.beginText()
            text.setTextTransform(size, 0, 0, size, 72, y)
            text.setFont("Times-Roman", 1)
            text.setCharSpace(0.12)
            text.textOut(line)
            c.drawText(text)
            y -= size * 1.25
        c.showPage()
        c.save()
        parsed = PdfParser().run(buf.getvalue())["parsed"]
        assert [(ln.text, round(ln.size)) for ln in parsed.pages[0].lines] == [
            ("Corporate Governance", 16),
            ("The governance process should ensure that these", 11),
            ("resources are utilised in a manner that meets", 11),
        ]
        elements = StructureDetector().run(parsed)["elements"]
        assert elements[0].kind == "heading" and elements[-1].section == "Corporate Governance"

    def test_unreadable_text_layer_is_dropped_and_the_page_goes_to_ocr(self) -> None:
        # page 1's font maps its glyphs to control characters (no usable ToUnicode map); page 2 is fine
        data = remapped_pdf(
            [["Revenue grew by 2.4% in the year under review."] * 4, ["Dividends rose to 155.98 million."] * 4],
            to_control_chars, remap_pages={1},
        )
        pages = PdfParser().run(data)["parsed"].pages
        assert (pages[0].lines, pages[0].needs_ocr) == ([], True)
        assert not pages[1].needs_ocr and pages[1].lines[0].text == "Dividends rose to 155.98 million."

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("n o n - G A A P", "non-GAAP"),
            ("S C H E D U L E  O F  F E E S", "SCHEDULE OF FEES"),
            ("the fee is 5 % per month", "the fee is 5 % per month"),
            ("Plain text stays as it is", "Plain text stays as it is"),
        ],
    )
    def test_repair_letter_spacing_without_positions(self, text: str, expected: str) -> None:
        assert repair_letter_spacing(text) == expected

    def test_repair_letter_spacing_uses_glyph_gaps(self) -> None:
        # "a b c d e f": glyphs 5 pt wide, 2 pt apart, except a 9 pt gap between c and d
        boxes, x = [], 0.0
        for i in range(6):
            boxes.append((x, x + 5))
            x += 5 + (9 if i == 2 else 2)
        assert repair_letter_spacing("a b c d e f", boxes) == "abc def"


class TestOcrFallback:
    def test_init_validates(self) -> None:
        with pytest.raises(ValueError, match="dpi"):
            OcrFallback(dpi=20)
        with pytest.raises(ValueError, match="language"):
            OcrFallback(language="eng; rm -rf /")
        with pytest.raises(ValueError, match="page_timeout_s"):
            OcrFallback(page_timeout_s=0)
        with pytest.raises(ValueError, match="layout"):
            OcrFallback(layout="slides")

    def test_to_dict_from_dict(self) -> None:
        c = OcrFallback(enabled=False, dpi=150, language="eng+deu", page_timeout_s=5, max_pixels=2_000_000,
                        layout="sparse")
        data = c.to_dict()
        assert data["init_parameters"] == {
            "enabled": False, "dpi": 150, "language": "eng+deu", "page_timeout_s": 5, "max_pixels": 2_000_000,
            "layout": "sparse",
        }
        back = OcrFallback.from_dict(data)
        assert (back.dpi, back.layout) == (150, "sparse")

    @pytest.mark.parametrize(
        ("layout", "width", "height", "psm"),
        [("auto", 768, 432, 11), ("auto", 612, 792, 3), ("document", 768, 432, 3), ("sparse", 612, 792, 11)],
    )
    def test_slides_are_read_as_sparse_text_documents_as_columns(
        self, layout: str, width: float, height: float, psm: int
    ) -> None:
        assert OcrFallback(layout=layout).psm_for(Page(number=1, width=width, height=height)) == psm

    def test_disabled_leaves_pages_alone(self) -> None:
        data = sample_pdfs.sample_bytes(sample_pdfs.HANDBOOK)
        parsed = PdfParser().run(data)["parsed"]
        out = OcrFallback(enabled=False).run(data, parsed)["parsed"]
        assert out.ocr_pages == []

    @pytest.mark.slow
    def test_scanned_page_text_comes_back(self) -> None:
        pytest.importorskip("pytesseract")
        from connectors.ocr import tesseract_available

        if not tesseract_available():
            pytest.skip("tesseract is not installed")
        data = sample_pdfs.sample_bytes(sample_pdfs.HANDBOOK)
        parsed = PdfParser().run(data)["parsed"]
        seen: list[tuple[int, int]] = []
        out = OcrFallback().run(data, parsed, on_page=lambda d, t: seen.append((d, t)))["parsed"]
        scan = next(f.pages[0] for f in sample_pdfs.facts() if f.kind == "ocr")
        assert out.ocr_pages == [scan] and seen == [(1, 1)]
        assert parsed.pages[scan - 1].lines == []  # the input was not mutated
        page = out.pages[scan - 1]
        assert page.ocr_confidence is not None and page.ocr_confidence > 60
        got = " ".join(ln.text for ln in page.lines).lower().split()
        memo = next(b for b in sample_pdfs.HANDBOOK_BLOCKS if b[0] == "scan")[1]
        expected = " ".join(memo).lower().split()
        found = sum(1 for w in expected if w in got)
        assert found / len(expected) >= 0.9


class TestIsolatedPdfReader:
    def test_init_validates(self) -> None:
        with pytest.raises(ValueError, match="max_memory_mb"):
            IsolatedPdfReader(max_memory_mb=100)
        with pytest.raises(ValueError, match="max_stream_mb"):
            IsolatedPdfReader(max_stream_mb=64, max_total_inflated_mb=32)
        with pytest.raises(ValueError, match="dpi"):
            IsolatedPdfReader(ocr_dpi=20)
        with pytest.raises(ValueError, match="ocr_min_chars"):
            IsolatedPdfReader(ocr_min_chars=-1)

    def test_to_dict_from_dict(self) -> None:
        reader = IsolatedPdfReader(max_file_mb=5, max_pages=10, max_stream_mb=8, max_total_inflated_mb=64,
                                   ocr_min_chars=12, ocr_enabled=False, ocr_dpi=150, ocr_language="eng+deu",
                                   ocr_page_timeout_s=5, max_memory_mb=900, max_chars=9000, max_lines=300)
        data = reader.to_dict()
        assert data == {
            "type": "pipelines.components.isolated_reader.IsolatedPdfReader",
            "init_parameters": {
                "max_file_mb": 5, "max_pages": 10, "max_stream_mb": 8, "max_total_inflated_mb": 64,
                "ocr_min_chars": 12, "ocr_enabled": False, "ocr_dpi": 150, "ocr_language": "eng+deu",
                "ocr_page_timeout_s": 5, "max_memory_mb": 900, "max_chars": 9000, "max_lines": 300,
            },
        }
        assert IsolatedPdfReader.from_dict(data).to_dict() == data

    @pytest.mark.parametrize(
        ("kwargs", "outcome"),
        [
            pytest.param({}, "parsed", id="reads-in-the-child"),
            pytest.param({"max_pages": 3}, "page limit", id="guard-refusal-comes-back-as-is"),
        ],
    )
    def test_run_reads_like_the_in_process_steps(self, kwargs: dict, outcome: str) -> None:
        data = sample_pdfs.sample_bytes(sample_pdfs.CONTRACT)
        reader = IsolatedPdfReader(ocr_enabled=False, **kwargs)
        if outcome != "parsed":
            out = reader.run(data)
            assert "parsed" not in out
            assert [f.code for f in out["failed"]] == ["too_many_pages"] and outcome in out["failed"][0].reason
            return
        pages: list[tuple[int, int]] = []
        parsed = reader.run(data, deadline=time.monotonic() + 60, on_page=lambda d, t: pages.append((d, t)))["parsed"]
        here = PdfParser().run(data)["parsed"]
        assert parsed == here
        assert pages[-1] == (here.page_count, here.page_count)


class TestStructureDetector:
    def test_init_and_serialisation(self) -> None:
        with pytest.raises(ValueError, match="heading_size_ratio"):
            StructureDetector(heading_size_ratio=1.0)
        data = StructureDetector(heading_size_ratio=1.2, max_heading_chars=80).to_dict()
        assert data["init_parameters"] == {"heading_size_ratio": 1.2, "max_heading_chars": 80}
        assert StructureDetector.from_dict(data).max_heading_chars == 80

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("4.2 Parental leave", ("4.2", 2)),
            ("7 Company Performance", ("7", 1)),
            ("Section 12 Grievance", ("12", 1)),
            ("ARTICLE IV TERM AND TERMINATION", ("IV", 1)),
            ("2023 was a good year", ("", 0)),
            ("Introduction", ("", 0)),
        ],
    )
    def test_heading_numbering(self, text: str, expected: tuple[str, int]) -> None:
        assert heading_numbering(text) == expected

    @pytest.mark.parametrize(
        ("word", "number", "expected"),
        [("Table", "3", "Table 3"), ("Tabelle", "2", "Table 2"), ("Abbildung", "1.3", "Figure 1.3"),
         ("Fig.", "4", "Figure 4"), ("Exhibit", "A1", "Exhibit A1")],
    )
    def test_caption_labels_have_one_spelling(self, word: str, number: str, expected: str) -> None:
        assert caption_label(word, number) == expected

    def test_headings_and_section_paths(self, handbook_elements: list[Element]) -> None:
        heads = {e.numbering: e for e in handbook_elements if e.kind == "heading" and e.numbering}
        assert heads["4.2"].text == "4.2 Parental leave" and heads["4.2"].level == 2
        assert heads["12"].text.startswith("Section 12") and heads["12"].level == 1
        para = next(e for e in handbook_elements if e.kind == "paragraph" and "primary carer" in e.text)
        assert para.section == "4 Leave > 4.2 Parental leave" and para.section_id == "4.2"

    def test_contract_articles_and_clauses(self, contract_elements: list[Element]) -> None:
        heads = [(e.numbering, e.level) for e in contract_elements if e.kind == "heading" and e.numbering]
        assert ("IV", 1) in heads and ("7.1", 2) in heads and ("7.2", 2) in heads
        law = next(e for e in contract_elements if "laws of Ireland" in e.text)
        assert law.section == "ARTICLE VII GENERAL > 7.1 Governing law" and law.section_id == "7.1"

    def test_running_header_footer_and_page_numbers_are_dropped(self, handbook_elements: list[Element]) -> None:
        text = "\n".join(e.text for e in handbook_elements)
        assert "internal use only" not in text
        assert not any(e.text.startswith("Page ") for e in handbook_elements)
        assert "Page 3" not in text
        assert not any(e.text.startswith("Halvorsen & Pike Engineering Ltd. \u2014") for e in handbook_elements)

    def test_lone_page_number_outside_the_margin_band_is_dropped(self) -> None:
        # LaTeX puts page numbers at ~83% of the page height, above a 10% footer band
        body = [Line(page=1, text=f"Body line {i} of the column.", x0=72, top=100 + 14 * i, x1=300,
                     bottom=110 + 14 * i, size=10) for i in range(5)]
        number = Line(page=1, text="7", x0=300, top=696, x1=305, bottom=703, size=10)
        kept = strip_running_lines([[*body, number]], [842.0])[0]
        assert kept == body
        # a number inside the body (a table cell, a list of figures) stays
        inner = Line(page=1, text="12", x0=72, top=130, x1=80, bottom=136, size=10)
        assert inner in strip_running_lines([[*body[:3], inner, *body[3:]]], [842.0])[0]

    def test_ocr_lines_never_join_across_pages(self) -> None:
        # slides OCR'd one per page: no sentence ends, so they used to flow into one paragraph over the deck
        pages = [
            Page(number=n, width=720, height=405, ocr=True, ocr_confidence=90.0, lines=[
                Line(page=n, text=f"Slide {n} title", x0=50, top=40, x1=400, bottom=70, ocr_confidence=90.0),
                Line(page=n, text=f"point {n} without a full stop", x0=50, top=90, x1=400, bottom=110,
                     ocr_confidence=90.0),
            ])
            for n in range(1, 6)
        ]
        elements = StructureDetector().run(ParsedPdf(pages=pages))["elements"]
        assert all(e.page_start == e.page_end for e in elements)
        by_page = {n: " ".join(e.text for e in elements if e.page_start == n) for n in range(1, 6)}
        assert by_page[3] == "Slide 3 title point 3 without a full stop"

    def test_a_paragraph_never_flows_onto_a_third_page(self) -> None:
        # one short line per page, none ending a sentence (a sparse text layer, a figure's labels)
        pages = [Page(number=n, width=612, height=792, lines=[
            Line(page=n, text=f"words on page {n} and the sentence goes on", x0=72, top=300, x1=400, bottom=310,
                 size=10)]) for n in range(1, 6)]
        elements = StructureDetector().run(ParsedPdf(pages=pages))["elements"]
        assert " ".join(e.text for e in elements).count("words on page") == 5  # nothing lost
        assert all(e.page_end - e.page_start <= 1 for e in elements)

    def test_hyphenated_line_breaks_are_joined(self, handbook_elements: list[Element]) -> None:
        text = " ".join(e.text for e in handbook_elements)
        # every body word the generator hyphenates comes back whole
        assert "requested and approved" in text
        assert "including when entertaining clients" in text
        assert "reque-" not in text and "inclu-" not in text

    def test_tables_keep_caption_and_header(self, handbook_elements: list[Element]) -> None:
        tables = {e.label: e for e in handbook_elements if e.kind == "table"}
        assert set(tables) == {"Table 1", "Table 2"}
        t2 = tables["Table 2"]
        assert t2.caption == "Table 2: Revenue and headcount by year, 2018-2023"
        assert t2.header == ("Year", "Revenue (GBP million)", "Headcount at year end", "Offices")
        assert ("2022", "118.6", "1,180", "4") in t2.rows and len(t2.rows) == 6
        assert tables["Table 1"].header[2] == "Extra days bought or sold (max)"

    def test_statement_rows_stay_rows_when_set_tight(self) -> None:
        """A cash flow statement as filings set it: rows 11 pt apart, figures right-aligned (so each starts
        at its own x), a label wrapped onto the line of its figures and a total without a label."""
        from reportlab.pdfgen import canvas

        buf = io.BytesIO()
        pdf = canvas.Canvas(buf, pagesize=(612, 792))
        pdf.setFont("Helvetica", 9)
        lines = [
            ("", "2016", "2015"),
            ("Purchases of short-term investments", "(2,285,222)", "(2,064,833)"),
            ("Maturities of short-term investments", "769,228", "371,790"),
            ("Purchases of property and equipment", "(203,805)", "(184,936)"),
            ("Net cash used for investing", "", ""),
            ("activities", "(960,033)", "(1,488,358)"),
            ("", "(8,828)", "14"),
        ]
        y = 700.0
        for label, a, b in lines:
            pdf.drawString(72, y, label)
            pdf.drawRightString(400, y, a)
            pdf.drawRightString(500, y, b)
            y -= 11
        pdf.save()
        parsed = PdfParser().run(buf.getvalue())["parsed"]
        tables = [e for e in StructureDetector().run(parsed)["elements"] if e.kind == "table"]
        assert len(tables) == 1
        assert tables[0].header == ("", "2016", "2015")
        assert tables[0].rows == [
            ("Purchases of short-term investments", "(2,285,222)", "(2,064,833)"),
            ("Maturities of short-term investments", "769,228", "371,790"),
            ("Purchases of property and equipment", "(203,805)", "(184,936)"),
            ("Net cash used for investing activities", "(960,033)", "(1,488,358)"),
            ("", "(8,828)", "14"),
        ]

    def test_a_table_below_an_abstract_is_filed_under_the_title_not_the_abstract(self) -> None:
        """A paper whose only heading after its title is "Abstract": its table is no part of the abstract, so it is
        cited under the title; the paragraphs keep the section the PDF gives them."""
        from reportlab.lib.pagesizes import A4
        from reportlab.lib.styles import getSampleStyleSheet
        from reportlab.platypus import Paragraph, SimpleDocTemplate, Table

        styles = getSampleStyleSheet()
        story = [
            Paragraph("Parking Demand on a Harbour Campus", styles["Title"]),
            Paragraph("Abstract", styles["Heading2"]),
            Paragraph("We count the permits sold in each zone of the campus over one year.", styles["BodyText"]),
            Paragraph("Permits sell out first in the harbour zone.", styles["BodyText"]),
            Paragraph("Table 1: Permits by zone", styles["BodyText"]),
            Table([["Zone", "Permits"], ["North", "120"], ["Harbour", "40"]], colWidths=[120, 90], hAlign="LEFT"),
        ]
        buf = io.BytesIO()
        SimpleDocTemplate(buf, pagesize=A4, invariant=1).build(story)
        elements = StructureDetector().run(PdfParser().run(buf.getvalue())["parsed"])["elements"]
        (table,) = [e for e in elements if e.kind == "table"]
        assert table.caption == "Table 1: Permits by zone" and table.rows == [("North", "120"), ("Harbour", "40")]
        assert table.section == "Parking Demand on a Harbour Campus"
        paragraphs = [e for e in elements if e.kind == "paragraph"]
        assert [p.section for p in paragraphs] == ["Parking Demand on a Harbour Campus > Abstract"] * 2

    def test_bulleted_list_is_one_element(self, handbook_elements: list[Element]) -> None:
        lists = [e for e in handbook_elements if e.kind == "list"]
        assert len(lists) == 1 and len(lists[0].items) == 5
        assert lists[0].items[0].startswith("Gifts or hospitality")


class TestStructureChunker:
    def test_init_validates(self) -> None:
        with pytest.raises(ValueError, match="max_tokens"):
            StructureChunker(model_path=MODEL_PATH, max_tokens=300)
        with pytest.raises(ValueError, match="min_tokens"):
            StructureChunker(model_path=MODEL_PATH, max_tokens=100, min_tokens=100)

    def test_to_dict_from_dict(self) -> None:
        data = StructureChunker(model_path="/m", max_tokens=120, min_tokens=10).to_dict()
        assert data == {
            "type": "pipelines.components.chunker.StructureChunker",
            "init_parameters": {"model_path": "/m", "max_tokens": 120, "min_tokens": 10},
        }
        assert StructureChunker.from_dict(data).max_tokens == 120

    @pytest.mark.parametrize("max_tokens", [200, 64])
    def test_chunks_respect_budget_and_sections(
        self, handbook_elements: list[Element], count_tokens, max_tokens: int  # noqa: ANN001
    ) -> None:
        docs = StructureChunker(model_path=MODEL_PATH, max_tokens=max_tokens, min_tokens=20).run(
            handbook_elements, doc_id="d1", file_name="h.pdf", scope="local", sha256="abc"
        )["documents"]
        assert [d.meta["chunk_index"] for d in docs] == list(range(len(docs)))
        assert [d.id for d in docs] == [f"d1:{i:05d}" for i in range(len(docs))]
        sections_by_text = {e.text: e.section for e in handbook_elements if e.kind == "paragraph" and len(e.text) > 60}
        for d in docs:
            assert count_tokens(passage_text(d)) <= max_tokens
            assert 1 <= d.meta["page_start"] <= d.meta["page_end"]
            for para, section in sections_by_text.items():
                if para in d.content:
                    # whole paragraphs are only ever in a chunk of their own section
                    # (a parent's short intro may join its first subsection, which keeps the deeper path)
                    assert d.meta["section"] == section or d.meta["section"].startswith(section + " > ")
        table_chunks = [d for d in docs if d.meta["element_type"] == "table" and d.meta["label"] == "Table 2"]
        assert table_chunks
        for d in table_chunks:
            lines = d.content.splitlines()
            assert lines[0] == "Table 2: Revenue and headcount by year, 2018-2023"
            assert lines[1] == "Year | Revenue (GBP million) | Headcount at year end | Offices"
        assert "2022 | 118.6 | 1,180 | 4" in "\n".join(d.content for d in table_chunks)
        if max_tokens == 64:
            assert len(table_chunks) >= 2  # split, each part repeating caption and header

    def test_small_parent_intro_joins_first_subsection_and_meta_is_complete(
        self, contract_elements: list[Element]
    ) -> None:
        docs = StructureChunker(model_path=MODEL_PATH).run(
            contract_elements, doc_id="c", file_name="c.pdf", scope="s1", sha256="x", uploaded_by="U1",
            uploaded_at="2024-01-01T00:00:00Z",
        )["documents"]
        law = next(d for d in docs if "laws of Ireland" in (d.content or ""))
        assert law.meta["section_id"] == "7.1" and law.content.startswith("ARTICLE VII GENERAL")
        keys = {"scope", "doc_id", "file_name", "page_start", "page_end", "section", "section_id", "element_type",
                "label", "chunk_index", "sha256", "uploaded_by", "uploaded_at"}
        assert all(keys <= set(d.meta) for d in docs)
        assert {d.meta["scope"] for d in docs} == {"s1"}
        pay = next(d for d in docs if d.meta["element_type"] == "table")
        assert pay.meta["label"] == "Table 1" and pay.meta["section_id"] == "3.4"


    def test_each_sparse_ocr_slide_is_its_own_chunk(self) -> None:
        # image-only decks: a few words per slide; packed by tokens, chunks spanned 3-12 slides ("pp. 3-9")
        elements = [Element(kind="paragraph", text=f"Slide {n}: a few words", page_start=n, page_end=n, ocr=True,
                            ocr_confidence=88.0) for n in range(1, 11)]
        docs = StructureChunker(model_path=MODEL_PATH).run(elements, doc_id="d", file_name="deck.pdf",
                                                           scope="local")["documents"]
        assert [(d.meta["page_start"], d.meta["page_end"]) for d in docs] == [(n, n) for n in range(1, 11)]
        assert [d.content for d in docs] == [f"Slide {n}: a few words" for n in range(1, 11)]
        assert all(d.meta["element_type"] == "ocr" for d in docs)

    def test_ocr_blocks_of_one_slide_share_a_chunk(self) -> None:
        elements = [Element(kind="paragraph", text=text, page_start=page, page_end=page, ocr=True)
                    for page, text in [(1, "Title"), (1, "first point"), (1, "second point"), (2, "Next slide")]]
        docs = StructureChunker(model_path=MODEL_PATH).run(elements, doc_id="d", file_name="deck.pdf",
                                                           scope="local")["documents"]
        assert [(d.content, d.meta["page_start"], d.meta["page_end"]) for d in docs] == [
            ("Title\nfirst point\nsecond point", 1, 1), ("Next slide", 2, 2)]

    @pytest.mark.parametrize("kind", ["paragraph", "list"])
    def test_small_text_never_packs_across_more_than_two_pages(self, kind: str) -> None:
        elements = [Element(kind=kind, text=f"- short item on page {n}" if kind == "list" else f"Short on {n}.",
                            items=[f"short item on page {n}"] if kind == "list" else [],
                            page_start=n, page_end=n, section="Notes") for n in range(1, 8)]
        docs = StructureChunker(model_path=MODEL_PATH).run(elements, doc_id="d", file_name="f.pdf",
                                                           scope="local")["documents"]
        assert all(d.meta["page_end"] - d.meta["page_start"] <= 1 for d in docs)
        assert sum(d.content.count(" on ") for d in docs) == 7  # nothing lost

    def test_a_chunk_with_substance_does_not_reach_onto_the_next_page(self, count_tokens) -> None:  # noqa: ANN001
        long = ("The travel policy covers flights, hotels and meals booked for business trips, and it applies "
                "to every employee, contractor and intern who travels on the company's behalf in any country, "
                "whether the trip lasts a single day or several weeks.")
        assert count_tokens(long) >= 40
        elements = [Element(kind="paragraph", text=long, page_start=4, page_end=4, section="Travel"),
                    Element(kind="paragraph", text="Receipts are kept.", page_start=5, page_end=5, section="Travel"),
                    Element(kind="paragraph", text="Taxis are fine.", page_start=6, page_end=6, section="Travel"),
                    Element(kind="paragraph", text="Trains are first.", page_start=7, page_end=7, section="Travel")]
        docs = StructureChunker(model_path=MODEL_PATH, min_tokens=40).run(
            elements, doc_id="d", file_name="f.pdf", scope="local")["documents"]
        # the full chunk stays on its page; small text may still cross one page boundary
        assert [(d.meta["page_start"], d.meta["page_end"]) for d in docs] == [(4, 4), (5, 6), (7, 7)]

    def test_parts_of_a_paragraph_over_a_page_break_cite_their_own_page(self) -> None:
        sentences = [f"Sentence {w} of the long policy paragraph explains one more rule in detail." for w in
                     ("one", "two", "three", "four", "five", "six", "seven", "eight")]
        # lines of one paragraph: four sentences at the foot of page 1, the rest at the top of page 2
        pages = [Page(number=n, width=612, height=792, lines=[
            Line(page=n, text=text, x0=72, top=100 + 14 * i, x1=540, bottom=110 + 14 * i, size=10)
            for i, text in enumerate(sentences[4 * (n - 1):4 * n])]) for n in (1, 2)]
        pages[0].lines[-1] = dataclasses.replace(pages[0].lines[-1], text="Sentence four of the long policy "
                                                 "paragraph explains one more rule in")  # runs on over the break
        pages[1].lines[0] = dataclasses.replace(pages[1].lines[0], text="detail. Sentence five of the long policy "
                                                "paragraph explains one more rule in detail.")
        elements = StructureDetector().run(ParsedPdf(pages=pages))["elements"]
        assert [(e.kind, e.page_start, e.page_end) for e in elements] == [("paragraph", 1, 2)]
        docs = StructureChunker(model_path=MODEL_PATH, max_tokens=40, min_tokens=0).run(
            elements, doc_id="d", file_name="f.pdf", scope="local")["documents"]
        # two sentences per chunk: only the chunk holding sentence four (split by the break) spans both pages
        placed = [(d.content.split()[1], d.meta["page_start"], d.meta["page_end"]) for d in docs]
        assert placed == [("one", 1, 1), ("three", 1, 2), ("five", 2, 2), ("seven", 2, 2)]

    def test_a_small_sibling_section_joins_the_next_only_on_its_own_page(self) -> None:
        def section(title: str, body: str, page: int) -> list[Element]:
            return [Element(kind="heading", text=title, page_start=page, page_end=page, level=1, section=title),
                    Element(kind="paragraph", text=body, page_start=page, page_end=page, section=title)]

        elements = [*section("Parking", "Free.", 1), *section("Canteen", "Opens at 8.", 1),
                    *section("Library", "Closed on Sundays.", 2)]
        docs = StructureChunker(model_path=MODEL_PATH, min_tokens=40).run(
            elements, doc_id="d", file_name="f.pdf", scope="local")["documents"]
        assert [(d.content, d.meta["page_start"], d.meta["page_end"]) for d in docs] == [
            ("Parking\nFree.\nCanteen\nOpens at 8.", 1, 1), ("Library\nClosed on Sundays.", 2, 2)]

    def test_a_heading_with_nothing_under_it_leads_the_next_chunk_on_its_page(self) -> None:
        # "5.4 Analysis" directly followed by a run-in heading the structure step put beside it, not under it
        elements = [
            Element(kind="heading", text="5.4 Analysis", page_start=8, page_end=8, level=2, numbering="5.4",
                    section="5 Method > 5.4 Analysis", section_id="5.4"),
            Element(kind="heading", text="Few makes big difference", page_start=8, page_end=8, level=2,
                    section="5 Method > Few makes big difference", section_id="5"),
            Element(kind="paragraph", text="Our method selectively reranks hard samples.", page_start=8,
                    page_end=8, section="5 Method > Few makes big difference", section_id="5"),
            Element(kind="heading", text="6 Conclusion", page_start=8, page_end=8, level=1, numbering="6",
                    section="6 Conclusion", section_id="6"),
            Element(kind="heading", text="Limitations", page_start=9, page_end=9, level=1,
                    section="Limitations"),
            Element(kind="paragraph", text="We study English only.", page_start=9, page_end=9, section="Limitations"),
        ]
        docs = StructureChunker(model_path=MODEL_PATH).run(elements, doc_id="d", file_name="f.pdf",
                                                           scope="local")["documents"]
        assert [(d.content, d.meta["section_id"], d.meta["page_start"], d.meta["page_end"]) for d in docs] == [
            ("5.4 Analysis\nFew makes big difference\nOur method selectively reranks hard samples.", "5", 8, 8),
            ("6 Conclusion", "6", 8, 8),  # the next heading is on the next page: no chunk reaches over
            ("Limitations\nWe study English only.", "", 9, 9),
        ]

    def test_a_table_over_many_pages_is_cut_at_two_pages(self) -> None:
        rows = [(f"row {i}", str(i)) for i in range(9)]
        table = Element(kind="table", text="", page_start=1, page_end=5, label="Table 4", caption="Table 4: Items",
                        header=("Item", "Count"), rows=rows, row_pages=[1, 1, 2, 2, 3, 3, 4, 4, 5])
        docs = StructureChunker(model_path=MODEL_PATH).run([table], doc_id="d", file_name="f.pdf",
                                                           scope="local")["documents"]
        assert all(d.meta["page_end"] - d.meta["page_start"] <= 1 for d in docs)
        assert all(d.content.startswith("Table 4: Items\nItem | Count\n") for d in docs)
        assert sum(d.content.count("row ") for d in docs) == 9

    def test_chunk_text_never_carries_control_characters(self) -> None:
        elements = [Element(kind="paragraph", text="Revenue\x04 grew by 2.4%\x00 in 2023.", page_start=1, page_end=1)]
        docs = StructureChunker(model_path=MODEL_PATH).run(elements, doc_id="d", file_name="f.pdf", scope="local")[
            "documents"]
        assert [d.content for d in docs] == ["Revenue grew by 2.4% in 2023."]


class TestPassageEmbedder:
    def test_init_and_serialisation(self) -> None:
        with pytest.raises(ValueError, match="batch_size"):
            PassageEmbedder(model_path=MODEL_PATH, batch_size=0)
        data = PassageEmbedder(model_path="/m", threads=2, batch_size=8).to_dict()
        assert data["init_parameters"] == {"model_path": "/m", "threads": 2, "batch_size": 8, "backend": "torch",
                                           "models_dir": ""}
        assert PassageEmbedder.from_dict(data).batch_size == 8

    def test_passage_text_prefixes_the_section_path(self) -> None:
        doc = Document(content="Up to 5 days.", meta={"section": "4 Leave > 4.1 Annual leave"})
        assert passage_text(doc) == "4 Leave > 4.1 Annual leave\nUp to 5 days."
        assert passage_text(Document(content="x", meta={})) == "x"


class TestChunkWriter:
    @pytest.fixture
    def store(self, tmp_path: Path):
        from connectors.sqlite_store import SQLiteDocumentStore

        return SQLiteDocumentStore(path=tmp_path / "chunks.db")

    def test_init_and_serialisation(self, store) -> None:
        from pipelines.components.writer import ChunkWriter

        with pytest.raises(ValueError, match="store"):
            ChunkWriter(store=None)  # type: ignore[arg-type]
        data = ChunkWriter(store=store).to_dict()
        assert data["type"] == "pipelines.components.writer.ChunkWriter"
        assert ChunkWriter.from_dict(copy.deepcopy(data)).to_dict() == data  # from_dict fills in the store

    @pytest.mark.parametrize("n_chunks", [0, 2])
    def test_run(self, store, n_chunks: int) -> None:
        from pipelines.components.writer import NO_TEXT, ChunkWriter

        meta = {"scope": "slack:T1:C1", "doc_id": "d1", "file_name": "a.pdf", "page_start": 1, "page_end": 1}
        docs = [Document(id=f"d1:{i:05d}", content=f"chunk {i}", meta={**meta, "chunk_index": i}, embedding=[0.0] * 4)
                for i in range(n_chunks)]
        out = ChunkWriter(store=store).run(documents=docs, scope="slack:T1:C1")
        assert out["written"] == n_chunks
        assert out["failed"] == ([] if n_chunks else [NO_TEXT])
        assert NO_TEXT.code == "no_text"
        assert store.count_documents() == n_chunks
