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

Usage: ``python -m eval.sample_pdfs OUT_DIR``.
"""

from __future__ import annotations

import io
import random
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

HANDBOOK = "halvorsen_pike_employee_handbook.pdf"
CONTRACT = "brightwater_kestrel_services_agreement.pdf"
SAMPLE_FILES = (HANDBOOK, CONTRACT)

_FIXED_DATE = "D:20240301090000+00'00'"


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


# --------------------------------------------------------------------------------------------
# content
# --------------------------------------------------------------------------------------------
# A document is a list of blocks: ("h1"|"h2", text), ("p", text), ("bullets", [..]),
# ("table", caption, [header, *rows]), ("anchor", key), ("pagebreak",), ("twocol",), ("onecol",),
# ("scan", lines), ("spaced_h2", text).

_HB_TITLE = "Halvorsen & Pike Engineering Ltd. \u2014 Employee Handbook"

HANDBOOK_BLOCKS: list[tuple[Any, ...]] = [
    ("title", "Employee Handbook", "Halvorsen & Pike Engineering Ltd.", "Version 6.2 \u2014 effective 1 March 2024"),
    ("h1", "1 Introduction"),
    ("anchor", "hb_intro"),
    (
        "p",
        "Halvorsen & Pike Engineering Ltd. was founded in 1994 in Leeds by Astrid Halvorsen and Graham Pike "
        "as a structural engineering consultancy. Today the company employs 1,240 people across offices in "
        "Leeds, Manchester, Bristol and Aberdeen and designs bridges, offshore platforms and industrial "
        "facilities for clients in eleven countries.",
    ),
    (
        "p",
        "This handbook explains the policies, entitlements and responsibilities that apply to every employee. "
        "It forms part of your contract of employment where your offer letter says so, and it is reviewed "
        "every year by the People Team together with the Employee Consultation Forum. Where a local agreement "
        "or a statutory requirement gives you a better entitlement than this handbook, the better entitlement "
        "applies.",
    ),
    ("h2", "1.1 Who to contact"),
    (
        "p",
        "Questions about this handbook go to the People Team at people@halvorsenpike.example or on internal "
        "extension 2100. Questions about pay go to the Payroll Office on extension 2150. Your line manager is "
        "always the first person to talk to about day-to-day arrangements.",
    ),
    ("h2", "1.2 Changes to this handbook"),
    (
        "p",
        "Changes are announced at least 30 days before they take effect, except where a change is required by "
        "law. The current version is always published on the intranet; printed copies are not controlled "
        "documents.",
    ),
    ("pagebreak",),
    ("h1", "2 Working Hours"),
    ("anchor", "hb_hours"),
    (
        "p",
        "The standard working week is 37.5 hours, Monday to Friday. Core hours are 10:00 to 15:00, when all "
        "full-time employees are expected to be available unless they are on leave or have agreed otherwise "
        "with their line manager. Outside core hours employees may choose when to start and finish their "
        "working day between 07:00 and 19:00.",
    ),
    ("h2", "2.1 Flexitime"),
    (
        "p",
        "Time worked above or below the standard week is recorded in the flexitime system. A credit of up to "
        "20 hours may be carried over from one month to the next; any credit above 20 hours is lost at the "
        "end of the month unless your line manager approved the overtime in advance. A debit of more than 10 "
        "hours must be made up within the following month.",
    ),
    ("h2", "2.2 Overtime"),
    (
        "p",
        "Approved overtime for employees at grades E1 to E4 is paid at one and a half times the normal hourly "
        "rate on weekdays and twice the normal hourly rate on Sundays and public holidays. Employees at grade "
        "E5 and above receive time off in lieu instead of overtime pay.",
    ),
    ("pagebreak",),
    ("h1", "3 Pay and Benefits"),
    ("anchor", "hb_pay"),
    (
        "p",
        "Salaries are paid monthly by bank transfer on the 25th day of each month, or on the previous working "
        "day when the 25th falls on a weekend or a public holiday. Payslips are available in the payroll "
        "portal two working days before payment.",
    ),
    ("h2", "3.1 Pension"),
    (
        "p",
        "All employees are enrolled in the Halvorsen & Pike Group Pension Plan. The company contributes 7% of "
        "basic salary when the employee contributes at least 4%. Employees may opt out within one month of "
        "enrolment and receive a full refund of their own contributions.",
    ),
    ("h2", "3.2 Health cover and life assurance"),
    (
        "p",
        "Private medical insurance is provided for employees and their dependent children after the "
        "probationary period. Life assurance pays four times basic salary to your nominated beneficiaries. "
        "The annual salary review takes effect on 1 April each year.",
    ),
    ("pagebreak",),
    ("h1", "4 Leave"),
    (
        "p",
        "This section describes annual leave, parental leave, sick leave and bereavement leave. Leave is "
        "requested and approved in the HR portal; your line manager responds to a request within five working "
        "days.",
    ),
    ("h2", "4.1 Annual leave"),
    ("anchor", "hb_annual"),
    (
        "p",
        "The leave year runs from 1 January to 31 December. Your annual leave entitlement grows with your "
        "years of continuous service, as shown in Table 1, and is in addition to the eight public holidays. "
        "Up to 5 days of unused leave may be carried over into the next leave year and must be taken by 31 "
        "March.",
    ),
    (
        "table",
        "Table 1: Annual leave by years of service",
        [
            ["Years of service", "Annual leave (days)", "Extra days bought or sold (max)"],
            ["0 to 2", "25", "3"],
            ["3 to 5", "27", "3"],
            ["6 to 9", "29", "5"],
            ["10 or more", "31", "5"],
        ],
    ),
    ("pagebreak",),
    ("h2", "4.2 Parental leave"),
    ("anchor", "hb_parental"),
    (
        "p",
        "An employee who is the primary carer of a newborn or newly adopted child is entitled to 26 weeks of "
        "parental leave on full pay, followed by up to 26 further weeks of unpaid leave. The secondary carer "
        "is entitled to 6 weeks of parental leave on full pay, which may be taken in up to three separate "
        "blocks within the first year.",
    ),
    (
        "p",
        "Parental leave should be notified to the People Team at least 15 weeks before the expected week of "
        "childbirth or placement. Keeping-in-touch days, up to a maximum of 10, may be worked during parental "
        "leave without ending it.",
    ),
    ("h2", "4.3 Sick leave"),
    ("anchor", "hb_sick"),
    (
        "p",
        "If you are ill, tell your line manager before 09:30 on the first day of absence. You may self-certify "
        "absences of up to 7 calendar days; for longer absences a fit note from a doctor is required. Company "
        "sick pay is full pay for the first 12 weeks of absence in any rolling twelve-month period.",
    ),
    ("h2", "4.4 Bereavement leave"),
    ("anchor", "hb_bereavement"),
    (
        "p",
        "Employees receive 10 days of paid bereavement leave on the death of a partner, child, parent or "
        "sibling, and 3 days on the death of another close relative.",
    ),
    ("pagebreak",),
    ("h1", "5 Remote Work"),
    ("anchor", "hb_remote"),
    (
        "p",
        "Employees whose role allows it may work remotely for up to 3 days per week, agreed with their line "
        "manager. Remote work must be done from the United Kingdom; working from abroad for more than 10 "
        "working days per year requires written approval from the People Team and the Tax Office.",
    ),
    (
        "p",
        "The company provides a laptop, a monitor and a headset for remote work. A monthly stipend towards "
        "home office costs is paid with the salary; its amount and start date are set by the memorandum "
        "reproduced on the next page.",
    ),
    ("h2", "5.1 Equipment and security at home"),
    (
        "p",
        "Company equipment must not be used by other members of your household. Confidential drawings must not "
        "be printed at home. Use the company VPN for all work; public Wi-Fi networks may only be used through "
        "the VPN.",
    ),
    (
        "scan",
        [
            "HALVORSEN & PIKE ENGINEERING LTD.",
            "",
            "MEMORANDUM",
            "",
            "To: All employees",
            "From: Ingrid Solberg, Chief People Officer",
            "Date: 14 June 2024",
            "Subject: Remote work stipend",
            "",
            "From 1 July 2024 every employee who works remotely",
            "at least one day per week receives a remote work",
            "stipend of 45 pounds per month, paid with the salary.",
            "",
            "The stipend replaces the one-off home office grant.",
            "Claims for furniture are no longer reimbursed.",
            "Part-time employees receive the full stipend.",
            "",
            "Questions go to the People Team on extension 2100.",
            "",
            "Signed: Ingrid Solberg",
        ],
    ),
    ("twocol",),
    ("h1", "6 Travel and Expenses"),
    ("anchor", "hb_travel"),
    (
        "p",
        "Business travel must be booked through the travel desk at least 14 days in advance where possible. "
        "Standard class rail travel is the default for journeys within the United Kingdom; first class is "
        "allowed for journeys longer than three hours.",
    ),
    (
        "p",
        "Employees who use their own car for business journeys are reimbursed at a mileage rate of 45 pence "
        "per mile for the first 10,000 miles in a tax year and 25 pence per mile after that. Parking and tolls "
        "are reimbursed at cost.",
    ),
    (
        "p",
        "Hotel costs are reimbursed up to 160 pounds per night in London and 110 pounds per night elsewhere in "
        "the United Kingdom, including breakfast. Higher rates need the prior approval of a director.",
    ),
    ("columnbreak",),
    ("anchor", "hb_travel_col2"),
    (
        "p",
        "A meal allowance of 38 pounds per day is paid for each full day spent travelling on company business. "
        "Alcohol is never reimbursed, including when entertaining clients.",
    ),
    (
        "p",
        "Expense claims are submitted in the expenses portal with an itemised receipt for every item and must "
        "be submitted within 60 days of the expense; later claims are only paid with the approval of the "
        "Finance Director.",
    ),
    (
        "p",
        "Corporate cards are issued to employees who travel more than six times a year. Personal spending on "
        "a corporate card is a disciplinary matter.",
    ),
    ("onecol",),
    ("h1", "7 Company Performance"),
    ("anchor", "hb_perf"),
    (
        "p",
        "The company publishes its key figures to all employees every year after the annual accounts are "
        "approved. Revenue fell in 2020 during the pandemic and recovered strongly in the following two years. "
        "Table 2 shows revenue and headcount over the last six financial years.",
    ),
    (
        "table",
        "Table 2: Revenue and headcount by year, 2018-2023",
        [
            ["Year", "Revenue (GBP million)", "Headcount at year end", "Offices"],
            ["2018", "84.2", "910", "3"],
            ["2019", "91.5", "985", "3"],
            ["2020", "78.9", "940", "3"],
            ["2021", "102.3", "1,050", "4"],
            ["2022", "118.6", "1,180", "4"],
            ["2023", "112.4", "1,240", "4"],
        ],
    ),
    (
        "p",
        "The profit-sharing pool is 6% of operating profit and is shared equally between all employees who "
        "were employed for the whole financial year.",
    ),
    ("pagebreak",),
    ("h1", "8 Code of Conduct"),
    ("anchor", "hb_conduct"),
    (
        "p",
        "Every employee is expected to act honestly, treat colleagues and clients with respect and protect the "
        "reputation of the company. In particular, employees must follow these rules:",
    ),
    (
        "bullets",
        [
            "Gifts or hospitality worth more than 50 pounds must be declared in the gifts register.",
            "Conflicts of interest must be declared to your line manager within 5 working days.",
            "Never offer or accept a payment to influence a business decision.",
            "Use company social media accounts only when authorised by Communications.",
            "Report suspected fraud to the confidential ethics line on extension 2999.",
        ],
    ),
    (
        "p",
        "A breach of the code of conduct may lead to disciplinary action under Section 12 of this handbook.",
    ),
    ("pagebreak",),
    ("h1", "9 Health and Safety"),
    ("anchor", "hb_safety"),
    (
        "p",
        "In the event of a fire alarm, leave the building by the nearest exit and go to the assembly point in "
        "car park B. Do not use the lifts. Fire wardens wear yellow vests and check that each floor is empty.",
    ),
    (
        "p",
        "Every office has at least one qualified first aider for every 50 employees. Accidents and near misses "
        "must be reported in the safety portal within 24 hours. Site visits require a completed risk "
        "assessment and the personal protective equipment listed in it.",
    ),
    ("h2", "9.1 Display screen equipment"),
    (
        "p",
        "Employees who use a computer for more than one hour a day are entitled to a workstation assessment "
        "and to an eye test paid by the company every two years.",
    ),
    ("pagebreak",),
    ("h1", "10 IT and Data Security"),
    ("anchor", "hb_it"),
    (
        "p",
        "Passwords must be at least 14 characters long and must not be reused across systems. Multi-factor "
        "authentication is mandatory for email, the VPN and all client-facing systems. Suspected phishing "
        "emails must be reported with the Report Phishing button or to the IT Service Desk on extension 4400.",
    ),
    (
        "p",
        "Client drawings and models are classified as confidential and may only be stored on the company "
        "document management system. Removable storage devices are blocked on all company laptops.",
    ),
    ("h1", "11 Learning and Development"),
    ("anchor", "hb_learning"),
    (
        "p",
        "Each employee has a personal training budget of 1,500 pounds per year and up to 5 study days per year "
        "for approved courses. The company pays the membership fees of one professional engineering "
        "institution per employee. Chartership candidates are assigned a mentor from a different office.",
    ),
    ("pagebreak",),
    ("h1", "Section 12 Grievance and Disciplinary Procedure"),
    ("anchor", "hb_grievance"),
    (
        "p",
        "An employee who has a grievance should first raise it informally with their line manager. A formal "
        "grievance must be raised in writing within 20 working days of the matter complained about. A "
        "grievance meeting is held within 10 working days of receiving the written grievance.",
    ),
    ("h2", "12.1 Disciplinary procedure"),
    (
        "p",
        "Disciplinary warnings stay on file for 12 months for a first written warning and 24 months for a "
        "final written warning. Employees may be accompanied at any disciplinary meeting by a colleague or a "
        "trade union representative.",
    ),
    ("h2", "12.2 Appeals"),
    ("anchor", "hb_appeal"),
    (
        "p",
        "An appeal against a grievance or disciplinary outcome must be made in writing within 10 working days "
        "of the outcome letter. Appeals are heard by a director who was not involved in the original decision.",
    ),
    ("pagebreak",),
    ("h1", "13 Leaving the Company"),
    ("anchor", "hb_leaving"),
    (
        "p",
        "The notice period for employees is one month during the first two years of service and three months "
        "after two years of service. Unused annual leave is paid out with the final salary. Company equipment "
        "must be returned to the IT Service Desk on or before the last working day.",
    ),
    (
        "p",
        "Every leaver is offered an exit interview with a member of the People Team. Feedback from exit "
        "interviews is reported anonymously to the executive board twice a year.",
    ),
]

_CT_TITLE = "Master Services Agreement \u2014 Brightwater Analytics GmbH / Kestrel Freight Lines Inc."

CONTRACT_BLOCKS: list[tuple[Any, ...]] = [
    (
        "title",
        "Master Services Agreement",
        "Brightwater Analytics GmbH and Kestrel Freight Lines Inc.",
        "Agreement No. BWA-2024-0117",
    ),
    ("anchor", "ct_parties"),
    (
        "p",
        "This Master Services Agreement (the \u201cAgreement\u201d) is made on 15 January 2024 (the \u201cEffective "
        "Date\u201d) between Brightwater Analytics GmbH, a company registered in Hamburg under number HRB 184467, "
        "Speicherstadt 12, 20457 Hamburg, Germany (the \u201cProvider\u201d), and Kestrel Freight Lines Inc., a "
        "Delaware corporation with offices at 400 Harbor Drive, Baltimore, Maryland (the \u201cClient\u201d).",
    ),
    (
        "p",
        "The Client operates a fleet of 2,300 trucks in North America and wishes to use the Provider's route "
        "optimisation platform. The parties therefore agree as follows.",
    ),
    ("h1", "ARTICLE I DEFINITIONS"),
    ("anchor", "ct_defs"),
    (
        "p",
        "1.1 \u201cBusiness Day\u201d means a day other than a Saturday, a Sunday or a public holiday in Hamburg "
        "or in Maryland.",
    ),
    (
        "p",
        "1.2 \u201cConfidential Information\u201d means all information disclosed by one party to the other that "
        "is marked as confidential or would reasonably be understood to be confidential, including shipment "
        "data, customer lists and pricing.",
    ),
    (
        "p",
        "1.3 \u201cDeliverables\u201d means the reports, route plans, configuration files and documentation that "
        "the Provider delivers to the Client under a Statement of Work.",
    ),
    (
        "p",
        "1.4 \u201cService Levels\u201d means the availability and support commitments set out in Article II.",
    ),
    ("pagebreak",),
    ("h1", "ARTICLE II SERVICES"),
    ("anchor", "ct_services"),
    (
        "p",
        "2.1 The Provider shall provide the RouteWise platform as a hosted service, together with implementation, "
        "training for up to 40 Client users and second-line support, as described in each Statement of Work.",
    ),
    ("anchor", "ct_sla"),
    (
        "p",
        "2.2 The Provider shall make the platform available 99.7% of the time in each calendar month, excluding "
        "scheduled maintenance announced at least 5 Business Days in advance. For each full 0.1% below that "
        "level the Client receives a service credit of 5% of the monthly fee, up to a maximum of 30% of the "
        "monthly fee.",
    ),
    (
        "p",
        "2.3 Critical incidents are acknowledged within 30 minutes, 24 hours a day, and resolved or worked "
        "around within 4 hours. Other incidents are acknowledged within one Business Day.",
    ),
    ("pagebreak",),
    ("h1", "ARTICLE III FEES AND PAYMENT"),
    ("anchor", "ct_fees"),
    (
        "p",
        "3.1 The Client shall pay an annual subscription fee of EUR 184,000 for the platform and a one-time "
        "implementation fee of EUR 42,500, in the instalments set out in Table 1 below.",
    ),
    (
        "p",
        "3.2 Invoices are payable within 30 days of the invoice date. Late payments bear interest at 1.5% per "
        "month from the due date until payment in full.",
    ),
    (
        "p",
        "3.3 The subscription fee may be increased once a year, on the anniversary of the Effective Date, by no "
        "more than 4%.",
    ),
    ("spaced_h2", "3.4 P a y m e n t   S c h e d u l e"),
    ("anchor", "ct_table"),
    (
        "table",
        "Table 1: Payment schedule",
        [
            ["Instalment", "Amount (EUR)", "Due"],
            ["Implementation, first half", "21,250", "On signature"],
            ["Implementation, second half", "21,250", "On go-live acceptance"],
            ["Subscription, year 1", "184,000", "On go-live acceptance"],
            ["Subscription, year 2", "184,000", "First anniversary of go-live"],
            ["Subscription, year 3", "184,000", "Second anniversary of go-live"],
        ],
    ),
    ("pagebreak",),
    ("h1", "ARTICLE IV TERM AND TERMINATION"),
    ("anchor", "ct_term"),
    (
        "p",
        "4.1 This Agreement starts on the Effective Date and continues for an initial term of 36 months. It "
        "then renews automatically for successive periods of 12 months unless either party gives notice of "
        "non-renewal at least 90 days before the end of the current term.",
    ),
    (
        "p",
        "4.2 Either party may terminate this Agreement for material breach if the breach is not cured within "
        "30 days of written notice describing it.",
    ),
    (
        "p",
        "4.3 On termination the Provider shall return or delete all Client data within 45 days and, on "
        "request, provide an export of the Client's route history in CSV format.",
    ),
    ("h1", "ARTICLE V CONFIDENTIALITY"),
    ("anchor", "ct_conf"),
    (
        "p",
        "5.1 Each party shall keep the other party's Confidential Information secret and use it only to perform "
        "this Agreement. These obligations survive for 5 years after the Agreement ends.",
    ),
    (
        "p",
        "5.2 Personal data is processed under the Data Processing Agreement in Schedule 2, and the Provider "
        "stores Client data only in data centres in Frankfurt and Dublin.",
    ),
    ("pagebreak",),
    ("h1", "ARTICLE VI LIABILITY"),
    ("anchor", "ct_liab"),
    (
        "p",
        "6.1 Each party's total liability under this Agreement in any contract year is limited to the fees "
        "paid or payable in the 12 months before the event giving rise to the claim.",
    ),
    (
        "p",
        "6.2 Neither party is liable for loss of profit, loss of revenue or indirect or consequential loss. "
        "The limits in this Article do not apply to breach of Article V or to liability that cannot be limited "
        "by law.",
    ),
    (
        "p",
        "6.3 The Provider shall maintain professional indemnity insurance of at least EUR 5,000,000 for the term "
        "of this Agreement and for two years after it.",
    ),
    ("pagebreak",),
    ("h1", "ARTICLE VII GENERAL"),
    ("h2", "7.1 Governing law"),
    ("anchor", "ct_law"),
    (
        "p",
        "This Agreement is governed by the laws of Ireland. The courts of Dublin have exclusive jurisdiction "
        "over any dispute arising out of or in connection with it.",
    ),
    ("h2", "7.2 Notices"),
    ("anchor", "ct_notices"),
    (
        "p",
        "Notices must be in writing and sent by courier or by email to legal@brightwater.example for the "
        "Provider and to contracts@kestrelfreight.example for the Client. A notice sent by email is received "
        "on the next Business Day.",
    ),
    ("h2", "7.3 Entire agreement"),
    (
        "p",
        "This Agreement, its Schedules and each Statement of Work are the entire agreement between the parties "
        "and replace all earlier proposals and understandings about its subject matter.",
    ),
    ("pagebreak",),
    ("h1", "SIGNATURES"),
    ("anchor", "ct_sign"),
    (
        "p",
        "Signed for and on behalf of Brightwater Analytics GmbH by Matthias Kern, Managing Director, and for and "
        "on behalf of Kestrel Freight Lines Inc. by Dana Okafor, Chief Operating Officer.",
    ),
]

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


# --------------------------------------------------------------------------------------------
# rendering
# --------------------------------------------------------------------------------------------


def _soft_hyphenate(text: str) -> str:
    """Insert soft hyphens into long words so ReportLab breaks some lines with a hyphen."""
    out = []
    for word in text.split(" "):
        core = word.strip(".,;:()\u201c\u201d'")
        if len(core) >= 9 and core.isalpha() and core.islower():
            mid = len(word) // 2
            # break after a vowel near the middle, the way a hyphenation dictionary would
            cut = next((i + 1 for i in range(mid, len(word) - 3) if word[i] in "aeiou"), mid)
            word = word[:cut] + "\u00ad" + word[cut:]
        out.append(word)
    return " ".join(out)


def _scan_image(lines: list[str]) -> Any:
    """The memo as a slightly rotated, noisy greyscale 'scan' at 200 dpi (JPEG bytes)."""
    from PIL import Image, ImageDraw, ImageFilter, ImageFont

    w, h = 1700, 2200  # US letter at 200 dpi
    img = Image.new("L", (w, h), 250)
    draw = ImageDraw.Draw(img)
    font: Any
    bold: Any
    try:
        font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf", 40)
        bold = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSerif-Bold.ttf", 46)
    except OSError:
        font = ImageFont.load_default(size=40)
        bold = ImageFont.load_default(size=46)
    y = 220
    for i, line in enumerate(lines):
        f = bold if i in (0, 2) else font
        draw.text((190, y), line, fill=25, font=f)
        y += 64 if line else 40
    draw.line((190, y + 40, 700, y + 10), fill=40, width=4)  # a "signature" stroke
    rng = random.Random(20240614)  # fixed seed: reproducible speckle
    px = img.load()
    assert px is not None
    for _ in range(9000):
        x, yy = rng.randrange(w), rng.randrange(h)
        px[x, yy] = rng.choice((90, 140, 200))
    img = img.rotate(0.5, resample=Image.Resampling.BICUBIC, fillcolor=245, expand=False)
    img = img.filter(ImageFilter.GaussianBlur(0.6))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=80, optimize=False)
    return buf.getvalue()


@dataclass
class _Build:
    anchors: dict[str, int] = field(default_factory=dict)
    pages: int = 0


def _render(blocks: list[tuple[Any, ...]], running_title: str, doc_title: str) -> tuple[bytes, _Build]:
    from reportlab.lib import colors
    from reportlab.lib.enums import TA_CENTER
    from reportlab.lib.pagesizes import LETTER
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.lib.units import inch
    from reportlab.lib.utils import ImageReader
    from reportlab.platypus import (
        BaseDocTemplate,
        Flowable,
        Frame,
        FrameBreak,
        KeepTogether,
        ListFlowable,
        ListItem,
        NextPageTemplate,
        PageBreak,
        PageTemplate,
        Paragraph,
        Spacer,
        Table,
        TableStyle,
    )

    state = _Build()
    pw, ph = LETTER
    margin = inch

    class Anchor(Flowable):
        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

        def wrap(self, aw: float, ah: float) -> tuple[float, float]:
            return 0, 0

        def draw(self) -> None:
            state.anchors.setdefault(self.key, self.canv.getPageNumber())

    class ScanPage(Flowable):
        """A full-page image with no text layer (drawn on a page template without header/footer)."""

        def __init__(self, data: bytes) -> None:
            super().__init__()
            self.data = data

        def wrap(self, aw: float, ah: float) -> tuple[float, float]:
            return aw, ah

        def draw(self) -> None:
            state.anchors.setdefault("hb_scan", self.canv.getPageNumber())
            self.canv.drawImage(ImageReader(io.BytesIO(self.data)), 0, 0, width=pw, height=ph)

    class SpacedHeading(Flowable):
        """A heading drawn glyph by glyph with spaces, the way some producers letter-space text."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

        def wrap(self, aw: float, ah: float) -> tuple[float, float]:
            return aw, 26

        def draw(self) -> None:
            self.canv.setFont("Helvetica-Bold", 12.5)
            self.canv.drawString(0, 8, self.text)

    body = ParagraphStyle(
        "body", fontName="Times-Roman", fontSize=11, leading=14.5, spaceAfter=7,
        embeddedHyphenation=1, hyphenationLang="en_GB", uriWasteReduce=0.3,
    )
    h1 = ParagraphStyle("h1", fontName="Helvetica-Bold", fontSize=16, leading=20, spaceBefore=8, spaceAfter=8)
    h2 = ParagraphStyle("h2", fontName="Helvetica-Bold", fontSize=12.5, leading=16, spaceBefore=6, spaceAfter=5)
    caption = ParagraphStyle("cap", fontName="Helvetica-Oblique", fontSize=10, leading=13, spaceAfter=4)
    cell = ParagraphStyle("cell", fontName="Times-Roman", fontSize=10, leading=12)
    head_cell = ParagraphStyle("hcell", fontName="Times-Bold", fontSize=10, leading=12)
    title1 = ParagraphStyle("t1", fontName="Helvetica-Bold", fontSize=26, leading=32, alignment=TA_CENTER)
    title2 = ParagraphStyle("t2", fontName="Helvetica", fontSize=14, leading=20, alignment=TA_CENTER)

    def decorate(canv: Any, doc: Any) -> None:
        canv.saveState()
        canv.setFont("Helvetica", 8.5)
        canv.setFillColor(colors.HexColor("#444444"))
        canv.drawString(margin, ph - 0.6 * inch, running_title)
        canv.line(margin, ph - 0.66 * inch, pw - margin, ph - 0.66 * inch)
        canv.drawString(margin, 0.55 * inch, "Confidential \u2014 internal use only")
        canv.drawRightString(pw - margin, 0.55 * inch, f"Page {canv.getPageNumber()}")
        canv.restoreState()

    def count(canv: Any, doc: Any) -> None:
        state.pages = max(state.pages, canv.getPageNumber())

    buf = io.BytesIO()
    doc = BaseDocTemplate(
        buf, pagesize=LETTER, leftMargin=margin, rightMargin=margin, topMargin=margin, bottomMargin=margin,
        title=doc_title, author="Citebot sample generator", subject="Sample document", creator="Citebot",
        producer="ReportLab", invariant=1,
    )
    fw, fh = pw - 2 * margin, ph - 2 * margin
    gap = 0.3 * inch
    cw = (fw - gap) / 2
    doc.addPageTemplates([
        PageTemplate("one", [Frame(margin, margin, fw, fh, id="f1")], onPage=decorate, onPageEnd=count),
        PageTemplate(
            "two",
            [Frame(margin, margin, cw, fh, id="c1"), Frame(margin + cw + gap, margin, cw, fh, id="c2")],
            onPage=decorate, onPageEnd=count,
        ),
        PageTemplate("scan", [Frame(0, 0, pw, ph, id="s", leftPadding=0, rightPadding=0, topPadding=0,
                                    bottomPadding=0)], onPageEnd=count),
    ])

    story: list[Any] = []
    for block in blocks:
        kind = block[0]
        if kind == "title":
            story += [Spacer(1, 2.2 * inch), Paragraph(block[1], title1), Spacer(1, 0.3 * inch),
                      Paragraph(block[2], title2), Spacer(1, 0.15 * inch), Paragraph(block[3], title2),
                      Spacer(1, 0.6 * inch)]
        elif kind == "h1":
            story.append(Paragraph(block[1], h1))
        elif kind == "h2":
            story.append(Paragraph(block[1], h2))
        elif kind == "spaced_h2":
            story.append(SpacedHeading(block[1]))
        elif kind == "p":
            story.append(Paragraph(_soft_hyphenate(block[1]), body))
        elif kind == "bullets":
            story.append(ListFlowable(
                [ListItem(Paragraph(t, body), leftIndent=14) for t in block[1]],
                bulletType="bullet", start="\u2022", leftIndent=14,
            ))
        elif kind == "table":
            header, *rows = block[2]
            data = [[Paragraph(c, head_cell) for c in header]] + [[Paragraph(c, cell) for c in r] for r in rows]
            t = Table(data, repeatRows=1, hAlign="LEFT")
            t.setStyle(TableStyle([
                ("LINEABOVE", (0, 0), (-1, 0), 1, colors.black),
                ("LINEBELOW", (0, 0), (-1, 0), 0.6, colors.black),
                ("LINEBELOW", (0, -1), (-1, -1), 1, colors.black),
                ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#e8e8e8")),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("LEFTPADDING", (0, 0), (-1, -1), 6),
                ("RIGHTPADDING", (0, 0), (-1, -1), 14),
            ]))
            story.append(KeepTogether([Paragraph(block[1], caption), t, Spacer(1, 10)]))
        elif kind == "anchor":
            story.append(Anchor(block[1]))
        elif kind == "pagebreak":
            story.append(PageBreak())
        elif kind == "twocol":
            story += [NextPageTemplate("two"), PageBreak()]
        elif kind == "columnbreak":
            story.append(FrameBreak())
        elif kind == "onecol":
            story += [NextPageTemplate("one"), PageBreak()]
        elif kind == "scan":
            story += [NextPageTemplate("scan"), PageBreak(), ScanPage(_scan_image(block[1])), NextPageTemplate("one")]
        else:  # pragma: no cover - a typo in the tables above
            raise ValueError(f"unknown block kind {kind!r}")
    doc.build(story)
    return buf.getvalue(), state


@lru_cache(maxsize=1)
def _built() -> dict[str, tuple[bytes, dict[str, int], int]]:
    out: dict[str, tuple[bytes, dict[str, int], int]] = {}
    for name, blocks, running, title in (
        (HANDBOOK, HANDBOOK_BLOCKS, _HB_TITLE, "Employee Handbook"),
        (CONTRACT, CONTRACT_BLOCKS, _CT_TITLE, "Master Services Agreement"),
    ):
        data, st = _render(blocks, running, title)
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
