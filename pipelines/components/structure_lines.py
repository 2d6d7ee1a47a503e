"""What one line of a page is, for :class:`pipelines.components.structure.StructureDetector`: a running header,
footer or page number (:func:`strip_running_lines`), a heading's numbering and level (:func:`heading_numbering`),
a caption's label, a list item, a table row or the wrapped rest of the row above, and how two lines of a paragraph
join.
"""

from __future__ import annotations

import re
from collections import Counter

from pipelines.reading.layout import Line

_PAGE_NUMBER = re.compile(
    r"^(?:(?:page|seite|p\.|pg\.?)\s*)?[-\u2013\u2014(\[]?\s*(?:\d{1,4}|[ivxlc]{1,7})\s*[-\u2013\u2014)\]]?"
    r"(?:\s*(?:of|/|von)\s*\d{1,4})?$",
    re.IGNORECASE,
)
CAPTION = re.compile(
    r"^(Table|Tab\.|Tabelle|Figure|Fig\.|Abbildung|Abb\.|Exhibit|Chart)\s+"
    r"([A-Z]?\d+(?:[.\-]\d+)*)\s*[:.\u2013\u2014-]?\s*",
    re.IGNORECASE,
)
BULLET_CHARS = tuple("\u2022\u25cf\u25aa\u25e6\u2023\u2043\u00b7*")
ENUMERATED = re.compile(r"^(\(?[a-z0-9]{1,2}\)|[\-\u2013\u2014])")
_NUM_HEADING = re.compile(r"^(\d{1,3}(?:\.\d{1,3}){0,5})\.?\s+(?=[^\W\d_]|[\"\u201c(])")
ARTICLE = re.compile(r"^(?:ARTICLE|Article|ART\.)\s+([IVXLC]{1,7}|\d{1,3})\b\.?\s*")
SECTION = re.compile(r"^(?:SECTION|Section|Sec\.|\u00a7)\s*(\d{1,3}(?:\.\d{1,3}){0,4})\b\.?\s*")
_CHAPTER = re.compile(r"^(?:CHAPTER|Chapter|PART|Part|Kapitel)\s+([IVXLC]{1,7}|\d{1,3})\b\.?\s*")
_ROMAN = re.compile(r"^([IVX]{1,6})\.\s+(?=[A-Z])")
BULLET = re.compile(
    r"^(?:[\u2022\u25cf\u25aa\u25e6\u2023\u2043\u00b7\u2013\u2014*\-]|\(?[a-z]\)|\(\d{1,2}\)|\d{1,2}\))\s+"
)
SENTENCE_END = re.compile(r"[.!?:;\u201d\"')]$")
_FIGURE = re.compile(r"[$€£(\-\u2014\u2013]*\s*[\d.,]+\s*%?\)?|[\u2014\u2013\-]")


_LABEL_KINDS = {"tab": "Table", "fig": "Figure", "abb": "Figure", "exh": "Exhibit", "cha": "Chart"}


def caption_label(word: str, number: str) -> str:
    """``"Table 3"``, ``"Figure 1.2"`` (also for "Tab.", "Abbildung"...): one spelling for lookups."""
    return f"{_LABEL_KINDS.get(word[:3].lower(), word.rstrip('.').capitalize())} {number}"


def _fold(text: str) -> str:
    return re.sub(r"\d+", "#", re.sub(r"\s+", " ", text.strip().lower()))


def norm_title(text: str) -> str:
    return re.sub(r"[^0-9a-z\u00c0-\u024f]+", "", text.lower())


def heading_numbering(text: str) -> tuple[str, int]:
    """``("4.2", 2)`` for "4.2 Parental leave", ``("IV", 1)`` for "ARTICLE IV ...", ``("", 0)`` when none."""
    for rx in (ARTICLE, _CHAPTER):
        m = rx.match(text)
        if m:
            return m.group(1), 1
    m = SECTION.match(text)
    if m:
        return m.group(1), m.group(1).count(".") + 1
    m = _NUM_HEADING.match(text)
    if m:
        num = m.group(1)
        if "." not in num and int(num) > 200:  # a year or an amount, not a section number
            return "", 0
        return num, num.count(".") + 1
    m = _ROMAN.match(text)
    if m:
        return m.group(1), 1
    return "", 0


def strip_running_lines(pages: list[list[Line]], heights: list[float]) -> list[list[Line]]:
    """Drop running headers/footers and page numbers (lines in the margin bands)."""
    band = 0.1
    counts: Counter[str] = Counter()
    for lines, h in zip(pages, heights, strict=True):
        seen = set()
        for ln in lines:
            if ln.ocr_confidence is not None:
                continue
            if ln.top < h * band or ln.bottom > h * (1 - band):
                seen.add(_fold(ln.text))
        counts.update(seen)
    n = len(pages)
    threshold = max(2, int(0.3 * n + 0.999)) if n >= 3 else n + 1
    out = []
    for lines, h in zip(pages, heights, strict=True):
        kept = []
        text_lines = [ln for ln in lines if ln.ocr_confidence is None]
        lowest = max(text_lines, key=lambda ln: ln.bottom) if text_lines else None
        highest = min(text_lines, key=lambda ln: ln.top) if text_lines else None
        for ln in lines:
            if (ln is lowest or ln is highest) and len(text_lines) > 1 and _PAGE_NUMBER.match(ln.text.strip()):
                continue  # a lone page number above or below everything else, wherever the margins are
            in_band = ln.top < h * band or ln.bottom > h * (1 - band)
            if (
                in_band
                and ln.ocr_confidence is None
                and (counts[_fold(ln.text)] >= threshold or _PAGE_NUMBER.match(ln.text.strip()))
            ):
                continue
            kept.append(ln)
        out.append(kept)
    return out


def join_lines(prev: str, nxt: str, hyphen_join: bool) -> str:
    if not prev:
        return nxt
    if hyphen_join:
        return prev + nxt
    if prev.endswith("-") and len(prev) > 1 and prev[-2].isalpha() and nxt[:1].islower():
        return prev[:-1] + nxt
    return prev + " " + nxt


def is_table_row(ln: Line) -> bool:
    return len(ln.cells) >= 2 and all(len(c) <= 60 for c in ln.cells) and len(ln.text) <= 240


def continues_row(row: dict[int, str], line: list[tuple[int, str]], full: int, *, header: bool) -> bool:
    """Whether a table line (cells by column) is the wrapped rest of the row above, not a row of its own.

    A line holding as many cells as a typical row, or starting a new label (a capitalised first cell in
    the first column), is a row: "Maturities of short-term investments | 769,228" under "Purchases of
    short-term investments | (2,285,222)" stays a row of its own. A line in lower case under a label
    alone ("activities | 1,234" under "Net cash provided by operating") or a short tail of text cells
    continues the row; so do lines under the header that leave the label column empty ("| 2019 | 2018"
    under "| Year ended | Year ended"). A line of figures under filled cells is a total, never a wrap.
    """
    first_col, first = min(line)
    if set(row) == {0} and first_col == 0 and first[:1].islower():
        return True
    if header and first_col > 0:
        return True
    if len(line) >= full or (first_col == 0 and not first[:1].islower()):
        return False
    return not any(col in row and _FIGURE.fullmatch(t) for col, t in line)
