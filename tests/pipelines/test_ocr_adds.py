"""OCR adds, never replaces (issue 38): a readable text layer is kept however short, a page without one is OCR'd,
and a scan with a few lines of real text keeps them and gains the picture's words. Through the real reader: the
memory-capped child process the indexer uses."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from connectors.ocr import tesseract_available
from pipelines.components.isolated_reader import IsolatedPdfReader
from pipelines.reading.layout import Line, ParsedPdf
from pipelines.reading.ocr import add_ocr_lines
from pipelines.reading.text import is_readable
from tests.helpers import SHARED_PDFS
from tests.helpers.pdfs import make_pdf, remapped_pdf, scanned_pdf, to_control_chars

MEMO = ["The remote work stipend is paid", "monthly from the first of July.", "Signed by Ingrid Solberg"]


def _read(data: bytes, **kwargs: object) -> ParsedPdf:
    reader = IsolatedPdfReader(ocr_page_timeout_s=30, **kwargs)  # type: ignore[arg-type]
    out = reader.run(data, deadline=time.monotonic() + 120)
    assert not out["failed"], out["failed"]
    parsed: ParsedPdf = out["parsed"]
    return parsed


def _texts(parsed: ParsedPdf, page: int = 1) -> list[str]:
    return [ln.text for ln in parsed.pages[page - 1].lines]


def _words(lines: list[str]) -> set[str]:
    return {w.strip(".,").lower() for line in lines for w in line.split()}


def _needs_tesseract() -> None:
    if not tesseract_available():
        pytest.skip("tesseract is not installed")


@pytest.mark.parametrize(
    ("text", "dropped", "readable"),
    [
        pytest.param("Line 1\nLine 2", 0, True, id="short-latin"),
        pytest.param("يبيبَح habibi", 0, True, id="arabic"),
        pytest.param("25", 0, True, id="a-page-number"),
        pytest.param("\ue001 Agenda", 0, True, id="one-private-use-bullet"),
        pytest.param("Revenue \ufffd rose", 0, True, id="one-replacement-char"),
        pytest.param("", 0, False, id="empty"),
        pytest.param("• — •", 0, False, id="no-letter-or-digit"),
        pytest.param("\ue001\ue002\ue003\ue004 ab", 0, False, id="private-use-glyphs"),
        pytest.param("(cid:3)(cid:4)(cid:5) x", 0, False, id="cid-garbage"),
        pytest.param("a.b", 25, False, id="control-characters"),
        pytest.param("Dividends rose to 155.98 million in the year under review.", 4, True, id="few-controls"),
    ],
)
def test_readable_text_layer(text: str, dropped: int, readable: bool) -> None:
    assert is_readable(text, dropped=dropped) is readable


def test_ocr_lines_are_added_only_for_words_the_text_layer_lacks() -> None:
    def line(text: str, top: float, conf: float | None = None) -> Line:
        return Line(page=1, text=text, x0=50, top=top, x1=300, bottom=top + 12, ocr_confidence=conf)

    text_layer = [line("Page 7", 800)]
    ocr = [line("Quarterly report", 100, 90.0), line("7", 805, 80.0), line("page 7", 790, 85.0)]
    assert add_ocr_lines(text_layer, ocr) == [ocr[0], text_layer[0]]  # merged by place; "7", "page 7" known
    assert add_ocr_lines([], ocr) == ocr
    assert add_ocr_lines(text_layer, ocr[1:]) == text_layer


class TestThroughTheReader:
    def test_a_short_text_layer_keeps_its_exact_text(self) -> None:
        _needs_tesseract()
        parsed = _read(make_pdf([["Line 1", "Line 2"], ["Ünïcödé – 42"]], bold=None))
        assert [_texts(parsed, 1), _texts(parsed, 2)] == [["Line 1", "Line 2"], ["Ünïcödé – 42"]]
        assert parsed.ocr_pages == [] and not any(p.needs_ocr for p in parsed.pages)

    def test_a_scanned_page_gets_ocr_text(self) -> None:
        _needs_tesseract()
        parsed = _read(scanned_pdf([(MEMO, [])]))
        assert parsed.ocr_pages == [1]
        page = parsed.pages[0]
        assert page.lines and all(ln.ocr_confidence is not None for ln in page.lines)
        expected = _words(MEMO)
        assert len(expected & _words(_texts(parsed))) >= 0.9 * len(expected)

    def test_a_scan_with_a_page_number_keeps_it_and_gains_the_pictures_words(self) -> None:
        _needs_tesseract()
        parsed = _read(scanned_pdf([(MEMO, ["Page 7 of 12"])]))
        assert parsed.ocr_pages == [1]
        lines = parsed.pages[0].lines
        kept = [ln.text for ln in lines if ln.ocr_confidence is None]
        added = [ln.text for ln in lines if ln.ocr_confidence is not None]
        assert kept == ["Page 7 of 12"]  # the text layer, exactly, and once
        expected = _words(MEMO)
        assert len(expected & _words(added)) >= 0.9 * len(expected)
        assert lines[-1].text == "Page 7 of 12"  # in its place: the foot of the page, after the memo

    def test_a_short_text_layer_without_a_large_picture_is_not_ocrd(self) -> None:
        # the same page number, with the memo as real text: nothing for OCR to add
        parsed = _read(make_pdf([["Page 7 of 12"]], bold=None))
        assert parsed.pages[0].needs_ocr is False and parsed.ocr_pages == []

    def test_an_unreadable_text_layer_is_replaced_by_ocr(self) -> None:
        _needs_tesseract()
        lines = ["Revenue grew by 2.4% in the year under review."] * 3
        parsed = _read(remapped_pdf([lines], to_control_chars, remap_pages={1}))
        assert parsed.ocr_pages == [1]
        assert all(ln.ocr_confidence is not None for ln in parsed.pages[0].lines)
        assert {"revenue", "grew", "review"} <= _words(_texts(parsed))

    def test_with_ocr_off_a_scan_keeps_its_text_layer(self) -> None:
        parsed = _read(scanned_pdf([(MEMO, ["Page 7 of 12"])]), ocr_enabled=False)
        assert _texts(parsed) == ["Page 7 of 12"] and parsed.ocr_pages == []


def _shared(pattern: str) -> list[Path]:
    if not SHARED_PDFS.is_dir():
        pytest.skip(f"{SHARED_PDFS} is not present on this machine")
    return sorted(SHARED_PDFS.glob(pattern))


class TestSharedPdfs:
    """Real producers' PDFs (../shared/pdfs): short real text layers that OCR used to replace with its misreadings
    ("يبيبَح habibi" became "habibi 25", "Line 1 / Line 2" became "Line 2 Line 1 &")."""

    def test_arabic_text_layers_are_kept(self) -> None:
        _needs_tesseract()
        paths = _shared("015-arabic_habibi*.pdf")
        assert len(paths) == 3
        for path in paths:
            parsed = _read(path.read_bytes())
            assert parsed.ocr_pages == [], path.name
            for page in parsed.pages:
                words = " ".join(_texts(parsed, page.number)).split()
                assert "habibi" in words and "يبيبَح" in words, (path.name, page.number, words)

    @pytest.mark.parametrize(
        ("name", "lines"),
        [
            ("024-annotations_annotated_pdf.pdf", ["Some text.", "Line 1", "Line 2", "Not highlighted"]),
            ("020-xmp_output_with_metadata_pymupdf.pdf", ["Hello, World!"]),
            ("016-libre-office-link_libre-office-link.pdf", ["This is a link to an awesome blog."]),
            ("022-pdfkit_pdfkit.pdf", ["Header", "Foo: bar", "ABC: DEF"]),
        ],
    )
    def test_short_text_layers_are_kept_exactly(self, name: str, lines: list[str]) -> None:
        _needs_tesseract()
        (path,) = _shared(name)
        parsed = _read(path.read_bytes())
        assert _texts(parsed) == lines and parsed.ocr_pages == []

    def test_pictures_with_a_caption_keep_it(self) -> None:
        # six pages, each a page-sized picture (colour swatches, no words), four with "Background" as real text
        _needs_tesseract()
        (path,) = _shared("007-imagemagick-images_imagemagick-images.pdf")
        parsed = _read(path.read_bytes())
        assert all(p.needs_ocr for p in parsed.pages)  # a short text layer on a picture, or none: OCR may add
        assert [_texts(parsed, p.number) for p in parsed.pages] == [["Background"]] * 3 + [[], [], ["Background"]]
        assert parsed.ocr_pages == []  # OCR found no words to add, so no page counts as OCR'd

    def test_long_text_layer_with_a_figure_is_not_ocrd(self) -> None:
        (path,) = _shared("003-pdflatex-image_pdflatex-image.pdf")
        parsed = _read(path.read_bytes())
        assert not parsed.pages[0].needs_ocr and parsed.ocr_pages == []
        assert _texts(parsed)[0] == "1 Your Chapter"
