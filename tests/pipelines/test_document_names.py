"""Which filings of a busy channel a question is about: company names as analysts write them, and periods."""

from __future__ import annotations

import pytest

from pipelines.components.document_names import (
    Period,
    file_period,
    named_files,
    naming_words,
    preferred_files,
    question_period,
)

CHANNEL = [
    "WALMART_2021_10K.pdf",
    "WALMART_2023_10K.pdf",
    "WALMART_2023Q2_10Q.pdf",
    "HOMEDEPOT_2022_10K.pdf",
    "AMERICAN_EXPRESS_2022_10K.pdf",
    "JOHNSON_JOHNSON_2022Q4_EARNINGS.pdf",
    "JPMORGAN_2021Q1_10Q.pdf",
    "ULTABEAUTY_2023Q4_EARNINGS.pdf",
    "Independents-Report.pdf",
    "reportq32015-151009093138_95.pdf",
]


@pytest.mark.parametrize(
    ("question", "files"),
    [
        ("What was Walmart's FY2021 revenue?", ["WALMART_2021_10K.pdf", "WALMART_2023_10K.pdf",
                                                "WALMART_2023Q2_10Q.pdf"]),
        ("How many stores did Home Depot open in 2022?", ["HOMEDEPOT_2022_10K.pdf"]),
        ("Does AMEX have an improving operating margin?", ["AMERICAN_EXPRESS_2022_10K.pdf"]),
        ("How did JnJ's US sales compare to international sales?", ["JOHNSON_JOHNSON_2022Q4_EARNINGS.pdf"]),
        ("How did Johnson & Johnson's US sales grow?", ["JOHNSON_JOHNSON_2022Q4_EARNINGS.pdf"]),
        ("Which of JPM's segments had the lowest net revenue?", ["JPMORGAN_2021Q1_10Q.pdf"]),
        ("What drove Ulta's inventory up?", ["ULTABEAUTY_2023Q4_EARNINGS.pdf"]),
    ],
)
def test_a_question_names_the_company_of_its_files(question, files):
    assert named_files(question, CHANNEL) == files


@pytest.mark.parametrize(
    "question",
    [
        "How many hispanic independents favor trade with China?",  # a common word, not a name
        "How many Rep/Lean Rep people think cases rose?",  # "Rep" starts reportq3..., but names nothing
        "What is the revenue in 2022?",
        "The report says what about walmarts?",
    ],
)
def test_common_words_name_no_file(question):
    assert named_files(question, CHANNEL) == []


@pytest.mark.parametrize(
    ("name", "period"),
    [
        ("WALMART_2023Q2_10Q.pdf", Period(2023, 2, "10q")),
        ("WALMART_2021_10K.pdf", Period(2021, None, "10k")),
        ("ULTABEAUTY_2023Q4_EARNINGS.pdf", Period(2023, 4, "earnings")),
        ("ACME_2023_8K_dated-2023-08-30.pdf", Period(2023, None, "8k")),
        ("handbook.pdf", Period()),
    ],
)
def test_file_period(name, period):
    assert file_period(name) == period


@pytest.mark.parametrize(
    ("question", "year", "quarter"),
    [
        ("What is the FY2019 - FY2021 average margin?", 2021, None),
        ("Did PP&E grow between FY20 and FY21?", 2021, None),
        ("As of Q2'2023, is it spinning off a segment?", 2023, 2),
        ("Which region dropped most in Q22023?", 2023, 2),
        ("Which segment had the lowest revenue in 2021 Q1?", 2021, 1),
        ("Did VaR fall in the second fiscal quarter of 2023?", 2023, 2),
        ("What was bought in H1 FY2023?", 2023, 2),
        ("Did margins rise in Q2 of FY2023 compared to Q2 of FY2022?", 2023, 2),
        ("What are the main risks?", None, None),
    ],
)
def test_question_period(question, year, quarter):
    p = question_period(question)
    assert (p.year, p.quarter) == (year, quarter)


def test_the_period_picks_the_filing():
    walmart = [f for f in CHANNEL if f.startswith("WALMART")]
    assert preferred_files("What was Walmart's FY2021 revenue?", walmart) == ["WALMART_2021_10K.pdf"]
    assert preferred_files("Walmart's inventory at the end of Q2 2023?", walmart) == ["WALMART_2023Q2_10Q.pdf"]
    # FY2022 has no filing of its own: the next annual report holds it as its comparative year
    assert preferred_files("Walmart's FY2022 capex?", walmart) == ["WALMART_2023_10K.pdf"]
    # no period: every filing of the company stays in play
    assert preferred_files("Who is Walmart's CEO?", walmart) == walmart


@pytest.mark.parametrize(
    ("question", "file", "words"),
    [
        ("What was Netflix's net income in 2017?", "NETFLIX_2017_10K.pdf", ["Netflix"]),  # "net" stays
        ("What is the FY2017 return on assets for Coca Cola?", "COCACOLA_2017_10K.pdf", ["Coca", "Cola"]),
        ("Does AMEX have an improving operating margin?", "AMERICANEXPRESS_2022_10K.pdf", ["AMEX"]),
        ("What drove gross margin for American Express?", "AMERICANEXPRESS_2022_10K.pdf", ["American", "Express"]),
        ("What were General Mills general and administrative expenses?", "GENERALMILLS_2019_10K.pdf",
         ["General", "Mills"]),
        ("what were general mills sales", "GENERALMILLS_2019_10K.pdf", ["general", "mills"]),
        ("Are JnJ's FY2022 financials that of a high growth company?", "JOHNSON_JOHNSON_2022_10K.pdf", ["JnJ"]),
        ("Which region had the highest EBITDAR for MGM Resorts?", "MGMRESORTS_2022_10K.pdf", ["MGM", "Resorts"]),
        ("What is Nike revenue?", "ADOBE_2022_10K.pdf", []),  # a company the files are not about stays a word
    ],
)
def test_the_words_that_name_the_company(question, file, words):
    assert naming_words(question, [file]) == words


def test_the_words_that_name_a_company_by_its_alias():
    assert naming_words("What is Adobe's revenue?", ["filing-01.pdf"], {"filing-01.pdf": "Adobe_2022_10K"}) == [
        "Adobe"]
