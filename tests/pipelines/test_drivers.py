"""What drove a metric, as analysts ask it (issue 38): the filing's own explanation is quoted, found through the
lines the metric is computed from (a gross margin is explained as the cost of sales' share of sales), not a
sentence about sales alone, and never the metric's arithmetic."""

from __future__ import annotations

import pytest

from connectors.settings import Settings
from pipelines.questions import QuestionKind, classify
from pipelines.service import CitebotService
from tests.helpers.pdfs import make_pdf

SCOPE = "slack:T1:CMDA"
MDA = [
    ["Acme Widgets Inc. Annual Report on Form 10-K", "Fiscal 2022 was a year of steady growth for Acme Widgets."],
    ["MANAGEMENT'S DISCUSSION AND ANALYSIS", "Results of Operations",
     "Net sales increased 5.1% in fiscal 2022 due to higher volumes in the Industrial segment.",
     "Cost of products sold increased as a percent to sales driven by commodity inflation and one-time plant exit "
     "costs, partially offset by supply chain savings.",
     "Merchandise inventories totaled $1.6 billion at the end of fiscal 2022 compared to $1.5 billion a year earlier.",
     "The $104.2 million increase was primarily due to the opening of 47 new stores.",
     "Selling, general and administrative expenses were flat as a percent of sales."],
    ["CONSOLIDATED STATEMENTS OF INCOME", "(In millions)", "Years Ended December 31,", "2022 2021",
     "Net sales 1,000 951", "Cost of products sold 420 380", "Net income 180 150"],
]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    svc = CitebotService(Settings(data_dir=tmp_path_factory.mktemp("drivers"), ocr_enabled=False))
    assert svc.ingest(make_pdf(MDA, bold=None), file_name="ACME_2022_10K.pdf", scope=SCOPE).status == "indexed"
    return svc


def test_a_margins_drivers_are_quoted_from_the_sentence_explaining_its_cost_line(service):
    answer = service.answer("What drove gross margin change as of FY2022 for Acme? If gross margin is not a useful "
                            "metric for a company like this, then please state that and explain why.", [SCOPE])
    assert answer.kind == "drivers" and not answer.refused
    quotes = [c.quote for c in answer.citations]
    assert any(q.startswith("Cost of products sold increased as a percent to sales driven by") for q in quotes)
    assert not any(q.startswith("Net sales increased") for q in quotes)  # what moved sales is not the margin's story
    assert "=" not in answer.text  # no arithmetic: the question asks why


def test_a_sentence_referring_back_to_the_line_is_quoted_with_the_sentence_it_refers_to(service):
    answer = service.answer("What drove the increase in Acme's merchandise inventories balance at end of FY2022?",
                            [SCOPE])
    assert answer.kind == "drivers"
    assert any(c.quote.startswith("Merchandise inventories totaled") and c.quote.endswith("47 new stores.")
               for c in answer.citations)


@pytest.mark.parametrize(
    ("question", "drivers"),
    [("What drove gross margin change as of FY2022 for JnJ?", True),
     ("Why did Acme's net income fall in 2022?", True),
     ("What was Acme's gross margin in FY2022?", False),
     ("Why is the sky blue?", False)],  # no metric or line item named: the look-up's question
)
def test_a_question_asks_for_drivers_when_it_asks_why_a_named_metric_moved(question, drivers):
    assert (QuestionKind.DRIVERS in classify(question)) is drivers
