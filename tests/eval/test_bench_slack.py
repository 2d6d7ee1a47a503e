"""``citebot bench slack``'s check that a burst answers as asking alone does: the quotes it compares and what
``--check`` fails on."""

from __future__ import annotations

from bot.slack.render import render_answer
from eval.bench.slack import missed_targets, quotes_of
from pipelines.models import Answer, Citation


def _answer(*quotes: tuple[str, int]) -> Answer:
    cites = [
        Citation(n=i, chunk_id=f"d:{i:05d}", doc_id="d", file="handbook.pdf", page_start=page, page_end=page,
                 section="4 Leave", quote=quote)
        for i, (quote, page) in enumerate(quotes, start=1)
    ]
    return Answer(text="Staff get 25 days [1].", citations=cites)


def _result(mismatches: list[dict[str, object]]) -> dict[str, object]:
    return {"ack_target_met": True, "answer_target_met": True, "ready_target_met": True, "all_answered_once": True,
            "answered_exactly_once": 2, "mentions": 2, "ack_ms_p95": 40.0, "answer_posted_ms_p95": 900.0,
            "ready_s": 2.0, "quote_mismatches": mismatches}


def test_quotes_are_read_in_order_with_where_they_are_from():
    _, blocks = render_answer(_answer(("Staff get 25 days of leave.", 3), ("Carry-over is 5 days.", 4)))
    quotes = quotes_of(blocks)
    assert len(quotes) == 2
    assert quotes[0].startswith("[1] Staff get 25 days of leave. — ") and "handbook.pdf" in quotes[0]
    assert "p. 3" in quotes[0] and "p. 4" in quotes[1]
    _, refused = render_answer(Answer(text="I could not find that in the PDFs.", refused=True))
    assert quotes_of(refused) == []


def test_a_quote_that_differs_from_asking_alone_fails_the_check():
    alone = quotes_of(render_answer(_answer(("Staff get 25 days of leave.", 3)))[1])
    other_page = quotes_of(render_answer(_answer(("Staff get 25 days of leave.", 9)))[1])
    assert alone != other_page  # the same words from another page are another quote
    assert missed_targets({"onnx": _result([])}) == []
    mismatch = {"ts": "2.000001", "question": "How many days of leave?", "in_burst": other_page, "alone": alone}
    assert missed_targets({"onnx": _result([mismatch])}) == ["1 answers quote otherwise than asked alone (onnx)"]
