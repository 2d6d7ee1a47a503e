"""What drove a metric: "What drove gross margin change as of FY2022 for JnJ?" answered with the filing's own
explanation, the sentences of its discussion that say what moved the metric or a line it is computed from ("Cost of
products sold increased as a percent to sales driven by: …"), quoted (:func:`metric_drivers`).

A filing seldom says "gross margin" where it explains it: it explains the cost of sales as a share of sales, or the
gross profit. The lines a metric is computed from are :data:`pipelines.components.statements.FORMULAS`' own, named as
:data:`~pipelines.components.statements.LINE_ITEMS` says a filing names them. A sentence counts when it names the
metric or one of its lines and says why ("driven by", "due to", "primarily", "offset by"); none found leaves the
question to the look-up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from haystack import Document

from pipelines.components._text import sentence_spans
from pipelines.components.statements import asked_item, formula_for, line_item
from pipelines.figures.periods import asked_period
from pipelines.models import Answer
from pipelines.questions.kinds import DRIVERS, Question
from pipelines.questions.steps import AnswerDraft, Steps, page_text

MAX_QUOTES = 2
MAX_SENTENCE = 700  # characters: a bulleted list of drivers is one sentence; a page of prose is not
# how a filing says why a figure moved
CAUSE = re.compile(r"\b(?:driven by|due to|primarily (?:due|driven|as a result|because|from|reflect)|mainly|largely|"
                   r"as a result of|attributable to|reflect(?:s|ed|ing)|offset by|because of|result(?:ed|ing)? from|"
                   r"caused by|led by|owing to)\b", re.I)
_BACK = re.compile(r"^(?:the|this|these|that|such|its)\b(?:\s+\S+){0,4}?\s+(?:increase|decrease|change|decline|"
                   r"improvement|growth|rise)\b", re.I)
MOVED = re.compile(r"\b(?:increas|decreas|declin|improv|grew|growth|rose|fell|expan|contract|compress|lower|higher|"
                   r"change)", re.I)


@dataclass(frozen=True)
class _Subject:
    """What a sentence must name: the metric itself (``weight`` 2) or a line it is computed from (1)."""

    name: str
    pattern: re.Pattern[str]
    weight: int


def _subjects(question: str) -> list[_Subject]:
    """The metric the question asks the drivers of and the lines it is computed from; [] when it names none."""
    formula = formula_for(question)
    if formula is not None:
        metric = re.sub(r"^the ", "", formula.name)
        out = [_Subject(metric, re.compile(rf"\b{re.escape(metric)}", re.I), 2)]
        if metric.endswith("margin"):  # the gross profit a gross margin is, the operating income an operating one
            kind = metric.removesuffix("margin").strip()
            out.append(_Subject(f"{kind} profit", re.compile(rf"\b{kind} (?:profit|income)\b", re.I), 1))
        for name in formula.lines:
            if name == "revenue":  # every margin's denominator: what moved sales is not what moved the margin
                continue
            out.append(_Subject(name, re.compile(rf"(?:{line_item(name).asked})", re.I), 1))
        return out
    asked = asked_item(question)
    if asked is None:
        return []
    return [_Subject(asked.name, re.compile(rf"(?:{asked.asked})", re.I), 2)]


def metric_drivers(steps: Steps, q: Question) -> Answer | None:
    """The filing's sentences saying what moved the metric ``q`` asks about, best first; ``None`` when it asks no
    drivers of a named metric or no passage retrieval puts forward says why."""
    head = re.split(r"[?.]\s", q.text, maxsplit=1)[0]
    if not DRIVERS.search(head):
        return None
    subjects = _subjects(head)
    if not subjects:
        return None
    words = " ".join(s.name for s in subjects)
    first, more = steps.and_in_first(q.text, f"{words} increased decreased percent of sales driven by due to",
                                     q.scopes, q.mode, q.k)
    year = asked_period(q.text).year
    found: list[tuple[float, int, Document, str]] = []  # score, retrieval rank, chunk, quote
    seen: set[str] = set()
    for rank, doc in enumerate(first + more[:10]):
        if doc.id in seen:
            continue
        seen.add(doc.id)
        text = doc.content or ""
        spans = sentence_spans(text)
        for i, (a, b) in enumerate(spans):
            sentence = text[a:b]
            cause = CAUSE.search(sentence)
            if len(sentence) > MAX_SENTENCE or "|" in sentence or cause is None:
                continue
            # the thing explained comes before the cause ("Cost of products sold increased … driven by"), or in
            # the sentence before one that refers back to it ("The $104.2 million increase was primarily due to")
            named = sum(s.weight for s in subjects if s.pattern.search(sentence[: cause.start()]))
            if not named and i > 0 and _BACK.match(sentence):
                named = sum(s.weight for s in subjects if s.pattern.search(text[spans[i - 1][0] : spans[i - 1][1]]))
                a = spans[i - 1][0] if named else a
            if not named:
                continue
            quote = text[a:b]
            score = named + (1 if MOVED.search(sentence) else 0) + (0.5 if re.search(r"percent|%", sentence) else 0)
            score += 0.5 if year is not None and str(year) in quote else 0
            found.append((score, rank, doc, quote))
    if not found:
        return None
    found.sort(key=lambda f: (-f[0], f[1]))
    draft = AnswerDraft()
    picked = found[:MAX_QUOTES]
    marks = "".join(draft.cite(doc, sentence) for _, _, doc, sentence in picked)
    doc = picked[0][2]
    where = f"{(doc.meta or {}).get('file_name', 'the PDF')} ({page_text(doc)})"
    draft.lines.append(f"What {where} says moved {subjects[0].name}"
                       f"{' (through ' + ', '.join(s.name for s in subjects[1:]) + ')' if len(subjects) > 1 else ''}"
                       f": {marks}")
    return steps.finish(draft, "drivers")
