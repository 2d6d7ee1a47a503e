"""Eval runs written to disk by hand (``meta.json`` and ``results.jsonl``), for the compare and report tests: a
case answered well, one missed, an unanswerable one refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eval.cases import Source
from eval.records import CaseResult, CitedQuote, Hit, JudgeScore

SRC = [Source(doc="hb.pdf", pages=[4])]


def good(cid: str, critical: bool = False, latency: float = 20.0) -> CaseResult:
    return CaseResult(
        id=cid, question=f"question {cid}?", category="lookup", critical=critical, sources=SRC,
        expected_answer="25 days", answer="You get 25 days [1].",
        citations=[CitedQuote(n=1, chunk_id="d:1", file="hb.pdf", page_start=4, page_end=4, quote="25 days",
                              verbatim=True)],
        retrieved=[Hit(chunk_id="d:1", file="hb.pdf", page_start=4, page_end=4, score=0.9)],
        latency_ms=latency,
    )


def missed(cid: str, critical: bool = False) -> CaseResult:
    return CaseResult(
        id=cid, question=f"question {cid}?", category="lookup", critical=critical, sources=SRC,
        expected_answer="25 days", answer="Something else [1].",
        citations=[CitedQuote(n=1, chunk_id="d:9", file="hb.pdf", page_start=9, page_end=9, quote="else",
                              verbatim=True)],
        retrieved=[Hit(chunk_id="d:9", file="hb.pdf", page_start=9, page_end=9, score=0.2)],
        latency_ms=50.0,
        judge={"groundedness": JudgeScore(score=0.0, explanation="quote is about travel, not leave")},
    )


def refused_unanswerable(cid: str) -> CaseResult:
    return CaseResult(id=cid, question=f"unanswerable {cid}?", category="unanswerable", answerable=False,
                      refused=True, answer="The PDFs here don't say.", latency_ms=10.0)


def write_run(path: Path, results: list[CaseResult], **meta: Any) -> Path:
    path.mkdir(parents=True)
    (path / "meta.json").write_text(json.dumps({"k": 5, "retrieval_mode": "hybrid", "set": "t.jsonl", **meta}))
    (path / "results.jsonl").write_text("".join(r.to_line() + "\n" for r in results))
    return path
