"""Printed page numbers are read off headers and footers only when many pages agree on one offset."""

from __future__ import annotations

from pipelines.components.printed_page_numbers import printed_page_labels
from pipelines.reading.layout import Line


def _page(number: int, *, header: str = "", footer: str = "", body: str = "Some body text of the page.") -> list[Line]:
    lines = [Line(page=number, text=body, x0=50, top=300, x1=500, bottom=312)]
    if header:
        lines.append(Line(page=number, text=header, x0=50, top=40, x1=500, bottom=50))
    if footer:
        lines.append(Line(page=number, text=footer, x0=280, top=800, x1=300, bottom=810))
    return lines


def test_footers_numbered_after_an_unnumbered_cover_and_contents():
    pages = [_page(1), _page(2)] + [_page(n, footer=str(n - 2)) for n in range(3, 9)]
    assert printed_page_labels(pages) == {n: str(n - 2) for n in range(3, 9)}


def test_numbers_in_running_headers_and_page_x_of_y_forms():
    pages = [_page(1)] + [_page(n, header=f"Chapter 3: Important information {n + 27}") for n in range(2, 6)]
    assert printed_page_labels(pages)[2] == "29"
    pages = [_page(1)] + [_page(n, footer=f"Page {n - 1} of 4") for n in range(2, 6)]
    assert printed_page_labels(pages) == {2: "1", 3: "2", 4: "3", 5: "4"}


def test_nothing_when_printed_and_physical_numbers_agree():
    assert printed_page_labels([_page(n, footer=str(n)) for n in range(1, 8)]) == {}


def test_a_year_or_amount_in_every_footer_is_not_a_page_number():
    assert printed_page_labels([_page(n, footer="Annual report 2023") for n in range(1, 30)]) == {}
    # a number that does not move with the page never agrees on an offset
    assert printed_page_labels([_page(n, header="Section 7") for n in range(1, 12)]) == {}


def test_too_few_agreeing_pages_give_nothing():
    pages = [_page(1), _page(2), _page(3, footer="1"), _page(4, footer="2"), _page(5), _page(6)]
    assert printed_page_labels(pages) == {}
