"""A statement's figure and a metric computed from quoted rows, as a reader gets them (issue 38 items 2 and 3): the
row, its period, its unit, the quotes that show each, and the arithmetic recomputed from the quotes."""

from __future__ import annotations

from decimal import Decimal

import pytest
from haystack import Document

from connectors.settings import Settings
from pipelines.components.statements import asked_item, row_is
from pipelines.figures.arithmetic import FormulaError, Operand, evaluate, instantiate, readable, recompute
from pipelines.figures.numbers import parse_figure
from pipelines.figures.periods import asked_period
from pipelines.figures.tables import read_page, split_rows
from pipelines.models import Citation, Computation, ComputedOperand
from pipelines.service import CitebotService
from tests.helpers.pdfs import make_pdf

SCOPE = "slack:T1:CFIN"
OTHER = "slack:T1:COTHER"
FILING = [
    ["Acme Widgets Inc. Annual Report on Form 10-K", "Fiscal 2022 was a year of steady growth for Acme Widgets.",
     "Management discusses results for fiscal 2022 in the pages that follow.",
     "Acme expects net income to grow 8% to 10% in fiscal 2023, reflecting new plant capacity."],
    ["CONSOLIDATED BALANCE SHEETS", "(In millions, except par value)", "December 31, 2022 December 31, 2021",
     "Inventories 90 80", "Total current assets 900 800", "Property and equipment, net 700 660",
     "Total assets 2,500 2,300",
     "Accounts payable 120 100", "Total current liabilities 400 350", "Long-term debt 600 640",
     "Total liabilities 1,200 1,100",
     "Total stockholders' equity 1,300 1,200"],
    ["CONSOLIDATED STATEMENTS OF INCOME", "(In millions, except per share data)", "Years Ended December 31,",
     "2022 2021 2020", "Total revenue 1,000 900 800", "Cost of revenue 400 380 350",
     "Selling, general and administrative 150 140 130", "Operating income 250 200 150",
     "Income before income taxes 230 190 150", "Provision for income taxes (Note 7) (50) (40) (30)",
     "Net income 180 150 120", "Diluted net income per share 1.80 1.50 1.20"],
    ["CONSOLIDATED STATEMENTS OF CASH FLOWS", "(In millions)", "Years Ended December 31,", "2022 2021 2020",
     "Net cash provided by operating activities 300 260 240",
     "Purchases of property and equipment (50) (45) (40)", "Dividends paid (30) (25) (20)"],
]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    svc = CitebotService(Settings(data_dir=tmp_path_factory.mktemp("figures"), ocr_enabled=False))
    pdf = make_pdf(FILING, bold=None)
    assert svc.ingest(pdf, file_name="ACME_2022_10K.pdf", scope=SCOPE).status == "indexed"
    return svc


def _verbatim(service: CitebotService, answer) -> None:
    for c in answer.citations:
        chunks = service.store.fetch(scopes=[SCOPE], filters={"field": "meta.doc_id", "operator": "==",
                                                               "value": c.doc_id})
        assert c.quote in {f"{d.meta['doc_id']}:{d.meta['chunk_index']:05d}": d.content for d in chunks}[c.chunk_id]


# --- what a reader asks for, end to end ---------------------------------------------------------------------

@pytest.mark.parametrize(
    ("question", "shown", "not_shown"),
    [
        ("What were Acme's total assets at the end of fiscal 2022?", "$2,500 million", "2,300"),
        ("What were Acme's total current liabilities in FY2022?", "$400 million", "1,200"),
        ("What were Acme's total liabilities in FY2021?", "$1,100 million", "350"),
        ("What was Acme's total revenue?", "$1,000 million", "900 million"),  # no year: the latest
        ("What was Acme's net income in 2020?", "$120 million", "180 million"),
        ("What was Acme's FY2022 capital expenditure?", "$50 million", "-$50"),  # an outflow, as an amount
    ],
)
def test_a_line_item_is_answered_with_its_figure_period_and_unit(service, question, shown, not_shown):
    answer = service.answer(question, [SCOPE])
    assert answer.kind == "figure" and not answer.refused
    first = answer.text.splitlines()[0]
    assert shown in first and not_shown not in first
    quotes = [c.quote for c in answer.citations]
    assert any("In millions" in q for q in quotes)  # the unit line
    assert any(q.count("20") >= 2 and any(y in q for y in ("2022", "2021")) for q in quotes)  # the periods
    _verbatim(service, answer)


def test_a_period_the_filing_lacks_is_said_to_be_missing(service):
    answer = service.answer("What was Acme's revenue in fiscal 2030?", [SCOPE])
    assert answer.refused and answer.kind == "figure"
    assert "no 2030 figure" in answer.text and "2022, 2021, 2020" in answer.text
    _verbatim(service, answer)


def test_a_question_about_the_outlook_is_answered_from_the_guidance_not_refused_for_a_missing_column(service):
    """No statement prints a year to come: "is it expected to grow" is answered by what the filing expects."""
    answer = service.answer("Is Acme's net income expected to grow in fiscal 2023?", [SCOPE])
    assert not answer.refused and "no 2023 figure" not in answer.text
    assert any("expects net income to grow 8% to 10%" in c.quote for c in answer.citations)


def test_a_share_of_sales_of_a_line_no_statement_names_is_not_answered_with_sales(service):
    """"Wages expense as a percent of net sales": the only line item named is net sales, which is not the answer."""
    answer = service.answer("Did Acme's wages expense as a percent of net sales increase or decrease in FY2022?",
                            [SCOPE])
    assert answer.kind != "figure" and not answer.text.startswith("Total revenue")


def test_a_unit_the_question_asks_for_is_shown_beside_the_quoted_figure(service):
    answer = service.answer("What were Acme's total assets in FY2022? Answer in USD billions.", [SCOPE])
    assert "$2,500 million" in answer.text and "$2.50 billion (converted from the quoted figure)" in answer.text


@pytest.mark.parametrize(
    ("question", "result"),
    [
        ("What is Acme's FY2022 operating margin?", "= 25.0%"),
        ("What is the FY2022 current ratio for Acme? Round to two decimal places.", "= 2.25"),
        ("What is Acme's year-over-year revenue growth from FY2021 to FY2022?", "= 11.1%"),
        # asked as analysts ask it: "did it grow", "how did it change", in two-digit years
        ("Did Acme grow its PPNE between FY21 and FY22?", "PP&E growth from fiscal 2021 to fiscal 2022"),
        ("How did Acme's net income change from FY2021 to FY2022?", "= 20.0%"),
        # FinanceBench's "has it increased its debt": the balance sheet's long-term debt, both years quoted
        ("Has Acme increased its debt on balance sheet between FY2022 and the FY2021 period?",
         "Long-term debt growth from fiscal 2021 to fiscal 2022 = (later − earlier) ÷ earlier, of long-term debt = "
         "(600 − 640) ÷ 640 × 100 = -6.3%"),
        ("What is Acme's FY2022 free cash flow?", "= 250 million"),
        ("What is the FY2022 return on assets for Acme? ROA is net income / average total assets.", "= 0.08"),
        ("What is the FY2020 - FY2022 3 year average of capex as a % of revenue for Acme?", "= 5.0%"),
        ("What was Acme's SG&A as a % of revenue in FY2022?", "= 15.0%"),
        # the provision printed as a deduction, "(50)", is an amount of tax
        ("What was Acme's effective tax rate in FY2022?", "= 21.7%"),
        # a rate's change in percentage points, both rates shown
        ("How much has Acme's operating margin changed between FY2021 and FY2022?",
         "= 2.8 percentage points (from 22.2% in fiscal 2021 to 25.0% in fiscal 2022)"),
        # "is it improving": the year asked beside the one before
        ("Does Acme have an improving operating margin profile as of FY2022?",
         "= 2.8 percentage points (from 22.2% in fiscal 2021 to 25.0% in fiscal 2022)"),
        ("Does Acme have an improving free cash flow conversion as of FY2022?",
         "= -4.4 percentage points (from 143.3% in fiscal 2021 to 138.9% in fiscal 2022)"),
        # the question's own definition: days payable over purchases (COGS plus the change in inventory)
        ("What is FY2022 days payable outstanding (DPO) for Acme? DPO is defined as: 365 * (average accounts "
         "payable between FY2021 and FY2022) / (FY2022 COGS + change in inventory between FY2021 and FY2022). "
         "Round your answer to two decimal places.", "= 97.93"),
        ("What is FY2022 days payable outstanding (DPO) for Acme? Round your answer to two decimal places.",
         "= 100.38"),
    ],
)
def test_a_metric_no_statement_prints_is_computed_from_quoted_rows(service, question, result):
    answer = service.answer(question, [SCOPE])
    assert answer.kind == "computed" and answer.computation is not None
    first = answer.text.splitlines()[0]
    assert result in first and "computed from the quoted rows" in first
    assert recompute(answer.computation, answer.citations)
    _verbatim(service, answer)


def test_no_figure_crosses_a_channel(service):
    answer = service.answer("What were Acme's total assets at the end of fiscal 2022?", [OTHER])
    assert answer.refused and not answer.citations


# --- the parts --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("line", "rows"),
    [
        ("Total assets | $ 27,165 $ | 27,241", [("Total assets", ["27,165", "27,241"])]),
        ("Purchases of property and equipment (442) (348) (419) Purchases of long-term investments (46) (42) (15)",
         [("Purchases of property and equipment", ["(442)", "(348)", "(419)"]),
          ("Purchases of long-term investments", ["(46)", "(42)", "(15)"])]),
        ("Cash flows from operating activities: Net income $ 4,756 $ 4,822 $ 5,260 Adjustments to reconcile:",
         [("Net income", ["4,756", "4,822", "5,260"])]),
        ("Trade receivables, net of allowances of $23 and of $16, respectively 2,065 1,878",
         [("Trade receivables, net of allowances of $23 and of $16, respectively", ["2,065", "1,878"])]),
        ("Management discussed the results at length.", []),
        ("Inventories, net (Note 6) | 2,438 | 2,320", [("Inventories, net (Note 6)", ["2,438", "2,320"])]),
        ("Other current assets (Notes 11 and 15) 761 873", [("Other current assets (Notes 11 and 15)",
                                                              ["761", "873"])]),
    ],
)
def test_rows_are_split_from_the_text_layer(line, rows):
    assert [(label, cells) for _, _, label, cells in split_rows(line, 2)] == rows


def test_a_page_reads_as_rows_under_their_header_and_unit():
    head = Document(id="a", content="BALANCE SHEETS\n(In millions)\nDecember 2, 2022 December 3, 2021\nASSETS")
    rows = Document(id="b", content="Total assets | $ 27,165 $ | 27,241\nTotal current liabilities | 8,128 | 6,932")
    page = read_page([head, rows])
    assert [(r.label, r.header.years if r.header else None, r.scale) for r in page.rows] == [
        ("Total assets", (2022, 2021), "millions"), ("Total current liabilities", (2022, 2021), "millions")]
    assert page.rows[0].span.text == "Total assets | $ 27,165 $ | 27,241" and page.rows[0].unit.text == "(In millions)"


def test_a_column_header_that_cites_a_note_is_still_the_header():
    """JnJ's balance sheet: the date line names the fiscal years' ends (2023, 2022), the next line the columns'
    years, after a note reference; "(Note 1)" is no column."""
    head = Document(id="a", content="CONSOLIDATED BALANCE SHEETS\nAt January 1, 2023 and January 2, 2022\n"
                                    "(Dollars in Millions Except Share and Per Share Amounts) (Note 1) 2022 2021")
    rows = Document(id="b", content="Inventories (Notes 1 and 3) | 12,483 | 10,387")
    page = read_page([head, rows])
    assert [(r.label, r.header.years if r.header else None) for r in page.rows] == [
        ("Inventories (Notes 1 and 3)", (2022, 2021))]


def test_a_row_under_a_line_that_groups_it_is_read_with_that_line():
    from pipelines.components.statements import line_item

    doc = Document(id="a", content="(In millions, except per share data)\n2023 2022\n"
                                   "Income from operations | 900 | 800\nEarnings per common share: |  | \n"
                                   "Basic | $ 3.27 $ | 3.83\nWeighted average common shares outstanding: |  | \n"
                                   "Basic | 1,551.6 | 1,578.8")
    rows = read_page([doc]).rows
    assert [(r.label, r.group, r.scale) for r in rows] == [
        ("Income from operations", "", "millions"),  # "operations" holds no "ratio"
        ("Basic", "Earnings per common share", ""),  # a figure per share is in dollars
        ("Basic", "Weighted average common shares outstanding", "millions")]
    eps = line_item("basic EPS")
    assert [row_is(eps, r.label, r.group) for r in rows] == [False, True, False]
    # under "Earnings per common share––diluted", a net income line is diluted EPS, and no longer net income
    diluted = "Earnings per common share––diluted"
    label = "Net income attributable to Pfizer Inc. common shareholders"
    assert row_is(line_item("diluted EPS"), label, diluted) and not row_is(line_item("net income"), label, diluted)
    assert row_is(line_item("net income"), label)


def test_a_section_total_printed_without_a_label_is_read_as_the_sections_total():
    head = Document(id="a", content="STATEMENTS OF OPERATIONS\n(In thousands)\nYear Ended December 31, 2020 2019")
    body = Document(id="b", content="Revenues\nCasino | $ 2,871 | $ 6,517\nRooms | 830 | 2,322\n | 3,701 | 8,839\n"
                                     "Expenses\nCasino | 1,701 | 3,623\nRooms | 419 | 829\n | 9,999 | 4,452")
    rows = read_page([head, body]).rows
    total = next(r for r in rows if r.label == "Total revenues")
    assert total.cells == ("3,701", "8,839") and total.header is not None and total.header.years == (2020, 2019)
    assert total.span.text.startswith("Revenues\nCasino") and total.span.text.endswith("3,701 | 8,839")
    # a line of figures that is not the sum of the rows above it is no total of anything
    assert [r.label for r in rows if r.label.startswith("Total")] == ["Total revenues"]


def test_a_passage_running_onto_the_next_page_puts_both_pages_forward():
    from pipelines.questions.figures import candidate_pages

    docs = [Document(id="x", content="Balance sheet title", meta={"doc_id": "d", "page_start": 71, "page_end": 72}),
            Document(id="y", content="Notes", meta={"doc_id": "d", "page_start": 90, "page_end": 90})]
    assert candidate_pages(docs) == [("d", 71), ("d", 72), ("d", 90)]


def test_a_total_printed_without_a_label_answers_for_the_line_item(service):
    pdf = make_pdf([
        ["Resorts International Annual Report on Form 10-K", "Results for 2020 are discussed below."],
        ["CONSOLIDATED STATEMENTS OF OPERATIONS", "(In thousands)", "Year Ended December 31,", "2020 2019",
         "Revenues", "Casino 2,871,720 6,517,759", "Rooms 830,382 2,322,579", "3,702,102 8,840,338",
         "Expenses", "Casino 1,701,783 3,623,899", "Operating income 642,434 3,940,215"],
    ], bold=None)
    scope = "slack:T1:CRESORTS"
    assert service.ingest(pdf, file_name="RESORTS_2020_10K.pdf", scope=scope).status == "indexed"
    answer = service.answer("What was total revenue of Resorts International in 2020?", [scope])
    assert answer.kind == "figure"
    assert answer.text.startswith("Total revenues for 2020: $3,702,102 thousand")


@pytest.mark.parametrize(
    ("question", "item"),
    [("What was capital expenditure in FY2018?", "capital expenditure"),
     ("total current liabilities in FY2022", "total current liabilities"),
     ("What were total liabilities?", "total liabilities"),
     ("What were net sales in 2019?", "revenue"),
     ("What was SG&A as a % of revenue in FY2022?", "selling, general and administrative"),
     ("What was basic EPS in 2022?", "basic EPS"),
     ("How much net cash was used in investing activities in 2021?", "cash from investing"),
     ("what is basic earnings per ordinary share in FY2023 for Bestbuy?", "basic EPS"),
     ("What goodwill does Best Buy have at the end of fiscal 2023?", "goodwill"),
     ("Who is the auditor?", None)],
)
def test_the_line_item_a_question_asks_for(question, item):
    found = asked_item(question)
    assert (found.name if found else None) == item


@pytest.mark.parametrize(
    ("item", "label", "is_it"),
    [("capital expenditure", "Purchases of property and equipment", True),
     ("total liabilities", "Total liabilities and stockholders' equity", False),
     ("total current liabilities", "Total liabilities", False),
     ("revenue", "Sales and marketing", False),
     ("revenue", "Net sales", True),
     ("revenue", "Revenue per Available Room (REVPAR)", False),
     ("selling, general and administrative", "Selling, general and administrative expenses", True),
     ("revenue", "Selling, general and administrative expenses", False),
     ("cash from investing", "Net cash used in investing activities", True),
     ("income before taxes", "Pretax income", True),
     ("receivables", "Trade accounts receivable, less allowance for doubtful accounts", True),
     ("cash from operations", "Cash provided (used) by operations", True),
     ("selling, general and administrative", "Total selling and administrative expense", True),
     ("goodwill", "Goodwill", True),
     ("net PP&E", "Property, plant and equipment", True),  # a balance sheet that prints only the net amount
     ("net PP&E", "Property, plant and equipment, gross", False),
     ("goodwill", "Goodwill impairment", False),
     ("basic EPS", "Basic earnings per ordinary share", True),
     # a sentence of prose that names the line is not its row
     ("cash from operations", "Cash collateral received or posted related to the Company's credit-related contingent "
                              "features is presented in the Cash provided by operations component", False)],
)
def test_a_row_is_the_item_by_meaning(item, label, is_it):
    from pipelines.components.statements import line_item

    assert row_is(line_item(item), label) is is_it


@pytest.mark.parametrize(
    ("text", "value"),
    [("$ 27,165", Decimal(27165)), ("(1,084)", Decimal(-1084)), ("—", Decimal(0)), ("12.5%", Decimal("12.5")),
     ("word", None)],
)
def test_printed_figures(text, value):
    assert parse_figure(text) == value


@pytest.mark.parametrize(
    ("question", "years"),
    [("FY2022 revenue", (2022,)), ("revenue in FY 22", (2022,)), ("between FY2018 and FY2019", (2018, 2019)),
     ("What was revenue?", ()), ("revenue of $2023 million", ())],
)
def test_the_period_a_question_names(question, years):
    assert asked_period(question).years == years


def test_arithmetic_is_instantiated_evaluated_and_read_back():
    operands: list[Operand] = []
    expr = instantiate("{revenue} / avg({net PP&E})", 2019, operands)
    assert [(o.item, o.year) for o in operands] == [("revenue", 2019), ("net PP&E", 2019), ("net PP&E", 2018)]
    values = {"o1": Decimal(6489), "o2": Decimal(253), "o3": Decimal(282)}
    assert round(evaluate(expr, values), 2) == Decimal("24.26")
    assert readable(expr, {"o1": "6,489", "o2": "253", "o3": "282"}) == "6,489 ÷ ((253 + 282) ÷ 2)"


@pytest.mark.parametrize("expr", ["__import__('os')", "o1.real", "o1 ** 2", "open(o1)", "o9"])
def test_nothing_but_arithmetic_is_evaluated(expr):
    with pytest.raises(FormulaError):
        evaluate(expr, {"o1": Decimal(1)})


def _computation(result: str) -> Computation:
    return Computation(expression="(o1 / o2)", factor="100", decimals=1, result=result,
                       operands=[ComputedOperand(name="o1", n=1, cell="250"), ComputedOperand(name="o2", n=2,
                                                                                              cell="1,000")])


def _citations(first: str) -> list[Citation]:
    return [Citation(n=n, chunk_id=f"d:{n}", doc_id="d", file="f.pdf", page_start=1, page_end=1, quote=q)
            for n, q in ((1, first), (2, "Total revenue 1,000 900"))]


@pytest.mark.parametrize(
    ("result", "first", "holds"),
    [("25.0", "Operating income 250 200", True),
     ("26.0", "Operating income 250 200", False),  # the shown result does not follow
     ("25.0", "Operating income 260 200", False)],  # the quote does not print the operand
)
def test_a_computation_is_recomputed_from_the_validated_quotes(result, first, holds):
    assert recompute(_computation(result), _citations(first)) is holds


def test_operands_from_tables_in_different_units_are_compared_in_dollars():
    """An MD&A table in millions and a balance sheet in thousands: 1,469.5 million ÷ 2,213,556 thousand is 0.66."""
    computation = Computation(expression="(o1 / o2)", decimals=2, result="0.66", operands=[
        ComputedOperand(name="o1", n=1, cell="1,469.5", scale="millions"),
        ComputedOperand(name="o2", n=2, cell="2,213,556", scale="thousands")])
    citations = [Citation(n=n, chunk_id=f"d:{n}", doc_id="d", file="f.pdf", page_start=1, page_end=1, quote=q)
                 for n, q in ((1, "Net cash provided by operating activities 1,469.5"),
                              (2, "Total current liabilities 2,213,556"))]
    assert recompute(computation, citations)
    assert not recompute(computation.model_copy(update={"operands": [
        o.model_copy(update={"scale": ""}) for o in computation.operands]}), citations)


@pytest.mark.parametrize(
    ("question", "figure"),
    [("How much was Acme's revenue in 2022?", True),
     ("How does Acme record its inventories?", False),  # a policy, not a figure
     ("For Acme, which year had the highest revenue?", False),  # a name
     ("What are the main risks to Acme's revenue?", False)],
)
def test_only_a_question_that_asks_for_a_figure_is_answered_with_one(question, figure):
    from pipelines.questions.kinds import QuestionKind, classify

    assert (QuestionKind.FIGURE in classify(question)) is figure


@pytest.mark.parametrize(
    ("question", "superlative"),
    [("Which region had the Highest EBITDAR Contribution for MGM during FY2022?", True),
     ("What is Best Buy's total revenue in fiscal 2023?", False),
     ("Best plan for a team of five: which is it?", True),
     ("Which plan is the cheapest?", True)],
)
def test_a_capitalised_superlative_inside_a_question_is_a_name_unless_the_comes_before_it(question, superlative):
    from pipelines.questions.kinds import QuestionKind, classify

    assert (QuestionKind.TABLE in classify(question)) is superlative


def test_a_question_about_what_drove_a_metric_is_not_answered_with_its_arithmetic(service):
    answer = service.answer("What drove the change in Acme's operating margin in FY2022?", [SCOPE])
    assert answer.kind != "computed"
    # an instruction to explain, after the question, still leaves the metric to compute
    answer = service.answer("Does Acme have positive working capital based on FY2022 data? If working capital is "
                            "not a useful metric for this company, explain why.", [SCOPE])
    assert answer.kind == "computed" and "= 500 million" in answer.text


@pytest.mark.parametrize(
    ("unit", "scale"),
    [("(In millions, except per share data)", "millions"), ("(Dollars in millions)", "millions"),
     ("(MILLIONS, EXCEPT PER COMMON SHARE DATA) | 2021 | 2020", "millions"), ("($ in thousands)", "thousands"),
     ("Amounts are stated in US dollars.", "")],
)
def test_the_units_statements_print(unit, scale):
    doc = Document(id="u", content=f"{unit}\n2021 2020\nRevenues | 81,288 | 41,651")
    assert read_page([doc]).rows[0].scale == scale


def test_a_release_that_prints_each_periods_share_of_sales_beside_it_reads_the_amounts():
    doc = Document(id="r", content="(In thousands, except per share data)\n| 2023 |  | 2022 |\n"
                                   "Net sales | $ 3,226,773 | 100.0% $ 2,729,388 |  | 100.0%\n"
                                   "Gross margin % | 37.6% | 37.6%")
    rows = read_page([doc]).rows
    assert rows[0].cells == ("3,226,773", "2,729,388")  # not 100.0% for 2022
    assert rows[1].cells == ("37.6%", "37.6%")  # a row of percentages keeps them


def _indexed(service: CitebotService, scope: str, pages: list[list[str]], file_name: str) -> str:
    """``scope``, holding ``pages`` as ``file_name`` (indexed by the first test that asks for it)."""
    if not service.store.fetch(scopes=[scope], limit=1):
        assert service.ingest(make_pdf(pages, bold=None), file_name=file_name, scope=scope).status == "indexed"
    return scope


QUARTERLY = [
    ["Acme Widgets Inc. Quarterly Report on Form 10-Q", "Results for the second quarter of 2022 follow."],
    ["CONDENSED CONSOLIDATED STATEMENTS OF INCOME",
     "Three months ended June 30, Six months ended June 30,",
     "(In millions) 2022 2021 2022 2021", "Total revenue 260 240 500 470", "Net income 45 40 85 70"],
]


@pytest.mark.parametrize(
    ("question", "shown"),
    [("What was Acme's net income in Q2 2022?", "Net income for the three months ended June 30, 2022: $45 million"),
     ("What was Acme's total revenue for the six months ended June 30, 2021?",
      "Total revenue for the six months ended June 30, 2021: $470 million")],
)
def test_a_quarterly_figure_says_the_span_its_column_covers(service, question, shown):
    """A 10-Q's columns are quarters and half-years under bare years: "for 2022" would read as the fiscal year."""
    scope = _indexed(service, "slack:T1:CQUARTER", QUARTERLY, "ACME_2022Q2_10Q.pdf")
    answer = service.answer(question, [scope])
    assert answer.kind == "figure" and not answer.refused
    assert answer.text.splitlines()[0].startswith(shown)
    span = shown.split(" for the ")[1].split(",")[0].lower()  # "three months ended june 30"
    assert any(c.quote.lower() == span for c in answer.citations)  # the span is quoted, not only said


@pytest.mark.parametrize(
    ("question", "shown"),
    [("What was Acme's net margin in Q2 2022?", "for the three months ended June 30, 2022 ="),
     # two periods "versus" each other are a growth, not a comparison of two documents
     ("What was Acme's net income growth in Q2 2022 versus Q2 2021?",
      "from the three months ended June 30, 2021 to the three months ended June 30, 2022 =")],
)
def test_a_metric_computed_from_a_quarter_says_the_span_its_columns_cover(service, question, shown):
    scope = _indexed(service, "slack:T1:CQUARTER", QUARTERLY, "ACME_2022Q2_10Q.pdf")
    answer = service.answer(question, [scope])
    assert answer.kind == "computed" and shown in answer.text.splitlines()[0]
    assert any(c.quote.lower() == "three months ended june 30" for c in answer.citations)
    assert recompute(answer.computation, answer.citations)


RELEASE = [
    ["Acme Widgets Announces Fourth Quarter Fiscal 2023 Results",
     "CONSOLIDATED STATEMENTS OF INCOME", "(In millions)", "13 Weeks Ended", "2023 2022",
     "Net sales 3,227 2,729", "Cost of sales 2,014 1,702", "Net income 341 289",
     "52 Weeks Ended", "2023 2022", "Net sales 10,209 8,631", "Cost of sales 6,164 5,262", "Net income 1,242 986"],
]


@pytest.mark.parametrize(
    ("question", "shown"),
    [("What were Acme's net sales in fiscal 2023?", "Net sales for the 52 weeks ended in 2023: $10,209 million"),
     ("What were Acme's net sales in Q4 2023?", "Net sales for the 13 weeks ended in 2023: $3,227 million"),
     ("What was Acme's cost of sales for the quarter ended in 2023?",
      "Cost of sales for the 13 weeks ended in 2023: $2,014 million"),
     ("What was Acme's gross margin in FY2023?", "= 39.6%")],
)
def test_a_year_asked_of_an_earnings_release_is_read_from_its_full_year_table(service, question, shown):
    """An earnings release prints the quarter's table first: a year's figure comes from the year's table."""
    scope = _indexed(service, "slack:T1:CRELEASE", RELEASE, "ACME_2023Q4_EARNINGS.pdf")
    answer = service.answer(question, [scope])
    assert not answer.refused and shown in answer.text.splitlines()[0]


DATED_QUARTERS = [
    ["Acme Widgets Inc. Quarterly Report on Form 10-Q", "CONDENSED CONSOLIDATED STATEMENTS OF INCOME",
     "(In millions)", "Three Months Ended Six Months Ended",
     "July 1, 2022 July 2, 2021 July 1, 2022 July 2, 2021",
     "Total revenue 260 240 500 470", "Net income 45 40 85 70"],
]


@pytest.mark.parametrize(
    ("question", "shown"),
    [("What was Acme's net income in Q2 2022?", ("Net income for the three months ended July 1, 2022", "$45 million")),
     ("What was Acme's total revenue for the six months ended July 1, 2022?",
      ("Total revenue for the six months ended July 1, 2022", "$500 million"))],
)
def test_a_dated_column_under_a_span_says_that_span(service, question, shown):
    """Columns dated by the header are still read under their own group's span: the half-year's columns are not
    "the three months ended"."""
    scope = _indexed(service, "slack:T1:CDATED", DATED_QUARTERS, "ACME_2022Q2_10Q.pdf")
    answer = service.answer(question, [scope])
    first = answer.text.splitlines()[0]
    assert answer.kind == "figure" and first.startswith(shown[0]) and shown[1] in first


TAX_NOTE = FILING[:3] + [
    ["NOTE 7. INCOME TAXES", "The reconciliation of the statutory rate to our effective tax rate follows.",
     "Years Ended December 31,", "2022 2021 2020", "Statutory federal income tax rate 21.0% 21.0% 21.0%",
     "Effective tax rate 22.9% 20.2% 17.5%"],
]


@pytest.mark.parametrize(
    ("question", "shown"),
    [("How much has the effective tax rate of Acme changed between FY2021 and FY2022?",
      "= 2.7 percentage points (from 20.2% in fiscal 2021 to 22.9% in fiscal 2022)"),
     ("What was Acme's effective tax rate in FY2022?", "= 22.9%")],
)
def test_a_rate_the_filing_prints_is_read_from_its_row_not_recomputed(service, question, shown):
    """The tax note prints the filer's own rate (22.9%); income tax over pre-tax income on the income statement
    gives 21.7% (50 / 230): an analyst quotes the filer's figure, from the page that states it."""
    scope = _indexed(service, "slack:T1:CTAXNOTE", TAX_NOTE, "ACME_2022_10K.pdf")
    answer = service.answer(question, [scope])
    first = answer.text.splitlines()[0]
    assert answer.kind == "computed" and shown in first and "as printed" in first
    assert any(c.quote.startswith("Effective tax rate") and c.page_start <= 4 <= c.page_end for c in answer.citations)
    assert recompute(answer.computation, answer.citations)


DISCUSSED = FILING[:1] + [
    ["Analysis of Consolidated Statements of Income", "Percent Change", "Years Ended December 31,", "2022 2021",
     "(In millions except percentages)", "Total revenue 1,000 900", "Cost of revenue 400 380",
     "Selling, general and administrative 150 140", "Operating income 250 200", "Income before income taxes 230 190",
     "Provision for income taxes (50) (40)", "Net income 180 150", "Diluted net income per share 1.80 1.50"],
] + FILING[1:]


@pytest.mark.parametrize("question", ["What was Acme's net income in FY2022?",
                                      "What is the FY2022 return on assets for Acme? ROA is net income / average "
                                      "total assets."])
def test_a_figure_is_quoted_from_the_statement_not_the_discussions_copy_of_it(service, question):
    """The discussion prints a copy of the income statement first ("Analysis of Consolidated Statements of
    Income"); a reader checks a figure against the statement itself."""
    scope = _indexed(service, "slack:T1:CDISCUSSED", DISCUSSED, "ACME_2022_10K.pdf")
    answer = service.answer(question, [scope])
    net_income = [c.quote for c in answer.citations if c.quote.startswith("Net income")]
    assert net_income == ["Net income 180 150 120"]  # the statement's row (three years), not the copy's (two)


CARD_ISSUER = [
    ["Acme Card Company Annual Report on Form 10-K", "Acme Card issues charge and credit cards."],
    ["ACME CARD COMPANY", "CONSOLIDATED STATEMENTS OF INCOME", "(Millions, except per share amounts)",
     "Year Ended December 31,", "2022 2021 2020",
     "Discount revenue 30,739 24,563 19,435", "Net card fees 6,070 5,195 4,664",
     "Total non-interest revenues 42,967 34,630 28,102", "Interest on loans 11,967 8,850 9,779",
     "Total interest expense 2,763 1,283 2,098", "Net interest income 9,895 7,750 7,985",
     "Total revenues net of interest expense 52,862 42,380 36,087", "Card Member rewards 14,002 11,007 8,041",
     "Marketing 5,458 5,291 3,696", "Total expenses 41,095 33,110 27,061", "Pretax income 9,585 10,689 4,296",
     "Income tax provision 2,071 2,629 1,161", "Net income 7,514 8,060 3,135"],
    ["ACME CARD COMPANY", "CONSOLIDATED STATEMENTS OF COMPREHENSIVE INCOME", "(Millions)", "Year Ended December 31,",
     "2022 2021 2020", "Net income 7,514 8,060 3,135", "Net unrealized debt securities losses (84) (45) 11",
     "Foreign currency translation adjustments (193) (57) 95", "Net unrealized pension losses (66) 174 (57)",
     "Other comprehensive loss (343) 72 49", "Comprehensive income 7,171 8,132 3,184",
     "Comprehensive income attributable to common shareholders 7,100 8,050 3,100"],
]


@pytest.mark.parametrize(
    ("question", "line"),
    [("Does Acme Card have an improving operating margin profile as of 2022? If operating margin is not a useful "
      "metric for a company like this, then state that and explain why.", "operating income"),
     ("What drove gross margin change as of the FY2022 for Acme Card? If gross margin is not a useful metric for a "
      "company like this, then please state that and explain why.", "cost of goods sold")],
)
def test_a_metric_whose_line_the_statement_lacks_is_said_not_to_apply_when_the_question_allows_it(service, question,
                                                                                                 line):
    """A card issuer's income statement prints no cost of goods sold or operating income: asked to say so when the
    metric is not useful, the answer names the line the statement lacks and quotes the statement, not the
    comprehensive income statement after it."""
    scope = _indexed(service, "slack:T1:CCARD", CARD_ISSUER, "ACME_CARD_2022_10K.pdf")
    answer = service.answer(question, [scope])
    assert not answer.refused and f"prints no {line} line" in answer.text
    assert [c.quote for c in answer.citations][:1] == ["CONSOLIDATED STATEMENTS OF INCOME"]
    assert "=" not in answer.text  # nothing computed


QUARTER_RELEASE = [
    ["Acme Widgets Reports Fourth-Quarter 2022 Results", "Fourth-quarter sales and cost of revenue follow.",
     "CONSOLIDATED STATEMENTS OF EARNINGS", "(In millions)", "Fourth Quarter", "2022 2021",
     "Total revenue 260 240", "Cost of revenue 104 96", "Net income 45 40"],
]


def test_a_metric_reads_every_operand_from_one_filing(service, tmp_path_factory):
    """A channel with the 10-K and the fourth quarter's release: the year's inventory turnover divides the 10-K's
    cost of revenue (400) by its inventories, never the release's quarter (104) by the 10-K's inventories."""
    scope = "slack:T1:CONEFILING"
    if not service.store.fetch(scopes=[scope], limit=1):
        for pages, name in ((QUARTER_RELEASE, "ACME_2022Q4_EARNINGS.pdf"), (FILING, "ACME_2022_10K.pdf")):
            assert service.ingest(make_pdf(pages, bold=None), file_name=name, scope=scope).status == "indexed"
    answer = service.answer("What is Acme's FY2022 inventory turnover? Calculate it from cost of revenue and "
                            "average inventories.", [scope])
    assert answer.kind == "computed" and "400 ÷ ((90 + 80) ÷ 2)" in answer.text.splitlines()[0]
    assert {c.file for c in answer.citations} == {"ACME_2022_10K.pdf"}
