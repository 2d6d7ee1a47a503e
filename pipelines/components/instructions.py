"""What an analyst's question tells the answerer to do, parsed apart from what it asks.

Questions as analysts write them wrap the question in instructions: a role ("Assume that you are a public
equities analyst.", "You are an investment banker and your only resource(s) ... is (are): the balance sheet.
Here's the question: ..."), the statements to read from ("Base your judgments on the information provided
primarily in the balance sheet.", "According to the details clearly outlined within the P&L statement, ..."),
the unit ("Answer in USD millions.", "(in units of percents ...)") and the rounding ("Round your answer to two
decimal places."). None of these words is in the passage that answers: searched for, they pull in passages
about judgments and information, and checked for in the scope (term support), they make a question the
documents answer look unanswerable.

:func:`split_instructions` returns the question without them and an :class:`Instructions` saying what they
asked: the statements named (:data:`pipelines.components.statements.KINDS`, what page ranking lifts), the unit,
the decimals and the role, for the answer kinds to use. A sentence is only taken out when a question remains.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipelines.components._text import question_sentences
from pipelines.components.statements import wanted_statements

_NUMBERS = {"zero": 0, "no": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_STATEMENT = r"(?:statements?|balance sheets?|p&l|profit and loss|income|cash flows?|financial position)"
_SOURCE = rf"(?:{_STATEMENT}|line items)"

# "... your only resource(s) to answer the following question is (are): X. Here's the question: what is ...?"
_LEAD_IN = re.compile(r"^.*?\b(?:here(?:'s| is) the question|the question is|question)\s*:\s*", re.I)
# "Assume that you are a public equities analyst.", "You are an investment banker and ...", "Act as a CFO."
_ROLE = re.compile(
    r"^(?:please\s+)?(?:(?:assume|imagine|pretend|suppose)(?:\s+that)?\s+you(?:'re|\s+are)|you(?:'re|\s+are)\s+"
    r"(?:a|an|the)\b|act\s+as\b|acting\s+as\b|as\s+(?:a|an)\s+[\w\s-]{0,40}?(?:analyst|banker|investor|manager|"
    r"accountant|advisor|adviser|auditor|officer|cfo|ceo)\b)",
    re.I,
)
_ROLE_WHO = re.compile(r"\byou(?:'re|\s+are)\s+((?:a|an|the)\s+[\w\s&-]+?)(?:\s+and\b|[.,;:]|$)", re.I)
# whole sentences that say how to work, never what to find
_HOW = re.compile(
    rf"^(?:please\s+)?(?:"
    r"(?:we|i)\s+(?:want|need|would like|wish)\s+to\s+(?:calculate|compute|work out|estimate|find|know)\b|"
    r"(?:please\s+)?help\s+(?:us|me)\s+(?:compute|calculate|work|answer)\b|"
    r"answer\s+(?:the\s+following|this|the)\s+question\b|"
    rf"(?:base|basing|utilize|use|using|give|provide|address|answer|respond|rely|relying|refer|referencing|look|"
    rf"looking|draw|drawing|take|taking|(?:calculate|compute|extract)\s*(?:\(or\s+\w+\)\s*)?(?:the|your)\s+answer)"
    rf"\b.{{0,120}}\b{_SOURCE}\b|"
    r"if\b.{0,120}\b(?:state that|explain why|say so)\b)",
    re.I,
)
# a clause before the question proper: "According to the details clearly outlined within the balance sheet, what"
_SOURCE_CLAUSE = re.compile(
    r"^(?:according\s+to|based\s+on|basing\s+(?:your\s+)?\w+\s+(?:on|off(?:\s+of)?|by)|by\s+drawing\s+conclusions?\s+"
    r"from|taking\s+into\s+account|when\s+(?:primarily\s+)?referencing|(?:by\s+)?(?:primarily\s+)?using|"
    r"relying\s+on|referring\s+to|looking\s+at|from|answer\s+the\s+following\s+question\b)"
    rf"[^,:?]{{0,160}}?\b{_SOURCE}\b[^,:?]{{0,80}}[,:]\s*",
    re.I,
)
# "..., based on the balance sheet?" at the end of the question
_SOURCE_TAIL = re.compile(
    rf",?\s*\b(?:according\s+to|based\s+on|using|from)\s+(?:the\s+)?[^,?]{{0,60}}\b{_STATEMENT}\b\s*(?=[?.]?$)", re.I
)
_UNIT = re.compile(
    r"\b(?:usd|us\s?\$|\$|dollars?)\s*(millions?|billions?|thousands?|mn|bn)\b|"
    r"\b(millions?|billions?|thousands?)\s+(?:of\s+)?(?:usd|us\s?dollars|dollars)\b|"
    r"\b(?:in\s+)?units?\s+of\s+(percents?|percentages?)\b|\bin\s+(percent(?:age)?s?)(?:\s+terms)?\b",
    re.I,
)
_UNIT_SPAN = re.compile(
    r"\(\s*(?:in|answer in|round|expressed in)\b[^)]*?(?:usd|\$|dollars?|millions?|billions?|thousands?|percents?|"
    r"decimal)[^)]*\)|"
    r",?\s*\b(?:answer(?:ed)?\s+)?(?:in|expressed\s+in)\s+(?:units\s+of\s+)?"
    r"(?:(?:usd|us\s?\$|\$|dollars?)\s*(?:millions?|billions?|thousands?|mn|bn)|(?:millions?|billions?|thousands?)"
    r"\s+(?:of\s+)?(?:usd|dollars))\b",
    re.I,
)
_DECIMALS = re.compile(r"\b(zero|no|one|two|three|four|five|six|\d)\s+decimal(?:\s+places?|\s+points?|s)?\b", re.I)
_WHOLE = re.compile(r"\bnearest\s+(?:whole\s+number|integer|dollar|percent)\b|\bwhole\s+number\b", re.I)


@dataclass(frozen=True)
class Instructions:
    """What a question asked of the answer rather than of the documents.

    ``statements``: the financial statements it says to read from (``"balance"``, ``"income"``, ``"cash_flow"``,
    ``"equity"``); ``unit``: ``"USD millions"``, ``"USD billions"``, ``"USD thousands"``, ``"percent"`` or ``""``;
    ``decimals``: the rounding asked for (``None``: none); ``role``: who the asker said to be (``"a public
    equities analyst"``); ``removed``: the instruction text taken out of the question, as written."""

    statements: tuple[str, ...] = ()
    unit: str = ""
    decimals: int | None = None
    role: str = ""
    removed: tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.statements or self.unit or self.decimals is not None or self.role or self.removed)


def _unit(text: str) -> str:
    m = _UNIT.search(text)
    if not m:
        return ""
    word = next(g for g in m.groups() if g).lower()
    if word.startswith("percent"):
        return "percent"
    scale = {"mn": "millions", "bn": "billions"}.get(word, word.rstrip("s") + "s")
    return f"USD {scale}"


def _decimals(text: str) -> int | None:
    m = _DECIMALS.search(text)
    if m:
        word = m.group(1).lower()
        return int(word) if word.isdigit() else _NUMBERS[word]
    return 0 if _WHOLE.search(text) else None


def _is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith("?")


def split_instructions(question: str, *, format_cue: re.Pattern[str] | None = None) -> tuple[str, Instructions]:
    """``question`` without its instructions (role, sources, unit, rounding; ``format_cue``: trailing sentences
    that only say how to write the answer, the analyzer's own rule), and what they asked. The question's first
    sentence that is not an instruction always stays; a question that is all instructions is returned whole."""
    text = " ".join(question.split())
    removed: list[str] = []
    lead = _LEAD_IN.match(text)
    if lead and lead.end() < len(text) and re.search(r"[A-Za-z]", text[lead.end():]):
        removed.append(lead.group(0).strip())
        text = text[lead.end():]
        text = text[:1].upper() + text[1:]
    kept: list[str] = []
    for sentence in question_sentences(text):
        s = sentence.strip()
        if not s:
            continue
        if not _is_question(s) and (_ROLE.search(s) or _HOW.search(s)):
            removed.append(s)
            continue
        if kept and format_cue is not None and format_cue.search(s):
            removed.append(s)
            continue
        clause = _SOURCE_CLAUSE.match(s)
        if clause and clause.end() < len(s):
            removed.append(clause.group(0).strip(" ,:"))
            s = s[clause.end():]
            s = s[:1].upper() + s[1:]
        if tail := _SOURCE_TAIL.search(s):
            removed.append(tail.group(0).strip(" ,"))
            s = s[: tail.start()] + s[tail.end():]
        for span in list(_UNIT_SPAN.finditer(s))[::-1]:
            removed.append(span.group(0).strip(" ,"))
            s = s[: span.start()] + s[span.end():]
        s = re.sub(r"\s+([?.,;:])", r"\1", " ".join(s.split()))
        if s.strip(" ?.,;:"):
            kept.append(s)
    if not kept:
        return " ".join(question.split()), Instructions()
    said = " ".join(removed)
    who = _ROLE_WHO.search(said)
    role = " ".join(who.group(1).split()) if who else ""
    statements = wanted_statements(said) if re.search(_STATEMENT, said, re.I) else ()
    return " ".join(kept), Instructions(
        statements=tuple(statements), unit=_unit(question), decimals=_decimals(question), role=role,
        removed=tuple(removed),
    )
