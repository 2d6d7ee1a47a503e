"""Which files of a busy channel a question is about, from how people name companies and periods.

A finance team's channel holds many filings of several companies and years, named as people and EDGAR
name them: ``ACTIVISIONBLIZZARD_2019_10K.pdf``, ``JOHNSON_JOHNSON_2023Q2_EARNINGS.pdf``, ``Pfizer_2023Q2_10Q.pdf``.
Questions name the company the way analysts write it ("Activision Blizzard", "AMEX", "JnJ", "JPM", "MGM")
and the period ("FY2019", "FY20", "Q2'2023", "the second fiscal quarter of 2023", "H1 FY2023").

:func:`named_files` finds the files whose name the question spells (run together, abbreviated by word prefixes
or initials); :func:`preferred_files` ranks those by the period the question asks about. Both are pure
functions of the question and the file names, so a file is only ever matched within the scopes it was listed
from. A file whose name says nothing (``filing-01.pdf``, ``10-K.pdf``) is matched by what the document says it is:
``aliases`` maps a file to its identity spelt as a descriptive name (``Adobe_2022_10K``, from the ``doc_*`` metadata
read off its cover at ingest, :mod:`pipelines.reading.identity`); the file is named when the question names the
company of either, and its period is the alias's when its own name gives no year.

Period rules (a filing reports its own period and the years before it, never later ones): the target is the
latest year the question names; a file of that year fits best, a later file next (its comparatives hold
the year), an earlier one not at all; a named quarter picks the quarter's filing, and with no quarter named
the annual report comes first.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from pipelines.components._text import STOPWORDS

_YEAR = r"(?:19|20)\d\d"
_FILE_PERIOD = re.compile(rf"(?<![0-9])({_YEAR})(?:[\s_\-.]?q([1-4]))?(?![0-9])", re.I)
_FORM_WORDS = frozenset({"10k", "10q", "8k", "10ka", "20f", "earnings", "dated", "final", "report", "annual",
                         "quarterly", "pdf", "v1", "v2", "v3"})
_ORDINAL_Q = {"first": 1, "second": 2, "third": 3, "fourth": 4, "1st": 1, "2nd": 2, "3rd": 3, "4th": 4}
_Q_PATTERNS = (
    re.compile(rf"\bq([1-4])\s*(?:'|’|of\s+)?\s*(?:fy\s*)?({_YEAR})\b", re.I),  # Q2 2023, Q2'2023, Q2 of FY2023
    re.compile(rf"\bq([1-4])({_YEAR})\b", re.I),  # Q22023
    re.compile(rf"\b({_YEAR})\s*q([1-4])\b", re.I),  # 2021 Q1
)
_ORDINAL_QUARTER = re.compile(
    rf"\b(first|second|third|fourth|1st|2nd|3rd|4th)\s+(?:fiscal\s+)?quarter(?:\s+of)?\s+"
    rf"(?:fiscal\s+|fy\s*)?({_YEAR})\b",
    re.I,
)
_HALF = re.compile(rf"\b(h1|h2|first\s+half|second\s+half)\s*(?:of\s+)?(?:fiscal\s+|fy\s*)?({_YEAR})\b", re.I)
_FY_SHORT = re.compile(r"\bfy\s*'?(\d\d)\b", re.I)
_YEARS = re.compile(rf"(?<![0-9])({_YEAR})(?![0-9])")
_ANNUAL_WORDS = re.compile(r"\b(10-?k|annual report)\b", re.I)
_QUARTER_WORDS = re.compile(r"\b(10-?q|quarterly report)\b", re.I)


@dataclass(frozen=True)
class Period:
    """A year, and a quarter (1-4) when one is named; ``annual`` for a 10-K, ``form`` as the name spells it."""

    year: int | None = None
    quarter: int | None = None
    form: str = ""


def _words(text: str) -> list[str]:
    text = re.sub(r"(?i)['’]s\b", "", text)
    return [w for w in re.split(r"[^0-9a-z]+", text.lower()) if w]


def company_words(file_name: str) -> list[str]:
    """The words of a file's name that are not its period or form: ``["johnson", "johnson"]``."""
    stem = re.sub(r"(?i)\.pdf$", "", file_name)
    stem = _FILE_PERIOD.sub(" ", stem)
    return [w for w in _words(stem) if w not in _FORM_WORDS and not w.isdigit() and re.search(r"[a-z]", w)]


def file_period(file_name: str) -> Period:
    """The period a file's name gives: ``MGMRESORTS_2022Q4_EARNINGS.pdf`` -> 2022, Q4, earnings."""
    m = _FILE_PERIOD.search(file_name)
    low = file_name.lower()
    form = next((f for f in ("10k", "10q", "8k", "earnings") if re.search(rf"(?<![a-z0-9]){f}(?![a-z0-9])", low)), "")
    if not m:
        return Period(form=form)
    return Period(int(m.group(1)), int(m.group(2)) if m.group(2) else None, form)


def question_period(question: str) -> Period:
    """The latest year (and a quarter, if one is named) a question asks about; ``FY20`` is 2020, ``H1`` is Q2."""
    found: list[tuple[int, int | None]] = []
    for pat in _Q_PATTERNS:
        for m in pat.finditer(question):
            a, b = m.group(1), m.group(2)
            year, q = (int(b), int(a)) if len(a) == 1 else (int(a), int(b))
            found.append((year, q))
    for m in _ORDINAL_QUARTER.finditer(question):
        found.append((int(m.group(2)), _ORDINAL_Q[m.group(1).lower()]))
    for m in _HALF.finditer(question):
        found.append((int(m.group(2)), 2 if m.group(1).lower() in ("h1", "first half") else 4))
    years = [int(y) for y in _YEARS.findall(question)] + [2000 + int(y) for y in _FY_SHORT.findall(question)]
    form = "10k" if _ANNUAL_WORDS.search(question) else "10q" if _QUARTER_WORDS.search(question) else ""
    if not years and not found:
        return Period(form=form)
    latest = max(years + [y for y, _ in found])
    quarters = [q for y, q in found if y == latest and q is not None]
    return Period(latest, quarters[-1] if quarters else None, form)


@dataclass(frozen=True)
class _Asked:
    """A question's words as :func:`names_company` reads them: ``(original, normalised)`` per word, which of them
    look like names, and the normalised ones."""

    tokens: tuple[tuple[str, str], ...]
    proper: tuple[bool, ...]
    norms: tuple[str, ...]
    initials: frozenset[str]  # every way below of naming a file starts with the first letter of a word
    # What :func:`_names` compares each file's key with, worked out once per question rather than once per file:
    # the runs of up to four words run together (a lone word only if it looks like a name), and the runs of two or
    # more words at least six letters long (a key they begin), by first letter.
    runs: frozenset[str]
    prefixes: Mapping[str, tuple[str, ...]]
    # The words that look like names (at least three letters), by first letter, each with whether it may be an
    # abbreviation (AMEX, JnJ): every way a word names a file needs the file's key to start with its letter.
    named: Mapping[str, tuple[tuple[str, str, bool], ...]]


@functools.lru_cache(maxsize=256)
def _asked(question: str) -> _Asked:
    tokens = tuple(_question_tokens(question))
    proper = tuple(raw[0].isupper() and (pos > 0 or raw.isupper()) and norm not in STOPWORDS
                   for pos, (raw, norm) in enumerate(tokens))
    norms = tuple(n for _, n in tokens)
    runs: set[str] = set()
    prefixes: dict[str, list[str]] = {}
    for i in range(len(norms)):  # "Activision Blizzard", "Coca Cola", "Johnson & Johnson" run together
        run = ""
        for j in range(i, min(i + 4, len(norms))):
            run += norms[j]
            if j == i and not proper[i]:
                continue  # one common word ("independents") is not a name
            runs.add(run)
            if j > i and len(run) >= 6:
                prefixes.setdefault(run[0], []).append(run)
    named: dict[str, list[tuple[str, str, bool]]] = {}
    for pos, (raw, norm) in enumerate(tokens):
        if proper[pos] and len(norm) >= 3:
            short = raw.isupper() or re.fullmatch(r"[A-Z]n[A-Z]", raw) is not None
            named.setdefault(norm[0], []).append((raw, norm, short))
    return _Asked(tokens, proper, norms, frozenset(n[0] for n in norms), frozenset(runs),
                  {c: tuple(r) for c, r in prefixes.items()}, {c: tuple(t) for c, t in named.items()})


@functools.lru_cache(maxsize=16384)
def _company(file_name: str) -> tuple[tuple[str, ...], str]:
    """A file name's company words and the key they run together into (read once per name, not per question)."""
    words = tuple(company_words(file_name))
    return words, "".join(words)


def _question_tokens(question: str) -> list[tuple[str, str]]:
    """``(original, normalised)`` per word; "&" and "and" are dropped (Johnson & Johnson)."""
    out = []
    for raw in re.findall(r"[A-Za-z0-9][A-Za-z0-9&'’.\-]*", question):
        raw = re.sub(r"(?i)['’]s$|[.\-]$", "", raw)
        norm = re.sub(r"[^0-9a-z]", "", raw.lower())
        if norm and norm != "and":
            out.append((raw, norm))
    return out


def _abbreviates(token: str, words: Sequence[str], key: str) -> bool:
    """``AMEX`` for american express, ``JPM`` for jpmorgan, ``JnJ`` for johnson johnson: the token is a prefix
    of the name run together, or two runs of at least two letters (the second starting a later part of it), or
    initials with a small ``n`` for "and"."""
    low = token.lower()
    if key.startswith(low):
        return True
    if re.fullmatch(r"[A-Z]n[A-Z]", token) and len(words) >= 2:
        return words[0][0] == low[0] and words[1][0] == low[2]
    if len(low) >= 3 and len(words) == len(low) and all(w[0] == c for w, c in zip(words, low, strict=True)):
        return True  # AMD for advanced micro devices
    for cut in range(2, len(low) - 1):
        head, tail = low[:cut], low[cut:]
        if key.startswith(head) and tail in key[cut:] and len(tail) >= 2:
            return True
    return False


def names_company(question: str, file_name: str) -> bool:
    """Does the question name the company (or subject) of ``file_name``?"""
    return _names(_asked(question), *_company(file_name))


def _names(asked: _Asked, words: Sequence[str], key: str) -> bool:
    if len(key) < 2 or key[0] not in asked.initials:
        return False
    if key in asked.runs:  # the question's words run together are the name
        return True
    if any(key.startswith(run) and len(run) >= 0.6 * len(key) for run in asked.prefixes.get(key[0], ())):
        return True  # they begin it, and make most of it
    for raw, norm, short in asked.named.get(key[0], ()):
        if short and _abbreviates(raw, words, key):  # AMEX, JPM, MGM, ADBE; JnJ
            return True
        if key.startswith(norm) and (len(norm) >= 5 or len(norm) >= 0.4 * len(key)):  # Ulta, Germanwings
            return True
    return False


def named_files(question: str, file_names: Sequence[str], aliases: Mapping[str, str] | None = None) -> list[str]:
    """The files whose company the question names, by their name or by their alias (the question is read once, each
    name once per process, and each company once per question: a channel's filings of one company, or its scans
    named alike, share one)."""
    asked = _asked(question)
    named: dict[tuple[tuple[str, ...], str], bool] = {}

    def hit(name: str) -> bool:
        company = _company(name)
        found = named.get(company)
        if found is None:
            found = named[company] = _names(asked, *company)
        return found

    aliases = aliases or {}
    return [f for f in file_names if hit(f) or (f in aliases and hit(aliases[f]))]


def _fit(asked: Period, file: Period) -> float:
    score = 0.0
    if asked.year is not None and file.year is not None:
        if file.year == asked.year:
            score += 3.0
        elif file.year > asked.year:
            score += max(0.0, 2.0 - 0.5 * (file.year - asked.year - 1))
    if asked.quarter is not None:
        if file.quarter == asked.quarter or (file.quarter is None and file.form == "10q"):
            score += 1.0
        elif file.quarter is not None:
            score -= 1.0
    elif asked.year is not None:
        score += {None: 0.5, 4: 0.25}.get(file.quarter, -0.5) if file.form != "8k" else 0.0
    if asked.form and file.form:
        score += 0.5 if asked.form == file.form else -0.5
    return score


def _period_of(file_name: str, aliases: Mapping[str, str]) -> Period:
    """The file's period from its name; from its alias when the name gives no year (its form too, when the name
    gives none)."""
    own = file_period(file_name)
    alias = aliases.get(file_name)
    if not alias:
        return own
    said = file_period(alias)
    if own.year is None:
        return said
    return own if own.form else replace(own, form=said.form)


def preferred_files(question: str, file_names: Sequence[str], aliases: Mapping[str, str] | None = None) -> list[str]:
    """Among ``file_names`` (files of one company, say), those whose period fits the question best; all of them
    when the question names no period or none fits."""
    asked = question_period(question)
    if asked.year is None and not asked.form:
        return list(file_names)
    scored = [(_fit(asked, _period_of(f, aliases or {})), f) for f in file_names]
    best = max((s for s, _ in scored), default=0.0)
    if best <= 0.0:
        return list(file_names)
    return [f for s, f in scored if s >= best - 0.3]


def naming_words(question: str, file_names: Sequence[str], aliases: Mapping[str, str] | None = None) -> list[str]:
    """The words of ``question`` (as written, possessives dropped) that name the company of one of ``file_names``
    (by its name or its alias): "Netflix" in "What was Netflix's net income?", "Coca Cola", "AMEX", "JnJ". Within
    those files the name is on every page, so it tells no passage from another: retrieval and the refusal check
    leave it out once routing has used it. A word counts alone when it looks like a name (capitalised, or an
    abbreviation), else only with its neighbours, run together into the name ("general mills"): "general and
    administrative expenses" keeps its "general", "Netflix net income" its "net"."""
    tokens = _question_tokens(question)
    norms = [n for _, n in tokens]
    companies = {_company(f) for f in file_names} | {_company(a) for f, a in (aliases or {}).items()
                                                        if f in file_names}
    asked = _asked(question)
    flagged = [False] * len(tokens)
    for words, key in companies:
        if len(key) < 2 or not _names(asked, words, key):
            continue
        for i, (raw, norm) in enumerate(tokens):
            if len(norm) < 2 or not (raw[:1].isupper() or raw[:1].isdigit()):
                continue
            short = raw.isupper() or re.fullmatch(r"[A-Z]n[A-Z]", raw) is not None
            if norm in words or (short and _abbreviates(raw, words, key)) or (
                key.startswith(norm) and (len(norm) >= 5 or len(norm) >= 0.4 * len(key))
            ):
                flagged[i] = True
        for i in range(len(tokens)):  # "Coca Cola", "Activision Blizzard", "general mills": words run together
            run = norms[i]
            for j in range(i + 1, min(i + 4, len(tokens))):
                run += norms[j]
                if run == key or (key.startswith(run) and len(run) >= 0.6 * len(key)):
                    flagged[i : j + 1] = [True] * (j + 1 - i)
    return list(dict.fromkeys(raw for (raw, _), hit in zip(tokens, flagged, strict=True) if hit))
