"""``citebot eval promote``: turn 👍/👎 from chat (the durable feedback log) into eval cases.

* 👍 → a case in the set: the question, the bot's answer as the expected answer, the documents and pages
  it cited as sources, ``origin: feedback``, the chat scope. A 👍 on a refusal becomes an unanswerable case.
* 👎 → a case in ``FILE.review.jsonl`` with the bad answer attached under ``review``, for an admin to fill in
  the expected answer and sources and then move over to the set.

Cases are deduplicated by normalised question and scope, against what both files already hold, so running
it again adds nothing new.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connectors.state_log import FeedbackEntry, StateLog
from eval.cases import Case, ReviewCase, Source, append_cases, case_id, dedup_key, load_cases, load_review_cases


def review_path(set_path: Path) -> Path:
    """``eval/sets/x.jsonl`` → ``eval/sets/x.review.jsonl``."""
    name = set_path.name[: -len(".jsonl")] if set_path.name.endswith(".jsonl") else set_path.name
    return set_path.with_name(f"{name}.review.jsonl")


def sources_from_citations(citations: list[dict[str, Any]]) -> list[Source]:
    pages: dict[str, set[int]] = {}
    for c in citations:
        file = str(c.get("file") or "")
        if not file:
            continue
        start = int(c.get("page_start") or 0)
        end = int(c.get("page_end") or start)
        pages.setdefault(file, set()).update(p for p in range(start, max(start, end) + 1) if p >= 1)
    return [Source(doc=f, pages=sorted(p)) for f, p in pages.items()]


@dataclass
class PromoteResult:
    added: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)
    skipped: int = 0


def promote(
    log: StateLog,
    set_path: Path,
    *,
    since: str | None = None,
) -> PromoteResult:
    existing = load_cases(set_path) if set_path.exists() else []
    rpath = review_path(set_path)
    in_review = load_review_cases(rpath)
    set_keys = {dedup_key(c.question, c.scope) for c in existing}
    review_keys = {dedup_key(c.question, c.scope) for c in in_review}
    ids = {c.id for c in existing} | {c.id for c in in_review}

    result = PromoteResult()
    new_cases: list[Case] = []
    new_review: list[Case] = []
    for entry in log.feedback(since=since):
        key = dedup_key(entry.question, entry.scope)
        if entry.polarity == "up":
            if key in set_keys:
                result.skipped += 1
                continue
            case = _case_from_up(log, entry)
            set_keys.add(key)
            new_cases.append(case)
            result.added.append(case.id)
        else:
            if key in set_keys or key in review_keys:
                result.skipped += 1
                continue
            case = _case_from_down(entry)
            review_keys.add(key)
            new_review.append(case)
            result.review.append(case.id)
        if case.id in ids:  # same question and scope under another id scheme: never write a duplicate id
            raise ValueError(f"case id {case.id} already used in {set_path} or {rpath}")
        ids.add(case.id)
    append_cases(set_path, new_cases)
    append_cases(rpath, new_review)
    return result


def _refused(log: StateLog, entry: FeedbackEntry) -> bool:
    found = log.find_answer(platform=entry.platform, message_ref=entry.message_ref)
    return bool(found and found[2].refused)


def _case_from_up(log: StateLog, entry: FeedbackEntry) -> Case:
    refused = _refused(log, entry)
    return Case(
        id=case_id("fb", entry.question, entry.scope),
        question=entry.question,
        answer=None if refused else entry.answer,
        answerable=not refused,
        sources=[] if refused else sources_from_citations(entry.citations),
        category="feedback-unanswerable" if refused else "feedback",
        origin="feedback",
        scope=entry.scope,
    )


def _case_from_down(entry: FeedbackEntry) -> Case:
    return ReviewCase(
        id=case_id("fb", entry.question, entry.scope),
        question=entry.question,
        answer=None,
        sources=[],
        category="feedback",
        origin="feedback",
        scope=entry.scope,
        review={
            "bad_answer": entry.answer,
            "bad_citations": [
                {k: c.get(k) for k in ("file", "page_start", "page_end", "quote")} for c in entry.citations
            ],
            "comment": entry.comment,
            "platform": entry.platform,
            "at": entry.at,
            "todo": "fill in answer and sources (or set answerable to false), delete review, move to the set",
        },
    )
