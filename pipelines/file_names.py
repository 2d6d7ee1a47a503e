"""What a file name is, for deciding whether two uploads share one: the one place this rule lives.

Names come from chat users. Before they are stored they are NFKC-normalised, control and format characters
(zero-width spaces and joiners, bidi overrides, soft hyphens) dropped and whitespace collapsed
(:func:`clean_name`), so ``handbook\\u200b.pdf`` *is* ``handbook.pdf``. Two names are the same for the
"someone else's file of that name" rule when their :func:`name_key` is: case folded and every character that
Unicode lists as confusable with a Latin letter or digit (a Cyrillic ``о``, a Greek ``Α``) mapped to it, so a
look-alike ``hаndbook.pdf`` is indexed beside HR's file as ``hаndbook (2).pdf``, never as a second
``handbook.pdf``.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from confusable_homoglyphs import confusables

_DROPPED_CATEGORIES = ("Cc", "Cf", "Co", "Cs", "Cn")
_SPACES = re.compile(r"\s+")
MAX_NAME_CHARS = 200
FALLBACK_NAME = "document.pdf"


def clean_name(name: str) -> str:
    """``name`` as stored and shown: NFKC, no control/format/unassigned characters, whitespace collapsed, at most
    :data:`MAX_NAME_CHARS` characters (the extension kept); :data:`FALLBACK_NAME` when nothing is left."""
    text = unicodedata.normalize("NFKC", name)
    text = "".join(ch for ch in text if unicodedata.category(ch) not in _DROPPED_CATEGORIES or ch in "\t\n")
    text = _SPACES.sub(" ", text).strip()
    if len(text) > MAX_NAME_CHARS:
        stem, dot, ext = text.rpartition(".")
        keep = MAX_NAME_CHARS - len(ext) - 2 if dot and len(ext) <= 10 else MAX_NAME_CHARS - 1
        text = (stem[:keep].rstrip() + "…" + (dot + ext if dot and len(ext) <= 10 else "")).strip()
    return text or FALLBACK_NAME


def name_key(name: str) -> str:
    """What two names must share to count as the same name: :func:`clean_name`, case folded, look-alike
    characters mapped to the Latin letter or digit they imitate."""
    latin = "".join(_latin(ch) for ch in clean_name(name))  # before case folding: a Greek Η is an H, its η an n
    return "".join(_latin(ch) for ch in latin.casefold())


@functools.lru_cache(maxsize=4096)
def _latin(ch: str) -> str:
    if ch.isascii():
        return ch
    found = confusables.is_confusable(ch, preferred_aliases=["latin", "common"], greedy=True) or []
    for entry in found:
        for glyph in entry.get("homoglyphs", []):
            candidate = str(glyph.get("c", ""))
            if candidate.isascii() and candidate.strip():
                return candidate.casefold()
    return ch


_COPY_NUMBER = re.compile(r" \(\d+\)(?=(\.[^.]*)?$)")


def family_key(name: str) -> str:
    """:func:`name_key` without the `` (n)`` that marks a copy indexed beside another's file: ``handbook (2).pdf``
    and a look-alike ``hаndbook (2).pdf`` are of the ``handbook.pdf`` family, so a listing can say whose each is."""
    return _COPY_NUMBER.sub("", name_key(name), count=1)


def is_look_alike(a: str, b: str) -> bool:
    """Different names that read the same."""
    return clean_name(a) != clean_name(b) and name_key(a) == name_key(b)
