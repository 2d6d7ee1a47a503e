"""What a document is, read from its own first pages, whatever its file name says.

People upload ``10-K.pdf``, ``annual-report-final.pdf``, ``download (3).pdf``; a channel whose filings were renamed
``filing-01.pdf``... lost most of its routing (page-hit@5 0.84 -> 0.37 on FinanceBench's development half), because
the company and period a question names were matched against file names only. A filing states all three on its
cover page, and a report its title on its title page:

* **form** — ``FORM 10-K`` (10-Q, 8-K, 20-F, 40-F, an amendment's ``/A`` kept), else the cover's own words
  ("ANNUAL REPORT PURSUANT TO SECTION 13" -> 10-K, "QUARTERLY REPORT ..." -> 10-Q, "CURRENT REPORT" -> 8-K); a press
  release announcing results ("today reported ... results") is an ``earnings release``;
* **issuer** — the line above "(Exact name of registrant as specified in its charter)", else an ALL-CAPS line
  ending in a company word ("MICROSOFT CORPORATION", "THE COCA-COLA COMPANY AND SUBSIDIARIES"), else the name a
  release gives before its ticker ("Ulta Beauty, Inc. (NASDAQ: ULTA)");
* **period** — the date of "For the fiscal year ended ...", "For the quarterly period ended ...", "... quarter and
  year ended ...", or an 8-K's "Date of report"; the fiscal year is that date's year, and a date in a month's first
  week ends the month before (52/53-week years: "January 1, 2023" closes fiscal 2022). The quarter is a release's
  own word ("fourth quarter", "Q2"), else, for a 10-Q, the calendar quarter its period ends in;
* **title** — for anything that is not a filing: the first page's largest type (or its first line of words).

:func:`read_identity` is a pure function of the first pages' text (no Haystack here: :mod:`pipelines.models`
labels citations with it); :class:`pipelines.components.document_identity.DocumentIdentifier` is the indexing step
that reads it from the parsed PDF. The identity goes on every chunk of the document as ``doc_*`` metadata
(:meth:`DocumentIdentity.meta`), where routing and citation labels read it, always within the asker's scopes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

EARNINGS = "earnings release"
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|" \
         r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_DATE = rf"{_MONTH}\s+(\d{{1,2}})\s*,?\s*((?:19|20)\d\d)"
_FORM = re.compile(r"\bFORM\s+(10-?K|10-?Q|8-?K|20-?F|40-?F|6-?K)(\s*/\s*A)?\b", re.I)
_FORM_WORDS = (
    (re.compile(r"\bannual\s+report\s+pursuant\s+to\s+section\s+13", re.I), "10-K"),
    (re.compile(r"\bquarterly\s+report\s+pursuant\s+to\s+section\s+13", re.I), "10-Q"),
    (re.compile(r"\bcurrent\s+report\s+pursuant\s+to\s+section\s+13", re.I), "8-K"),
)
_RELEASE = re.compile(
    r"\btoday\s+(?:announced|reported)\b[^.]{0,80}\bresults\b|\b(?:reports|announces)\b[^.\n]{0,60}\b(?:quarter|"
    r"year)\b[^.\n]{0,40}\bresults\b", re.I)
_PERIOD = re.compile(
    rf"\b(?:fiscal\s+year|quarterly\s+period|year|quarter|period|weeks)\s+ended\b[^0-9\n]{{0,40}}?\n?[^0-9\n]{{0,40}}?"
    rf"{_DATE}", re.I)
_REPORT_DATE = re.compile(rf"\bdate\s+of\s+report\b[^0-9]{{0,80}}?{_DATE}", re.I)
_QUARTER_WORD = re.compile(r"\b(first|second|third|fourth)[\s\-]+(?:fiscal\s+)?quarter\b|\bQ([1-4])\b|\b([1-4])Q\d\d\b",
                           re.I)
_ORDINAL = {"first": 1, "second": 2, "third": 3, "fourth": 4}
_YEAR = re.compile(r"(?<!\d)((?:19|20)\d\d)(?!\d)")
_EXACT_NAME = re.compile(r"\(?\s*exact\s+name\s+of\s+(?:the\s+)?registrant", re.I)
_BOILERPLATE = re.compile(
    r"commission\s+file|transition\s+period|securities|exchange\s+act|report\s+pursuant|fiscal\s+year|"
    r"quarterly\s+period|washington|identification|incorporation|^\W*$|^[\d\s\-–,]+$|\bnumber\b|\bform\b", re.I)
_COMPANY_END = re.compile(
    r"\b(?:INC|INCORPORATED|CORPORATION|CORP|COMPANY|CO|LTD|LIMITED|PLC|LLC|L\.P|N\.V|S\.A|AG|SE|GROUP|HOLDINGS|"
    r"INTERNATIONAL)\b\.?$")
_NOT_COMPANY = re.compile(r"EXCHANGE|MARKET|STOCK|COMMISSION|REPORT|SECURITIES|STATES", re.I)
_SUBSIDIARIES = re.compile(r"\s+AND\s+(?:ITS\s+)?(?:CONSOLIDATED\s+)?SUBSIDIARIES\b.*$", re.I)
_TICKER = re.compile(
    r"((?:(?:[A-Z][\w.&'’\-]*|&),?\s+){0,5}[A-Z][\w.&'’\-]*)\s*\((?:NYSE|NASDAQ|Nasdaq|NYSE\s+American|TSX|LSE)\s*:")
_LETTER_SPACED = re.compile(r"\b([A-Z]) (?=[A-Z]{2,}\b)")
_LOWER_KEEP = {"and", "of", "the", "de", "&"}
_SMALL_UPPER = {"INC", "CO", "THE", "AND", "OF", "LTD", "NEW", "ONE", "OIL", "GAS", "ART", "AIR", "SUN", "BIG"}
_CORPORATE = re.compile(
    r"(?i)(?:,?\s+|\b)(?:inc|incorporated|corporation|corp|company|co|ltd|limited|plc|llc|l\.p|n\.v|s\.a|ag|se)\.?$")


# Words a file name may hold and still say nothing of what the document is.
_GENERIC_NAME_WORDS = frozenset({
    "filing", "filings", "document", "doc", "docs", "download", "downloads", "report", "reports", "final", "draft",
    "annual", "quarterly", "current", "10k", "10q", "8k", "20f", "40f", "k", "q", "f", "form", "file", "scan",
    "scanned", "copy", "untitled", "pdf", "new", "version", "v", "fy", "earnings", "release", "press", "statement",
    "statements", "financial", "financials", "attachment", "upload", "print", "printout", "of", "the", "and",
})


def name_says_nothing(file_name: str) -> bool:
    """A file name that says nothing of what the document is: only generic words (filing, document, download,
    report, final, 10-K...), digits and years (``filing-01.pdf``, ``annual-report-final.pdf``, ``download (3).pdf``,
    ``10-K.pdf``). Such a file is labelled with its identity too, wherever an answer names it."""
    stem = re.sub(r"(?i)\.pdf$", "", file_name)
    words = [w for w in re.split(r"[^0-9a-z]+", stem.lower()) if w]
    telling = [w for w in words if not re.fullmatch(r"v?\d+[a-z]?|q[1-4]|fy\d*", w) and w not in _GENERIC_NAME_WORDS]
    return not telling


def file_label(file_name: str, meta: Mapping[str, Any]) -> str:
    """How an answer names a chunk's file: the file name, and what the document says it is when the name says
    nothing ("filing-01.pdf (Adobe Inc., 10-K, fiscal 2022)")."""
    if not name_says_nothing(file_name):
        return file_name
    said = DocumentIdentity.from_meta(meta).describe()
    return f"{file_name} ({said})" if said else file_name


@dataclass(frozen=True)
class DocumentIdentity:
    """Who issued a document, what form it is and which period it reports, or its title; "" / None when unread."""

    issuer: str = ""
    form: str = ""
    period_end: str = ""  # ISO date of the period's last day as printed ("2022-12-02"); "" when none
    year: int | None = None  # the fiscal year (or the year a report names)
    quarter: int | None = None
    title: str = ""

    @property
    def known(self) -> bool:
        return bool(self.issuer or self.form or self.year or self.title)

    def meta(self) -> dict[str, Any]:
        """The chunk metadata fields (``doc_issuer``, ``doc_form``, ``doc_period``, ``doc_year``, ``doc_quarter``,
        ``doc_title``), only those that were read."""
        out: dict[str, Any] = {"doc_issuer": self.issuer, "doc_form": self.form, "doc_period": self.period_end,
                               "doc_year": self.year, "doc_quarter": self.quarter, "doc_title": self.title}
        return {k: v for k, v in out.items() if v not in ("", None)}

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> DocumentIdentity:
        """The identity a chunk's (or a listed document's) metadata holds."""
        def num(v: Any) -> int | None:
            try:
                return int(v) if v not in (None, "") else None
            except (TypeError, ValueError):
                return None

        return cls(issuer=str(meta.get("doc_issuer") or ""), form=str(meta.get("doc_form") or ""),
                   period_end=str(meta.get("doc_period") or ""), year=num(meta.get("doc_year")),
                   quarter=num(meta.get("doc_quarter")), title=str(meta.get("doc_title") or ""))

    def describe(self) -> str:
        """For people: "Adobe Inc., 10-K, fiscal 2022"; "Johnson & Johnson, earnings release, Q4 2022"; a title."""
        if not self.issuer and not self.form:
            return self.title
        when = ""
        if self.year:
            when = f"Q{self.quarter} {self.year}" if self.quarter and self.form != "10-K" else f"fiscal {self.year}"
        return ", ".join(p for p in (self.issuer or self.title, self.form, when) if p)

    def routing_name(self) -> str:
        """The identity spelt as a descriptive file name is ("Adobe Inc_2022_10K"), for the matching of
        :mod:`pipelines.components.document_names`; "" when there is no issuer."""
        if not self.issuer:
            return ""
        period = f"{self.year}Q{self.quarter}" if self.year and self.quarter else str(self.year or "")
        form = {EARNINGS: "EARNINGS"}.get(self.form, self.form.replace("-", "").replace("/", ""))
        return "_".join(p for p in (bare_company(self.issuer), period, form) if p)


def bare_company(issuer: str) -> str:
    """A company's name without "The" and its legal form: "The Kraft Heinz Company" -> "Kraft Heinz"."""
    name = re.sub(r"(?i)^the\s+", "", issuer.strip())
    for _ in range(2):  # "JPMorgan Chase & Co." -> "JPMorgan Chase"
        name = _CORPORATE.sub("", name).rstrip(" ,&")
    return name or issuer.strip()


def _people_case(name: str) -> str:
    """An ALL-CAPS name as people write it: "ADVANCED MICRO DEVICES, INC." -> "Advanced Micro Devices, Inc.";
    short words that read as initials stay upper ("MGM Resorts International"). Mixed case is left alone."""
    if name != name.upper():
        return name
    words = []
    for w in name.split():
        core = re.sub(r"[^A-Z]", "", w)
        if len(core) <= 3 and core not in _SMALL_UPPER and core:
            words.append(w)
        elif w.lower() in _LOWER_KEEP and words:
            words.append(w.lower())
        else:
            words.append("-".join(p.capitalize() for p in w.split("-")))
    return " ".join(words)


def _clean_name(line: str) -> str:
    line = _LETTER_SPACED.sub(r"\1", line)  # "MGM R ESORTS I NTERNATIONAL"
    line = re.sub(r"\s+([.,])", r"\1", line)  # "NIKE, Inc ."
    line = _SUBSIDIARIES.sub("", line)
    return _people_case(" ".join(line.split()).strip(" ,;:"))


def _issuer(lines: Sequence[str]) -> str:
    for i, line in enumerate(lines):
        m = _EXACT_NAME.search(line)
        if not m:
            continue
        same = line[: m.start()].strip()
        if re.search(r"[A-Za-z]{2}", same) and not _BOILERPLATE.search(same):
            return _clean_name(same)
        for prev in reversed(lines[max(0, i - 3): i]):
            if re.fullmatch(r"[\s_\-–—*]*", prev):
                continue
            if _BOILERPLATE.search(prev):
                if re.search(r"commission\s+file|^[\d\s\-–,]+$|^\W*$", prev, re.I):
                    continue  # the file number sits between the name and the phrase on some covers
                break
            if re.search(r"[A-Za-z]{2}", prev):
                return _clean_name(prev)
        break
    for line in lines:
        text = _SUBSIDIARIES.sub("", _LETTER_SPACED.sub(r"\1", " ".join(line.split())))
        if (text == text.upper() and re.search(r"[A-Z]{2}", text) and len(text) <= 60
                and _COMPANY_END.search(text) and not _NOT_COMPANY.search(text)):
            return _clean_name(text)
    joined = " ".join(lines)
    m = _TICKER.search(joined)
    if m:
        return _clean_name(m.group(1))
    return ""


def _date(month: str, day: str, year: str) -> tuple[int, int, int]:
    mon = next(i for i, name in enumerate(_MONTHS, 1) if name.startswith(month.lower()[:3]))
    return int(year), mon, int(day)


def _closing_month(y: int, mon: int, day: int) -> tuple[int, int]:
    """The month a period ending on this date closes: a date in a month's first week ends the month before."""
    if day <= 7:
        return (y - 1, 12) if mon == 1 else (y, mon - 1)
    return y, mon


def _form(text: str, head: str) -> str:
    m = _FORM.search(head)
    if m:
        base = m.group(1).upper()
        base = base if "-" in base else f"{base[:-1]}-{base[-1]}"
        return base + ("/A" if m.group(2) else "")
    for rx, form in _FORM_WORDS:
        if rx.search(head):
            return form
    return EARNINGS if _RELEASE.search(text) else ""


def _headline(lines: Sequence[tuple[str, float]]) -> str:
    """The first page's title: its largest type (two lines of it at most), else its first line of words."""
    worded = [(t.strip(), s) for t, s in lines if re.search(r"[A-Za-z]{3}", t) and not re.match(r"(?i)page\s+\d", t)]
    if not worded:
        return ""
    top = max(s for _, s in worded)
    if top > 0:
        run: list[str] = []
        for t, s in worded:
            if s >= top - 0.05:
                run.append(t)
                if len(run) == 2:
                    break
            elif run:
                break
        return " ".join(" ".join(run).split())[:200]
    return worded[0][0][:200]


def read_identity(pages: Sequence[str], *, headline: str = "") -> DocumentIdentity:
    """The identity of a document from its first pages' text (a page per string, lines split by newlines).
    ``headline``: the first page's largest type (:func:`headline_of`), used as the title of what is no filing."""
    lines = [ln for p in pages for ln in p.splitlines()]
    text = "\n".join(lines)
    head = "\n".join(pages[0].splitlines()[:60]) if pages else ""
    form = _form(text, head)
    issuer = _issuer(lines) if form else ""
    year = quarter = None
    period_end = ""
    m = _PERIOD.search(text) if form != "8-K" else None
    m = m or (_REPORT_DATE.search(text) if form == "8-K" else None)
    if m:
        y, mon, day = _date(*m.groups())
        period_end = f"{y:04d}-{mon:02d}-{day:02d}"
        year, month = _closing_month(y, mon, day)
        if form == "10-Q":
            quarter = (month - 1) // 3 + 1
    if form == EARNINGS:
        q = _QUARTER_WORD.search(text)
        if q:
            quarter = _ORDINAL[q.group(1).lower()] if q.group(1) else int(q.group(2) or q.group(3))
        if year is None and q:  # "2022 Fourth-Quarter", "fourth quarter and full year 2022"
            near = _YEAR.findall(text[max(0, q.start() - 40): q.end() + 60])
            year = int(near[0]) if near else None
    title = ""
    if not form:
        title = headline or next((ln.strip() for ln in lines if re.search(r"[A-Za-z]{3}", ln)), "")
        title = " ".join(title.split())[:200]
        years = set(_YEAR.findall(title))
        year = int(years.pop()) if len(years) == 1 else None
    return DocumentIdentity(issuer=issuer, form=form, period_end=period_end, year=year, quarter=quarter,
                            title=title)


def headline_of(lines: Sequence[tuple[str, float]]) -> str:
    """The first page's title from its ``(text, font size)`` lines (size 0 when unknown, as after OCR)."""
    return _headline(lines)
