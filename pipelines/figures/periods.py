"""The period a question asks about, as analysts write it: "FY2022", "FY 22", "fiscal 2022", "fiscal year 2017",
"in 2017", "as of December 31, 2022", "between FY2018 and FY2019". A question that names none asks for the latest."""

from __future__ import annotations

import re
from dataclasses import dataclass

_YEAR = r"(?:19|20)\d\d"
_FY_SHORT = re.compile(r"\bfy\s*'?(\d\d)\b", re.I)
_YEARS = re.compile(rf"(?<![\d.,$])({_YEAR})(?![\d,]|\.\d)")
_QUARTER = re.compile(r"\bq([1-4])\b|\b(first|second|third|fourth)\s+(?:fiscal\s+)?quarter\b", re.I)
_ORDINAL = {"first": 1, "second": 2, "third": 3, "fourth": 4}
# a question about a quarter's span, whichever one ("for the quarter ended January 28, 2023", "13 weeks ended")
_QUARTERLY = re.compile(r"\bquarter(?:ly)?\b|\b(?:three|3|thirteen|13)[- ](?:months|weeks)\b", re.I)


@dataclass(frozen=True)
class AskedPeriod:
    """The fiscal ``years`` a question names, in the order it names them (none: the latest), a ``quarter``, and
    whether it asks about a quarter's span at all (``quarterly``: "the quarter ended January 28, 2023")."""

    years: tuple[int, ...] = ()
    quarter: int | None = None
    quarterly: bool = False

    @property
    def year(self) -> int | None:
        """The year a look-up is about: the latest one named (a filing reports its year and the ones before)."""
        return max(self.years) if self.years else None


def asked_period(question: str) -> AskedPeriod:
    """The years and quarter ``question`` names; "FY22" is 2022."""
    text = _FY_SHORT.sub(lambda m: f" 20{m.group(1)} ", question)
    years: list[int] = []
    for m in _YEARS.finditer(text):
        y = int(m.group(1))
        if y not in years:
            years.append(y)
    q = _QUARTER.search(question)
    quarter = None
    if q:
        quarter = int(q.group(1)) if q.group(1) else _ORDINAL[q.group(2).lower()]
    return AskedPeriod(years=tuple(years), quarter=quarter,
                       quarterly=quarter is not None or _QUARTERLY.search(question) is not None)


def years_in(text: str) -> list[int]:
    """The years printed in a column-header line, left to right ("December 2, 2022 December 3, 2021" -> [2022,
    2021]; "2017 2016 2015")."""
    return [int(m.group(1)) for m in _YEARS.finditer(text)]
