"""The sample services agreement's content: the blocks :mod:`eval.sample_render` lays out (see there for the
block kinds). Its facts, with the anchors they name, are in :mod:`eval.sample_pdfs`."""

from __future__ import annotations

from typing import Any

CONTRACT_TITLE = "Master Services Agreement \u2014 Brightwater Analytics GmbH / Kestrel Freight Lines Inc."

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
