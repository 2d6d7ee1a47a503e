"""`citebot demo` and `citebot ask` on the embedded defaults, offline."""

from __future__ import annotations

import json

import pytest

from bot.cli.main import main
from eval.fakes.openai_api import FakeOpenAI, careful_responder
from eval.sample_pdfs import CONTRACT, HANDBOOK

pytestmark = pytest.mark.slow


def test_demo_then_ask(capsys, monkeypatch):
    monkeypatch.setenv("CITEBOT_OCR_ENABLED", "false")  # the scanned page's OCR is slow and not what this tests
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "✓ halvorsen_pike_employee_handbook.pdf: indexed" in out
    assert "Q: Which year in table 2 has the highest revenue?" in out and "2022 | 118.6 | 1,180" in out
    assert "Q: What do pages 4-5 say about parental leave?" in out and "· p. 5 · 4.2 Parental leave" in out
    assert "The indexed PDFs don't seem to answer that." in out  # the unanswerable sample question
    assert "[1] │ " in out
    assert ", 0 ms]" not in out  # every answer kind is timed
    assert " chunks in " in out and "passages" not in out.split("Q:")[0]  # ingest's word for them

    # a table quoted whole reads as a table: one row per line under the quote's bar
    assert main(["ask", "What does Table 2 say?"]) == 0
    out = capsys.readouterr().out
    assert "  [1] │ Table 2: Revenue and headcount by year, 2018-2023\n" in out
    assert ("      │ Year | Revenue (GBP million) | Headcount at year end | Offices\n"
            "      │ 2018 | 84.2 | 910 | 3\n      │ 2019 | 91.5 | 985 | 3\n") in out

    # idempotent: a second run indexes nothing
    assert main(["demo", "--question", "How long must passwords be?"]) == 0
    out = capsys.readouterr().out
    assert "unchanged, already indexed" in out and "✓" not in out
    assert "at least 14 characters" in out

    assert main(["ask", "What is the annual subscription fee?", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["mode"] == "extractive" and not answer["refused"]
    assert "EUR 184,000" in answer["citations"][0]["quote"]
    assert set(answer["timings_ms"]) == {"retrieve", "generate", "total"}

    assert main(["ask", "What is the annual subscription fee?", "--mode", "bm25"]) == 0
    assert "EUR 184,000" in capsys.readouterr().out

    # the question types beyond look-ups (issue 24), as the terminal shows them
    assert main(["ask", "Compare the two PDFs on confidentiality"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("What each PDF says about confidentiality:\n")
    assert "• halvorsen_pike_employee_handbook.pdf: says nothing about confidentiality that I could find." in out
    assert "Confidential Information secret" in out and "· p. 4 · ARTICLE V CONFIDENTIALITY" in out
    assert main(["ask", "What is the limit?"]) == 0
    out = capsys.readouterr().out
    # a numbered list, each reading's follow-up question after it, and how to ask one on the command line
    assert out.startswith("Which limit do you mean? The PDFs mention several:\n1. 2.1 Flexitime")
    assert f"\n2. ARTICLE VI LIABILITY ({CONTRACT}, p. 5) [2] → ask “What is the limit in section VI of " in out
    assert f"\n3. 6 Travel and Expenses ({HANDBOOK}, p. 8) [3] → ask “What is the limit in section 6 of " in out
    assert '\nAsk again with the question of the one you mean: citebot ask "…"\n' in out and "thread" not in out
    assert "Hotel costs are reimbursed up to 160 pounds per night in London" in out
    assert main(["ask", "What does Figure 1 show?"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("There is no Figure 1 in the PDFs here.\nThey have: ")
    assert "[1]" not in out  # never unrelated passages
    assert main(["ask", "Compare the notice periods in the handbook and the services agreement"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("What each PDF says about the notice periods:\n")
    assert f"\n• {CONTRACT} [" in out and f"\n• {HANDBOOK} [" in out  # one cited block per document
    assert "one month during the first two years of service" in out
    assert main(["ask", "Summarize the services agreement"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"A summary of {CONTRACT} (7 pages): the opening sentence of each section.\n")
    assert "\n• ARTICLE III FEES AND PAYMENT (p. 3) [4]\n" in out and "annual subscription fee of EUR 184,000" in out
    assert main(["ask", "Which year in table 2 had the highest revenue?"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"2022: the highest Revenue (GBP million) in Table 2 of {HANDBOOK} (p. 9) is 118.6 [1][2].\n")
    assert main(["ask", "What kind of document is this?"]) == 0
    assert capsys.readouterr().out.startswith(f"{CONTRACT} is a master services agreement; its first page reads [1]\n"
                                              f"{HANDBOOK} is an employee handbook; its first page reads [2]\n")
    assert main(["ask", "What is the mileage rate and what is the dress code?"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("• What is the mileage rate? [1]\n• What is the dress code? The PDFs don't say.\n\n  [1] │ ")
    assert out.endswith("(Part of your question isn't covered by the PDFs here.)\n") and "[2]" not in out
    assert main(["ask", "What is the mileage rate and what is the dress code?", "--json"]) == 0
    assert "45 pence per mile" in json.loads(capsys.readouterr().out)["citations"][0]["quote"]

    # another scope has nothing indexed
    assert main(["ask", "What is the annual subscription fee?", "--scope", "slack:T1:C1"]) == 1
    assert "No PDFs are indexed in slack:T1:C1" in capsys.readouterr().err

    # with an OpenAI-compatible endpoint configured, the same command answers through the LLM
    with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        assert main(["ask", "What is the annual subscription fee?", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["mode"] == "llm" and answer["citations"] and answer["validation"]["exact"] == 1
    assert fake.requests and fake.requests[0]["temperature"] == 0

    # issue 24's rows in LLM mode: the model writes comparisons, summaries and each part of a multi-part question,
    # its quotes validated; what needs no writing is answered as without a model
    with FakeOpenAI(careful_responder) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        assert main(["ask", "What is the mileage rate and what is the dress code?"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"• What is the mileage rate? The model read {HANDBOOK} [1].\n"
                              "• What is the dress code? The PDFs don't say.\n")
        assert "\n  [1] │ " in out and "[2]" not in out and len(fake.requests) == 1  # the model's one quote, shown
        assert main(["ask", "Compare the two PDFs on confidentiality"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"The model read {CONTRACT} [1].")
        assert f"\n• {HANDBOOK}: says nothing about confidentiality that I could find.\n" in out
        assert main(["ask", "Compare the notice periods in the handbook and the services agreement"]) == 0
        out = capsys.readouterr().out.split("\n", 1)[0]
        assert f"The model read {CONTRACT} [" in out and f"The model read {HANDBOOK} [" in out
        assert main(["ask", "Summarize the services agreement"]) == 0
        assert capsys.readouterr().out.split("\n", 1)[0].count(f"The model read {CONTRACT} [") >= 8
        asked = len(fake.requests)
        for question, first in [("What does Figure 1 show?", "There is no Figure 1 in the PDFs here."),
                                ("What is the limit?", "Which limit do you mean? The PDFs mention several:"),
                                ("Which year in table 2 had the highest revenue?", "2022: the highest Revenue"),
                                ("What kind of document is this?", f"{CONTRACT} is a master services agreement")]:
            assert main(["ask", question]) == 0
            assert capsys.readouterr().out.startswith(first), question
        assert len(fake.requests) == asked
