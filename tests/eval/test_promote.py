"""Promotion of chat feedback into eval cases: 👍 → set, 👎 → review file, duplicates skipped, reruns add nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from connectors.settings import Settings
from connectors.state_log import StateLog
from eval.cases import load_cases, load_review_cases
from eval.promote import promote, review_path
from pipelines.models import Answer, Citation


def _answer(text: str, pages: list[tuple[str, int, int]], refused: bool = False) -> Answer:
    return Answer(
        text=text,
        refused=refused,
        citations=[
            Citation(n=i + 1, chunk_id=f"d:{i:05d}", doc_id="d", file=f, page_start=a, page_end=b, quote=f"q{i}")
            for i, (f, a, b) in enumerate(pages)
        ],
    )


def _say(log: StateLog, ref: str, question: str, answer: Answer, scope: str = "slack:T1:C1") -> None:
    log.record_answer(platform="slack", message_ref=ref, thread_ref=ref, scope=scope, user="U1", question=question,
                      answer_json=answer.model_dump_json())


@pytest.fixture
def log(tmp_path: Path) -> StateLog:
    log = StateLog(tmp_path / "data" / "state.sqlite3")
    leave = _answer("25 days [1] [2].", [("hb.pdf", 4, 4), ("hb.pdf", 5, 6)])
    _say(log, "m1", "How many days of leave do I get?", leave)
    _say(log, "m2", "Who approves travel?", _answer("The travel desk [1].", [("hb.pdf", 8, 8)]))
    _say(log, "m3", "What is the dress code?", _answer("The PDFs here don't say.", [], refused=True))
    # the same question asked again in the same channel (different case and punctuation) and in another channel
    _say(log, "m4", "how many days of leave do I get", _answer("25 days [1].", [("hb.pdf", 4, 4)]))
    _say(log, "m5", "How many days of leave do I get?", _answer("25 [1].", [("hb.pdf", 4, 4)]), scope="slack:T1:C2")
    log.add_feedback(platform="slack", message_ref="m1", user="U2", polarity="up")
    log.add_feedback(platform="slack", message_ref="m1", user="U3", polarity="up")  # second 👍, same answer
    log.add_feedback(platform="slack", message_ref="m2", user="U2", polarity="down", comment="wrong desk")
    log.add_feedback(platform="slack", message_ref="m3", user="U2", polarity="up")
    log.add_feedback(platform="slack", message_ref="m4", user="U4", polarity="up")
    log.add_feedback(platform="slack", message_ref="m5", user="U4", polarity="up")
    return log


def test_thumbs_up_becomes_a_case_with_cited_pages(log: StateLog, tmp_path: Path) -> None:
    set_path = tmp_path / "fb.jsonl"
    res = promote(log, set_path)
    cases = load_cases(set_path)
    assert len(res.added) == 3 and len(cases) == 3  # m1, m3 (refusal), m5 (other channel); m4 is m1 again
    leave = next(c for c in cases if c.scope == "slack:T1:C1" and c.answerable)
    assert leave.question == "How many days of leave do I get?"
    assert leave.answer == "q0; q1"  # the evidence it cited, not the lead line "25 days [1] [2]."
    assert leave.origin == "feedback"
    assert [(s.doc, s.pages) for s in leave.sources] == [("hb.pdf", [4, 5, 6])]
    refused = next(c for c in cases if not c.answerable)
    assert refused.question == "What is the dress code?" and refused.sources == []
    assert {c.scope for c in cases} == {"slack:T1:C1", "slack:T1:C2"}


def test_thumbs_down_goes_to_review_with_the_bad_answer(log: StateLog, tmp_path: Path) -> None:
    set_path = tmp_path / "fb.jsonl"
    promote(log, set_path)
    [case] = load_review_cases(review_path(set_path))
    assert case.question == "Who approves travel?"
    assert case.answer is None and case.sources == []
    review = json.loads(review_path(set_path).read_text())["review"]
    assert review["bad_answer"] == "The travel desk [1]."
    assert review["bad_citations"][0]["page_start"] == 8
    assert review["comment"] == "wrong desk"
    assert [(v["polarity"], v["user"], v.get("comment")) for v in review["votes"]] == [("down", "U2", "wrong desk")]
    assert review_path(set_path).name == "fb.review.jsonl"


def test_rerun_adds_nothing_and_a_thumbs_down_on_a_set_question_goes_to_review(log: StateLog, tmp_path: Path) -> None:
    set_path = tmp_path / "fb.jsonl"
    set_path.write_text(json.dumps({"id": "manual-1", "question": "Who approves travel?", "scope": "slack:T1:C1"})
                        + "\n")
    first = promote(log, set_path)
    # the 👎'd question is a case in the set already: its expectation may be what is wrong, so an admin looks
    [case] = load_review_cases(review_path(set_path))
    assert first.review == [case.id] and case.question == "Who approves travel?"
    assert json.loads(review_path(set_path).read_text())["review"]["in_set"] == "manual-1"
    before = (set_path.read_text(), review_path(set_path).read_text())
    second = promote(log, set_path)
    assert second.added == [] and second.review == []
    assert (set_path.read_text(), review_path(set_path).read_text()) == before


def test_thumbs_up_and_down_on_one_question_go_to_review_with_every_vote(log: StateLog, tmp_path: Path) -> None:
    set_path = tmp_path / "fb.jsonl"
    promote(log, set_path)
    leave_id = next(c.id for c in load_cases(set_path) if c.scope == "slack:T1:C1" and c.answerable)
    # later someone 👎s the leave answer the set already holds, with a reason from the Slack form
    log.add_feedback(platform="slack", message_ref="m1", user="U5", polarity="down", comment="that was 2023",
                     choice="wrong_passage")
    res = promote(log, set_path)
    assert res.added == [] and res.skipped == 2  # the refusal and the other channel's case, already present
    [leave] = [c for c in load_review_cases(review_path(set_path)) if c.question.startswith("How many days")]
    assert res.review == [leave.id]
    review = leave.review  # type: ignore[attr-defined]
    assert review["why"] == "👍 and 👎 on the same question" and review["in_set"] == leave_id
    assert sorted((v["user"], v["polarity"]) for v in review["votes"]) == [
        ("U2", "up"), ("U3", "up"), ("U4", "up"), ("U5", "down")
    ]
    assert {"choice": "wrong_passage", "comment": "that was 2023"}.items() <= review["votes"][-1].items()
    assert review["good_evidence"] == "q0" and review["comment"] == "that was 2023"  # the latest 👍 (m4) cited q0

    # a new vote on a question under review joins its case; nothing is duplicated on a rerun
    log.add_feedback(platform="slack", message_ref="m4", user="U6", polarity="up")
    assert promote(log, set_path).review == [leave.id]
    assert promote(log, set_path).review == []
    [leave] = [c for c in load_review_cases(review_path(set_path)) if c.question.startswith("How many days")]
    assert len(leave.review["votes"]) == 5  # type: ignore[attr-defined]


def test_since_filters_old_feedback(log: StateLog, tmp_path: Path) -> None:
    assert promote(log, tmp_path / "fb.jsonl", since="2999-01-01T00:00:00+00:00").added == []


def test_cli_promote_and_feedback_filters(
    log: StateLog, tmp_path: Path, capsys: pytest.CaptureFixture[str], run_cli: Any
) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    assert run_cli(["feedback", "--json", "--polarity", "down"], settings) == 0
    out = json.loads(capsys.readouterr().out)
    assert [e["question"] for e in out] == ["Who approves travel?"]
    assert {"question", "answer", "polarity", "platform", "scope", "user", "at", "citations"} <= set(out[0])
    assert run_cli(["feedback", "--json", "--since", "2999-01-01"], settings) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert run_cli(["eval", "promote", "--set", str(tmp_path / "s.jsonl")], settings) == 0
    assert "3 case(s) added" in capsys.readouterr().out
    assert run_cli(["feedback"], settings) == 0
    assert "    “wrong desk”" in capsys.readouterr().out
    assert run_cli(["eval", "promote", "--set", str(tmp_path / "s.jsonl")], settings) == 0
    assert "0 case(s) added" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        run_cli(["feedback", "--since", "last tuesday"], settings)


def test_the_weeks_thumbs_down_come_grouped_by_reason_and_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], run_cli: Any
) -> None:
    log = StateLog(tmp_path / "data" / "state.sqlite3")
    votes = [  # (question, the files the answer quoted, the 👎 form's choice)
        ("Which hotels may I book?", ["travel.pdf", "travel.pdf", "hb.pdf"], "wrong_passage"),
        ("What is the hotel limit?", ["travel.pdf"], "wrong_passage"),
        ("How many days of leave?", ["hb.pdf"], "missing_information"),
        ("Who signs travel requests?", ["travel.pdf"], "wrong_passage"),
        ("Is there a dress code?", [], ""),  # a refusal, 👎 without a reason
    ]
    for i, (question, files, choice) in enumerate(votes):
        answer = _answer("x [1].", [(f, 3, 3) for f in files], refused=not files)
        _say(log, f"d{i}", question, answer)
        assert log.add_feedback(platform="slack", message_ref=f"d{i}", user="U9", polarity="down", choice=choice)
    set_path, settings = tmp_path / "s.jsonl", Settings(data_dir=tmp_path / "data")
    assert run_cli(["eval", "promote", "--set", str(set_path), "--days", "7"], settings) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    start = lines.index("To review, by reason and document (largest first):")
    clusters = [line.rsplit(": ", 2)[0].strip() for line in lines[start + 1:]]
    assert clusters == ["quoted the wrong passage — travel.pdf", "left out information — hb.pdf",
                        "no reason given — (refused: nothing quoted)"]
    assert lines[start + 1].rsplit(": ", 2)[1] == "3 case(s)"
    # the review file keeps each cluster's cases together, each case saying its cluster
    cases = load_review_cases(review_path(set_path))
    keys = [(c.review["cluster"]["reason"], c.review["cluster"]["document"]) for c in cases]  # type: ignore[attr-defined]
    assert keys == [("wrong_passage", "travel.pdf")] * 3 + [("missing_information", "hb.pdf"),
                                                            ("no reason given", "(refused: nothing quoted)")]
    # the week's votes only: nothing older is promoted again
    assert run_cli(["eval", "promote", "--set", str(set_path), "--days", "7"], settings) == 0
    assert "To review" not in capsys.readouterr().out  # nothing new
