"""``citebot eval promote``: turn 👍/👎 from chat (the durable feedback log) into eval cases.

Feedback is grouped by question (normalised) and scope, so every vote on the same question is seen together:

* only 👍 → a case in the set: the question, the quotes the bot cited as the expected answer (the evidence,
  ``;``-separated, not the lead line "Here is what the PDFs say…"), the documents and pages it cited as
  sources, ``origin: feedback``, the chat scope. A 👍 on a refusal becomes an unanswerable case. A question
  the set already holds is skipped (counted as already present).
* any 👎 (alone, with a comment, or beside a 👍) → a case in ``FILE.review.jsonl`` for an admin to fill in
  the expected answer and sources and then move over to the set. ``review`` holds every vote with its
  comment and choice, the 👎'd answer and its citations, the 👍'd evidence when there is some, and
  ``in_set`` when the set already has the question (its expectation may be what is wrong). A disputed
  question never goes to the set, and a 👎 is never dropped as "already present".

Reruns are idempotent: votes already in a review case are not added again; new votes on a question under
review are added to its case (the review file is rewritten, keeping an admin's edits).

The weekly loop: ``citebot eval promote --days 7`` takes the week's votes, and the 👎 come out grouped by
reason (the 👎 form's choice) and document (the one the 👎'd answer quoted most), so a reviewer works through
clusters ("quoted the wrong passage — travel.pdf: 4 cases") rather than a list. Each review case records its
``review.cluster``, and the review file keeps the cases of one cluster together.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connectors.state_api import ChatState, FeedbackEntry
from eval.cases import (
    Case,
    ReviewCase,
    Source,
    append_cases,
    case_id,
    dedup_key,
    dump_case,
    load_cases,
    load_review_cases,
)

TODO = "fill in answer and sources (or set answerable to false), delete review, move to the set"
NO_REASON = "no reason given"
NOTHING_QUOTED = "(refused: nothing quoted)"


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


def evidence(citations: list[dict[str, Any]]) -> str:
    """The cited quotes, ``;``-separated (how a multi-part expected answer is written), without repeats."""
    quotes = dict.fromkeys(" ".join(str(c.get("quote") or "").split()) for c in citations)
    return "; ".join(q for q in quotes if q)


@dataclass
class Cluster:
    """Review cases whose 👎 share a reason and a document."""

    reason: str  # the 👎 form's choice key, or NO_REASON
    document: str  # the file the 👎'd answer quoted most, or NOTHING_QUOTED
    case_ids: list[str] = field(default_factory=list)


@dataclass
class PromoteResult:
    added: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)  # review cases created or given new votes
    skipped: int = 0  # 👍-only questions the set already holds
    clusters: list[Cluster] = field(default_factory=list)  # this run's review cases, the largest cluster first


def cluster_of(review: dict[str, Any]) -> tuple[str, str]:
    """(reason, document) of a review case: the commonest 👎 choice among its votes and the file its 👎'd answer
    quoted most (ties: the first quoted)."""
    choices = Counter(str(v.get("choice") or "") for v in review.get("votes") or []
                      if isinstance(v, dict) and v.get("polarity") == "down")
    reason = next((c for c, _n in choices.most_common() if c), NO_REASON)
    files = Counter(str(c.get("file") or "") for c in review.get("bad_citations") or [] if isinstance(c, dict))
    document = next((f for f, _n in files.most_common() if f), NOTHING_QUOTED)
    return reason, document


def _clustered(cases: list[Case], touched: list[str]) -> tuple[list[Case], list[Cluster]]:
    """The review cases with each cluster's cases together (clusters in order of first appearance), and the
    clusters of the cases in ``touched``, largest first."""
    keys: dict[str, tuple[str, str]] = {}
    for i, c in enumerate(cases):
        review = dict(getattr(c, "review", {}) or {})
        keys[c.id] = cluster_of(review)
        if keys[c.id] != tuple(review.get("cluster", {}).values()):
            review["cluster"] = {"reason": keys[c.id][0], "document": keys[c.id][1]}
            cases[i] = c.model_copy(update={"review": review})
    first = {k: i for i, k in reversed(list(enumerate(keys[c.id] for c in cases)))}
    ordered = sorted(cases, key=lambda c: first[keys[c.id]])
    groups: dict[tuple[str, str], Cluster] = {}
    for cid in dict.fromkeys(touched):
        reason, document = keys[cid]
        groups.setdefault((reason, document), Cluster(reason, document)).case_ids.append(cid)
    return ordered, sorted(groups.values(), key=lambda g: (-len(g.case_ids), g.reason, g.document))


def _vote(e: FeedbackEntry) -> dict[str, Any]:
    vote: dict[str, Any] = {"polarity": e.polarity, "user": e.user, "platform": e.platform, "at": e.at,
                            "message_ref": e.message_ref}
    if e.choice:
        vote["choice"] = e.choice
    if e.comment:
        vote["comment"] = e.comment
    return vote


def _vote_key(vote: dict[str, Any]) -> tuple[str, str, str, str]:
    return (str(vote.get("platform")), str(vote.get("message_ref")), str(vote.get("user")), str(vote.get("at")))


def promote(log: ChatState, set_path: Path, *, since: str | None = None) -> PromoteResult:
    existing = load_cases(set_path) if set_path.exists() else []
    rpath = review_path(set_path)
    in_review: list[Case] = load_review_cases(rpath)
    in_set = {dedup_key(c.question, c.scope): c.id for c in existing}
    review_by_key = {dedup_key(c.question, c.scope): i for i, c in enumerate(in_review)}
    ids = {c.id for c in existing} | {c.id for c in in_review}

    groups: dict[str, list[FeedbackEntry]] = {}
    for entry in log.feedback(since=since):
        groups.setdefault(dedup_key(entry.question, entry.scope), []).append(entry)

    result = PromoteResult()
    new_cases: list[Case] = []
    review_changed = False
    for key, entries in groups.items():
        disputed = any(e.polarity == "down" for e in entries) or key in review_by_key
        if not disputed:
            if key in in_set:
                result.skipped += 1
                continue
            case = _case_from_up(entries[0])  # the first 👍'd answer, as before grouping
            _new_id(case.id, ids, set_path, rpath)
            in_set[key] = case.id
            new_cases.append(case)
            result.added.append(case.id)
            continue
        if key in review_by_key:  # a question under review: add the votes it does not hold yet
            i = review_by_key[key]
            old = in_review[i]
            review = dict(getattr(old, "review", {}) or {})
            votes = list(review.get("votes") or [])
            seen = {_vote_key(v) for v in votes if isinstance(v, dict)}
            fresh = [_vote(e) for e in entries if _vote_key(_vote(e)) not in seen]
            if not fresh:
                continue
            review["votes"] = votes + fresh
            in_review[i] = old.model_copy(update={"review": review})
            result.review.append(old.id)
            review_changed = True
            continue
        case = _review_case(entries, in_set.get(key))
        _new_id(case.id, ids, set_path, rpath)
        review_by_key[key] = len(in_review)
        in_review.append(case)
        result.review.append(case.id)
        review_changed = True
    append_cases(set_path, new_cases)
    if review_changed:
        in_review, result.clusters = _clustered(in_review, result.review)
        rpath.parent.mkdir(parents=True, exist_ok=True)
        rpath.write_text("".join(dump_case(c) + "\n" for c in in_review), encoding="utf-8")
    return result


def _new_id(cid: str, ids: set[str], set_path: Path, rpath: Path) -> None:
    if cid in ids:  # same question and scope under another id scheme: never write a duplicate id
        raise ValueError(f"case id {cid} already used in {set_path} or {rpath}")
    ids.add(cid)


def _case_from_up(entry: FeedbackEntry) -> Case:
    refused = entry.refused
    quotes = evidence(entry.citations)
    return Case(
        id=case_id("fb", entry.question, entry.scope),
        question=entry.question,
        answer=None if refused else (quotes or entry.answer),
        answerable=not refused,
        sources=[] if refused else sources_from_citations(entry.citations),
        category="feedback-unanswerable" if refused else "feedback",
        origin="feedback",
        scope=entry.scope,
    )


def _review_case(entries: list[FeedbackEntry], set_case: str | None) -> Case:
    downs = [e for e in entries if e.polarity == "down"]
    ups = [e for e in entries if e.polarity == "up"]
    bad = downs[-1] if downs else entries[-1]
    review: dict[str, Any] = {
        "why": "👍 and 👎 on the same question" if ups else "👎",
        "votes": [_vote(e) for e in entries],
        "bad_answer": bad.answer,
        "bad_citations": [
            {k: c.get(k) for k in ("file", "page_start", "page_end", "quote")} for c in bad.citations
        ],
        "comment": "; ".join(e.comment for e in downs if e.comment),
        "platform": bad.platform,
        "at": bad.at,
        "todo": TODO,
    }
    if ups:
        review["good_evidence"] = evidence(ups[-1].citations)
    if set_case:
        review["in_set"] = set_case
    return ReviewCase(
        # beside a set case from an earlier 👍 (id fb-…), the review case needs an id of its own
        id=case_id("fbr" if set_case else "fb", bad.question, bad.scope),
        question=bad.question,
        answer=None,
        sources=[],
        category="feedback",
        origin="feedback",
        scope=bad.scope,
        review=review,
    )
