"""QuestionAnalyzer: the question without instructions about the answer's form, and its specific terms."""

from __future__ import annotations

import pytest

from pipelines.components.instructions import Instructions
from pipelines.components.question_analyzer import (
    QuestionAnalyzer,
    anchors,
    content_words,
    plain_periods,
    split_question,
    strip_instructions,
    without_names,
    word_forms,
)


class TestQuestionAnalyzer:
    def test_init_to_dict_from_dict(self):
        data = QuestionAnalyzer().to_dict()
        assert data == {"type": "pipelines.components.question_analyzer.QuestionAnalyzer", "init_parameters": {}}
        assert isinstance(QuestionAnalyzer.from_dict(data), QuestionAnalyzer)

    @pytest.mark.parametrize(
        ("question", "query"),
        [
            ("How many bar charts are in the report? Please write the answer in integer format.",
             "How many bar charts are in the report?"),
            ('Which years are shown? Format all of the years in a list like ["2006", "2007"]',
             "Which years are shown?"),
            ("What is the ratio for FY2023? Round your answer to three decimal places.",
             "What is the ratio for FY2023?"),
            ('Which colours appear, in descending order, e.g., ["9%","8%"] in the 2013 survey?',
             "Which colours appear, in descending order in the 2013 survey?"),
            # a question that is itself about order keeps its words
            ("List the senses in the ascending order of their bandwidth.",
             "List the senses in the ascending order of their bandwidth."),
            ("What are the core hours?", "What are the core hours?"),
        ],
    )
    def test_run_strips_answer_format_instructions(self, question, query):
        assert QuestionAnalyzer().run(question=question)["query"] == plain_periods(query)
        assert strip_instructions(question) == query

    @pytest.mark.parametrize(
        ("question", "expected"),
        [
            ("What was the revenue of Halvorsen & Pike in 2021?", ["2021", "Halvorsen", "Pike"]),
            ("Are there counties in Florida with more than 100 deaths per 100,000 residents?",
             ["100", "100000", "Florida"]),
            ("What is the operating cash flow ratio for ADBE in FY2015?", ["2015", "ADBE"]),
            ("What is the title of the diagram on page 9?", []),  # where to look, not what it says
            ("WHAT IS THE LOGO COLOR?", []),  # shouting is not a name
        ],
    )
    def test_anchors_are_numbers_names_and_quotes(self, question, expected):
        assert anchors(question) == expected

    def test_content_words_leave_out_question_and_document_words(self):
        assert content_words("According to the report, how many dogs are allowed in the office on page 3?") == [
            "dogs", "office"]
        # how a question points at the document or its look is not what the text says
        assert content_words("How many red logos appear in the entire presentation?") == []
        assert content_words("What colour is the ITC logo on the cover, in three words?") == ["itc", "cover", "words"]

    @pytest.mark.parametrize(
        ("word", "forms"),
        [
            ("ending", {"ended", "ends", "end"}),
            ("sampled", {"sample", "samples", "sampling"}),
            ("studies", {"study", "studied"}),
            ("recommendation", {"recommend", "recommended"}),
            ("FY2015", {"FY2015"}),
        ],
    )
    def test_word_forms_find_a_word_in_any_inflection(self, word, forms):
        assert forms <= set(word_forms(word))
        assert word_forms(word)[0] in (word, word.lower())


_BALANCE_Q = ("Assume that you are a public equities analyst. Answer the following question by primarily using "
              "information shown in the balance sheet: what is Adobe's total assets at the end of FY2022? Answer in "
              "USD billions.")


@pytest.mark.parametrize(
    ("question", "query", "said"),
    [
        (_BALANCE_Q, "What is Adobe's total assets at the end of FY2022?",
         Instructions(statements=("balance",), unit="USD billions", role="a public equities analyst")),
        ("You are an investment banker and your only resource(s) to answer the following question is (are): the "
         "statement of financial position and the cash flow statement. Here's the question: what is the FY2015 "
         "operating cash flow ratio for Adobe? Operating cash flow ratio is defined as: cash from operations / total "
         "current liabilities. Round your answer to two decimal places.",
         "What is the FY2015 operating cash flow ratio for Adobe? Operating cash flow ratio is defined as: cash from "
         "operations / total current liabilities.",
         Instructions(statements=("balance", "cash_flow"), decimals=2, role="an investment banker")),
        ("What is Netflix's year end FY2017 total current liabilities (in USD millions)? Base your judgments on the "
         "information provided primarily in the balance sheet.",
         "What is Netflix's year end FY2017 total current liabilities?",
         Instructions(statements=("balance",), unit="USD millions")),
        ("We need to calculate a reasonable approximation (or exact number if possible) of a financial metric. "
         "Basing your judgment by information plainly provided in the statement of income, what is Nike's three year "
         "average of cost of goods sold as a % of revenue from FY2016 to FY2018? Answer in units of percents and "
         "round to one decimal place.",
         "What is Nike's three year average of cost of goods sold as a % of revenue from FY2016 to FY2018?",
         Instructions(statements=("income",), unit="percent", decimals=1)),
        ("Answer the following question as if you are an equity research analyst and have lost internet connection "
         "so you do not have access to financial metric providers. According to the details clearly outlined within "
         "the P&L statement and the statement of cash flows, what is the FY2015 D&A % margin for AMD?",
         "What is the FY2015 D&A % margin for AMD?",
         Instructions(statements=("income", "cash_flow"), role="an equity research analyst")),
        ("Does Adobe have an improving operating margin profile as of FY2022? If operating margin is not a useful "
         "metric for a company like this, then state that and explain why.",
         "Does Adobe have an improving operating margin profile as of FY2022?", Instructions()),
        # a question about a statement keeps it: only an instruction's statements are taken out
        ("What was the largest liability in American Express's Balance Sheet in 2022?",
         "What was the largest liability in American Express's Balance Sheet in 2022?", Instructions()),
        ("How much does Pfizer expect to pay to spin off Upjohn in the future in USD million?",
         "How much does Pfizer expect to pay to spin off Upjohn in the future?", Instructions(unit="USD millions")),
    ],
)
def test_an_analysts_instructions_are_parsed_out_of_the_question(question, query, said):
    out, got = split_question(question)
    assert out == query
    assert (got.statements, got.unit, got.decimals, got.role) == (said.statements, said.unit, said.decimals,
                                                                  said.role)
    assert (got.removed != ()) == (query != question)


def test_the_analyzer_searches_for_neither_the_routed_company_nor_period_words():
    out = QuestionAnalyzer().run(question=_BALANCE_Q, names=["Adobe"])
    assert out["query"] == "What is the company's total assets at the end of 2022?"  # what the embedding reads
    assert out["keywords"] == "What is total assets at the end of 2022?"  # what BM25 searches for
    assert out["words"] == ["assets", "end"]  # no "adobe", "fiscal", "judgments", "usd", "billions"
    assert out["anchors"] == ["2022"]
    assert out["instructions"].statements == ("balance",)


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("total assets at the end of fiscal 2022", "total assets at the end of 2022"),
        ("year end FY2018 accounts payable", "2018 accounts payable"),
        ("capex from FY 2016 to FY18", "capex from 2016 to 2018"),
        ("revenue in fiscal year 2021", "revenue in 2021"),
        ("When does the fiscal year end?", "When does the fiscal year end?"),  # no year: a question about it
    ],
)
def test_periods_are_said_as_years(text, plain):
    assert plain_periods(text) == plain


@pytest.mark.parametrize(
    ("text", "names", "instead", "out"),
    [
        ("In which year and city was Halvorsen & Pike founded?", ["Halvorsen", "Pike"], "the company",
         "In which year and city was the company founded?"),
        ("What is Netflix's year end 2017 total?", ["Netflix"], "", "What is year end 2017 total?"),
        ("What is Netflix's year end 2017 total?", ["Netflix"], "the company",
         "What is the company's year end 2017 total?"),
        ("What is the ROA for Coca Cola?", ["Coca", "Cola"], "", "What is the ROA for?"),
        ("What is the net revenue?", [], "the company", "What is the net revenue?"),
    ],
)
def test_the_routed_company_is_said_as_the_company_or_not_at_all(text, names, instead, out):
    assert without_names(text, names, instead=instead) == out
