"""Small text helpers shared by the components: terms, stop words, and every way text is cut into sentences.

The sentence rules, side by side (each reader needs its own cut; changing one changes what it produces:
:func:`chunk_sentences` changes the chunks, so the index):

* :func:`sentence_spans` — the sentences a quote can be: paragraph and bullet breaks, then ``.!?`` before a
  capital, digit or bullet, not after an abbreviation ("Dr.", "e.g."); spans into the text, so quotes stay verbatim.
* :func:`chunk_sentences` — where the chunker may cut a paragraph too long for one chunk: after ``.!?;:`` before a
  capital or digit (a clause end is a fine cut there; the pieces are joined again up to the chunk's size).
* :func:`answer_sentences` — the claims of an LLM answer: after ``.!?`` and at every line break (a model's list
  item is a claim of its own, whatever it ends with).
* :func:`question_sentences` — the sentences of a question: after ``.!?`` before anything.
"""

from __future__ import annotations

import functools
import re

STOPWORDS = frozenset(
    """a about above after again all also am an and any are as at be been before being below between both but by
    can could did do does doing down during each few for from further had has have having he her here hers him his
    how i if in into is it its itself just me more most my no nor not of off on once only or other our ours out over
    own same she should so some such than that the their theirs them then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your yours
    tell say says said show shows give list please explain describe summarize summarise summary according
    document documents pdf pdfs file files paper report page pages section sections table tables figure figures
    does do did much many whats""".split()  # noqa: SIM905
)

# Words too generic to show whether passages are about the question ("how LONG", "do I NEED").
GENERIC = frozenset(
    """get gets got need needed needs long often apply applies applied allowed allow ask asked define defined
    include includes support supported kept keep quickly many much commit overview give happen happens way ways
    work works thing things new make made use used kind""".split()  # noqa: SIM905
)

_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")


@functools.lru_cache(maxsize=65536)  # a question reads the same passages' words several times (~57k calls each)
def stem(word: str) -> str:
    """A deliberately tiny stemmer: lower case, strip possessives and simple plural/verb endings."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    w = w.strip("'-").replace("-", "")
    for suffix, min_len in (("ness", 7), ("ies", 5), ("sses", 6), ("es", 5), ("s", 4), ("ing", 6), ("ed", 5)):
        if w.endswith(suffix) and len(w) >= min_len:
            if suffix == "ies":
                return w[:-3] + "y"
            if suffix == "sses":
                return w[:-2]
            if suffix == "s" and w.endswith("ss"):
                return w
            w = w[: -len(suffix)]
            break
    if len(w) > 4 and w.endswith("e"):
        w = w[:-1]
    return w


def coverage(question_terms: set[str], passages: list[str]) -> float:
    """Share of the question's specific terms (not :data:`GENERIC`) that occur in ``passages``."""
    specific = question_terms - {stem(g) for g in GENERIC}
    if not specific:
        return 1.0
    seen: set[str] = set()
    for p in passages:
        seen |= set(terms(p))
    return len(specific & seen) / len(specific)


def terms(text: str) -> list[str]:
    """Content terms (stemmed, stop words removed), in order, duplicates kept."""
    out = []
    for tok in _TOKEN.findall(text):
        low = tok.lower()
        if low in STOPWORDS or (len(low) < 2 and not low.isdigit()):
            continue
        out.append(stem(low))
    return out


_SENT_END = re.compile(r"(?<=[.!?])[\"”’)]?\s+(?=[\"“(\[]?[A-Z0-9•\-])")
_ABBREV = frozenset(
    "dr mr mrs ms prof st no nos fig figs vs etc e.g i.e cf approx art sec p pp vol ch inc ltd co".split()  # noqa: SIM905
)
_BULLET = re.compile(r"\n\s*(?=[•\-\*–]|\d+[.)]\s|[a-z][.)]\s)")


_CHUNK_SENT = re.compile(r"(?<=[.!?;:])\s+(?=[\"\u201c(\[]?[A-Z0-9\u00c0-\u024f])")
_ANSWER_SENT = re.compile(r"(?<=[.!?])\s+|\n+")
_QUESTION_SENT = re.compile(r"(?<=[.?!])\s+(?=\S)")


def chunk_sentences(text: str) -> list[str]:
    """The pieces the chunker may cut an over-long paragraph into (see the module docstring)."""
    return _CHUNK_SENT.split(text)


def answer_sentences(text: str) -> list[str]:
    """The sentences and lines of an LLM answer (see the module docstring); pieces may be blank."""
    return _ANSWER_SENT.split(text)


def question_sentences(text: str) -> list[str]:
    """The sentences of a question (see the module docstring)."""
    return _QUESTION_SENT.split(text)


def sentence_spans(text: str, *, lines: bool = False) -> list[tuple[int, int]]:
    """[start, end) spans of the sentences (or, with ``lines``, the non-empty lines) of ``text``."""
    spans: list[tuple[int, int]] = []
    if lines:
        pos = 0
        for line in text.split("\n"):
            s, e = pos, pos + len(line)
            pos = e + 1
            s, e = _strip(text, s, e)
            if e > s:
                spans.append((s, e))
        return spans
    # paragraphs and bullets first, then sentence ends within them
    cuts = [0]
    for m in re.finditer(r"\n\s*\n", text):
        cuts.append(m.end())
    for m in _BULLET.finditer(text):
        cuts.append(m.end())
    for m in _SENT_END.finditer(text):
        before = text[max(0, m.start() - 6) : m.start() + 1].split()
        if before and before[-1].lower().rstrip(".") in _ABBREV:
            continue
        cuts.append(m.end())
    cuts = sorted(set(cuts)) + [len(text)]
    for s, e in zip(cuts, cuts[1:], strict=False):
        s, e = _strip(text, s, e)
        if e > s:
            spans.append((s, e))
    return spans


def _strip(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e
