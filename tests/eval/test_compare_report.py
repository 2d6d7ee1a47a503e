"""Compare with gates (exit 1 when one fails) and report rendering, on hand-made run directories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from connectors.settings import Settings
from eval.compare import Gates, GatesError, compare, load_gates
from eval.records import CaseResult, Hit, JudgeScore, load_run
from eval.report import write_report
from tests.helpers.runs import good, missed, refused_unanswerable, write_run

GATES = """
[floors]
citation_validity = 1.0
"page_hit@5" = 0.7
refusal_f1 = 0.8
[drop]
max = 0.02
[critical]
no_regression = true
"""


@pytest.fixture
def gates(tmp_path: Path) -> Path:
    p = tmp_path / "gates.toml"
    p.write_text(GATES)
    return p


def test_same_run_passes_its_gates(tmp_path: Path, gates: Path, run_cli: Any,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    base = write_run(tmp_path / "base", [good("a"), good("b", critical=True), good("c"), refused_unanswerable("u")])
    settings = Settings(data_dir=tmp_path / "data")
    assert run_cli(["eval", "compare", str(base), str(base), "--gates", str(gates)], settings) == 0
    out = capsys.readouterr().out
    assert "PASS  floor page_hit@5: 1.0000 >= 0.7000 on 3 cases (few: one of them moves it by about 0.33)" in out
    assert "PASS  floor refusal_f1: 1.0000 >= 0.8000 on 1 unanswerable cases (few" in out
    assert "PASS  floor citation_validity: 1.0000 >= 1.0000 on 3 quotes (few" in out
    assert "RESULT: all gates passed" in out


def test_regression_on_a_critical_case_fails_with_exit_1(tmp_path: Path, gates: Path, run_cli: Any,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    base = write_run(tmp_path / "base", [good("a"), good("b", critical=True), good("c"), good("d"),
                                         refused_unanswerable("u")])
    new = write_run(tmp_path / "new", [good("a"), missed("b", critical=True), good("c"), good("d"),
                                       refused_unanswerable("u")])
    settings = Settings(data_dir=tmp_path / "data")
    assert run_cli(["eval", "compare", str(base), str(new), "--gates", str(gates)], settings) == 1
    out = capsys.readouterr().out
    assert "FAIL  critical cases: b" in out
    assert "FAIL  max drop 0.02" in out and "page_hit@5 -0.2500" in out
    assert "PASS  floor page_hit@5: 0.7500 >= 0.7000 on 4 cases" in out
    c = compare(load_run(base), load_run(new), load_gates(gates))
    [reg] = c.regressions
    assert reg.id == "b" and reg.critical and "retrieval miss" in reg.new_labels
    assert c.deltas["page_hit@5"]["delta"] == pytest.approx(-0.25)
    # --no-gates: the comparison is informational, exit 0
    assert run_cli(["eval", "compare", str(base), str(new), "--no-gates"], settings) == 0
    assert "Gates:" not in capsys.readouterr().out


def test_without_gates_the_shipped_file_is_used_from_any_directory(
    tmp_path: Path, run_cli: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from eval.compare import SHIPPED_GATES

    run = write_run(tmp_path / "run", [good("a"), good("b"), refused_unanswerable("u")])
    settings = Settings(data_dir=tmp_path / "data")
    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    monkeypatch.chdir(elsewhere)  # not the repository root
    assert run_cli(["eval", "compare", str(run)], settings) == 0
    out = capsys.readouterr().out
    assert f"gates from {SHIPPED_GATES}" in out and "PASS  floor page_hit@5" in out
    # the path the docs give works from here too
    assert run_cli(["eval", "compare", str(run), "--gates", "eval/gates.toml"], settings) == 0
    assert "PASS  floor citation_validity" in capsys.readouterr().out
    assert run_cli(["eval", "compare", str(run), "--gates", "nope/gates.toml"], settings) == 2
    assert "cannot read gates file nope/gates.toml" in capsys.readouterr().err


def test_floor_only_compare_and_forged_quote(tmp_path: Path, gates: Path, run_cli: Any,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    forged = good("a")
    forged.citations[0].verbatim = False
    new = write_run(tmp_path / "new", [forged, good("b"), refused_unanswerable("u")])
    settings = Settings(data_dir=tmp_path / "data")
    assert run_cli(["eval", "compare", str(new), "--gates", str(gates)], settings) == 1
    out = capsys.readouterr().out
    assert "FAIL  floor citation_validity: 0.5000 < 1.0000" in out
    assert "SKIP  max drop" in out


def test_bad_gates_file_is_named(tmp_path: Path) -> None:
    p = tmp_path / "g.toml"
    p.write_text("[floor]\nx = 1\n")
    with pytest.raises(GatesError, match="unknown table"):
        load_gates(p)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[drop]\nmaximum = 0.02\n", "unknown key drop.maximum; [drop] takes max, metrics"),
        ("[critical]\nno_regresion = true\n", "unknown key critical.no_regresion; [critical] takes no_regression"),
        ("[cases]\ntolerance = 0.1\n", "unknown key cases.tolerance; [cases] takes score_tolerance"),
        ("[drop]\nmax = \"2%\"\n", "drop.max must be a number"),
        ("[critical]\nno_regression = 1\n", "critical.no_regression must be true or false"),
        ("floors = 1\n", "floors must be a table"),
    ],
)
def test_gates_with_unknown_or_mistyped_keys_are_rejected_naming_the_key(
    tmp_path: Path, toml: str, message: str
) -> None:
    p = tmp_path / "g.toml"
    p.write_text(toml)
    with pytest.raises(GatesError) as e:
        load_gates(p)
    assert message in str(e.value) and str(p) in str(e.value)


def test_shipped_gates_parse() -> None:
    g = load_gates(Path(__file__).resolve().parents[2] / "eval" / "gates.toml")
    assert g.floors["citation_validity"] == 1.0 and "page_hit@5" in g.floors and "refusal_f1" in g.floors
    assert g.max_drop == 0.02 and g.critical_no_regression
    assert g.low_score_below == 0.6 and g.low_score_max_share is not None and g.low_score_max_share <= 0.1
    assert set(g.judge_floors) == {"groundedness", "completeness", "correctness"}


def test_report_has_charts_buckets_and_every_failing_case_in_full(tmp_path: Path, run_cli: Any) -> None:
    answered_unanswerable = CaseResult(id="x", question="Is there a dress code?", category="unanswerable",
                                       answerable=False, answer="Wear a suit.", latency_ms=30)
    long_answer = good("long")
    long_answer.answer = "Leave: " + "every employee is entitled to twenty-five days of paid leave. " * 12 + "[1]"
    long_answer.citations[0].page_start = long_answer.citations[0].page_end = 9  # cites an off-gold page
    long_answer.retrieved = [Hit(chunk_id="d:9", file="hb.pdf", page_start=9, page_end=9, score=0.8),
                             Hit(chunk_id="d:1", file="hb.pdf", page_start=4, page_end=4, score=0.7)]
    run = write_run(tmp_path / "run", [good("a"), good("b", latency=40), missed("m"), answered_unanswerable,
                                       refused_unanswerable("u"), long_answer])
    assert run_cli(["eval", "report", str(run)], Settings(data_dir=tmp_path / "data")) == 0
    md = (run / "report.md").read_text()
    page = (run / "report.html").read_text()
    assert "| high | 3 |" in md and "| low | 2 |" in md
    assert "| retrieval miss | 1 |" in md and "| answered unanswerable | 1 |" in md
    assert "| refused answerable | 0 |" in md
    assert "| answer without citation | 1 |" in md and "| unsupported answer | 2 |" in md
    # every failing case, lowest score first, and no case that did not fail
    failing = md.split("## Failing cases")[1]
    shown = [line.split()[1] for line in failing.splitlines() if line.startswith("### ")]
    assert sorted(shown[:2]) == ["m", "x"] and shown[2:] == ["long"]
    assert "question m?" in failing and "Something else" in failing and "25 days — hb.pdf p.4" in failing
    assert "quote is about travel, not leave" in failing
    assert "### long — score 0.75 (medium) — unsupported answer" in failing  # the label says what failed
    assert "low score" not in failing  # a case with a failure label is not also called "low score"
    # the whole answer, never cut; gold pages marked among the retrieved ones
    assert long_answer.answer in page and long_answer.answer in md
    long_section = page.split('id="case-long"')[1].split('<div class="case')[0]
    hits = long_section.split("Retrieved (top 5)")[1]
    assert hits.index("hb.pdf p.9") < hits.index("hb.pdf p.4") < hits.index("★ gold")
    assert hits.count("★ gold") == 1
    # anchors: the index links to each case's own section
    for cid in ("m", "x", "long"):
        assert f'href="#case-{cid}"' in page and f'id="case-{cid}"' in page
    assert 'id="case-a"' not in page
    # "Judge" only where a judge spoke: case m was judged, x was not
    x_section = page.split('id="case-x"')[1].split('<div class="case')[0]
    assert "Judge" not in x_section and "Judge: groundedness" in page
    assert page.count("<svg") >= 3 and "Case score distribution" in page and "Answer latency" in page
    assert "Per category" in page and "<script" not in page
    import xml.etree.ElementTree as ET

    for svg in run.glob("*.svg"):
        root = ET.fromstring(svg.read_text())  # well-formed, drawn
        assert root.tag.endswith("svg") and root.findall(".//{http://www.w3.org/2000/svg}path")


def test_the_verdict_comes_first_with_gates_deltas_and_links_to_regressed_cases(
    tmp_path: Path, gates: Path, run_cli: Any
) -> None:
    base = write_run(tmp_path / "base", [good("a", critical=True), good("b"), refused_unanswerable("u")])
    new = write_run(tmp_path / "new", [missed("a", critical=True), good("b"), refused_unanswerable("u")])
    settings = Settings(data_dir=tmp_path / "data")
    assert run_cli(["eval", "report", str(new), "--against", str(base), "--gates", str(gates)], settings) == 0
    page = (new / "report.html").read_text()
    body = page.split("<body>")[1].lstrip()
    assert body.startswith('<div class="banner fail" id="verdict">')  # nothing above the verdict
    banner = body.split("</div>\n\n")[0]
    assert "FAIL" in banner and "against <strong>base</strong>" in banner
    assert "critical cases" in banner and "floor page_hit@5" in banner and 'class="status FAIL"' in banner
    assert '<a href="#case-a">a</a>' in banner and 'id="case-a"' in page  # the regression links to its case
    # deltas against the baseline beside each headline figure
    cards = page.split('<div class="cards">')[1].split("<h2>")[0]
    assert "-0.500 vs 1.000" in cards  # page_hit@5 fell from 1.000 to 0.500
    md = (new / "report.md").read_text()
    assert md.split("\n")[2] == "## Verdict: FAIL"
    # the same run against itself passes; without gates the report says it checked none
    assert run_cli(["eval", "report", str(base), "--against", str(base), "--gates", str(gates)], settings) == 0
    assert '<div class="banner pass" id="verdict">' in (base / "report.html").read_text()
    assert run_cli(["eval", "report", str(base), "--no-gates"], settings) == 0
    assert "NO GATES CHECKED" in (base / "report.html").read_text()


def test_the_low_score_and_judge_gates(tmp_path: Path) -> None:
    cases = [good(c) for c in "abcdefghijklmnopqrst"]  # 20 cases
    judged = [r.model_copy(update={"judge": {"groundedness": JudgeScore(score=0.7)}}) for r in cases]
    gates = Gates(low_score_max_share=0.05, judge_floors={"groundedness": 0.8})
    ok = compare(None, ({"k": 5}, cases), gates)
    assert [(g.gate, g.passed) for g in ok.gates] == [("low scores (< 0.6)", True), ("judge groundedness", None)]
    one_low = compare(None, ({"k": 5}, [*cases[:19], missed("z")]), gates)  # 1 of 20 = 5%: allowed
    assert one_low.gates[0].passed is True and "1 of 20 cases = 5.0%" in one_low.gates[0].detail
    two_low = compare(None, ({"k": 5}, [*cases[:18], missed("y"), missed("z")]), gates)
    assert two_low.gates[0].passed is False and two_low.gates[0].detail.endswith(": y, z")
    low_judge = compare(None, ({"k": 5}, judged), gates)
    assert low_judge.gates[1].passed is False and "0.7000 < 0.8000 on 20 cases" in low_judge.gates[1].detail


def test_report_escapes_html(tmp_path: Path) -> None:
    evil = good("a")
    evil.question = "<script>alert(1)</script>?"
    evil.answer = "<img src=x onerror=alert(1)>"
    evil.retrieved = []
    run = write_run(tmp_path / "run", [evil])
    write_report(run)
    page = (run / "report.html").read_text()
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    assert "<img" not in page


def test_report_of_mode_all_has_the_ablation_table(tmp_path: Path) -> None:
    parent = tmp_path / "all"
    for mode, results in (("hybrid", [good("a"), good("b")]), ("bm25", [good("a"), missed("b")]),
                          ("dense", [missed("a"), missed("b")])):
        write_run(parent / mode, results, retrieval_mode=mode)
    write_report(parent)
    md = (parent / "report.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| ")}
    assert rows["hybrid"].split("|")[3].strip() == "1.000"  # page_hit@5
    assert rows["bm25"].split("|")[3].strip() == "0.500"
    assert rows["dense"].split("|")[3].strip() == "0.000"
    assert (parent / "hybrid" / "report.html").exists()


def test_runs_on_different_sets_are_compared_on_common_cases(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", [good("a"), good("b")])
    new = write_run(tmp_path / "new", [good("a"), good("b"), missed("c")])  # a new, harder case is no regression
    c = compare(load_run(base), load_run(new), Gates(max_drop=0.02))
    assert c.passed and c.deltas["page_hit@5"]["delta"] == 0.0
    assert c.new is not None and c.new["page_hit@5"] == pytest.approx(2 / 3)  # floors see the whole new run
    assert "2 cases both runs have" in c.notes[0]


def curve_run(tmp_path: Path) -> Path:
    """Threshold 0.5: two answerable cases answered (0.9, 0.6), one refused by the threshold (0.4); one
    unanswerable refused (0.3), one answered by mistake (0.7)."""
    cases = [good("a"), good("b"), missed("m"), refused_unanswerable("u"), refused_unanswerable("w")]
    for r, conf in zip(cases, (0.9, 0.6, 0.4, 0.3, 0.7), strict=True):
        r.confidence = conf
    cases[2].refused, cases[2].citations = True, []
    cases[4].refused, cases[4].answer = False, "Made up."
    return write_run(tmp_path / "run", cases, settings={"refusal_threshold": 0.5})


def test_report_shows_the_refusal_trade_off_with_the_current_threshold_marked(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    run = curve_run(tmp_path)
    write_report(run)
    md = (run / "report.md").read_text()
    section = md.split("## Refusal trade-off")[1].split("##")[0]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in section.splitlines() if line.startswith("| ") and "threshold" not in line}
    assert rows["0.500"][:2] == ["0.667", "0.500"] and rows["0.500"][-1] == "◀ current"  # what the run did
    assert rows["0.650"][:2] == ["0.333", "0.500"]  # b (0.6) refused too; w (0.7) still answered
    assert rows["0.750"][:2] == ["0.333", "1.000"]
    assert rows["0.350"][:2] == ["1.000", "0.500"]  # m (0.4) would be answered
    svg = (run / "refusal_curve.svg").read_text()
    ET.fromstring(svg)
    assert "Refusal recall on unanswerable cases" in svg and "Answer rate on answerable cases" in svg
    assert "current 0.500" in svg
    assert all(f">{tick / 5:.1f}</text>" in svg for tick in range(6))  # ticks 0.0, 0.2, ... 1.0
    page = (run / "report.html").read_text()
    assert "<h2>Refusal trade-off</h2>" in page and "current 0.500" in page
    summary = json.loads((run / "summary.json").read_text())
    assert [p["threshold"] for p in summary["refusal_curve"] if p["current"]] == [0.5]


def test_runs_without_confidences_report_no_trade_off(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", [good("a"), refused_unanswerable("u")], settings={"refusal_threshold": 0.5})
    write_report(run)
    assert "Refusal trade-off" not in (run / "report.md").read_text()
    assert not (run / "refusal_curve.svg").exists()


def test_run_summary_prints_categories_and_the_trade_off_per_mode(tmp_path: Path) -> None:
    from eval.report_tables import run_summary_markdown

    run = curve_run(tmp_path)
    text = run_summary_markdown({"hybrid": load_run(run), "bm25": load_run(run)})
    assert text.count("By category (") == 2 and "Refusal trade-off (bm25; the run used 0.500):" in text
    lookup = next(line for line in text.splitlines() if line.startswith("| lookup |"))
    # 3 answerable cases, 2 answered; page-hit@5 2/3 (m retrieved p.9); both answers cite page 4; "25 days" is a
    # short answer in all three and on the screen in the two answered (the refused one shows nothing)
    assert [c.strip() for c in lookup.split("|")[2:-1]] == ["3", "0.667", "0.667", "1.000", "—", "0.667", "3"]
    unans = next(line for line in text.splitlines() if line.startswith("| unanswerable |"))
    # half refused; no short answer to look for on an unanswerable case
    assert [c.strip() for c in unans.split("|")[6:-1]] == ["0.500", "—", "0"]
    assert "| 0.500 | 0.667 | 0.500 |" in text and "◀ current" in text


def _svg_texts(svg: str) -> list[str]:
    import xml.etree.ElementTree as ET

    root = ET.fromstring(svg)
    # what the text shows: its own text, not a <title> tooltip inside it
    return [(t.text or "") + "".join(c.tail or "" for c in t) for t in root.iter("{http://www.w3.org/2000/svg}text")]


def test_every_chart_has_axis_titles_round_ticks_and_n_on_each_bar(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", [good("a"), good("b", latency=140), missed("m"), refused_unanswerable("u")])
    write_report(run)
    scores = _svg_texts((run / "scores.svg").read_text())
    assert "case score (0 = failed, 1 = everything right)" in scores and "cases" in scores
    assert {"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"} <= set(scores)  # x ticks
    latency = _svg_texts((run / "latency.svg").read_text())
    assert "time to answer (ms)" in latency and {"0", "20", "40", "140"} <= set(latency)  # round ticks
    cats = (run / "categories.svg").read_text()
    texts = _svg_texts(cats)
    assert "category" in texts and "share of cases (score: mean)" in texts
    assert {"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"} <= set(texts)
    assert {"page_hit@5", "refusal correct", "mean case score"} <= set(texts)  # the legend
    # lookup: 3 answerable cases for page_hit@5, refusal and score (said once); unanswerable: 1 each, no page_hit
    assert sorted(t for t in texts if t.startswith("n=")) == ["n=1", "n=3"]


def test_report_of_mode_all_has_an_ablation_chart(tmp_path: Path) -> None:
    parent = tmp_path / "all"
    for mode, results in (("hybrid", [good("a"), good("b")]), ("bm25", [good("a"), missed("b")]),
                          ("dense", [missed("a"), missed("b")])):
        write_run(parent / mode, results, retrieval_mode=mode)
    write_report(parent)
    page = (parent / "report.html").read_text()
    assert "Retrieval modes compared" in page and "Answer time by retrieval mode" in page
    texts = _svg_texts((parent / "ablation.svg").read_text())
    assert {"hybrid", "bm25", "dense", "page_hit@5", "metric", "value (higher is better)"} <= set(texts)
    assert "n=2" in texts
    assert "![ablation.svg](ablation.svg)" in (parent / "report.md").read_text()


def test_report_of_several_runs_adds_a_trend(tmp_path: Path, run_cli: Any,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    old = write_run(tmp_path / "old", [good("a"), missed("b")], started_at="2026-01-01T10:00:00+00:00")
    new = write_run(tmp_path / "new", [good("a"), good("b")], started_at="2026-02-01T10:00:00+00:00")
    settings = Settings(data_dir=tmp_path / "data")
    assert run_cli(["eval", "report", str(new), str(old)], settings) == 0  # any order: by start time
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [str(new / "trend.md"), str(new / "trend.html")]
    md = (new / "trend.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("| old") or line.startswith("| new")]
    assert [r.split("|")[1].strip()[:3] for r in rows] == ["old", "new"]
    assert [r.split("|")[3].strip() for r in rows] == ["0.500", "1.000"]  # page_hit@5 went up
    texts = _svg_texts((new / "trend.svg").read_text())
    assert {"run", "value (higher is better)", "page_hit@5", "1.0"} <= set(texts)
    assert "Headline metrics, run after run" in (new / "trend.html").read_text()
    assert (old / "report.html").exists() and (new / "report.html").exists()


def test_a_run_without_failures_says_so(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", [good(c) for c in "abcdefghijkl"])
    write_report(run)
    failing = (run / "report.md").read_text().split("## Failing cases")[1]
    assert "No case failed" in failing and "### " not in failing


class TestFloorWithoutCases:
    """Issue 41 item 15: a floor whose metric has no case in the run is skipped, and says so."""

    @pytest.mark.parametrize(
        ("metric", "unit"),
        [("refusal_f1", "unanswerable cases"), ("refusal_recall", "unanswerable cases"),
         ("answer_shown", "short-answer cases")],
    )
    def test_skips_naming_what_the_run_lacks(self, metric: str, unit: str) -> None:
        # all answerable (one refused by mistake, which would make refusal F1 0.0), none with a short answer
        cases = [good("a"), good("b"), missed("m")]
        for r in cases:
            r.expected_answer = "an explanation of the leave policy that runs on for many words"
        cases[2].refused = True
        c = compare(None, ({"k": 5}, cases), Gates(floors={metric: 0.7}))
        assert [(g.gate, g.passed) for g in c.gates] == [(f"floor {metric}", None)]
        assert c.gates[0].detail == f"skipped: this run has no {unit} to measure it on"
        assert c.passed

    def test_a_floor_with_cases_still_fails(self) -> None:
        c = compare(None, ({"k": 5}, [good("a"), refused_unanswerable("u"), missed("m")]),
                    Gates(floors={"answer_shown": 0.9}))
        # "25 days" is shown by a, not by m ("Something else")
        assert c.gates[0].passed is False
        assert c.gates[0].detail.startswith("0.5000 < 0.9000 on 2 short-answer cases")


class TestVerdictSaysWhatWasJudged:
    """Issue 41 item 17: the verdict says what the answers were judged by, and what was not judged."""

    def test_banner_and_compare_name_the_short_answer_cases_and_the_missing_judge(
        self, tmp_path: Path, gates: Path, run_cli: Any, capsys: pytest.CaptureFixture[str]
    ) -> None:
        summary = good("s")
        summary.expected_answer = None  # a summary question: nothing short to look for
        run = write_run(tmp_path / "run", [good("a"), good("b"), summary, refused_unanswerable("u")])
        settings = Settings(data_dir=tmp_path / "data")
        assert run_cli(["eval", "report", str(run), "--gates", str(gates)], settings) == 0
        banner = (run / "report.html").read_text().split('id="verdict">')[1].split("</table>")[0]
        judged = ("answers judged by answer_shown on 2 short-answer cases (not the 1 answerable case with a long "
                  "or no expected answer); correctness not judged (no --judge)")
        assert "PASS — every gate holds" in banner and f"Judged: {judged}" in banner
        assert f"Judged: {judged}." in (run / "report.md").read_text()
        assert run_cli(["eval", "compare", str(run), "--gates", str(gates)], settings) == 0
        assert f"Judged: {judged}" in capsys.readouterr().out

    def test_a_judged_run_says_so(self) -> None:
        judged = [r.model_copy(update={"judge": {"correctness": JudgeScore(score=0.9)}})
                  for r in (good("a"), good("b"))]
        c = compare(None, ({"k": 5}, judged), Gates())
        assert c.judged == ("answers judged by answer_shown on 2 short-answer cases; "
                            "correctness judged by the LLM judge on 2 cases")
