"""Eval cases: one JSON object a line (format in ``eval/README.md``), loaded and validated with pydantic.

A bad line is reported with its file and line number, so an admin editing a set by hand knows what
to fix; duplicate ids and sources on unanswerable cases are errors too.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

Origin = Literal["manual", "feedback"]


class EvalSetError(ValueError):
    """An eval set could not be read; the message names the file, line and field to fix."""


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid")

    doc: str = Field(min_length=1, description="The PDF's file name as indexed (e.g. 'handbook.pdf').")
    pages: list[int] = Field(default_factory=list, description="1-based pages holding the answer.")

    @field_validator("pages")
    @classmethod
    def _pages(cls, pages: list[int]) -> list[int]:
        if any(p < 1 for p in pages):
            raise ValueError("pages are 1-based: every page must be >= 1")
        return sorted(set(pages))


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    answer: str | None = Field(None, description="Expected answer (optional).")
    answerable: bool = True
    sources: list[Source] = Field(default_factory=list)
    category: str = "uncategorised"
    critical: bool = False
    origin: Origin = "manual"
    scope: str | None = Field(None, description="Chat scope the case came from (feedback); informational.")
    asked_in: list[str] = Field(
        default_factory=list,
        description="File names of the PDFs an unanswerable question is asked about: a --per-doc run asks it "
        "in their scopes only (without it, across every PDF).",
    )

    @model_validator(mode="after")
    def _check(self) -> Case:
        if not self.answerable and self.sources:
            raise ValueError("an unanswerable case cannot have sources")
        if self.answerable and self.asked_in:
            raise ValueError("asked_in is for unanswerable cases; an answerable case is asked where its sources are")
        if any(not d.strip() for d in self.asked_in):
            raise ValueError("asked_in holds file names; an empty one is not allowed")
        return self

    def expected_pages(self) -> set[tuple[str, int]]:
        """(file name, page) pairs the answer is on."""
        return {(s.doc, p) for s in self.sources for p in s.pages}

    @property
    def docs(self) -> list[str]:
        return [s.doc for s in self.sources]


class ReviewCase(Case):
    """A 👎 from chat waiting for an admin: fill ``answer`` and ``sources``, drop ``review``, move it over."""

    review: dict[str, Any] = Field(default_factory=dict)


def normalise_question(text: str) -> str:
    """Case, accents-compatible forms, punctuation and whitespace folded: the dedup key of a question."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[^\w\s]", " ", text)
    return " ".join(text.split())


def dedup_key(question: str, scope: str | None) -> str:
    return f"{scope or ''}\x00{normalise_question(question)}"


def case_id(prefix: str, question: str, scope: str | None) -> str:
    digest = hashlib.sha256(dedup_key(question, scope).encode()).hexdigest()[:10]
    return f"{prefix}-{digest}"


def _parse_lines(path: Path, lines: Iterable[str], model: type[Case]) -> list[Case]:
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            continue
        try:
            raw = json.loads(stripped)
        except json.JSONDecodeError as e:
            raise EvalSetError(f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno})") from e
        try:
            case = model.model_validate(raw)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(x) for x in err['loc']) or 'case'}: {err['msg']}" for err in e.errors()
            )
            raise EvalSetError(f"{path}:{lineno}: {problems}") from e
        if case.id in seen:
            raise EvalSetError(f"{path}:{lineno}: duplicate id {case.id!r} (first on line {seen[case.id]})")
        seen[case.id] = lineno
        cases.append(case)
    return cases


def load_cases(path: Path) -> list[Case]:
    """Read and validate an eval set; raise :class:`EvalSetError` naming the line to fix."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise EvalSetError(f"cannot read eval set {path}: {e.strerror}") from e
    return _parse_lines(path, text.splitlines(), Case)


# Lies beside a set file: ``{"case id": "file.pdf" or ["a.pdf", ...]}`` for unanswerable cases without asked_in.
ASKED_IN_FILE = "unanswerable_asked_in.json"


def asked_in_file(set_path: Path) -> Path | None:
    """The set's ``unanswerable_asked_in.json`` when one lies beside it."""
    p = set_path.parent / ASKED_IN_FILE
    return p if p.is_file() else None


def apply_asked_in(cases: list[Case], path: Path) -> tuple[list[Case], int]:
    """Fill ``asked_in`` from ``path`` for the unanswerable cases that lack it (a case's own field wins);
    returns the cases and how many were filled. Ids the set lacks and answerable ids are errors."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise EvalSetError(f"cannot read {path}: {e}") from e
    if not isinstance(raw, dict):
        raise EvalSetError(f"{path}: expected an object mapping case ids to file names")
    by_id = {c.id: c for c in cases}
    docs: dict[str, list[str]] = {}
    for cid, value in raw.items():
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n.strip() for n in names):
            raise EvalSetError(f"{path}: {cid}: expected a file name or a list of file names")
        case = by_id.get(cid)
        if case is None:
            raise EvalSetError(f"{path}: {cid}: no case with this id in the set")
        if case.answerable:
            raise EvalSetError(f"{path}: {cid}: the case is answerable; asked_in is for unanswerable cases")
        docs[cid] = names
    out = [c.model_copy(update={"asked_in": docs[c.id]}) if c.id in docs and not c.asked_in else c for c in cases]
    return out, sum(1 for a, b in zip(cases, out, strict=True) if a is not b)


def load_review_cases(path: Path) -> list[Case]:
    if not path.exists():
        return []
    return _parse_lines(path, path.read_text(encoding="utf-8").splitlines(), ReviewCase)


def dump_case(case: Case) -> str:
    """One JSONL line, without defaults that would only add noise."""
    data = case.model_dump(exclude_none=True)
    if data.get("origin") == "manual":
        data.pop("origin")
    if data.get("critical") is False:
        data.pop("critical")
    if data.get("answerable") is True:
        data.pop("answerable")
    if not data.get("asked_in"):
        data.pop("asked_in", None)
    return json.dumps(data, ensure_ascii=False)


def append_cases(path: Path, cases: Iterable[Case]) -> int:
    """Append cases to a JSONL file (created if missing); returns how many were written."""
    lines = [dump_case(c) for c in cases]
    if not lines:
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = ""
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as f:
            f.seek(-1, 2)
            if f.read(1) != b"\n":
                prefix = "\n"
    with path.open("a", encoding="utf-8") as f:
        f.write(prefix + "\n".join(lines) + "\n")
    return len(lines)


def set_checksum(path: Path) -> str:
    """sha256 of the set file, and of the ``unanswerable_asked_in.json`` beside it when there is one (it
    changes where cases are asked, so a run must not resume across an edit of it)."""
    h = hashlib.sha256(path.read_bytes())
    side = asked_in_file(path)
    if side is not None:
        h.update(b"\0" + side.read_bytes())
    return h.hexdigest()
