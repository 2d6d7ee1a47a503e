"""QuestionAnalyzer: what retrieval should look for, separated from how the asker wants the answer written.

Real questions carry words that are about the answer, not about the documents: "Please write the answer in
float format", "round to three decimal places", "e.g., ["3","2"]". Searched for, they pull in passages
about formats and rounding. Out of a question come:

* ``query``: the question without trailing sentences that only instruct about the answer's form, and
  without inline examples of the expected form ("e.g., [...]", "for example [...]"); the first sentence is
  always kept, so "List the senses in ascending order of bandwidth" stays whole. Both retrievers search for
  it. (Dropping stop words and words like "chart" or "report" from the BM25 query measured worse: BM25's
  IDF already discounts common words, and "chart" finds a chart's caption.)
* ``words``: its content words, lower-cased, stop words and generic question words ("chart", "report")
  dropped;
* ``anchors``: the specific terms a passage that answers must contain, as they are written: years and
  other numbers, capitalised names that do not open a sentence, quoted phrases. An answer that none of the
  scope's passages can back is what these catch ("in 2024" asked of a report about 2018);
* ``instructions``: what the asker said about the answer rather than the documents, as analysts write it (a
  role, the statements to read from, the unit, the rounding: :mod:`pipelines.components.instructions`), taken
  out of ``query`` and kept for the answer kinds.

Two kinds of words are not searched for, though the question needs them: the words ``names`` that routing
already used to pick the company's filings ("Netflix": in its own filing the name is on every page, and the
passages it matches best word for word are the auditor's report and the certifications; ``keywords`` is the query
without them, for BM25), and period words ("fiscal", "FY2022" is searched for as 2022, "year end"): a filing has
a section titled "Fiscal 2022" and every page is about its fiscal year. Neither counts in term support.
"""

from __future__ import annotations

import re
from typing import Any

from haystack import component, default_from_dict, default_to_dict

from pipelines.components._text import GENERIC, STOPWORDS, question_sentences
from pipelines.components.instructions import Instructions, split_instructions

_FORMAT_CUE = re.compile(
    r"\b(?:format(?:ted)?|in (?:a |the )?list|as a list|list format|decimal(?: place)?s?|round(?:ed)?|nearest|"
    r"yyyy|integer|int|float|percentage terms?|directly answer|(?:your|the) answer|answer (?:with|in|as)|"
    r"write (?:down )?(?:the|your)|save your|return (?:me )?(?:a|an|the)|represent|enumerate|in (?:ascending|"
    r"descending|alphabetical)|(?:ascending|descending|alphabetical) order|in english)\b",
    re.I,
)
# "e.g., ["3","2"]", "for example [3000, 4000]", "such as 100, 200 or 300...."
_EXAMPLE = re.compile(
    r"[,;(]?\s*(?:e\.g\.|for example|such as|like)\s*[,:]?\s*(?:\[[^\]]*\]|'[^']*'|\"[^\"]*\"|"
    r"\d[\d,.\s]*(?:or\s+\d[\d,.]*)?)[.)]*",
    re.I,
)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’&\-.]*[A-Za-z0-9%]|[A-Za-z0-9]")
_QUOTED = re.compile(r"[\"“]([^\"”]{3,80})[\"”]")
_NUMBER = re.compile(r"^\d[\d,.]*%?$")
_NUMBER_TOKEN = re.compile(r"\b\d{1,3}(?:,\d{3})+(?:\.\d+)?\b|\b\d+(?:\.\d+)?\b")
_FISCAL = re.compile(r"\b(?:FY|Q[1-4]|H[12])\s?'?(\d{2,4})\b", re.I)
_DATE_FORMAT = re.compile(r"\b[YMD]{2,4}(?:[-/][YMD]{2,4})+\b")
# Question and instruction words that say nothing about what the documents hold.
_QUESTION_WORDS = frozenset(
    """according based regarding mentioned shown listed presented stated given described depicted named provided
    chart charts slide slides image images picture pictures graph graphs guidebook brochure manual author authors
    figure figures table tables diagram report document paper page pages this these those above below first second
    third last following answer answers exact total number numbers percent percentage ratio value values
    amount""".split()  # noqa: SIM905
    # what a document is, and how a question asks about it: a PDF's text rarely names itself or its own parts
    + """presentation article deck handbook booklet leaflet entire whole include included includes appear appears
    appeared contain contains illustrate illustrated enumerate list write integer format name names date title
    one two three four five six seven eight nine ten fourth fifth sixth seventh eighth ninth tenth""".split()  # noqa: SIM905
    # how it looks: the text layer does not describe colours, logos or drawings, so their absence is no evidence
    + """colour colours color colors coloured colored red green blue yellow grey gray black white orange purple
    pink brown logo logos photo photos photograph photographs icon icons cartoon cartoons drawn drawing shape
    shapes bar bars pie plot plots""".split()  # noqa: SIM905
)


def split_question(question: str) -> tuple[str, Instructions]:
    """The question without inline examples of the answer's form, trailing format instructions and an analyst's
    instructions (role, statements to use, unit, rounding), and what those instructions asked."""
    text = _EXAMPLE.sub("", " ".join(question.split())).strip()
    out, said = split_instructions(text, format_cue=_FORMAT_CUE)
    return (out.strip() or " ".join(question.split())), said


def strip_instructions(question: str) -> str:
    """The question without inline examples of the answer's form and without instructions (:func:`split_question`)."""
    return split_question(question)[0]


# "FY2022", "FY 22", "fiscal 2022", "fiscal year 2022" are the year; "year end FY2018" too
_PERIOD_YEAR = re.compile(r"\b(?:(?:fiscal|financial)\s+(?:year\s+)?|fy\s*'?)((?:19|20)\d\d)\b", re.I)
_FY_SHORT = re.compile(r"\bfy\s*'?(\d\d)\b", re.I)
_YEAR_END = re.compile(r"\b(?:fiscal\s+)?year[- ]end(?:ed|ing)?\s+(?=(?:19|20)\d\d\b)", re.I)


def plain_periods(text: str) -> str:
    """``text`` with its fiscal periods said as years: "at the end of fiscal 2022" -> "at the end of 2022",
    "year end FY2018" -> "2018". A filing calls its every page's year "fiscal"; the year is what tells them apart."""
    text = _PERIOD_YEAR.sub(r"\1", text)
    text = _FY_SHORT.sub(r"20\1", text)
    return " ".join(_YEAR_END.sub("", text).split())


def without_names(text: str, names: list[str], *, instead: str = "") -> str:
    """``text`` with the words ``names`` (whole words, a run of them as one: "Halvorsen & Pike"; possessives with
    them) replaced by ``instead``: "What was Netflix's net income?" without ["Netflix"] is "What was net income?",
    or "What was the company's net income?" with ``instead="the company"``."""
    if not names:
        return text
    one = "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True))
    run = rf"(?<![\w&])(?:{one})(?:[\s&.\-]+(?:{one}))*(['’]s?)?(?![\w&])"
    text = re.sub(run, lambda m: f" {instead}{m.group(1) or ''} " if instead else " ", text)
    text = re.sub(r"\s+([?.,;:!)])", r"\1", " ".join(text.split()))
    return text.strip()


def content_words(text: str) -> list[str]:
    """The words of ``text`` that say what it is about: stop words, question words and generic document words
    dropped, first occurrence only, lower-cased, place references ("page 12") left out."""
    out: list[str] = []
    for tok in _WORD.findall(_PLACE_REF.sub(" ", text)):
        low = re.sub(r"['’]s$", "", tok.lower()).strip(".'’")
        if (len(low) < 3 or low in STOPWORDS or low in GENERIC or low in _QUESTION_WORDS or low[:1].isdigit()
                or low in PERIOD_WORDS or _PERIOD_TOKEN.match(low)):
            continue
        if low not in out:
            out.append(low)
    return out


# Words that say which period, not what about it: a filing calls every page's year "fiscal", and titles a section
# "Fiscal 2022"; a question's "fiscal", "year end" or "quarter" tells no passage from another. (Kept out of
# _text.py, whose every definition but a listed few decides the eval index's key.)
PERIOD_WORDS = frozenset(
    """fiscal fy year years yearly year-end yearend annual annually quarter quarters quarterly ended ending ytd
    period periods""".split()  # noqa: SIM905
)
_PERIOD_TOKEN = re.compile(r"^(?:fy|q[1-4]|h[12])'?\d+$")
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "es", "ed", "s")


def word_forms(word: str) -> list[str]:
    """``word`` and its likely inflections (plural, past, -ing, -ation), for asking whether a PDF mentions a
    word in any form: "ending" -> ending, end, ends, ended...; "sampled" -> sampled, sampl(e), samples...
    A light suffix stripper, not a stemmer: each form is a whole word a BM25 index can look up."""
    w = word.lower()
    if not w.isalpha():
        return [word]  # numbers, codes and names with digits are looked up as they are
    stem = w
    for suffix in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            stem = w[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
            break
    forms = [w, stem, stem + "s", stem + "ation"]
    if stem.endswith("y"):
        forms += [stem[:-1] + "ies", stem[:-1] + "ied", stem + "ing", stem + "ed"]
    elif stem.endswith("e"):
        forms += [stem + "d", stem[:-1] + "ing", stem[:-1] + "ation"]
    else:
        forms += [stem + "e", stem + "es", stem + "ed", stem + "ing"]
    return list(dict.fromkeys([w] + [f for f in forms if len(f) >= 3]))


# "page 12", "figure 3", "table 2", "section 4.2", "slide 7": where to look, not what the passage says.
_PLACE_REF = re.compile(
    r"\b(?:pages?|pp?\.|figures?|fig\.|tables?|sections?|slides?|chapters?|appendix|unit|step|part|q)\s*"
    r"[A-Za-z]?\d+(?:\.\d+)*[a-z]?\b",
    re.I,
)


def anchors(text: str) -> list[str]:
    """Specific terms an answering passage must contain: numbers, mid-sentence capitalised names, quotes."""
    found: list[str] = [m.group(1).strip() for m in _QUOTED.finditer(text)]
    text = _DATE_FORMAT.sub(" ", _FISCAL.sub(r" \1 ", _PLACE_REF.sub(" ", text)))
    for m in _NUMBER_TOKEN.finditer(text):
        if len(m.group(0)) > 1:  # "3" or "2" are too common to tell anything
            found.append(m.group(0).replace(",", ""))
    shouting = sum(w.isupper() for w in _WORD.findall(text)) > len(_WORD.findall(text)) / 2
    for sentence in question_sentences(text):
        words = _WORD.findall(sentence)
        for i, w in enumerate(words):
            bare = re.sub(r"['’]s$", "", w.strip(".,'’"))
            low = bare.lower()
            if bare[:1].isdigit() or i == 0 or shouting or len(bare) < 3:
                continue
            if bare[:1].isupper() and low not in STOPWORDS and low not in _QUESTION_WORDS and low not in GENERIC:
                found.append(bare)
    return list(dict.fromkeys(found))


@component
class QuestionAnalyzer:
    """Question in; ``query`` (for retrieval and quote scoring), ``anchors`` (specific terms) and ``words``
    (content words), the last two for the refusal check, and ``instructions`` (:class:`Instructions`), out.

    Usage::

        analyzer = QuestionAnalyzer()
        out = analyzer.run(question="Assume you are an analyst. What were Netflix's FY2017 total current "
                                    "liabilities? Answer in USD millions.", names=["Netflix"])
        out["query"]  # "What were the company's 2017 total current liabilities?" (what the embedding reads)
        out["keywords"]  # "What were 2017 total current liabilities?"
        out["instructions"].unit  # "USD millions"

    :param question: the question as asked.
    :param names: words of it that name what routing picked the files by (the company): in ``query`` (what the
        embedding reads: "Halvorsen & Pike was founded in..." is what a question about its founding is near),
        not in ``keywords`` (what BM25 searches for), ``anchors`` or ``words``.
    :returns: ``query``, ``keywords``, ``anchors``, ``words`` and ``instructions``.
    """

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QuestionAnalyzer:
        return default_from_dict(cls, data)

    @component.output_types(query=str, keywords=str, anchors=list[str], words=list[str], instructions=Instructions)
    def run(self, question: str, names: list[str] | None = None) -> dict[str, Any]:
        """Split the question from what the asker said about the answer, and find its terms.

        :param question: the question as asked.
        :param names: its words that name the company routing picked the files by (see the class docstring).
        :returns: ``query`` (what the embedding reads), ``keywords`` (what BM25 searches for), ``anchors`` and
            ``words`` (for the refusal check), and ``instructions``.
        """
        query, said = split_question(question)
        query = plain_periods(query)
        keywords = without_names(query, list(names or [])) or query
        query = without_names(query, list(names or []), instead="the company")
        return {"query": query, "keywords": keywords, "anchors": anchors(keywords), "words": content_words(keywords),
                "instructions": said}
