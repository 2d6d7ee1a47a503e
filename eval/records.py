"""What an eval run writes: one :class:`CaseResult` per line of ``results.jsonl``, plus ``meta.json``.

Kept apart from the pipeline's ``Answer`` so a run directory stays readable after the models change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, Field

from connectors.settings import Settings
from eval.cases import Source
from pipelines.models import RetrievalMode


class Hit(BaseModel):
    """One retrieved chunk, in rank order."""

    chunk_id: str
    file: str
    page_start: int
    page_end: int
    score: float = 0.0


class CitedQuote(BaseModel):
    n: int = 0
    chunk_id: str
    file: str
    page_start: int
    page_end: int
    quote: str
    verbatim: bool | None = Field(
        None, description="Rechecked by the runner against the cited chunk's stored text; None = not checked."
    )


class JudgeScore(BaseModel):
    score: float | None = None
    explanation: str = ""


class CaseResult(BaseModel):
    id: str
    question: str
    category: str = "uncategorised"
    critical: bool = False
    answerable: bool = True
    expected_answer: str | None = None
    sources: list[Source] = Field(default_factory=list)
    scopes: list[str] = Field(default_factory=list)
    retrieval_mode: str = "hybrid"
    answer_mode: str = "extractive"
    answer_kind: str = Field(
        default="answer",
        description="A look-up ('answer'), or the question type that answered (compare, not_found, ...: "
        "pipelines/questions/).",
    )
    answer: str = ""
    refused: bool = False
    confidence: float | None = Field(
        default=None,
        description="What the refusal threshold was compared with (refused below it); for the trade-off curve.",
    )
    citations: list[CitedQuote] = Field(default_factory=list)
    retrieved: list[Hit] = Field(default_factory=list, description="The passages the answer was built from.")
    ranking: list[Hit] = Field(
        default_factory=list, description="The retrieval ranking to depth max(10, k), for the ranking metrics."
    )
    latency_ms: float = 0.0
    timings_ms: dict[str, float] = Field(default_factory=dict)
    judge: dict[str, JudgeScore] = Field(default_factory=dict)
    error: str | None = None

    @property
    def hits(self) -> list[Hit]:
        """What the retrieval metrics rank: the deep ranking when recorded, else the answer's passages."""
        return self.ranking or self.retrieved

    def shown_text(self) -> str:
        """What the user sees: the answer text, then each quote (extractive answers are mostly their quotes)."""
        return "\n".join([self.answer, *(f"[{c.n}] {c.quote}" for c in self.citations if c.quote)])

    def to_line(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_line(cls, line: str) -> CaseResult:
        return cls.model_validate_json(line)


RESULTS_FILE = "results.jsonl"
META_FILE = "meta.json"
# The modes an eval runs (``citebot eval run --mode``), in report order: the one list the runner, the command line's
# choices and the reports read. Each product mode (:class:`RetrievalMode`, so a new member joins by itself), hybrid
# followed by hybrid with each fusion of ``CITEBOT_FUSION`` forced (``hybrid-weighted``, ``hybrid-rrf``: that fusion
# whatever the setting says), and last the naive one-vector-per-page baseline (eval/page_baseline.py: retrieval only).
PAGES = "pages"
FUSION_MODES: dict[str, str] = {f"hybrid-{f}": f for f in get_args(Settings.model_fields["fusion"].annotation)}
HYBRID_MODES = (RetrievalMode.HYBRID.value, *FUSION_MODES)
MODES = (*HYBRID_MODES, *(m.value for m in RetrievalMode if m is not RetrievalMode.HYBRID), PAGES)
# The answer_mode of a case asked of a retriever that gives no answer (the naive page baseline, ``--mode pages``).
RETRIEVAL_ONLY = "retrieval-only"


class RunDirError(ValueError):
    """A run directory is missing or unreadable; the message says which command makes one."""


def resolve_run_dir(run_dir: Path) -> Path:
    """A run directory holds ``results.jsonl``; a ``--mode all`` run holds one per mode, and the hybrid one
    stands for it."""
    if (run_dir / RESULTS_FILE).exists():
        return run_dir
    for mode in MODES:
        if (run_dir / mode / RESULTS_FILE).exists():
            return run_dir / mode
    raise RunDirError(f"{run_dir} holds no {RESULTS_FILE}: make one with `citebot eval run --out {run_dir} ...`")


def read_results(path: Path) -> list[CaseResult]:
    """Results of a run, the last line per case id winning; a torn last line (interrupted write) is skipped."""
    out: dict[str, CaseResult] = {}
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            r = CaseResult.from_line(line)
        except ValueError:
            if i == len(lines) - 1:
                continue  # interrupted mid-write; the case will be redone
            raise RunDirError(f"{path}:{i + 1}: not a result line; was the file edited by hand?") from None
        out[r.id] = r
    return list(out.values())


def load_run(run_dir: Path) -> tuple[dict[str, Any], list[CaseResult]]:
    run_dir = resolve_run_dir(run_dir)
    meta: dict[str, Any] = {}
    if (run_dir / META_FILE).exists():
        meta = json.loads((run_dir / META_FILE).read_text(encoding="utf-8"))
    return meta, read_results(run_dir / RESULTS_FILE)
