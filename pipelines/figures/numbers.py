"""Printed figures as numbers and back: "$ 27,165" is 27165, "(1,084)" is -1084, "—" is zero, "12.5%" is 12.5."""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

# one printed figure: an optional sign or opening parenthesis, digits with thousands commas, decimals, a closing
# parenthesis, a percent sign; or a dash standing for nil
FIGURE = re.compile(r"^\(?-?\$?\(?\d[\d,]*(?:\.\d+)?\)?%?\)?$|^[—–-]$")
_DASHES = frozenset("—–-")


def is_figure(token: str) -> bool:
    """Whether ``token`` is one printed figure (a dash counts: statements print nil as "—")."""
    return bool(FIGURE.match(token.strip()))


def parse_figure(token: str) -> Decimal | None:
    """The value of a printed figure: parentheses or a minus make it negative, a dash is zero; None if it is none."""
    t = token.replace("$", "").strip()
    if t in _DASHES:
        return Decimal(0)
    negative = t.startswith("(") or t.endswith(")") or t.startswith("-")
    digits = t.strip("()%-").replace(",", "")
    if not digits or not digits[0].isdigit():
        return None
    try:
        value = Decimal(digits)
    except InvalidOperation:
        return None
    return -value if negative else value


def decimals_of(token: str) -> int:
    """How many decimals a printed figure shows ("10.13" -> 2, "27,165" -> 0)."""
    t = token.strip("()%$ ")
    return len(t.split(".", 1)[1]) if "." in t else 0


def rounded(value: Decimal, places: int) -> Decimal:
    """``value`` rounded half up to ``places`` decimals."""
    return value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def grouped(value: Decimal, places: int = 0) -> str:
    """``value`` printed with thousands commas and ``places`` decimals, a minus sign for a negative one."""
    return f"{rounded(value, places):,.{places}f}"
