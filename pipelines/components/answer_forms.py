"""The form an answer takes, when the question's words say so: "how many" is answered by a count, "what
percentage" by a share, "when" by a date, "what is the email" by an address.

The extractive answerer prefers a sentence in that form over one that only restates the question's words: asked
"What percentage of respondents voted?", "Respondents were asked whether they voted" matches every word and
answers nothing; "18% said they voted" answers. A figure the question itself names ("in 2018") is not an answer.

:func:`asked_form` reads the question once; :meth:`AnswerForm.holds` tests a candidate sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
_WORD_NUMBERS = re.compile(r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
                           r"forty|fifty|hundred|thousand|million|billion|dozen|half|none)\b", re.I)
_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
          r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")

# (what the question says, what an answer in that form holds); the first the question matches applies
_FORMS: tuple[tuple[str, re.Pattern[str], re.Pattern[str]], ...] = (
    ("email", re.compile(r"\be-?mail\b", re.I), re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")),
    ("phone", re.compile(r"\b(?:phone|telephone|hotline|number (?:shall|should|do|can) i call|call)\b", re.I),
     re.compile(r"\d{3}[-. )]{1,2}\d{3}[-. ]\d{3,4}|\+\d[\d -]{7,}")),
    ("web address", re.compile(r"\b(?:website|web ?site|url|web address|web page)\b", re.I),
     re.compile(r"https?://\S|\bwww\.\S|\b[\w-]+\.(?:com|org|net|gov|edu|io)\b", re.I)),
    ("share", re.compile(r"\b(?:percent(?:age)?s?|per cent|proportion|share of)\b|%", re.I),
     re.compile(r"\d\s?%|\bper ?cent\b", re.I)),
    ("date", re.compile(r"^\s*when\b|\b(?:what|which|in what) (?:year|date|month|day)\b|\bwhen (?:did|was|were|is|"
                        r"does|do|will)\b", re.I),
     re.compile(rf"\b(?:1[5-9]|20)\d\d\b|\b{_MONTH}\.? \d{{1,2}}\b|\b\d{{1,2}} {_MONTH}\b|"
                rf"\b\d{{1,2}}/\d{{1,2}}/\d", re.I)),
    ("number", re.compile(r"\bhow (?:many|much|long|old|often|far|big|large|tall|high|fast)\b|"
                          r"\bwhat (?:is|was|are|were) the (?:number|total|amount|count|size|value|cost|price)\b|"
                          r"\b(?:number|amount) of\b", re.I), _NUMBER),
)


@dataclass(frozen=True)
class AnswerForm:
    """An answer's form (``name``, e.g. "share") and the figures the question itself names (``given``), which
    are not an answer."""

    name: str
    pattern: re.Pattern[str]
    given: frozenset[str]

    def holds(self, text: str) -> bool:
        """Whether ``text`` holds an answer in this form (a count, a share...) that the question did not give."""
        if self.name == "number":
            return any(n.replace(",", "") not in self.given for n in _NUMBER.findall(text)) or \
                bool(_WORD_NUMBERS.search(text))
        return any(m.group(0) not in self.given for m in self.pattern.finditer(text))


def asked_form(question: str) -> AnswerForm | None:
    """The form ``question``'s answer takes, or None when its words do not say."""
    for name, asked, pattern in _FORMS:
        if asked.search(question):
            given = {n.replace(",", "") for n in _NUMBER.findall(question)}
            given |= {m.group(0) for m in pattern.finditer(question)}
            return AnswerForm(name, pattern, frozenset(given))
    return None
