"""The identity a document states on its first pages: covers written here, in the layout filings use."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.components.document_identity import DocumentIdentifier
from pipelines.models import ChunkLocation
from pipelines.reading.identity import (
    EARNINGS,
    DocumentIdentity,
    bare_company,
    headline_of,
    name_says_nothing,
    read_identity,
)
from pipelines.reading.layout import Line, Page, ParsedPdf

ANNUAL = """UNITED STATES
SECURITIES AND EXCHANGE COMMISSION
Washington, D.C. 20549
FORM 10-K
(Mark One)
☒ ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934
For the fiscal year ended September 30, 2021
or
☐ TRANSITION REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934
For the transition period from to
Commission File Number: 0-99999
BRIGHTWATER PUMPS, INC.
(Exact name of registrant as specified in its charter)
Ohio 12-3456789
(State or other jurisdiction of incorporation or organization) (I.R.S. Employer Identification No.)
"""

QUARTERLY = """UNITED STATES
SECURITIES AND EXCHANGE COMMISSION
FORM 10-Q
Quarterly report pursuant to Section 13 or 15(d) of
the Securities Exchange Act of 1934
For the quarterly period ended Commission file
July 1, 2024 number 1-1111
Kestrel Foods & Co.
(Exact name of registrant as specified in its charter)
"""

CURRENT = """UNITED STATES
SECURITIES AND EXCHANGE COMMISSION
FORM 8-K
CURRENT REPORT
Pursuant to Section 13 or 15(d) of The Securities Exchange Act of 1934
Date of report (Date of earliest event reported):
March 14, 2023
Orchard Lane Holdings
(Exact name of registrant as specified in its charter)
"""

RELEASE = """Exhibit 99.1
NORTHWIND TRADERS REPORTS THIRD QUARTER 2022 RESULTS
• Sales rose in every region
Seattle, Washington, October 27, 2022 – Northwind Traders Corp. (NYSE: NWT) today reported financial results for
the quarter ended September 30, 2022.
"""

# A cover whose name is printed as a picture: the statement heading of the next page spells it in capitals.
LOGO_COVER = ANNUAL.replace("BRIGHTWATER PUMPS, INC.\n", "")
NEXT_PAGE = "CONSOLIDATED STATEMENTS OF INCOME\nBRIGHTWATER PUMPS CORPORATION AND SUBSIDIARIES\n(In millions)"

REPORT = """Harbour Council
Annual Sustainability Report 2023
Prepared for the board, April 2024
"""


class TestReadIdentity:
    @pytest.mark.parametrize(
        ("pages", "want"),
        [
            ([ANNUAL], DocumentIdentity("Brightwater Pumps, Inc.", "10-K", "2021-09-30", 2021)),
            ([QUARTERLY], DocumentIdentity("Kestrel Foods & Co.", "10-Q", "2024-07-01", 2024, 2)),
            ([CURRENT], DocumentIdentity("Orchard Lane Holdings", "8-K", "2023-03-14", 2023)),
            ([RELEASE], DocumentIdentity("Northwind Traders Corp.", EARNINGS, "2022-09-30", 2022, 3)),
            ([LOGO_COVER, NEXT_PAGE], DocumentIdentity("Brightwater Pumps Corporation", "10-K", "2021-09-30", 2021)),
            ([REPORT], DocumentIdentity(title="Harbour Council", year=None)),
            (["", "   "], DocumentIdentity()),
        ],
        ids=["10-K", "10-Q", "8-K", "release", "name-as-logo", "report", "nothing"],
    )
    def test_reads_the_cover(self, pages: list[str], want: DocumentIdentity) -> None:
        assert read_identity(pages) == want

    def test_a_52_week_year_ending_in_januarys_first_week_is_the_year_before(self) -> None:
        cover = ANNUAL.replace("September 30, 2021", "January 2, 2022")
        got = read_identity([cover])
        assert (got.year, got.period_end) == (2021, "2022-01-02")

    def test_a_report_is_titled_by_its_largest_type_and_dated_by_its_title(self) -> None:
        lines = [("Harbour Council", 12.0), ("Annual Sustainability", 28.0), ("Report 2023", 28.0),
                 ("Prepared for the board", 10.0)]
        got = read_identity([REPORT], headline=headline_of(lines))
        assert got == DocumentIdentity(title="Annual Sustainability Report 2023", year=2023)
        assert got.describe() == "Annual Sustainability Report 2023"

    def test_letter_spaced_small_capitals_are_joined(self) -> None:
        cover = ANNUAL.replace("BRIGHTWATER PUMPS, INC.", "BRIGHTWATER P UMPS I NTERNATIONAL")
        assert read_identity([cover]).issuer == "Brightwater Pumps International"

    def test_description_routing_name_and_meta_round_trip(self) -> None:
        ident = read_identity([QUARTERLY])
        assert ident.describe() == "Kestrel Foods & Co., 10-Q, Q2 2024"
        assert ident.routing_name() == "Kestrel Foods_2024Q2_10Q"
        assert DocumentIdentity.from_meta(ident.meta()) == ident
        assert read_identity([ANNUAL]).describe() == "Brightwater Pumps, Inc., 10-K, fiscal 2021"
        assert DocumentIdentity().meta() == {}

    @pytest.mark.parametrize(("name", "bare"), [("The Kraft Heinz Company", "Kraft Heinz"),
                                                 ("JPMorgan Chase & Co.", "JPMorgan Chase"),
                                                 ("Corning Incorporated", "Corning"), ("NIKE, Inc.", "NIKE")])
    def test_bare_company(self, name: str, bare: str) -> None:
        assert bare_company(name) == bare


def _parsed(*pages: list[tuple[str, float]]) -> ParsedPdf:
    out = []
    for n, lines in enumerate(pages, 1):
        out.append(Page(number=n, width=600, height=800, lines=[
            Line(page=n, text=t, x0=50, top=50 + 14 * i, x1=500, bottom=62 + 14 * i, size=s)
            for i, (t, s) in enumerate(lines)]))
    return ParsedPdf(pages=out)


class TestDocumentIdentifier:
    def test_init_validates(self) -> None:
        with pytest.raises(ValueError, match="pages"):
            DocumentIdentifier(pages=0)

    def test_to_dict_from_dict(self) -> None:
        data: dict[str, Any] = DocumentIdentifier(pages=2).to_dict()
        assert data == {"type": "pipelines.components.document_identity.DocumentIdentifier",
                        "init_parameters": {"pages": 2}}
        assert DocumentIdentifier.from_dict(data).pages == 2

    @pytest.mark.parametrize(
        ("pages", "want"),
        [
            ([[(t, 9.0) for t in ANNUAL.splitlines()]], "Brightwater Pumps, Inc., 10-K, fiscal 2021"),
            ([[("Guide to the new office", 20.0), ("Floor plans and desks", 10.0)]], "Guide to the new office"),
            ([[], [("FORM 10-K", 9.0)]], ""),  # read from the first pages only, and only what they say
        ],
    )
    def test_run(self, pages: list[list[tuple[str, float]]], want: str) -> None:
        ident = DocumentIdentifier(pages=1).run(parsed=_parsed(*pages))["identity"]
        assert ident.describe() == want


@pytest.mark.parametrize(
    ("name", "nothing"),
    [("filing-01.pdf", True), ("10-K.pdf", True), ("annual-report-final.pdf", True), ("download (3).pdf", True),
     ("doc-001.pdf", True), ("ADOBE_2022_10K.pdf", False), ("handbook.pdf", False), ("Pfizer_2023Q2_10Q.pdf", False)],
)
def test_which_names_say_nothing(name: str, nothing: bool) -> None:
    assert name_says_nothing(name) is nothing


def test_a_citation_of_a_neutrally_named_file_says_what_the_document_is() -> None:
    from haystack import Document

    from pipelines.models import Citation, for_people

    ident = read_identity([ANNUAL]).meta()
    meta = {"doc_id": "d", "chunk_index": 0, "file_name": "filing-01.pdf", "page_start": 3, **ident}
    cite = Citation(**ChunkLocation.of(Document(content="x", meta=meta)), n=1, quote="x")
    assert cite.file == "filing-01.pdf"  # the file is still the file: links, filters and metrics use it
    assert for_people_label(for_people, cite) == "filing-01.pdf (Brightwater Pumps, Inc., 10-K, fiscal 2021)"
    named = ChunkLocation(**ChunkLocation.of(Document(content="x", meta={**meta, "file_name": "BRIGHTWATER_2021.pdf"})))
    assert named.file_label == "BRIGHTWATER_2021.pdf"
    bare = ChunkLocation(**ChunkLocation.of(Document(content="x", meta={"file_name": "filing-02.pdf"})))
    assert bare.file_label == "filing-02.pdf"


def for_people_label(for_people: Any, cite: Any) -> str:
    from pipelines.models import Answer

    return str(for_people(Answer(text="t [1]", citations=[cite])).citations[0].file_label)
