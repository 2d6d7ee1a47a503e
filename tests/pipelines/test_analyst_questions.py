"""Questions as analysts write them, over a generated 10-K: the instructions around the question steer the answer
and never cause a refusal, the company's name does not pull in boilerplate that merely names it, and "fiscal
2022" does not pull the section titled "Fiscal 2022" above the balance sheet (real indexing, real embeddings)."""

from __future__ import annotations

import pytest

from connectors.settings import Settings
from pipelines.service import CitebotService
from tests.helpers.pdfs import make_pdf

pytestmark = pytest.mark.slow

FILE = "NORTHWIND_2022_10K.pdf"
COVER, FISCAL, AUDITOR, BALANCE, INCOME, CERTIFICATION = 1, 2, 3, 4, 5, 6
PAGES = [
    ["NORTHWIND CORPORATION", "Annual Report on Form 10-K", "For the fiscal year ended December 31, 2022",
     "Northwind Corporation is a Delaware corporation."],
    ["Fiscal 2022", "Fiscal 2022 was a year of expansion for Northwind Corporation.",
     "In fiscal 2022 we opened twelve new distribution centers and entered three new markets.",
     "Our fiscal 2022 priorities were customer growth and supply chain resilience.",
     "We ended fiscal 2022 with more employees than at the end of fiscal 2021."],
    ["Report of Independent Registered Public Accounting Firm",
     "To the Stockholders and Board of Directors of Northwind Corporation:",
     "We have audited the accompanying consolidated balance sheets of Northwind Corporation as of",
     "December 31, 2022 and 2021. In our opinion, the financial statements of Northwind Corporation",
     "present fairly, in all material respects, the financial position of Northwind Corporation."],
    ["NORTHWIND CORPORATION", "CONSOLIDATED BALANCE SHEETS", "(in millions)",
     "December 31, | 2022 | 2021",
     "Cash and cash equivalents | 1,204 | 1,015",
     "Accounts receivable, net | 2,310 | 2,044",
     "Inventories | 3,118 | 2,870",
     "Total current assets | 6,632 | 5,929",
     "Property and equipment, net | 8,415 | 7,990",
     "Goodwill | 1,750 | 1,750",
     "Total assets | 16,797 | 15,669",
     "Accounts payable | 2,205 | 1,980",
     "Total current liabilities | 4,101 | 3,822",
     "Long-term debt | 5,300 | 5,450",
     "Total stockholders' equity | 7,396 | 6,397"],
    ["NORTHWIND CORPORATION", "CONSOLIDATED STATEMENTS OF OPERATIONS", "(in millions)",
     "Year ended December 31, | 2022 | 2021",
     "Net revenue | 24,880 | 22,415",
     "Cost of revenue | 15,902 | 14,377",
     "Operating income | 3,214 | 2,866",
     "Interest expense | 212 | 230",
     "Net income | 2,307 | 2,011"],
    ["Certification Pursuant to Section 302 of the Sarbanes-Oxley Act",
     "I, Jane Doe, certify that I have reviewed this annual report on Form 10-K of Northwind Corporation;",
     "Based on my knowledge, this report fairly presents the financial condition of Northwind Corporation.",
     "Northwind Corporation's other certifying officer and I are responsible for internal control."],
]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    svc = CitebotService(Settings(data_dir=tmp_path_factory.mktemp("analyst"), ocr_enabled=False))
    assert svc.ingest(make_pdf(PAGES), file_name=FILE, scope="local").status == "indexed"
    return svc


@pytest.mark.parametrize(
    ("question", "page", "figure"),
    [
        ("Assume that you are a public equities analyst. Answer the following question by primarily using "
         "information shown in the balance sheet: what is Northwind's total assets at the end of FY2022? Answer in "
         "USD millions.", BALANCE, "16,797"),
        ("You are an investment banker and your only resource(s) to answer the following question is (are): the "
         "statement of financial position. Here's the question: what are Northwind's FY2022 total current "
         "liabilities? Round your answer to two decimal places.", BALANCE, "4,101"),
        ("What is Northwind's year end FY2022 total current assets (in USD millions)? Base your judgments on the "
         "information provided primarily in the balance sheet.", BALANCE, "6,632"),
        ("According to the details clearly outlined within the P&L statement, what is the FY2022 net revenue for "
         "Northwind? Answer in USD millions.", INCOME, "24,880"),
    ],
)
def test_an_analyst_worded_question_is_answered_from_the_statement(service, question, page, figure):
    answer = service.answer(question, scopes=["local"])
    assert not answer.refused
    assert any(figure in c.quote and c.page_start <= page <= c.page_end for c in answer.citations)


@pytest.mark.parametrize(
    "question",
    ["What was Northwind net income in 2022?", "What was Northwind Corporation's net income in fiscal 2022?"],
)
def test_naming_the_company_does_not_quote_boilerplate_that_names_it(service, question):
    answer = service.answer(question, scopes=["local"])
    assert not answer.refused
    assert any("2,307" in c.quote and c.page_start <= INCOME <= c.page_end for c in answer.citations)
    assert not {c.page_start for c in answer.citations} & {AUDITOR, CERTIFICATION}


@pytest.mark.parametrize(
    "question",
    ["What were Northwind's total assets at the end of fiscal 2022?",
     "What were total assets at fiscal year end 2022?",
     "What were Northwind's FY2022 total assets?"],
)
def test_fiscal_2022_does_not_pull_the_fiscal_2022_section_above_the_balance_sheet(service, question):
    answer = service.answer(question, scopes=["local"])
    assert not answer.refused
    assert answer.retrieved[0].page_start == BALANCE
    assert answer.citations[0].page_start == BALANCE
