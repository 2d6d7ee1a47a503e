"""``answer_shown`` (issue 38): is a short expected answer on the user's screen, in the document's own format?"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from eval.cases import Source
from eval.metrics import answer_shown, case_metrics, figures_in, is_short_answer, summarise
from eval.records import CaseResult, CitedQuote
from eval.report import write_report
from tests.helpers.runs import write_run

SRC = [Source(doc="10k.pdf", pages=[40])]


def result(cid: str = "c", *, expected: str | None, answer: str = "Here is what the PDFs say [1]:",
           quotes: tuple[str, ...] = (), verbatim: bool = True, category: str = "lookup", **kw: object) -> CaseResult:
    citations = [CitedQuote(n=i, chunk_id=f"k:{i}", file="10k.pdf", page_start=40, page_end=40, quote=q,
                            verbatim=verbatim) for i, q in enumerate(quotes, 1)]
    return CaseResult.model_validate({"id": cid, "question": "q?", "category": category, "sources": SRC,
                                      "expected_answer": expected, "answer": answer, "citations": citations, **kw})


class TestFiguresIn:
    @pytest.mark.parametrize(
        ("text", "figures"),
        [
            ("Total revenue $27,165", [Decimal("27165")]),
            ("Operating loss (1,577)", [Decimal("-1577")]),
            ("change of −3.7 points", [Decimal("-3.7")]),
            ("margin 1.9%", [Decimal("1.9")]),
            ("$27.165 billion", [Decimal("27165000000")]),
            ("EUR 5 million", [Decimal("5000000")]),
            # a citation marker is no number, nor the year inside a fiscal period
            ("FY2022 sales [1]", []),
            # a range's dash is no minus sign
            ("fiscal 2021-2022", [Decimal("2021"), Decimal("2022")]),
            ("pages 10 - 12", [Decimal("10"), Decimal("12")]),
        ],
    )
    def test_reads_numbers_as_a_page_prints_them(self, text: str, figures: list[Decimal]) -> None:
        assert figures_in(text) == figures


class TestFigureShown:
    @pytest.mark.parametrize(
        ("expected", "shown", "value"),
        [
            # a table in millions prints $27.165 billion as 27,165; and the other way round
            ("$27.165 billion", "Net revenues $ 27,165", 1.0),
            ("$27.165 billion", "Net revenues $27,165,000,000", 1.0),
            ("$27.165 billion", "Net revenues of $27.2 billion", 0.0),  # fewer digits than the expected
            # "$5466.00" is a set's way of writing whole millions: a table in thousands shows it
            ("$5466.00", "Total current liabilities 5,466,312", 1.0),
            ("$5466.00", "Total current liabilities 5,467,312", 0.0),
            ("24.26", "24.3", 0.0),  # real decimals are still a precision
            ("$1,577 million", "Revenue 1,580", 0.0),
            ("$1,577 million", "Revenue was 1.577 billion", 1.0),
            ("1577", "(in millions) Revenue 1,577", 1.0),
            ("1.577 billion", "Revenue 1,577", 1.0),
            # parentheses are a minus sign
            ("-1577", "Net loss (1,577)", 1.0),
            ("-1577", "Net loss −1,577", 1.0),
            ("1,577", "Net loss (1,577)", 0.0),
            # a fall written in words shows a negative expected by its magnitude
            ("-3.7", "sales decreased 3.7% year on year", 1.0),
            # more digits than the expected round to it; fewer do not
            ("24.26", "days sales outstanding 24.259", 1.0),
            ("24.26", "days sales outstanding 24.3", 0.0),
            ("24.26", "days sales outstanding 24.25", 0.0),
            ("24.26", "days sales outstanding 24.255", 1.0),
            ("1.9%", "organic growth of 1.9%", 1.0),
            ("1.9%", "organic growth of 1.87%", 1.0),
            ("1.9%", "organic growth of 1.95%", 0.0),
            ("$5466.00", "Total 5,466", 1.0),
            ("0.66", "quick ratio 0.66", 1.0),
            ("0.66", "quick ratio 0.67", 0.0),
            # a percentage is never printed in thousands
            ("1.9%", "1,900 employees", 0.0),
            ("EUR 5,000,000", "liability capped at EUR 5 million", 1.0),
            # a one-digit figure must be printed as that number: 1.5 days or 2,000 staff do not show "2"
            ("2", "1.5 days", 0.0),
            ("2", "2,000 staff", 0.0),
            ("2", "within 2 days", 1.0),
            ("2", "2 million shares", 1.0),
            # a bare year in a header shows only that year, never an amount of 2,022 million
            ("2,022 million", "Year ended December 31, 2022", 0.0),
            ("2,022 million", "Revenue 2,022", 1.0),
            ("2022", "Year ended December 31, 2022", 1.0),
            ("2022", "Revenue 2,022", 0.0),
            ("2022", "FY2022 revenue", 0.0),
            ("2.022", "In 2022 revenue rose", 0.0),
            ("1,050", "a total of 1,050 staff", 1.0),
            ("1,050", "a total of 1,500 staff", 0.0),
        ],
    )
    def test_a_figure_in_the_documents_own_format(self, expected: str, shown: str, value: float) -> None:
        assert answer_shown(expected, [shown]) == value

    def test_any_shown_text_may_print_it(self) -> None:
        # the lead line says nothing; the second quote holds the figure
        shown = ["Here is what the PDFs say [1][2]:", "Revenue grew.", "Revenue was $27,165 million."]
        assert answer_shown("$27.165 billion", shown) == 1.0
        assert answer_shown("$27.165 billion", shown[:2]) == 0.0


class TestTextShown:
    @pytest.mark.parametrize(
        ("expected", "shown", "value"),
        [
            ("the laws of Ireland", "This Agreement is governed by the Laws of Ireland.", 1.0),
            ("Payroll Office", "Ask the payroll-office team.", 1.0),
            ("Payroll Office", "Ask the People Team.", 0.0),
            ("car park B", "Park in car park BB.", 0.0),  # whole words only
            ("10:00 to 15:00", "Core hours are 10:00 to 15:00.", 1.0),
            # a list is shown when every item is, whatever their order
            ("['ORACLE', 'IBM']", "Partners: IBM and Oracle.", 1.0),
            ("['ORACLE', 'IBM']", "Partners: Oracle.", 0.0),
            ("['yellow', 'black and white']", "A yellow logo on a black-and-white page.", 1.0),
            # the parts of a multi-part answer, likewise
            ("26 weeks; 6 weeks", "26 weeks for the primary carer, 6 weeks for the other parent", 1.0),
            ("26 weeks; 6 weeks", "26 weeks for the primary carer", 0.0),
        ],
    )
    def test_a_short_text_contained_after_normalisation(self, expected: str, shown: str, value: float) -> None:
        assert answer_shown(expected, [shown]) == value


class TestShortAnswer:
    @pytest.mark.parametrize(
        ("expected", "short"),
        [
            ("$1,577 million", True),
            ("-3.7", True),
            ("Dana Okafor", True),
            ("up to 3 days per week", True),
            ("160 pounds per night in London", True),  # six words
            ("['OPTIMISATION', 'PREDICTIVE MODELING', 'FORECASTING', 'STATISTICAL ANALYSIS']", True),
            ("one month during the first two years of service", False),  # eight words
            ("JnJ realised $13.2 billion in cash proceeds from the separation of Kenvue.", False),
            ("FCF conversion improved from 143% in 2021 to 156% in 2022", False),
            ("Yes", False),  # a verdict, not something a page prints
            ("No, rate of growth in adjusted EPS is expected to decelerate", False),
            ("['Iterative Retrieval', 'an explanation that runs well past six words long']", False),
            ("", False),
            (None, False),
        ],
    )
    def test_which_answers_are_looked_for(self, expected: str | None, short: bool) -> None:
        assert is_short_answer(expected) is short
        if not short:  # not counted either way: no 0 for an answer that cannot be looked for on the screen
            assert answer_shown(expected, [expected or ""]) is None


class TestCaseMetric:
    def test_answer_text_and_verbatim_quotes_count_a_quote_not_verbatim_does_not(self) -> None:
        in_answer = result(expected="1.9%", answer="Organic growth was 1.9% [1].")
        in_quote = result(expected="1.9%", quotes=("Organic growth of 1.9% in fiscal 2023.",))
        forged = result(expected="1.9%", quotes=("Organic growth of 1.9% in fiscal 2023.",), verbatim=False)
        assert [case_metrics(r)["answer_shown"] for r in (in_answer, in_quote, forged)] == [1.0, 1.0, 0.0]

    @pytest.mark.parametrize(
        ("case", "value"),
        [
            (result(expected="1.9%", quotes=("1.9%",), refused=True), 0.0),  # refused: nothing shown
            (result(expected="1.9%", quotes=("1.9%",), error="boom"), 0.0),
            (result(expected=None, answerable=False, sources=[], answer="Made up 1.9%."), None),  # unanswerable
            (result(expected="Sales grew because stores opened in twelve new states", quotes=("x",)), None),
            (result(expected=None, quotes=("x",)), None),  # a summary question without an expected text
        ],
    )
    def test_not_shown_or_not_counted(self, case: CaseResult, value: float | None) -> None:
        assert case_metrics(case)["answer_shown"] == value

    def test_per_category_and_overall_with_the_cases_it_rests_on(self) -> None:
        results = [
            result("a", expected="$27.165 billion", quotes=("Revenue $27,165",), category="figures"),
            result("b", expected="-1577", quotes=("Loss 1,234",), category="figures"),
            result("c", expected="Payroll Office", quotes=("Ask the Payroll Office.",), category="text"),
            result("d", expected="a long explanation of why the sales grew in that year", category="text"),
            result("u", expected=None, answerable=False, sources=[], refused=True, category="unanswerable"),
        ]
        s = summarise(results)
        shown = {name: (o["answer_shown"], o["short_answer_cases"]) for name, o in s["categories"].items()}
        assert shown == {"figures": (0.5, 2), "text": (1.0, 1), "unanswerable": (None, 0)}
        assert (s["overall"]["answer_shown"], s["overall"]["short_answer_cases"]) == (pytest.approx(2 / 3), 3)

    def test_an_existing_run_directory_gets_it_from_its_results_alone(self, tmp_path: Path) -> None:
        # results.jsonl written before answer_shown existed hold the answer and quotes: the report recomputes it
        run = write_run(tmp_path / "old", [
            result("a", expected="$27.165 billion", quotes=("Revenue $27,165",)),
            result("b", expected="-1577", quotes=("Loss 1,234",)),
        ])
        write_report(run, use_gates=False)
        md = (run / "report.md").read_text()
        assert "| answer_shown | 0.500 |" in md and "| short_answer_cases | 2 |" in md
