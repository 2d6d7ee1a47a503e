"""``citebot quality``: week-by-week figures from the chat state, and ``--check`` as a CronJob's alarm.

Each state log is written through the real chat state API (answers recorded as the chat core records them,
votes as the adapters add them); only the answers' times are moved back, to spread them over the weeks.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.cli.main import main
from connectors.state_log import StateLog
from pipelines.models import Answer, Citation, ValidationCounts

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)  # a Wednesday; ISO week 2026-W48


class StateBuilder:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "state.sqlite3"
        self.state = StateLog(self.path)
        self.n = 0

    def answer(self, *, days_ago: float, refused: bool = False, scope: str = "slack:T1:C1", dropped: int = 0,
               vote: str = "", choice: str = "", file: str = "handbook.pdf", section: str = "4 Leave") -> str:
        self.n += 1
        ref = f"C1:{self.n}.0"
        cites = [] if refused else [Citation(n=1, chunk_id="d:1", doc_id="d", file=file, page_start=4, page_end=4,
                                             section=section, quote="Employees get 25 days of annual leave.")]
        answer = Answer(text="The PDFs don't say." if refused else "Here is what the PDFs say [1]:",
                        refused=refused, citations=cites,
                        validation=ValidationCounts(exact=len(cites), unmatched=dropped))
        self.state.record_answer(platform="slack", message_ref=ref, thread_ref=ref, scope=scope, user="U1",
                                 question=f"question {self.n}?", answer_json=answer.model_dump_json())
        if vote:
            assert self.state.add_feedback(platform="slack", message_ref=ref, user="U2", polarity=vote,  # type: ignore[arg-type]
                                           choice=choice)
        at = (NOW - timedelta(days=days_ago)).isoformat(timespec="seconds")
        with sqlite3.connect(self.path) as db:
            db.execute("UPDATE answers SET at = ? WHERE message_ref = ?", (at, ref))
        return ref


@pytest.fixture
def build(tmp_path: Path) -> StateBuilder:
    return StateBuilder(tmp_path / "data")


def quality(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["quality", "--until", NOW.isoformat(), *args])
    return code, capsys.readouterr().out


def test_check_fails_when_the_refusal_rate_crosses_its_ceiling(build: StateBuilder,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(30):  # the last 7 days: 15 of 30 refused = 50% > the 40% ceiling
        build.answer(days_ago=i * 0.2, refused=i % 2 == 0)
    code, out = quality(capsys, "--check")
    assert code == 1, out
    assert "Last 7 days: ALARM" in out and "ALARM refusal rate: 50.0% > 40% ceiling" in out
    assert "ok    👎 rate" in out


def test_check_passes_on_a_log_that_stays_within_its_thresholds(build: StateBuilder,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(30):  # 3 of 30 refused, 2 with a 👎, no quote dropped
        build.answer(days_ago=i * 0.2, refused=i < 3, vote="down" if i in (10, 11) else "up" if i == 12 else "")
    code, out = quality(capsys, "--check")
    assert code == 0, out
    assert "Last 7 days: OK" in out and "ALARM" not in out
    # without --check the same report never fails a job
    assert quality(capsys)[0] == 0


def test_check_alarms_on_a_rise_over_the_weeks_before_even_under_the_ceiling(
    build: StateBuilder, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(200):  # the four windows before: 5% with a 👎
        build.answer(days_ago=8 + i * 0.1, vote="down" if i % 20 == 0 else "", choice="wrong_passage")
    for i in range(60):  # this week: 13.3% (under the 15% ceiling, but 8.3 points up: beyond chance)
        build.answer(days_ago=i * 0.1, vote="down" if i % 15 < 2 else "", choice="missing_information")
    code, out = quality(capsys, "--check")
    assert code == 1, out
    assert ("ALARM 👎 rate: 13.3% <= 15% ceiling; +8.3 points against 5.0% in the 4 windows before (more than 5, "
            "beyond chance (z = 2.2))") in out
    # the thresholds are settings: a wider allowed rise passes the same log
    monkeypatch.setenv("CITEBOT_QUALITY_MAX_RISE", "0.10")
    assert quality(capsys, "--check")[0] == 0


def test_a_rise_that_chance_explains_raises_no_alarm(build: StateBuilder,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(40):  # before: 5%
        build.answer(days_ago=8 + i * 0.5, vote="down" if i % 20 == 0 else "")
    for i in range(25):  # this week: 3 of 25 = 12%: 7 points up, but on so few answers that is noise (z < 2)
        build.answer(days_ago=i * 0.2, vote="down" if i < 3 else "")
    code, out = quality(capsys, "--check")
    assert code == 0, out
    assert "+7.0 points against 5.0% in the 4 windows before (more than 5, within chance (z = 1.0))" in out


def test_a_quiet_week_is_not_judged(build: StateBuilder, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(5):  # every answer refused, but five answers are no trend
        build.answer(days_ago=i, refused=True)
    code, out = quality(capsys, "--check")
    assert code == 0 and "Last 7 days: NOT ENOUGH DATA" in out and "not judged: 5 answers" in out


def test_the_report_by_week_scope_reason_and_document(build: StateBuilder, capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    build.answer(days_ago=0.5, vote="down", choice="wrong_passage", file="travel.pdf", section="7 Hotels")
    build.answer(days_ago=1, vote="down", choice="wrong_passage", file="travel.pdf", section="7 Hotels")
    build.answer(days_ago=1.5, vote="down", file="handbook.pdf", section="4 Leave", dropped=1)
    build.answer(days_ago=2, refused=True, vote="down", choice="should_have_refused")
    build.answer(days_ago=8, scope="teams:TN:19:abc", vote="up")
    build.answer(days_ago=8.5, scope="teams:TN:19:abc", refused=True)
    out_dir = tmp_path / "q"
    code, out = quality(capsys, "--out", str(out_dir), "--json")
    assert code == 0
    figures = json.loads(out)
    assert figures == json.loads((out_dir / "quality.json").read_text())
    weeks = figures["weeks"]
    assert list(weeks) == ["2026-W47", "2026-W48"]
    this, last = weeks["2026-W48"], weeks["2026-W47"]
    assert (this["answers"], this["refused"], this["downvoted"], this["quotes"], this["dropped"]) == (4, 1, 4, 4, 1)
    assert this["reasons"] == {"wrong_passage": 2, "should_have_refused": 1, "(no reason given)": 1}
    assert (last["answers"], last["refused"], last["upvoted"], last["refusal_rate"]) == (2, 1, 1, 0.5)
    assert figures["scopes"]["teams:TN:19:abc"]["answers"] == 2 and figures["scopes"]["slack:T1:C1"]["answers"] == 4
    assert figures["behind_downvotes"][0] == {"document": "travel.pdf", "section": "7 Hotels", "answers": 2}
    assert {"document": "(refused: nothing quoted)", "section": "", "answers": 1} in figures["behind_downvotes"]
    assert figures["verdict"] == "not_enough_data"

    page = (out_dir / "quality.html").read_text()
    body = page.split("<body>")[1].lstrip()
    assert body.startswith('<div class="banner none" id="verdict">')  # the verdict first
    assert "quoted the wrong passage 2" in page  # reasons in the words of the 👎 form
    assert "travel.pdf" in page and "7 Hotels" in page and "teams:TN:19:abc" in page
    assert "<script" not in page and page.count("<svg") == 4
    charts = {svg.split('aria-label="')[1].split('"')[0]: svg for svg in page.split("<svg")[1:]}
    assert set(charts) == {"Week by week: refusals, thumbs-down and dropped quotes", "Answers and votes per week",
                           "Why people gave a thumbs-down", "Documents and sections behind a thumbs-down"}
    rates = charts["Week by week: refusals, thumbs-down and dropped quotes"]
    for text in ("ISO week of 2026", "share", "refusal rate ceiling", "thumbs-down rate", "W47"):  # axes, legend
        assert f">{text}</text>" in rates, text


def test_html_escapes_what_the_state_holds(build: StateBuilder, capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    build.answer(days_ago=1, vote="down", file="<img src=x onerror=alert(1)>.pdf", section="<script>x</script>")
    assert quality(capsys, "--out", str(tmp_path / "q"))[0] == 0
    page = (tmp_path / "q" / "quality.html").read_text()
    assert "<img src=x" not in page and "<script>x" not in page and "&lt;script&gt;x" in page


def test_dollar_signs_in_names_are_text_not_tex(build: StateBuilder, capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    """Issue 40 row 6: matplotlib read `$...$` in a file name or heading as TeX math, and a macro it does not know
    failed the command (and --check) with ValueError. Text from users is drawn as it is."""
    name, section = r"minutes $\badmacro$.pdf", r"Costs $\frac{a}{b$ and $x^2$"
    build.answer(days_ago=1, vote="down", file=name, section=section)
    build.answer(days_ago=2, refused=True, vote="down", file=name, section=section)
    code, _ = quality(capsys, "--out", str(tmp_path / "q"))
    assert code == 0
    page = (tmp_path / "q" / "quality.html").read_text()
    assert r"minutes $\badmacro$.pdf" in page  # in the chart's SVG text too, as written
    assert quality(capsys, "--check")[0] in (0, 1)  # judged, not crashed
