"""Deterministic citation check: every quote must be a span of the chunk it cites.

A quote passes when it occurs in its chunk exactly, or after normalising both sides (Unicode NFKC,
whitespace runs, curly quotes and dash forms, line-break hyphenation, case), or when the best
fuzzy alignment (rapidfuzz ``partial_ratio_alignment`` on the normalised texts) scores at least
``fuzzy_threshold`` (:data:`FUZZY_THRESHOLD` unless a saved pipeline says otherwise). Whatever matched, the quote
shown to the user is the exact span of the source text mapped back from the match, never the generator's wording.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict

from pipelines.models import ChunkLocation, Citation, ValidationCounts, chunk_id_of

FUZZY_THRESHOLD = 0.9  # the fuzzy alignment's score (0-1) a quote needs: the one threshold every validator uses

_QUOTES = {
    "\u2018": "'",
    "\u2019": "'",
    "\u201a": "'",
    "\u201b": "'",
    "\u2032": "'",
    "`": "'",
    "\u00b4": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u201e": '"',
    "\u201f": '"',
    "\u2033": '"',
    "\u00ab": '"',
    "\u00bb": '"',
}
_DASHES = {c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\ufe63\uff0d"}
_DROP = {"\u00ad", "\u200b", "\u200c", "\u200d", "\ufeff"}
_HYPHEN_BREAK = re.compile(r"(?<=\w)-\s+(?=\w)")
_MIN_QUOTE_CHARS = 8


@dataclass(frozen=True)
class Normalised:
    """A normalised text and, for each of its characters, the index of the source character."""

    text: str
    index: list[int]

    def source_span(self, source: str, start: int, end: int) -> tuple[int, int]:
        """Source [start, end) covering normalised [start, end)."""
        return self.index[start], self.index[end - 1] + 1


def normalise(text: str) -> Normalised:
    """Normalise for matching, keeping a map back to the source characters."""
    chars: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        if ch in _DROP:
            continue
        for c in unicodedata.normalize("NFKC", ch):
            c = _QUOTES.get(c, _DASHES.get(c, c))
            if c.isspace():
                if chars and chars[-1] == " ":
                    continue
                c = " "
            for low in c.lower():
                chars.append(low)
                index.append(i)
    # strip the leading/trailing space
    while chars and chars[0] == " ":
        chars.pop(0)
        index.pop(0)
    while chars and chars[-1] == " ":
        chars.pop()
        index.pop()
    joined = "".join(chars)
    # line-break hyphenation ("infor- mation", "well-\nknown"): drop the hyphen and the break
    keep = [True] * len(joined)
    for m in _HYPHEN_BREAK.finditer(joined):
        for j in range(m.start(), m.end()):
            keep[j] = False
    if not all(keep):
        joined = "".join(c for c, k in zip(joined, keep, strict=True) if k)
        index = [x for x, k in zip(index, keep, strict=True) if k]
    return Normalised(joined, index)


def _hyphen_free(n: Normalised) -> Normalised:
    """Drop every in-word hyphen ("well-known" -> "wellknown") so both hyphenation styles meet."""
    keep = [
        not (c == "-" and 0 < i < len(n.text) - 1 and n.text[i - 1].isalnum() and n.text[i + 1].isalnum())
        for i, c in enumerate(n.text)
    ]
    if all(keep):
        return n
    return Normalised(
        "".join(c for c, k in zip(n.text, keep, strict=True) if k),
        [x for x, k in zip(n.index, keep, strict=True) if k],
    )


@dataclass(frozen=True)
class QuoteMatch:
    """How a quote matched its source, and the exact source span to show."""

    outcome: str  # exact | normalised | fuzzy | unmatched
    span: str = ""
    start: int = -1
    end: int = -1
    score: float = 0.0


def _trim_span(source: str, start: int, end: int) -> tuple[int, int]:
    """Widen a fuzzy span to whole words and trim surrounding whitespace/punctuation."""
    while start > 0 and source[start - 1].isalnum() and source[start].isalnum():
        start -= 1
    while end < len(source) and source[end - 1].isalnum() and source[end].isalnum():
        end += 1
    while start < end and (source[start].isspace() or source[start] in "\"'“”‘’,;:"):
        start += 1
    while end > start and (source[end - 1].isspace() or source[end - 1] in "\"'“”‘’,;:"):
        end -= 1
    return start, end


def match_quote(quote: str, source: str, *, fuzzy_threshold: float = FUZZY_THRESHOLD) -> QuoteMatch:
    """Find ``quote`` in ``source``: exact, normalised, or fuzzy at ``fuzzy_threshold`` (0-1)."""
    q = quote.strip().strip("\"'“”‘’").strip()
    if len(q) < _MIN_QUOTE_CHARS:
        return QuoteMatch("unmatched")
    pos = source.find(q)
    if pos >= 0:
        return QuoteMatch("exact", q, pos, pos + len(q), 1.0)
    src_n = _hyphen_free(normalise(source))
    q_n = _hyphen_free(normalise(q)).text.strip(" \"'")
    if len(q_n) < _MIN_QUOTE_CHARS or not src_n.text:
        return QuoteMatch("unmatched")
    pos = src_n.text.find(q_n)
    if pos >= 0:
        s, e = src_n.source_span(source, pos, pos + len(q_n))
        return QuoteMatch("normalised", source[s:e], s, e, 1.0)
    if len(q_n) > len(src_n.text) * 1.1:
        return QuoteMatch("unmatched")
    from rapidfuzz import fuzz

    al = fuzz.partial_ratio_alignment(q_n, src_n.text, score_cutoff=fuzzy_threshold * 100)
    if al is None or al.score < fuzzy_threshold * 100 or al.dest_end <= al.dest_start:
        return QuoteMatch("unmatched", score=(al.score / 100) if al else 0.0)
    s, e = src_n.source_span(source, al.dest_start, al.dest_end)
    s, e = _trim_span(source, s, e)
    if e - s < _MIN_QUOTE_CHARS:
        return QuoteMatch("unmatched", score=al.score / 100)
    return QuoteMatch("fuzzy", source[s:e], s, e, al.score / 100)


def citation_from(doc: Document, *, n: int, quote: str) -> Citation:
    return Citation(**ChunkLocation.of(doc), n=n, quote=quote)


@component
class CitationValidator:
    """Checks generator citations ``{n, chunk_id, quote}`` against the chunks that were given to it.

    Outputs ``citations`` (valid ones, quote replaced by the exact source span), ``failures``
    (``{n, chunk_id, quote, reason}`` with reason ``unknown_chunk`` or ``unmatched``) and
    ``validation`` (counts of every outcome).
    """

    def __init__(self, *, fuzzy_threshold: float = FUZZY_THRESHOLD) -> None:
        if not 0.5 <= fuzzy_threshold <= 1.0:
            raise ValueError("fuzzy_threshold must be between 0.5 and 1.0")
        self.fuzzy_threshold = fuzzy_threshold

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, fuzzy_threshold=self.fuzzy_threshold)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CitationValidator:
        return default_from_dict(cls, data)

    @component.output_types(citations=list[Citation], failures=list[dict[str, Any]], validation=ValidationCounts)
    def run(self, citations: Sequence[Mapping[str, Any]], documents: list[Document],
            retried: bool = False) -> dict[str, Any]:
        """Check each citation's quote against the chunk it cites.

        :param citations: the generator's citations, ``{n, chunk_id, quote}`` each: a :class:`RawCitation
            <pipelines.models.RawCitation>`, or the model's JSON as it came (checked here, key by key).
        :param documents: the chunks the generator was given; a citation of any other chunk fails.
        :param retried: these citations come from the stricter retry (counted in ``validation``).
        :returns: ``citations``, the valid ones with their quote replaced by the exact source span;
            ``failures``, ``{n, chunk_id, quote, reason}`` for the others; ``validation``, the counts of every outcome.
        """
        by_id: dict[str, Document] = {}
        for d in documents:
            by_id[chunk_id_of(d)] = d
            by_id.setdefault(d.id, d)
        counts = ValidationCounts(retried=retried)
        valid: list[Citation] = []
        failures: list[dict[str, Any]] = []
        for raw in citations:
            n = _as_int(raw.get("n"))
            chunk_id = str(raw.get("chunk_id", "")).strip()
            quote = str(raw.get("quote", ""))
            doc = by_id.get(chunk_id)
            if doc is None or n is None:
                counts.unknown_chunk += 1
                failures.append({"n": n, "chunk_id": chunk_id, "quote": quote, "reason": "unknown_chunk"})
                continue
            m = match_quote(quote, doc.content or "", fuzzy_threshold=self.fuzzy_threshold)
            if m.outcome == "unmatched":
                counts.unmatched += 1
                failures.append({"n": n, "chunk_id": chunk_id, "quote": quote, "reason": "unmatched"})
                continue
            setattr(counts, m.outcome, getattr(counts, m.outcome) + 1)
            valid.append(citation_from(doc, n=n, quote=m.span))
        return {"citations": valid, "failures": failures, "validation": counts}


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
