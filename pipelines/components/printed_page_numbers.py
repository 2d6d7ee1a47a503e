"""Printed page numbers: the numbers a PDF prints in its page headers or footers, when it declares no page labels.

A report whose cover and contents are unnumbered prints "1" on its fourth physical page; a reader asking about
"page 28" means the page that shows 28. PDFs that declare /PageLabels say so themselves (the parser reads them);
for the rest, the number is read off the top and bottom lines of each page, and kept only when many pages agree on
one offset between the printed and the physical number, so a year or an amount in a footer is outvoted.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from pipelines.reading.layout import Line

# A line that is only a page number, in the forms footers and headers use: "28", "- 28 -", "Page 28", "28 of 160",
# "p. 28", or a running title with the number at one end: "Annual Report 2023 | 28", "28 Chapter 3: Safety".
_BARE = re.compile(r"^[-–—\s]*(?:page|p\.|pg\.?)?\s*(\d{1,4})\s*(?:(?:of|/)\s*\d{1,4})?[-–—\s]*$", re.I)
_AT_END = re.compile(r"^\D.{0,78}?\s[|·•–—-]?\s*(\d{1,4})$")
_AT_START = re.compile(r"^(\d{1,4})\s*[|·•–—-]?\s+\D.{0,78}$")
_EDGE_LINES = 2  # lines looked at from the top and from the bottom of each page
MIN_AGREEING_PAGES = 3
MIN_AGREEING_SHARE = 0.4  # of the pages that print some candidate number


def _numbers(line: Line) -> set[int]:
    text = " ".join(line.text.split())
    found: set[int] = set()
    for rx in (_BARE, _AT_END, _AT_START):
        m = rx.match(text)
        if m:
            found.add(int(m.group(1)))
    return found


def printed_page_labels(pages: Sequence[Sequence[Line]]) -> dict[int, str]:
    """``{physical page: printed number}`` for a document whose pages print their numbers at a constant offset from
    the physical count (the common case: unnumbered cover and contents), else ``{}``. ``pages[i]`` holds the lines
    of physical page ``i + 1`` (any order). An offset of zero gives nothing: the physical number is the label."""
    votes: Counter[int] = Counter()
    voting_pages = 0
    for number, lines in enumerate(pages, 1):
        if not lines:
            continue
        ordered = sorted(lines, key=lambda ln: ln.top)
        edge = ordered[:_EDGE_LINES] + ordered[-_EDGE_LINES:]
        candidates = set().union(*(_numbers(ln) for ln in edge))
        offsets = {number - printed for printed in candidates}
        if offsets:
            voting_pages += 1
            votes.update(offsets)
    if not votes:
        return {}
    offset, agreeing = votes.most_common(1)[0]
    if offset == 0 or agreeing < MIN_AGREEING_PAGES or agreeing < MIN_AGREEING_SHARE * voting_pages:
        return {}
    return {number: str(number - offset) for number in range(max(1, offset + 1), len(pages) + 1)}
