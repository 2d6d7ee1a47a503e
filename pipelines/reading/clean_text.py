"""Make extracted text valid, printable Unicode before anything else (tokenizer, store, quotes) sees it.

pdfium reports characters outside the Basic Multilingual Plane (mathematical bold letters such as
"𝐍") as two UTF-16 halves, and fonts without a usable ToUnicode map come out as control characters
("\\x04"). Surrogate pairs are joined into one character; lone surrogates, control characters (C0
and C1, except newline and tab) and Unicode non-characters are dropped; carriage returns become
newlines.
"""

from __future__ import annotations

import re

# C0 controls except \t and \n, DEL and C1 controls, surrogates, and the non-characters of the BMP
_DROP = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def is_dropped_char(ch: str) -> bool:
    """True for a character :func:`clean_text` removes (one code point; ``\\r`` counts as kept)."""
    return ch != "\r" and _DROP.match(ch) is not None


def join_surrogates(high: str, low: str) -> str:
    """The character a UTF-16 surrogate pair stands for ("\\ud835", "\\udc0d" -> "𝐍"), or "" when not a pair."""
    if "\ud800" <= high <= "\udbff" and "\udc00" <= low <= "\udfff":
        return chr(0x10000 + ((ord(high) - 0xD800) << 10) + (ord(low) - 0xDC00))
    return ""


def clean_text(text: str) -> str:
    """``text`` as valid Unicode without control characters (newlines and tabs kept, ``\\r\\n`` -> ``\\n``)."""
    if text.isascii() and text.isprintable():
        return text
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if _SURROGATE.search(text):
        # a valid pair decodes to its character; lone halves survive as surrogates and are dropped below
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _DROP.sub("", text)
