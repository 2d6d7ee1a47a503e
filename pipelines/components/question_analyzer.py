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
  scope's passages can back is what these catch ("in 2024" asked of a report about 2018).
"""

from __future__ import annotations

import re
from typing import Any

from haystack import component, default_from_dict, default_to_dict

from pipelines.components._text import GENERIC, STOPWORDS, question_sentences

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


def strip_instructions(question: str) -> str:
    """The question without inline examples of the answer's form and without trailing format instructions."""
    text = _EXAMPLE.sub("", " ".join(question.split())).strip()
    sentences = question_sentences(text)
    kept = sentences[:1] + [s for s in sentences[1:] if not _FORMAT_CUE.search(s)]
    out = " ".join(kept).strip()
    return out or " ".join(question.split())


def content_words(text: str) -> list[str]:
    """The words of ``text`` that say what it is about: stop words, question words and generic document words
    dropped, first occurrence only, lower-cased, place references ("page 12") left out."""
    out: list[str] = []
    for tok in _WORD.findall(_PLACE_REF.sub(" ", text)):
        low = re.sub(r"['’]s$", "", tok.lower()).strip(".'’")
        if len(low) < 3 or low in STOPWORDS or low in GENERIC or low in _QUESTION_WORDS or low[:1].isdigit():
            continue
        if low not in out:
            out.append(low)
    return out


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
    (content words), the last two for the refusal check, out."""

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QuestionAnalyzer:
        return default_from_dict(cls, data)

    @component.output_types(query=str, anchors=list[str], words=list[str])
    def run(self, question: str) -> dict[str, Any]:
        query = strip_instructions(question)
        return {"query": query, "anchors": anchors(query), "words": content_words(query)}
