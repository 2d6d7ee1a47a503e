"""Max / min over a statement's rows, as an analyst asks it (issue 38): the region with the highest EBITDAR, the
largest liability on the balance sheet, which of three cash flows brought in the most. The row is named, its figure
is the period's column, and the row is quoted with what says which column and which table it is."""

from __future__ import annotations

import pytest

from connectors.settings import Settings
from pipelines.service import CitebotService
from tests.helpers.pdfs import make_pdf

RELEASE = "slack:T1:CRELEASE"
FILING = "slack:T1:CFILING"
OTHER = "slack:T1:COTHER"

RELEASE_PAGES = [
    ["Acme Resorts Reports Fourth Quarter and Full Year 2022 Financial Results",
     "Acme Resorts International today reported results for the quarter and year ended December 31, 2022."],
    ["ACME RESORTS INTERNATIONAL AND SUBSIDIARIES", "SUPPLEMENTAL DATA - NET REVENUES", "(In thousands)",
     "Three months ended Twelve months ended",
     "December 31, 2022 December 31, 2021 December 31, 2022 December 31, 2021",
     "Strip Resorts 2,297,282 1,806,686 8,398,372 4,737,185",
     "Regional Operations 991,452 899,607 3,815,885 3,392,363",
     "Macau Resorts 174,720 314,717 673,593 1,210,761",
     "ACME RESORTS INTERNATIONAL AND SUBSIDIARIES", "SUPPLEMENTAL DATA - ADJUSTED PROPERTY EBITDAR", "(In thousands)",
     "Three months ended Twelve months ended",
     "December 31, 2022 December 31, 2021 December 31, 2022 December 31, 2021",
     # the quarter's leader is not the year's: the column decides
     "Strip Resorts 277,052 698,739 3,142,308 1,738,211",
     "Regional Operations 319,517 309,250 1,294,630 1,217,814",
     "Macau Resorts (54,979) 5,015 (203,136) 25,367"],
]

FILING_PAGES = [
    ["Acme Widgets Inc. Annual Report on Form 10-K", "Fiscal 2022 was a year of steady growth for Acme Widgets."],
    ["CONSOLIDATED BALANCE SHEETS", "(In millions, except share data)", "December 31, 2022 December 31, 2021",
     "Assets", "Cash and cash equivalents 33,914 22,028", "Loans receivable 104,217 85,257",
     "Total assets 228,354 188,548",
     "Liabilities", "Customer deposits 110,239 84,382", "Accounts payable 12,133 10,574",
     "Long-term debt 42,573 38,675", "Total liabilities 203,643 166,371",
     "Shareholders' Equity", "Retained earnings 16,279 13,474", "Total shareholders' equity 24,711 22,177"],
    ["CONSOLIDATED STATEMENTS OF CASH FLOWS", "(In millions)", "Years Ended December 31,", "2022 2021",
     "Net income 5,070 6,046", "Depreciation 703 717",
     "Cash provided (used) by operations 5,841 5,188",
     "Purchases of short-term investments (6,059) (12,913)", "Other investing activities 52 (19)",
     "Cash provided (used) by investing activities 564 (1,524)",
     "Repurchase of common stock (5,480) (4,014)",
     "Cash provided (used) by financing activities (7,447) (4,836)"],
]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    svc = CitebotService(Settings(data_dir=tmp_path_factory.mktemp("rows"), ocr_enabled=False))
    for pages, name, scope in ((RELEASE_PAGES, "ACME_2022Q4_EARNINGS.pdf", RELEASE),
                               (FILING_PAGES, "ACME_2022_10K.pdf", FILING)):
        assert svc.ingest(make_pdf(pages, bold=None), file_name=name, scope=scope).status == "indexed"
    return svc


def _verbatim(service: CitebotService, answer, scope: str) -> None:
    for c in answer.citations:
        chunks = service.store.fetch(scopes=[scope], filters={"field": "meta.doc_id", "operator": "==",
                                                              "value": c.doc_id})
        assert c.quote in {f"{d.meta['doc_id']}:{d.meta['chunk_index']:05d}": d.content for d in chunks}[c.chunk_id]


def test_the_region_with_the_highest_measure_is_read_from_that_measures_table_and_the_years_column(service):
    answer = service.answer("Which region had the highest EBITDAR contribution for Acme during FY2022?", [RELEASE])
    assert answer.kind == "table" and not answer.refused
    first = answer.text.splitlines()[0]
    # the EBITDAR table's twelve-month column: not net revenues' leader, not the quarter's (Regional Operations)
    assert first.startswith("Strip Resorts: the highest for the twelve months ended December 31, 2022")
    assert "$3,142,308 thousand" in first
    quotes = [c.quote for c in answer.citations]
    assert "SUPPLEMENTAL DATA - ADJUSTED PROPERTY EBITDAR" in quotes and "Twelve months ended" in quotes
    assert any(q.startswith("Strip Resorts") and "3,142,308" in q for q in quotes)
    _verbatim(service, answer, RELEASE)


def test_the_largest_liability_is_one_of_the_liabilities_not_a_total_or_an_asset(service):
    answer = service.answer("What was the largest liability in Acme's balance sheet in 2022?", [FILING])
    assert answer.kind == "table"
    assert answer.text.startswith("Customer deposits: the largest at December 31, 2022")
    assert "$110,239 million" in answer.text.splitlines()[0]
    _verbatim(service, answer, FILING)


def test_the_options_a_question_lists_are_each_quoted_and_the_largest_named(service):
    answer = service.answer("Among operations, investing, and financing activities, which brought in the most "
                            "(or lost the least) cash flow for Acme in FY2022?", [FILING])
    assert answer.kind == "table"
    first = answer.text.splitlines()[0]
    assert first.startswith("Cash provided (used) by operations: the highest for 2022")
    assert "$564 million" in first and "-$7,447 million" in first  # the other two beside it, each quoted
    quoted = " ".join(c.quote for c in answer.citations)
    assert "investing activities 564" in quoted and "financing activities (7,447)" in quoted
    assert "Other investing activities" not in quoted  # the option's total, not a line under it
    _verbatim(service, answer, FILING)


def test_a_superlative_of_a_change_is_not_answered_with_the_largest_level(service):
    """"The biggest drop" asks for a change; naming the row with the largest figure would mislead."""
    answer = service.answer("Which region had the biggest drop in net revenues year over year in FY2022?", [RELEASE])
    assert not answer.text.startswith("Strip Resorts: the biggest")


def test_no_row_crosses_a_channel(service):
    answer = service.answer("What was the largest liability in Acme's balance sheet in 2022?", [OTHER])
    assert answer.refused and not answer.citations


SEGMENTS = "slack:T1:CSEGMENTS"
SEGMENT_PAGES = [
    ["Acme Foods Inc. Annual Report on Form 10-K", "Acme Foods reports four operating segments."],
    ["NOTE 16. SEGMENT INFORMATION", "Our operating segment results were as follows:", "Fiscal Year",
     "In Millions 2022 2021", "Net sales:", "North America Retail 11,572.0 11,250.0", "International 3,315.7 3,656.8",
     "Pet 2,259.4 1,732.4", "North America Foodservice 1,845.7 1,487.8", "Total 18,992.8 18,127.0",
     "Operating profit:", "North America Retail 2,699.7 2,725.9", "International 232.0 236.6", "Pet 470.6 415.0",
     "North America Foodservice 255.5 203.3", "Total segment operating profit 3,657.8 3,580.8",
     "Unallocated corporate items 402.6 212.1", "Divestitures (gain) loss (194.1) 53.5",
     "Operating profit 3,475.8 3,144.8"],
]


@pytest.mark.parametrize(
    ("question", "shown"),
    [("Which segment had the highest operating profit for Acme in fiscal 2022?", "North America Retail"),
     # not the reconciling lines after the segments' total, though "Divestitures (gain) loss" is lower
     ("Which segment had the lowest operating profit for Acme in fiscal 2022?", "International"),
     ("Which segment had the highest net sales for Acme in fiscal 2022?", "North America Retail")],
)
def test_a_segment_is_ranked_on_the_group_of_rows_its_measure_names(service, question, shown):
    """A segment note prints "Net sales:" then "Operating profit:" over the same segments, then the lines that
    reconcile the total; the measure asked names the group, and only the segments are ranked."""
    if not service.store.fetch(scopes=[SEGMENTS], limit=1):
        assert service.ingest(make_pdf(SEGMENT_PAGES, bold=None), file_name="ACME_FOODS_2022_10K.pdf",
                              scope=SEGMENTS).status == "indexed"
    answer = service.answer(question, [SEGMENTS])
    assert answer.kind == "table" and answer.text.startswith(f"{shown}: the ")
    figure = "2,699.7" if "highest operating" in question else "232.0" if "lowest" in question else "11,572.0"
    assert figure in answer.text.splitlines()[0]
    _verbatim(service, answer, SEGMENTS)


GEO = "slack:T1:CGEO"
GEO_PAGES = [
    ["Acme Card Company Annual Report on Form 10-K", "Acme Card issues charge and credit cards worldwide."],
    ["NOTE 24. REPORTABLE OPERATING SEGMENTS AND GEOGRAPHIC OPERATIONS", "GEOGRAPHIC OPERATIONS",
     "The following table presents our total revenues in different geographic regions.",
     "(Millions) | United States | EMEA | APAC | LACC | Other Unallocated | Consolidated",
     "Total revenues net of interest expense | $ 41,396 | 4,871 | 3,835 | 2,917 | (157) | 52,862"],
]


def test_the_regions_a_company_operates_in_are_its_geographic_tables_columns(service):
    """FinanceBench's "what are the geographies that X primarily operates in": the regions the filing reports by,
    copied from the quoted header, without the unit, the total or what is not allocated to a region."""
    if not service.store.fetch(scopes=[GEO], limit=1):
        assert service.ingest(make_pdf(GEO_PAGES, bold=None), file_name="ACME_CARD_2022_10K.pdf",
                              scope=GEO).status == "indexed"
    answer = service.answer("What are the geographies that Acme Card primarily operates in as of 2022?", [GEO])
    assert not answer.refused
    assert "reports by: United States, EMEA, APAC and LACC [1]." in answer.text
    assert answer.citations[0].quote.startswith("(Millions) | United States | EMEA")
    _verbatim(service, answer, GEO)
