"""What a question asks for, as far as its words tell: :func:`classify` (which handlers of
:class:`pipelines.answerer.Answerer`'s kinds may apply, most specific first) and :func:`split_parts` (the questions
a multi-part question asks). The patterns here are the handlers' too: a summary's, a comparison's wording is taken
out of the question with the pattern that recognised it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from pipelines.components._text import terms
from pipelines.components.statements import asked_item, formula_for
from pipelines.components.structure_router import parse_refs
from pipelines.models import RetrievalMode, Turn

if TYPE_CHECKING:
    from pipelines.streaming import ShowText

MAX_PARTS = 4

COMPARE = re.compile(r"\b(compare|comparison|comparing|differ|differs|difference|differences|versus|vs\.?|"
                     r"contrast|both|each (?:document|pdf|file))\b", re.I)
ALL_DOCS = re.compile(r"\b(?:both|the (?:two|\d+) (?:pdfs|documents|files)|all (?:the )?(?:pdfs|documents|files)|"
                      r"each (?:document|pdf|file))\b", re.I)
# asking for a summary, however it is put: "summarise X", "can you give me an overview of X", "what are the main
# points of X", "X in a nutshell"; what X is (the whole document, or a part of it) the handler decides
SUMMARY = re.compile(r"^\s*(?:(?:can|could|would|will) you\s+)?(?:please\s+)?(?:summari[sz]e|sum up|"
                     r"give (?:me |us )?(?:an? |the )?(?:short |brief |quick )?(?:summary|overview|gist|rundown) of|"
                     r"(?:an? |the )?(?:short |brief |quick )?(?:summary|overview|gist) of|what(?:'s| is) in|"
                     r"what (?:are|were) the (?:key|main) (?:points|findings|takeaways|messages) of|"
                     r"tl;?dr(?: of)?)\b", re.I)
THIS_DOC = re.compile(r"\b(?:this|the|that) (?:document|pdf|file|doc)\b", re.I)
_DOC_TYPE = re.compile(
    r"\b(?:what|which)\s+(?:kind|type|sort)\s+of\s+(?:a\s+)?(?:document|pdf|file|doc)\b"
    r"|\bwhat\s+(?:is|are)\s+(?:this|these|the)\s+(?:document|pdf|file|doc)s?(?:\s+about)?\s*\??$"
    r"|\bwhat\s+(?:documents|pdfs|files)\s+(?:are|do you have)\b",
    re.I,
)
# a superlative asks for the max or min of a measure, whatever the measure ("the longest refund window", "the
# cheapest plan"): the adjective's direction, not a list of column names
EXTREME = re.compile(r"\b(highest|lowest|largest|smallest|biggest|greatest|most|least|fewest|maximum|minimum|"
                     r"max|min|top|bottom|peak|best|worst|longest|shortest|cheapest|costliest|dearest|"
                     r"earliest|latest|fastest|slowest|heaviest|lightest|widest|narrowest|"
                     r"tallest|deepest|strongest|weakest)\b", re.I)


def superlative(question: str) -> re.Match[str] | None:
    """The superlative a question asks by (:data:`EXTREME`), or None. A capitalised one inside the question is a
    name ("for Best Buy", "Top Glove's"), unless "the" or a possessive comes before it ("had the Highest EBITDAR")."""
    for m in EXTREME.finditer(question):
        before = question[:m.start()].split()
        if m.group(1)[0].isupper() and before and before[-1].lower() not in _DETERMINERS:
            continue
        return m
    return None


_DETERMINERS = {"the", "its", "their", "our", "his", "her", "whose", "my", "your"}


LOW_WORDS = {"lowest", "smallest", "least", "fewest", "minimum", "min", "bottom", "worst", "shortest", "cheapest",
             "earliest", "slowest", "lightest", "narrowest", "weakest"}
SHORT_DEFINITE = re.compile(
    r"^\s*(?:what|which|how \w+)(?:\s+(?:is|are|was|were)|['’]s)\s+(?:the|our|my)\s+"
    r"([a-z][\w\-]*(?:\s[a-z][\w\-]*)?)\s*\??\s*$",
    re.I,
)
# asks where a company operates: "what are the geographies that X primarily operates in"
GEOGRAPHIES = re.compile(r"\b(?:geograph(?:y|ies|ic (?:regions?|areas?|markets?|segments?))|regions?|countries)\b"
                         r".{0,60}\boperat|\bwhere\b.{0,40}\boperat", re.I)
# asks what moved a figure, not the figure: "what drove gross margin change", "why did revenue fall"
DRIVERS = re.compile(r"\b(?:why|drivers?|reasons?|what (?:drove|caused))\b", re.I)
# a metric over time: "year-over-year change in operating income from FY2015 to FY2016", "3 year average of capex"
GROWTH = re.compile(r"year[- ]over[- ]year|\byoy\b|\bgrowth\b|\bgrew\b|\b(?:change|increase|decrease|decline)"
                    r"\b.{0,30}\bfrom\b|\bgrow\b.{0,30}\b(?:from|between)\b|"
                    # "has it increased its debt on balance sheet between FY2023 and FY2022"
                    r"\b(?:chang|increas|decreas|reduc|declin)ed\b.{0,40}\bbetween\b", re.I)
AVERAGE = re.compile(r"\b(\d|two|three|four|five)[- ]year average\b|\baverage\b.{0,60}\b(?:from|between|over)\b"
                     r"\s*(?:fy\s*)?(?:19|20)\d\d", re.I)
# a line item as a share of revenue: "D&A % margin", "SG&A as a % of revenue"
SHARE_OF_REVENUE = re.compile(r"%\s*margin|\bmargin\b|(?:as an? )?(?:%|percent(?:age)?|share) of (?:total |net )?"
                              r"(?:revenues?|sales)", re.I)
# a question that asks for a name, a list or a reason, not a figure ("which region had the biggest drop"); "how did
# revenue change from 2020 to 2021" asks for a figure
NOT_A_FIGURE = re.compile(r"^\s*(?:(?:for|at|in) [^,?]{1,40},\s*)?(?:which|who|whom|where|why|list|name|"
                          r"how (?!much\b|many\b)(?!(?:did|has|have|does|do)\b.{0,60}\b(?:change|grow|increase|"
                          r"decrease|decline)[sd]?\b)\w+)\b|\bwhat (?:are|were) the\b", re.I)
# a year the question asks about ("in 2024", "FY2022"), not an amount ("$2023 million", "2,023")
YEAR = re.compile(r"(?<![\d.,$])((?:19|20)\d\d)(?![\d,.]\d|\d)")
# an example of the answer's format, whose figures are not asked about ("write it like ['2006', '2007']")
EXAMPLE = re.compile(r"\[[^\]]*\]|(?<!\w)'[^'\n]*'(?!\w)|\"[^\"\n]*\"|“[^”\n]*”|"
                     r"\b(?:like|e\.g\.|such as|for example|format(?:ted)? as)\b[^.?]*", re.I)
APPENDIX = re.compile(r"\b(appendix|annex|schedule|exhibit|attachment)\s+([A-Z]|\d{1,3}|[IVX]{1,5})\b", re.I)
# "what is X and what is Y", "X? And Y?": parts that each ask their own question
_PART_SPLIT = re.compile(r"\s*(?:\?\s*|[;,]?\s+)(?:and|also|plus)\s+(?=(?:what|how|when|where|who|which|why|is|are|"
                         r"does|do|can|may)\b)|\?\s+(?=\S)", re.I)
# a sentence after the first is a part of its own only when it asks ("Who approves overtime?"); one that
# instructs ("Base your judgments on the balance sheet.", "If it is not a useful metric, say why.") is the
# first question's context, as analysts write them
_ASKS = re.compile(r"^(?:what|how|when|where|who|whom|whose|which|why|is|are|was|were|does|do|did|can|could|may|"
                   r"might|has|have|had|should|will|would)\b", re.I)


class QuestionKind(StrEnum):
    """What a question asks for, as far as the words tell (:func:`classify`)."""

    LOOKUP = "lookup"
    REFERENCE = "reference"
    DOCUMENT_TYPE = "document_type"
    SUMMARY = "summary"
    COMPARE = "compare"
    TABLE = "table"
    SHORT = "short"
    MULTI_PART = "multi_part"
    DRIVERS = "drivers"
    GEOGRAPHIES = "geographies"
    COMPUTED = "computed"
    FIGURE = "figure"
    PERIOD = "period"
    TOOLS = "tools"

    @classmethod
    def from_str(cls, value: str) -> QuestionKind:
        try:
            return cls(value)
        except ValueError as e:
            raise ValueError(f"unknown question kind {value!r}; one of {', '.join(k.value for k in cls)}") from e


def classify(question: str) -> list[QuestionKind]:
    """The kinds ``question`` may be, most specific first; always ends with ``LOOKUP``."""
    kinds: list[QuestionKind] = []
    refs = parse_refs(question)
    if refs.any or APPENDIX.search(question):
        kinds.append(QuestionKind.REFERENCE)
    if _DOC_TYPE.search(question):
        kinds.append(QuestionKind.DOCUMENT_TYPE)
    if SUMMARY.search(question) and not refs.any:
        kinds.append(QuestionKind.SUMMARY)
    if COMPARE.search(question):
        kinds.append(QuestionKind.COMPARE)
    if superlative(question) and re.search(r"\b(?:which|what|who|when)\b", question, re.I):
        kinds.append(QuestionKind.TABLE)
    head = re.split(r"[?.]\s", question, maxsplit=1)[0]
    if GEOGRAPHIES.search(head):
        kinds.append(QuestionKind.GEOGRAPHIES)
    if DRIVERS.search(head) and (formula_for(head) is not None or asked_item(head) is not None):
        kinds.append(QuestionKind.DRIVERS)
    figure = not NOT_A_FIGURE.search(question)
    item = asked_item(question) if figure else None
    over_item = item is not None and (GROWTH.search(question) or AVERAGE.search(question) or
                                      SHARE_OF_REVENUE.search(question))
    if figure and (formula_for(question) is not None or over_item):
        kinds.append(QuestionKind.COMPUTED)
        # "net income growth in Q1 2021 versus Q1 2020" compares two periods: that is the computation, not a
        # comparison of documents
        if len(set(YEAR.findall(EXAMPLE.sub(" ", question)))) >= 2 and not ALL_DOCS.search(question):
            kinds = [k for k in kinds if k is not QuestionKind.COMPARE]
    if item is not None:
        kinds.append(QuestionKind.FIGURE)
    if YEAR.search(EXAMPLE.sub(" ", question)):
        kinds.append(QuestionKind.PERIOD)
    if SHORT_DEFINITE.match(question):
        kinds.append(QuestionKind.SHORT)
    if len(split_parts(question)) > 1:
        kinds.append(QuestionKind.MULTI_PART)
    kinds.append(QuestionKind.LOOKUP)
    return kinds


def split_parts(question: str) -> list[str]:
    """The questions a multi-part question asks ("What is X and what is Y?" -> two), each ending in '?'."""
    parts = [p.strip(" ?,;") for p in _PART_SPLIT.split(question)]
    parts = [p for i, p in enumerate(parts)
             if len(terms(p)) >= 1 and len(p.split()) >= 3 and (i == 0 or _ASKS.match(p))]
    if len(parts) < 2:
        return [question]
    return [p[0].upper() + p[1:] + "?" for p in parts[:MAX_PARTS]]


@dataclass(frozen=True)
class Question:
    """A question parsed once: its ``text`` (whitespace folded), the asker's ``scopes``, the thread's ``history``,
    the retrieval ``mode``, ``k`` passages, ``show`` (an LLM answer's checked sentences as they are written), and
    the ``kinds`` it may be (:func:`classify`, less what a follow-up leaves to the look-up)."""

    text: str
    scopes: list[str]
    history: tuple[Turn, ...]
    mode: RetrievalMode
    k: int
    show: ShowText | None
    kinds: frozenset[QuestionKind]
