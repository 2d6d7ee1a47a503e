"""Deterministic sample PDFs for the demo, the eval set and the tests, with their ground truth.

``write_samples(out_dir)`` writes two realistic documents built with ReportLab:

* ``halvorsen_pike_employee_handbook.pdf`` (14 pages): numbered sections and subsections
  ("4 Leave", "4.2 Parental leave", "Section 12 ..."), a running header and footer with page
  numbers, hyphenated line breaks in body text, a bulleted list, two captioned tables ("Table 1:
  Annual leave by years of service", "Table 2: Revenue and headcount by year, 2018-2023"), a
  two-column page and ONE scanned page (a signed memo rendered to an image, no text layer) whose
  content appears nowhere else.
* ``brightwater_kestrel_services_agreement.pdf`` (7 pages): ARTICLE I..VII with clauses 7.1, 7.2,
  defined terms, a payment-schedule table and one letter-spaced heading (a real producer quirk).

Content is fixed (no dates that change, seeded noise), so the bytes are reproducible.
:func:`facts` lists question-worthy facts with file name and 1-based page numbers; pages are
recorded while the PDFs are laid out (anchors), not guessed.

The content is in :mod:`eval.sample_handbook` and :mod:`eval.sample_contract`, the layout in
:mod:`eval.sample_render`; this module names the files, holds their facts and builds them.

Usage: ``python -m eval.sample_pdfs OUT_DIR``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from eval.sample_contract import CONTRACT_BLOCKS, CONTRACT_TITLE
from eval.sample_handbook import HANDBOOK_BLOCKS, HANDBOOK_TITLE
from eval.sample_render import render

HANDBOOK = "halvorsen_pike_employee_handbook.pdf"
CONTRACT = "brightwater_kestrel_services_agreement.pdf"
SAMPLE_FILES = (HANDBOOK, CONTRACT)


@dataclass(frozen=True)
class Fact:
    """One question with an unambiguous answer in one sample PDF."""

    id: str
    question: str
    answer: str  # short answer text, present verbatim in the page text (after de-hyphenation)
    file: str
    pages: tuple[int, ...]
    section: str = ""  # section id ("4.2", "12", "III") or "" when not in a numbered section
    kind: str = "text"  # text | table | list | ocr | two_column | structure

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "question": self.question,
            "answer": self.answer,
            "file": self.file,
            "pages": list(self.pages),
            "section": self.section,
            "kind": self.kind,
        }



# (id, question, answer, file, anchor, section, kind). Pages come from where the anchor lands.
_FACTS: list[tuple[str, str, str, str, str, str, str]] = [
    ("hb-founded", "In which year and city was Halvorsen & Pike founded?", "founded in 1994 in Leeds",
     HANDBOOK, "hb_intro", "1", "text"),
    ("hb-employees", "How many people does Halvorsen & Pike employ?", "1,240 people", HANDBOOK, "hb_intro", "1",
     "text"),
    ("hb-core-hours", "What are the core working hours?", "10:00 to 15:00", HANDBOOK, "hb_hours", "2", "text"),
    ("hb-week", "How many hours is the standard working week?", "37.5 hours", HANDBOOK, "hb_hours", "2", "text"),
    ("hb-flexi", "How many flexitime hours can be carried over to the next month?", "20 hours", HANDBOOK,
     "hb_hours", "2.1", "text"),
    ("hb-payday", "On which day of the month are salaries paid?", "25th day of each month", HANDBOOK, "hb_pay", "3",
     "text"),
    ("hb-pension", "How much does the company contribute to the pension?", "7% of basic salary", HANDBOOK, "hb_pay",
     "3.1", "text"),
    ("hb-leave-10y", "How many days of annual leave does an employee with 10 or more years of service get?", "31",
     HANDBOOK, "hb_annual", "4.1", "table"),
    ("hb-leave-new", "How many days of annual leave do employees with 0 to 2 years of service get?", "25",
     HANDBOOK, "hb_annual", "4.1", "table"),
    ("hb-carryover", "How many days of unused annual leave can be carried over?", "Up to 5 days", HANDBOOK,
     "hb_annual", "4.1", "text"),
    ("hb-parental-primary", "How much parental leave on full pay does the primary carer get?", "26 weeks",
     HANDBOOK, "hb_parental", "4.2", "text"),
    ("hb-parental-secondary", "How much paid parental leave does the secondary carer get?", "6 weeks", HANDBOOK,
     "hb_parental", "4.2", "text"),
    ("hb-selfcert", "For how many days can you self-certify sickness?", "up to 7 calendar days", HANDBOOK,
     "hb_sick", "4.3", "text"),
    ("hb-bereavement", "How many days of bereavement leave for the death of a parent?", "10 days", HANDBOOK,
     "hb_bereavement", "4.4", "text"),
    ("hb-remote-days", "How many days per week may employees work remotely?", "up to 3 days per week", HANDBOOK,
     "hb_remote", "5", "text"),
    ("hb-stipend", "How much is the remote work stipend per month?", "45 pounds per month", HANDBOOK, "hb_scan", "",
     "ocr"),
    ("hb-stipend-start", "From when is the remote work stipend paid?", "From 1 July 2024", HANDBOOK, "hb_scan", "",
     "ocr"),
    ("hb-memo-author", "Who signed the memo about the remote work stipend?", "Ingrid Solberg", HANDBOOK, "hb_scan",
     "", "ocr"),
    ("hb-mileage", "What is the mileage rate for business journeys in your own car?", "45 pence per mile",
     HANDBOOK, "hb_travel", "6", "two_column"),
    ("hb-hotel-london", "What is the hotel limit per night in London?", "160 pounds per night in London", HANDBOOK,
     "hb_travel", "6", "two_column"),
    ("hb-meal", "What is the daily meal allowance when travelling?", "38 pounds per day", HANDBOOK,
     "hb_travel_col2", "6", "two_column"),
    ("hb-expense-deadline", "Within how many days must expense claims be submitted?", "within 60 days", HANDBOOK,
     "hb_travel_col2", "6", "two_column"),
    ("hb-revenue-max", "Which year in table 2 has the highest revenue?", "2022", HANDBOOK, "hb_perf", "7", "table"),
    ("hb-revenue-2020", "What was the revenue in 2020?", "78.9", HANDBOOK, "hb_perf", "7", "table"),
    ("hb-headcount-2021", "What was the headcount at the end of 2021?", "1,050", HANDBOOK, "hb_perf", "7", "table"),
    ("hb-gifts", "Above what value must gifts be declared?", "more than 50 pounds", HANDBOOK, "hb_conduct", "8",
     "list"),
    ("hb-assembly", "Where is the fire assembly point?", "car park B", HANDBOOK, "hb_safety", "9", "text"),
    ("hb-password", "How long must passwords be?", "at least 14 characters", HANDBOOK, "hb_it", "10", "text"),
    ("hb-training", "What is the personal training budget per year?", "1,500 pounds per year", HANDBOOK,
     "hb_learning", "11", "text"),
    ("hb-grievance", "Within how many working days must a formal grievance be raised?", "within 20 working days",
     HANDBOOK, "hb_grievance", "12", "structure"),
    ("hb-appeal", "How long do I have to appeal a disciplinary outcome?", "within 10 working days", HANDBOOK,
     "hb_appeal", "12.2", "text"),
    ("hb-notice", "What is the notice period after two years of service?", "three months", HANDBOOK, "hb_leaving",
     "13", "text"),
    ("ct-date", "When was the master services agreement made?", "15 January 2024", CONTRACT, "ct_parties", "",
     "text"),
    ("ct-fleet", "How many trucks does Kestrel Freight Lines operate?", "2,300 trucks", CONTRACT, "ct_parties", "",
     "text"),
    ("ct-business-day", "How is Business Day defined in the agreement?",
     "a day other than a Saturday, a Sunday or a public holiday", CONTRACT, "ct_defs", "I", "text"),
    ("ct-uptime", "What availability does the provider commit to?", "99.7%", CONTRACT, "ct_sla", "II", "text"),
    ("ct-credit", "What service credit applies for each 0.1% below the availability level?",
     "5% of the monthly fee", CONTRACT, "ct_sla", "II", "text"),
    ("ct-sub-fee", "What is the annual subscription fee?", "EUR 184,000", CONTRACT, "ct_fees", "III", "text"),
    ("ct-impl-fee", "What is the implementation fee?", "EUR 42,500", CONTRACT, "ct_fees", "III", "text"),
    ("ct-payment-days", "Within how many days are invoices payable?", "within 30 days of the invoice date",
     CONTRACT, "ct_fees", "III", "text"),
    ("ct-late", "What interest applies to late payments?", "1.5% per month", CONTRACT, "ct_fees", "III", "text"),
    ("ct-first-instalment", "What amount is due on signature?", "21,250", CONTRACT, "ct_table", "III", "table"),
    ("ct-term", "What is the initial term of the agreement?", "36 months", CONTRACT, "ct_term", "IV", "text"),
    ("ct-nonrenewal", "How much notice is needed for non-renewal?", "at least 90 days", CONTRACT, "ct_term", "IV",
     "text"),
    ("ct-cure", "How long is the cure period for material breach?", "30 days", CONTRACT, "ct_term", "IV", "text"),
    ("ct-conf-survival", "How long do confidentiality obligations survive?", "5 years", CONTRACT, "ct_conf", "V",
     "text"),
    ("ct-liability", "What is the liability cap?", "fees paid or payable in the 12 months", CONTRACT, "ct_liab",
     "VI", "text"),
    ("ct-law", "Which law governs the agreement?", "the laws of Ireland", CONTRACT, "ct_law", "7.1", "structure"),
    ("ct-notices", "Where must notices to the client be sent?", "contracts@kestrelfreight.example", CONTRACT,
     "ct_notices", "7.2", "structure"),
    ("ct-signatory", "Who signed for the client?", "Dana Okafor", CONTRACT, "ct_sign", "", "text"),
]


@lru_cache(maxsize=1)
def _built() -> dict[str, tuple[bytes, dict[str, int], int]]:
    out: dict[str, tuple[bytes, dict[str, int], int]] = {}
    for name, blocks, running, title in (
        (HANDBOOK, HANDBOOK_BLOCKS, HANDBOOK_TITLE, "Employee Handbook"),
        (CONTRACT, CONTRACT_BLOCKS, CONTRACT_TITLE, "Master Services Agreement"),
    ):
        data, st = render(blocks, running, title)
        out[name] = (data, dict(st.anchors), st.pages)
    return out


def sample_bytes(name: str) -> bytes:
    """The bytes of one sample PDF (built in memory once per process)."""
    return _built()[name][0]


def write_samples(out_dir: Path) -> list[Path]:
    """Write the sample PDFs into ``out_dir`` (created if needed); returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, (data, _anchors, _pages) in _built().items():
        p = out_dir / name
        if not p.exists() or p.read_bytes() != data:
            p.write_bytes(data)
        paths.append(p)
    return paths


def page_counts() -> dict[str, int]:
    return {name: pages for name, (_d, _a, pages) in _built().items()}


def facts() -> list[Fact]:
    """Ground truth for the eval set: question, short answer, file and 1-based page(s)."""
    built = _built()
    out = []
    for fid, q, a, file, anchor, section, kind in _FACTS:
        page = built[file][1][anchor]
        out.append(Fact(id=fid, question=q, answer=a, file=file, pages=(page,), section=section, kind=kind))
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m eval.sample_pdfs OUT_DIR", file=sys.stderr)
        return 2
    for p in write_samples(Path(args[0])):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
