"""clean_text: what the parser and OCR hand on is valid Unicode without control characters."""

from __future__ import annotations

import pytest

from pipelines.reading.clean_text import clean_text, is_dropped_char, join_surrogates


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Plain text, 5 % more.", "Plain text, 5 % more."),
        # pdfium's two UTF-16 halves of a mathematical bold N become the one character
        ("= \ud835\udc0d\ud835\udc2e\ud835\udc26 of", "= 𝐍𝐮𝐦 of"),
        ("a\ud835b", "ab"),  # a lone high half
        ("a\udc0db", "ab"),  # a lone low half
        ("\udc0d\ud835x", "x"),  # halves in the wrong order are no pair
        ("Revenue\x04 grew\x00 by\x1f 2.4%\x7f", "Revenue grew by 2.4%"),
        ("bullet\x95 item\x85", "bullet item"),  # C1 controls
        ("keep\ttabs\nand lines", "keep\ttabs\nand lines"),
        ("windows\r\nline\rends", "windows\nline\nends"),
        ("non\ufffe-char\uffff\ufdd0", "non-char"),
        ("Zürich – “quoted” 𝐍", "Zürich – “quoted” 𝐍"),
    ],
)
def test_clean_text(raw: str, expected: str) -> None:
    out = clean_text(raw)
    assert out == expected
    out.encode("utf-8")  # valid Unicode: a lone surrogate would raise here


def test_join_surrogates() -> None:
    assert join_surrogates("\ud835", "\udc0d") == "𝐍"
    assert join_surrogates("\ud835", "x") == ""
    assert join_surrogates("\udc0d", "\ud835") == ""


@pytest.mark.parametrize(("ch", "dropped"), [("\x04", True), ("\x9f", True), ("\ud835", True), ("\n", False),
                                             ("\t", False), ("\r", False), ("a", False), ("𝐍", False)])
def test_is_dropped_char(ch: str, dropped: bool) -> None:
    assert is_dropped_char(ch) is dropped
