"""The eval set format, and the shipped demo set checked against the sample PDFs' own text."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from eval.cases import Case, EvalSetError, append_cases, dedup_key, load_cases

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "eval" / "sets" / "demo.jsonl"


def _norm(text: str) -> str:
    text = re.sub(r"-\n", "", text)  # hyphenated line breaks
    return " ".join(text.replace("\u00ad", "").split()).casefold()


@pytest.fixture(scope="module")
def page_texts() -> dict[str, list[str]]:
    from pypdf import PdfReader

    from eval.sample_pdfs import SAMPLE_FILES, sample_bytes

    out = {}
    for name in SAMPLE_FILES:
        reader = PdfReader(io.BytesIO(sample_bytes(name)))
        out[name] = [_norm(p.extract_text() or "") for p in reader.pages]
    return out


def test_demo_set_shape() -> None:
    cases = load_cases(DEMO)
    assert len(cases) >= 30
    cats = {c.category for c in cases}
    assert {"lookup", "table", "reference", "multi-part", "summary", "paraphrase", "ocr", "unanswerable"} <= cats
    assert sum(1 for c in cases if not c.answerable) >= 5
    assert any(c.critical for c in cases)


def test_demo_sources_name_real_files_and_pages(page_texts: dict[str, list[str]]) -> None:
    for case in load_cases(DEMO):
        for s in case.sources:
            assert s.doc in page_texts, f"{case.id}: unknown file {s.doc}"
            assert s.pages and max(s.pages) <= len(page_texts[s.doc]), case.id


def test_demo_expected_answers_are_on_the_expected_pages(page_texts: dict[str, list[str]]) -> None:
    """Every part of an expected answer occurs in the text of one of the case's expected pages.

    (OCR cases are on the scanned page, which has no text layer: they are checked against the
    generator's ground truth below instead.)"""
    checked = 0
    for case in load_cases(DEMO):
        if not case.answer or case.category == "ocr":
            continue
        text = " ".join(page_texts[s.doc][p - 1] for s in case.sources for p in s.pages)
        for part in case.answer.split(";"):
            assert _norm(part) in text, f"{case.id}: {part!r} not on pages {[s.pages for s in case.sources]}"
            checked += 1
    assert checked >= 25


def test_demo_agrees_with_the_sample_ground_truth() -> None:
    from eval.sample_pdfs import facts

    truth = {f.question: (f.file, list(f.pages), f.answer) for f in facts()}
    matched = 0
    for case in load_cases(DEMO):
        if case.question in truth:
            file, pages, answer = truth[case.question]
            assert (case.sources[0].doc, case.sources[0].pages) == (file, pages), case.id
            if case.category == "ocr":
                assert case.answer == answer, case.id
            matched += 1
    assert matched >= 10
    assert all(c.question in truth for c in load_cases(DEMO) if c.category == "ocr")


def test_bad_lines_name_file_line_and_field(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text('{"id": "a", "question": "q"}\n'
                 '{"id": "b", "question": "q", "sources": [{"doc": "x", "pages": [0]}]}\n')
    with pytest.raises(EvalSetError, match=r"s.jsonl:2: sources.0.pages"):
        load_cases(p)
    p.write_text('{"id": "a", "question": "q"}\n{"id": "a", "question": "r"}\n')
    with pytest.raises(EvalSetError, match="duplicate id 'a'"):
        load_cases(p)
    p.write_text('{"id": "a", "question": "q", "answerable": false, "sources": [{"doc": "x"}]}\n')
    with pytest.raises(EvalSetError, match="unanswerable case cannot have sources"):
        load_cases(p)
    p.write_text("{not json\n")
    with pytest.raises(EvalSetError, match="s.jsonl:1: not valid JSON"):
        load_cases(p)
    p.write_text('{"id": "a", "question": "q", "sources": [{"doc": "x"}], "asked_in": ["x"]}\n')
    with pytest.raises(EvalSetError, match="s.jsonl:1: .*asked_in is for unanswerable cases"):
        load_cases(p)


def test_append_round_trips(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text('{"id": "a", "question": "q"}')  # no trailing newline
    append_cases(p, [Case(id="b", question="Where?", origin="feedback", scope="slack:T:C")])
    cases = load_cases(p)
    assert [c.id for c in cases] == ["a", "b"]
    assert cases[1].origin == "feedback"


def test_dedup_key_folds_case_punctuation_and_space() -> None:
    assert dedup_key("What are the  core hours?", "s") == dedup_key("what are the core hours", "s")
    assert dedup_key("What are the core hours?", "s") != dedup_key("What are the core hours?", "t")


def test_asked_in_round_trips_and_stays_out_of_lines_without_it(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    append_cases(p, [Case(id="u", question="Who?", answerable=False, asked_in=["hb.pdf"]),
                     Case(id="v", question="Why?", answerable=False)])
    assert "asked_in" not in p.read_text().splitlines()[1]
    assert [c.asked_in for c in load_cases(p)] == [["hb.pdf"], []]
