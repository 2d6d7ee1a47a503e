"""``citebot eval compare BASE NEW [--gates FILE]``: per-metric deltas, per-case regressions and CI gates.

Gates (TOML, see ``eval/gates.toml``)::

    [floors]                       # the new run must reach each value
    citation_validity = 1.0
    "page_hit@5" = 0.85

    [drop]                         # largest fall allowed against the baseline, higher-is-better metrics
    max = 0.02
    metrics = ["page_hit@5", ...]  # optional; default: every higher-is-better metric both runs have

    [critical]                     # no `critical` case may regress
    no_regression = true

    [low_score]                    # at most this share of cases may score below `below`
    max_share = 0.05
    below = 0.6

    [judge]                        # floors for the LLM judge's means, checked when the run was judged (--judge)
    groundedness = 0.8

A case *regresses* when it gains a failure label it did not have (retrieval miss, refused answerable,
answered unanswerable, unsupported answer, answer without citation, error) or its case score falls by more than
``[cases] score_tolerance`` (default 0.05). With only NEW given, floors are checked and the baseline
gates are reported as skipped. A key this module does not know (``[drop] maximum``) is an error naming
it, never silently ignored. Each floor says how many cases (or quotes) its value rests on, and warns
when that is few: on a small run one case moves a metric by a lot; a floor whose metric has no case in the run
(``refusal_f1`` on a set without unanswerable cases) is skipped, saying so. :func:`judged_scope` says what the
verdict judged the answers by, and what it did not judge.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eval.metrics import (
    JUDGE_CRITERIA,
    LOW_SCORE,
    case_metrics,
    case_score,
    citation_validity,
    failure_labels,
    higher_is_better,
    is_short_answer,
    summarise,
)
from eval.records import RETRIEVAL_ONLY, CaseResult, load_run

# The tables of a gates file and the keys each may hold ([floors] takes any metric name).
GATE_KEYS: dict[str, set[str] | None] = {
    "floors": None,
    "drop": {"max", "metrics"},
    "critical": {"no_regression"},
    "cases": {"score_tolerance"},
    "low_score": {"max_share", "below"},
    "judge": set(JUDGE_CRITERIA),
}
SMALL_RUN = 30  # a floor resting on fewer cases than this says so



class GatesError(ValueError):
    """The gates file is unreadable or names something unknown."""


class CompareError(ValueError):
    """The two runs cannot be compared (they share no case)."""


@dataclass
class Gates:
    floors: dict[str, float] = field(default_factory=dict)
    max_drop: float | None = None
    drop_metrics: list[str] | None = None
    critical_no_regression: bool = False
    score_tolerance: float = 0.05
    low_score_max_share: float | None = None
    low_score_below: float = LOW_SCORE
    judge_floors: dict[str, float] = field(default_factory=dict)


def load_gates(path: Path) -> Gates:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise GatesError(f"cannot read gates file {path}: {e}") from e
    unknown = set(raw) - set(GATE_KEYS)
    if unknown:
        raise GatesError(f"{path}: unknown table(s) {sorted(unknown)}; expected floors, drop, critical, cases")
    for table, allowed in GATE_KEYS.items():
        section = raw.get(table, {})
        if not isinstance(section, dict):
            raise GatesError(f"{path}: {table} must be a table ([{table}])")
        extra = sorted(set(section) - allowed) if allowed is not None else []
        if extra:
            raise GatesError(f"{path}: unknown key {table}.{extra[0]}; [{table}] takes {', '.join(sorted(allowed))}"
                             if allowed else f"{path}: unknown key {table}.{extra[0]}")
    floors = raw.get("floors", {})
    for name, value in floors.items():
        if not _number(value):
            raise GatesError(f"{path}: floor {name!r} must be a number")
    drop, critical, cases = raw.get("drop", {}), raw.get("critical", {}), raw.get("cases", {})
    if "max" in drop and not _number(drop["max"]):
        raise GatesError(f"{path}: drop.max must be a number")
    names = drop.get("metrics", [])
    if not (isinstance(names, list) and all(isinstance(m, str) for m in names)):
        raise GatesError(f"{path}: drop.metrics must be a list of metric names")
    if "no_regression" in critical and not isinstance(critical["no_regression"], bool):
        raise GatesError(f"{path}: critical.no_regression must be true or false")
    if "score_tolerance" in cases and not _number(cases["score_tolerance"]):
        raise GatesError(f"{path}: cases.score_tolerance must be a number")
    low, judge = raw.get("low_score", {}), raw.get("judge", {})
    named = [*((f"low_score.{k}", v) for k, v in low.items()), *((f"judge.{k}", v) for k, v in judge.items())]
    for key, value in named:
        if not _number(value) or not 0.0 <= float(value) <= 1.0:
            raise GatesError(f"{path}: {key} must be a number from 0 to 1")
    return Gates(
        floors={k: float(v) for k, v in floors.items()},
        max_drop=float(drop["max"]) if "max" in drop else None,
        drop_metrics=list(drop["metrics"]) if "metrics" in drop else None,
        critical_no_regression=bool(critical.get("no_regression", False)),
        score_tolerance=float(cases.get("score_tolerance", 0.05)),
        low_score_max_share=float(low["max_share"]) if "max_share" in low else None,
        low_score_below=float(low.get("below", LOW_SCORE)),
        judge_floors={k: float(v) for k, v in judge.items()},
    )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def support(metric: str, results: list[CaseResult], k: int) -> tuple[int, str]:
    """How many cases (or quotes) ``metric`` rests on in ``results``: (count, what they are)."""
    if metric == "citation_validity":
        return sum(citation_validity(r.citations)[1] for r in results), "quotes"
    if metric in ("refusal_recall", "refusal_f1"):
        return sum(1 for r in results if not r.answerable), "unanswerable cases"
    if metric == "refusal_precision":
        return sum(1 for r in results if r.refused or r.error), "refused cases"
    if metric == "answer_rate":
        return sum(1 for r in results if r.answerable), "answerable cases"
    if metric == "answer_shown":
        return sum(1 for r in results if case_metrics(r, k)["answer_shown"] is not None), "short-answer cases"
    if metric == "citation_page_precision":
        return sum(len(r.citations) for r in results if r.answerable and not r.refused), "quotes"
    if metric.startswith("latency_"):
        return sum(1 for r in results if not r.error), "cases"
    if metric in ("score_mean",):
        return len(results), "cases"
    per_case = [case_metrics(r, k).get(metric) for r in results]
    return sum(1 for v in per_case if v is not None), "cases"


@dataclass
class GateResult:
    gate: str
    passed: bool | None  # None: skipped
    detail: str


@dataclass
class CaseRegression:
    id: str
    question: str
    critical: bool
    base_score: float
    new_score: float
    new_labels: list[str]


@dataclass
class Comparison:
    base: dict[str, Any] | None
    new: dict[str, Any]
    deltas: dict[str, dict[str, float | None]]
    regressions: list[CaseRegression]
    improvements: list[str]
    gates: list[GateResult]
    notes: list[str] = field(default_factory=list)
    judged: str = ""

    @property
    def passed(self) -> bool:
        return all(g.passed is not False for g in self.gates)

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "deltas": self.deltas,
            "regressions": [asdict(r) for r in self.regressions],
            "improvements": self.improvements,
            "gates": [asdict(g) for g in self.gates],
            "notes": self.notes,
            "judged": self.judged,
        }


def _numeric(summary: dict[str, Any]) -> dict[str, float | None]:
    return {k: v for k, v in summary.items() if (isinstance(v, int | float) and not isinstance(v, bool)) or v is None}


def case_regressions(
    base: list[CaseResult], new: list[CaseResult], k: int, tolerance: float = 0.05
) -> tuple[list[CaseRegression], list[str]]:
    """Cases (matched by id) that got worse, and ids of cases that got better."""
    by_id = {r.id: r for r in base}
    regressions: list[CaseRegression] = []
    improved: list[str] = []
    for r in new:
        b = by_id.get(r.id)
        if b is None:
            continue
        bs, ns = case_score(b, k), case_score(r, k)
        gained = [label for label in failure_labels(r, k) if label not in failure_labels(b, k)]
        if gained or ns < bs - tolerance:
            regressions.append(
                CaseRegression(id=r.id, question=r.question, critical=r.critical or b.critical,
                               base_score=bs, new_score=ns, new_labels=gained)
            )
        elif ns > bs + tolerance:
            improved.append(r.id)
    return regressions, improved


# What must be the same for two runs' numbers to compare: (meta key, what people call it).
SAME_CONDITIONS = [("retrieval_mode", "retrieval mode"), ("set_sha256", "eval set"), ("k", "k"),
                   ("per_doc", "per-document scoping")]


def _shown(key: str, meta: dict[str, Any]) -> str:
    if key == "set_sha256":
        return f"{meta.get('set', '?')} ({str(meta.get(key))[:8]})"
    return str(meta.get(key))


def different_conditions(base_meta: dict[str, Any], new_meta: dict[str, Any]) -> list[str]:
    """How the two runs were asked differently (mode, set, k, per-doc), in words; [] when alike (or unknown)."""
    out = []
    for key, label in SAME_CONDITIONS:
        if key in base_meta and key in new_meta and base_meta[key] != new_meta[key]:
            out.append(f"{label}: base {_shown(key, base_meta)}, new {_shown(key, new_meta)}")
    return out


def compare(
    base: tuple[dict[str, Any], list[CaseResult]] | None,
    new: tuple[dict[str, Any], list[CaseResult]],
    gates: Gates | None = None,
    *,
    allow_different: bool = False,
) -> Comparison:
    """Raises :class:`CompareError` when the runs share no case: nothing would be compared. Runs asked in another
    mode, set, k or scoping fail the "same conditions" gate unless ``allow_different``."""
    new_meta, new_results = new
    k = int(new_meta.get("k", 5))
    new_sum = summarise(new_results, k)["overall"]  # floors: the whole new run
    gates = gates or Gates()
    base_sum: dict[str, Any] | None = None
    notes: list[str] = []
    new_cmp = new_sum
    if base:
        common = {r.id for r in base[1]} & {r.id for r in new_results}
        if not common:
            raise CompareError(f"the runs share no case (base {len(base[1])}, new {len(new_results)} cases): "
                               "nothing was compared. Compare runs of the same eval set.")
        base_cases = [r for r in base[1] if r.id in common]
        if len(common) < max(len(base[1]), len(new_results)):
            notes.append(f"deltas and the drop gate use the {len(common)} cases both runs have "
                         f"(base {len(base[1])}, new {len(new_results)})")
            new_cmp = summarise([r for r in new_results if r.id in common], k)["overall"]
        base_sum = summarise(base_cases, int(base[0].get("k", k)))["overall"]
        if base[0].get("k", k) != k:
            notes.append(f"the runs used different k (base {base[0].get('k')}, new {k})")

    deltas: dict[str, dict[str, float | None]] = {}
    for key, value in _numeric(new_cmp).items():
        b = _numeric(base_sum).get(key) if base_sum else None
        deltas[key] = {"base": b, "new": value, "delta": (value - b) if value is not None and b is not None else None}

    regressions, improved = case_regressions(base[1], new_results, k, gates.score_tolerance) if base else ([], [])

    results: list[GateResult] = []
    if base:
        differ = different_conditions(base[0], new_meta)
        if differ:
            allowed = " (allowed: --allow-different)" if allow_different else "; --allow-different to compare anyway"
            results.append(GateResult("same conditions", bool(allow_different),
                                      "; ".join(differ) + allowed))
        if base[0].get("index_checksum") and new_meta.get("index_checksum") and \
                base[0]["index_checksum"] != new_meta["index_checksum"]:
            notes.append("the runs searched different indexes (other PDFs, chunking or embedding): "
                         "a change there moves these numbers too")
    for metric, floor in gates.floors.items():
        if metric not in new_sum:
            results.append(GateResult(f"floor {metric}", False, f"unknown metric {metric!r} (k={k} in this run?)"))
            continue
        value = new_sum[metric]
        n, unit = support(metric, new_results, k)
        if n == 0:
            results.append(GateResult(f"floor {metric}", None, f"skipped: this run has no {unit} to measure it on"))
            continue
        if value is None:
            results.append(GateResult(f"floor {metric}", False, f"{metric} is undefined in this run (no cases apply)"))
            continue
        ok = value >= floor - 1e-9
        basis = f" on {n} {unit}"
        if n < SMALL_RUN:
            basis += f" (few: one of them moves it by about {1 / max(n, 1):.2f})"
        results.append(GateResult(f"floor {metric}", ok, f"{value:.4f} {'>=' if ok else '<'} {floor:.4f}{basis}"))
    if gates.max_drop is not None:
        if base_sum is None:
            results.append(GateResult("max drop", None, "skipped: no baseline run given"))
        else:
            metrics = gates.drop_metrics or [m for m in deltas if higher_is_better(m)]
            worst = [
                (m, deltas[m]["delta"])
                for m in metrics
                if m in deltas and deltas[m]["delta"] is not None and deltas[m]["delta"] < -gates.max_drop - 1e-9  # type: ignore[operator]
            ]
            detail = ", ".join(f"{m} {d:+.4f}" for m, d in worst) if worst else f"no metric fell by > {gates.max_drop}"
            results.append(GateResult(f"max drop {gates.max_drop}", not worst, detail))
    if gates.low_score_max_share is not None:
        low = [r.id for r in new_results if case_score(r, k) < gates.low_score_below]
        share = len(low) / len(new_results) if new_results else 0.0
        ok = share <= gates.low_score_max_share + 1e-9
        which = f": {', '.join(low[:8])}{' …' if len(low) > 8 else ''}" if low else ""
        results.append(GateResult(
            f"low scores (< {gates.low_score_below:g})", ok,
            f"{len(low)} of {len(new_results)} cases = {share:.1%} {'<=' if ok else '>'} "
            f"{gates.low_score_max_share:.0%}{which}",
        ))
    judged = any(r.judge for r in new_results)
    for name, floor in gates.judge_floors.items():
        value = new_sum.get(f"judge_{name}")
        if not judged or value is None:
            results.append(GateResult(f"judge {name}", None, "skipped: the run was not judged (eval run --judge)"))
            continue
        ok = value >= floor - 1e-9
        n, unit = support(f"judge_{name}", new_results, k)
        results.append(GateResult(f"judge {name}", ok, f"{value:.4f} {'>=' if ok else '<'} {floor:.4f} on {n} {unit}"))
    if gates.critical_no_regression:
        if base is None:
            results.append(GateResult("critical cases", None, "skipped: no baseline run given"))
        else:
            crit = [r for r in regressions if r.critical]
            detail = ", ".join(r.id for r in crit) if crit else "no critical case regressed"
            results.append(GateResult("critical cases", not crit, detail))
    return Comparison(base_sum, new_sum, deltas, regressions, improved, results, notes, judged_scope(new_results))


def judged_scope(results: list[CaseResult]) -> str:
    """What a verdict on ``results`` judged the answers by, and what it did not judge, in one line: "answers
    judged by answer_shown on 42 short-answer cases (not the 9 answerable cases with a long or no expected answer);
    correctness not judged (no --judge)". Retrieval and citation gates need no words here: they judge every case."""
    if results and all(r.answer_mode == RETRIEVAL_ONLY for r in results):
        return "answers not judged: a retrieval-only run (it ranks pages and answers nothing)"
    answerable = [r for r in results if r.answerable]
    short = sum(1 for r in answerable if is_short_answer(r.expected_answer))
    parts = [f"answers judged by answer_shown on {short} short-answer case{'s' if short != 1 else ''}"
             if short else "answers not judged by answer_shown: no case has a short expected answer"]
    if short and len(answerable) > short:
        rest = len(answerable) - short
        parts[0] += f" (not the {rest} answerable case{'s' if rest != 1 else ''} with a long or no expected answer)"
    judged = sum(1 for r in results if any(js.score is not None for js in r.judge.values()))
    parts.append(f"correctness judged by the LLM judge on {judged} case{'s' if judged != 1 else ''}" if judged
                 else "correctness not judged (no --judge)")
    return "; ".join(parts)


def _fmt(v: float | None) -> str:
    if v is None:
        return "—"
    if isinstance(v, int):
        return str(v)
    return f"{v:.4f}" if abs(v) < 10 else f"{v:.1f}"


def render(c: Comparison) -> str:
    lines = ["| metric | base | new | delta |", "|---|---:|---:|---:|"]
    for key, d in c.deltas.items():
        flag = ""
        hib = higher_is_better(key)
        if d["delta"] is not None and hib is not None and abs(d["delta"]) > 1e-9:
            worse = d["delta"] < 0 if hib else d["delta"] > 0
            flag = " ▼" if worse else " ▲"
        delta = "—" if d["delta"] is None else (f"{d['delta']:+d}" if isinstance(d["delta"], int)
                                                 else f"{d['delta']:+.4f}{flag}")
        lines.append(f"| {key} | {_fmt(d['base'])} | {_fmt(d['new'])} | {delta} |")
    lines.append("")
    lines += [f"Note: {n}" for n in c.notes] + ([""] if c.notes else [])
    if c.base is not None:
        lines.append(f"Regressed cases: {len(c.regressions)}; improved: {len(c.improvements)}")
        for r in c.regressions:
            crit = " [critical]" if r.critical else ""
            why = ", ".join(r.new_labels) or "lower score"
            lines.append(f"  - {r.id}{crit}: {r.base_score:.2f} -> {r.new_score:.2f} ({why}) {r.question}")
        lines.append("")
    if c.gates:
        lines.append("Gates:")
        for g in c.gates:
            status = "SKIP" if g.passed is None else "PASS" if g.passed else "FAIL"
            lines.append(f"  {status}  {g.gate}: {g.detail}")
        lines.append("RESULT: " + ("all gates passed" if c.passed else "a gate FAILED"))
        if c.judged:
            lines.append(f"Judged: {c.judged}")
    return "\n".join(lines)


SHIPPED_GATES = Path(__file__).resolve().parent / "gates.toml"


def find_gates(path: Path | None) -> Path:
    """The gates file to use: the shipped ``eval/gates.toml`` by default; a relative ``eval/gates.toml`` is also
    found from any working directory (next to the eval package), not only from the repository root."""
    if path is None:
        return SHIPPED_GATES
    if path.exists() or path.is_absolute():
        return path
    beside_package = SHIPPED_GATES.parents[1] / path
    if beside_package.exists():
        return beside_package
    raise GatesError(f"cannot read gates file {path}: no such file here or in {SHIPPED_GATES.parents[1]}")


def run_compare(base_dir: Path | None, new_dir: Path, gates_path: Path | None, as_json: bool = False, *,
                allow_different: bool = False) -> int:
    gates = load_gates(gates_path) if gates_path else None
    c = compare(load_run(base_dir) if base_dir else None, load_run(new_dir), gates, allow_different=allow_different)
    if gates_path is not None:
        c.notes.append(f"gates from {gates_path}")
    print(json.dumps(c.to_json(), indent=2) if as_json else render(c))
    return 0 if c.passed else 1
