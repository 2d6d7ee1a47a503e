"""Structure routing (after PDFTriage): explicit references in a question fetch those elements by metadata.

Recognised references:

* pages — "page 12", "p. 12", "pp. 5-7", "pages 5 to 7", "pages 5–7", "pages 5 and 6", "page two";
  and pages counted from either end — "the first page", "the cover", "the second page", "the last page",
  "the back cover" — which are physical pages whatever the PDF prints on them;
* sections — "section 4.2", "§ 4.2", "§4.2", "Section 12", "Article IV", "chapter 3", and a
  retrieved chunk's heading when the question contains all of the heading's words;
* tables and figures — "table 3", "Figure 2", "fig. 2" (chunk meta ``label``);
* a file name — "report.pdf", or the name without ``.pdf`` — which restricts everything else to
  that file;
* a company or subject a file is named after ("AMEX", "JnJ", "Activision Blizzard" for
  ``ACTIVISIONBLIZZARD_2019_10K.pdf``, see :mod:`pipelines.components.document_names`), which restricts
  everything else to that company's files, and to those whose period fits the question best ("FY2019",
  "Q2'2023") when it names one (on FinanceBench's development half, one channel of 38 filings: page-hit@5
  0.556 ranking the fitting filings first, 0.635 reading only them); a file is also matched by what the document
  says it is (issuer, form, period read off its cover at ingest: ``filing-01.pdf`` is routed as
  ``ADOBE_2022_10K.pdf`` is), from the listing of the asker's own scopes.

The fetched chunks go first in the answerer's context. Every fetch carries the caller's scopes.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict

from connectors.store_api import ChunkStore, DocInfo, require_scopes
from connectors.stores import store_from_dict
from pipelines.catalogue import DocumentCatalogue
from pipelines.components._text import stem, terms
from pipelines.components.document_names import named_files, naming_words, preferred_files
from pipelines.components.question_analyzer import PERIOD_WORDS
from pipelines.reading.identity import DocumentIdentity

_NUM = r"(\d{1,4})"
_PAGES = re.compile(rf"\b(?:pages?|pp?\.)\s*{_NUM}(?:\s*(?:-|–|—|to|through|thru|and|&)\s*{_NUM})?\b", re.I)
_SECTION = re.compile(r"(?:\b(?:section|sect\.|sec\.|chapter|clause|part)\s*|§\s*)(\d+(?:\.\d+)*|[IVXLC]+\b)", re.I)
_ARTICLE = re.compile(r"\barticle\s+(\d+(?:\.\d+)*|[IVXLC]+\b)", re.I)
_LABEL = re.compile(r"\b(table|figure|fig\.?)\s*(\d+(?:\.\d+)?[a-z]?)\b", re.I)
_NUMBER_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
                 "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_PAGE_WORD = re.compile(rf"\bpage\s+((?:{'|'.join(_TENS)})(?:[\s-](?:{'|'.join(_NUMBER_WORDS[:9])}))?|"
                        rf"{'|'.join(sorted(_NUMBER_WORDS, key=len, reverse=True))})\b", re.I)
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
             "ninth": 9, "tenth": 10, "last": -1, "final": -1}
# "the cover" only after a preposition or as "front/back cover", "cover page": "what does the policy cover" is not
# a page. -1 stands for the last page of each document.
_ORDINAL_PAGE = re.compile(
    rf"\b(?:the\s+)?(?:very\s+)?({'|'.join(_ORDINALS)})\s+page\b"
    r"|\b(front|back)\s+cover\b|\bcover\s+page\b|\b(?:on|of|in|at)\s+(?:the|its)\s+cover\b",
    re.I,
)
_MAX_PAGE_SPAN = 30
# Section numbers (and, apart, table/figure labels) looked up per question: a question naming more is not
# asking about each of them, and every one is a term of the store's filter.
MAX_REFS = 50
# "page 3 of the multicolumn document", "the outline PDF", "page 3 of multicolumn": one distinctive word of a
# file's name, said as the name of a document. Words that say what kind of document it is name no file.
_DOC_NAMED = re.compile(r"\b([a-z0-9][\w\-]{3,})\s+(?:document|doc|pdf|file|paper)s?\b", re.I)
_PAGE_OF = re.compile(rf"\b(?:pages?|pp?\.)\s*{_NUM}(?:\s*(?:-|–|—|to|and)\s*{_NUM})?\s+(?:of|in|from)\s+"
                      r"(?:the\s+)?([a-z0-9][\w\-]{3,})", re.I)
_KIND_WORDS = frozenset(
    """this that these those what which whose each every some such your their same other another whole entire
    first second third last latest previous next new old attached uploaded shared original above below following
    document documents pdf pdfs file files paper report handbook manual guide presentation deck slides article
    brochure booklet contract policy form""".split()  # noqa: SIM905
)
# a heading's words that say which period ("Fiscal 2022", "Year Ended December 31") name no subject: a question
# about fiscal 2022 asks about every page of the filing, not that section
_PERIOD_TERMS = frozenset(stem(w) for w in PERIOD_WORDS) | frozenset(
    stem(m) for m in """january february march april may june july august september october november december
    end""".split()  # noqa: SIM905
)
_FILE_CACHE_TTL_S = 600.0
_FILE_VERSION_CHECK_S = 2.0  # a file uploaded this long ago is named-matchable; counting costs ~5 ms at 50k


@dataclass(frozen=True)
class StructureRefs:
    """What a question explicitly points at."""

    pages: tuple[int, int] | None = None
    nth_page: int | None = None  # a physical page counted from the start (1, 2...) or -1 for the last page
    section_ids: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    spans: tuple[tuple[int, int], ...] = field(default=())

    @property
    def any(self) -> bool:
        return bool(self.pages or self.nth_page or self.section_ids or self.labels)

    def describe(self) -> str:
        parts = []
        if self.pages:
            a, b = self.pages
            parts.append(f"page {a}" if a == b else f"pages {a}–{b}")
        if self.nth_page:
            parts.append("the last page" if self.nth_page < 0 else f"page {self.nth_page}")
        parts += [f"section {s}" for s in self.section_ids]
        parts += list(self.labels)
        return ", ".join(parts)


def number_word(text: str) -> int:
    """The number a page's name spells ("fourteen" 14, "twenty-one" 21); :data:`_PAGE_WORD` matched it."""
    words = re.split(r"[\s-]+", text.lower())
    n = 0
    for w in words:
        n += (_TENS.index(w) + 2) * 10 if w in _TENS else _NUMBER_WORDS.index(w) + 1
    return n


@functools.lru_cache(maxsize=1024)
def parse_refs(question: str) -> StructureRefs:
    """The page range, section numbers and table/figure labels named in ``question``. Kept for the last 1024
    questions (a frozen result): the answerer's :func:`~pipelines.questions.kinds.classify`, the router and the
    reference and table answer kinds each read the same question's references, parsed once."""
    pages: tuple[int, int] | None = None
    spans: list[tuple[int, int]] = []
    m = _PAGES.search(question)
    if m:
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) else a
        a, b = min(a, b), max(a, b)
        if a >= 1:
            pages = (a, min(b, a + _MAX_PAGE_SPAN - 1))
            spans.append(m.span())
    elif wm := _PAGE_WORD.search(question):
        n = number_word(wm.group(1))
        pages = (n, n)
        spans.append(wm.span())
    nth_page: int | None = None
    if om := _ORDINAL_PAGE.search(question):
        word = (om.group(1) or om.group(2) or "front").lower()
        nth_page = -1 if word == "back" else _ORDINALS.get(word, 1)
        spans.append(om.span())
    sections: list[str] = []
    for rx in (_SECTION, _ARTICLE):
        for sm in rx.finditer(question):
            value = sm.group(1)
            if value.isalpha():
                value = value.upper()
                if not re.fullmatch(r"M{0,3}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})", value):
                    continue
            if value not in sections:
                sections.append(value)
                spans.append(sm.span())
    labels: list[str] = []
    for lm in _LABEL.finditer(question):
        kind = "Table" if lm.group(1).lower() == "table" else "Figure"
        label = f"{kind} {lm.group(2)}"
        if label not in labels:
            labels.append(label)
            spans.append(lm.span())
    # every reference is taken out of the content question, but only the first MAX_REFS are looked up
    return StructureRefs(pages, nth_page, tuple(sections[:MAX_REFS]), tuple(labels[:MAX_REFS]), tuple(spans))


def strip_refs(question: str, refs: StructureRefs) -> str:
    """The question without its structural references ("summarize pages 5-7" -> "summarize")."""
    out = question
    for s, e in sorted(refs.spans, reverse=True):
        out = out[:s] + " " + out[e:]
    return " ".join(out.split())


def identity_of(info: DocInfo) -> DocumentIdentity:
    """What a listed document says it is."""
    return DocumentIdentity(issuer=info.issuer, form=info.form, period_end=info.period, year=info.year,
                            quarter=info.quarter, title=info.title)


def _and(*conds: dict[str, Any] | None) -> dict[str, Any] | None:
    parts = [c for c in conds if c]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return {"operator": "AND", "conditions": parts}


@component
class StructureRouter:
    """Question in, the chunks it explicitly references out (``documents``), plus ``filters`` that
    restrict retrieval to a named file, a human-readable ``reference``, the ``content_question`` (the
    question without its references and file mentions), ``explicit`` (referenced chunks were found) and
    ``names`` (the question's words that name the company of the files it was routed to: "Netflix")."""

    def __init__(self, *, document_store: ChunkStore, fetch_limit: int = 40,
                 catalogue: DocumentCatalogue | None = None) -> None:
        """``catalogue``: the document listing shared with the rest of the process (the status line's count, the
        answer kinds), over ``document_store``; by default one of its own. A cache, not a setting: not
        serialised."""
        if document_store is None:
            raise ValueError("StructureRouter needs a document_store")
        if not 1 <= fetch_limit <= 500:
            raise ValueError("fetch_limit must be between 1 and 500")
        if catalogue is not None and catalogue.store is not document_store:
            raise ValueError("the catalogue must list the router's document_store")
        self.document_store = document_store
        self.fetch_limit = fetch_limit
        self.catalogue = catalogue or DocumentCatalogue(document_store)
        self._names_lock = threading.Lock()
        self._names: tuple[list[DocInfo], list[tuple[str, list[str]]]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, document_store=self.document_store.to_dict(), fetch_limit=self.fetch_limit)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StructureRouter:
        params = data.get("init_parameters", {})
        store = params.get("document_store")
        if isinstance(store, dict):
            params["document_store"] = store_from_dict(store)
        return default_from_dict(cls, data)

    # --- files ---------------------------------------------------------------------------------
    def _documents(
        self, scopes: list[str], *, recount: bool = False
    ) -> tuple[list[DocInfo], list[tuple[str, list[str]]]]:
        """The documents in ``scopes`` and ``(file name, its words)`` of each file, from the shared
        :class:`~pipelines.catalogue.DocumentCatalogue`: a listing up to ``_FILE_CACHE_TTL_S`` old at the scopes'
        chunk count, which is checked at most every ``_FILE_VERSION_CHECK_S`` unless ``recount``."""
        docs = self.catalogue.documents(scopes, max_age_s=_FILE_CACHE_TTL_S,
                                        count_every_s=0.0 if recount else _FILE_VERSION_CHECK_S)
        with self._names_lock:
            if self._names is not None and self._names[0] is docs:  # the same listing: the same names
                return docs, self._names[1]
        names = sorted({d.file for d in docs})
        entries = [(n, re.sub(r"[_\-.]+", " ", re.sub(r"\.pdf$", "", n.lower())).split()) for n in names]
        with self._names_lock:
            self._names = (docs, entries)
        return docs, entries

    def documents(self, scopes: list[str]) -> list[DocInfo]:
        """The documents in ``scopes``, from the cached listing the file names are read from (triage's outline)."""
        return self._documents(scopes)[0]

    def _file_names(self, scopes: list[str]) -> list[tuple[str, list[str]]]:
        return self._documents(scopes)[1]

    def file_filter(self, question: str, scopes: list[str]) -> tuple[dict[str, Any] | None, list[str], list[str]]:
        """A ``meta.file_name in [...]`` filter for files the question names, those names, and the phrases
        of the question that named them. A file is named by its full name, its name without ``.pdf``, or
        two or more consecutive words of it ("the employee handbook" for halvorsen_pike_employee_handbook.pdf)."""
        low_q = question.lower()
        padded = " " + " ".join(re.sub(r"[^\w]+|_", " ", low_q).split()) + " "
        named: list[str] = []
        phrases: list[str] = []
        for name, words in self._file_names(scopes):
            if name.lower() in low_q:
                named.append(name)
                phrases.append(name.lower())
                continue
            best = ""
            for i in range(len(words)):
                for j in range(len(words), i + 1, -1):
                    phrase = " ".join(words[i:j])
                    if len(phrase) > len(best) and len(phrase) >= 8 and f" {phrase} " in padded:
                        best = phrase
            if best or (len(words) == 1 and len(words[0]) >= 5 and f" {words[0]} " in padded):
                named.append(name)
                phrases.append(best or words[0])
        if not named:
            named, phrases = self._files_by_word(question, scopes)
        if not named:
            return None, [], []
        return {"field": "meta.file_name", "operator": "in", "value": named}, named, phrases

    def _files_by_word(self, question: str, scopes: list[str]) -> tuple[list[str], list[str]]:
        """The files one word of whose name the question uses as a document's name ("page 3 of the multicolumn
        document" for 026-latex-multicolumn_multicolumn.pdf), and the phrases that named them."""
        said = [(m.group(1), m.group(0)) for m in _DOC_NAMED.finditer(question)]
        said += [(m.group(3), m.group(3)) for m in _PAGE_OF.finditer(question)]
        named: list[str] = []
        phrases: list[str] = []
        for word, phrase in said:
            low = word.lower()
            if low in _KIND_WORDS or low.isdigit():
                continue
            hits = [name for name, words in self._file_names(scopes) if low in words and name not in named]
            if hits:
                named += hits
                phrases.append(" ".join(re.sub(r"[^\w]+|_", " ", phrase.lower()).split()))
        return named, phrases

    # --- headings ------------------------------------------------------------------------------
    def heading_documents(
        self,
        question: str,
        scopes: Sequence[str],
        candidates: list[Document],
        filters: dict[str, Any] | None = None,
        pool: list[Document] | None = None,
    ) -> tuple[list[Document], str]:
        """The section of a chunk in ``candidates`` whose innermost heading's words all occur in the question:
        its chunks among ``pool`` (all retrieved chunks; default ``candidates``), in document order. Period words
        ("Fiscal 2022", "Year Ended") are no heading's subject and match nothing."""
        qterms = set(terms(question)) - _PERIOD_TERMS
        best: tuple[int, str, Document] | None = None
        for doc in candidates:
            section = str((doc.meta or {}).get("section", "") or "")
            if not section:
                continue
            heading = section.split(" > ")[-1]
            hterms = {t for t in terms(re.sub(r"^[\dIVXLC.§]+\s+", "", heading))
                      if not t.isdigit() and t not in _PERIOD_TERMS}
            if len(hterms) >= 1 and hterms <= qterms and (best is None or len(hterms) > best[0]):
                best = (len(hterms), section, doc)
        if best is None:
            return [], ""
        _, section, hit = best
        doc_id = (hit.meta or {}).get("doc_id")
        # the rest of the section comes from the retrieved candidates (a section's chunks share its heading, so
        # they rank together); a metadata fetch would scan every chunk of the scopes (0.3 s at 50,000 chunks)
        same = [
            d for d in candidates if (d.meta or {}).get("section") == section and (d.meta or {}).get("doc_id") == doc_id
        ]
        same.sort(key=lambda d: int((d.meta or {}).get("chunk_index", 0) or 0))
        return [replace(d, score=1.0) for d in same[: self.fetch_limit]], section.split(" > ")[-1]

    # --- run -----------------------------------------------------------------------------------
    def _pages(self, scopes: list[str], file_cond: dict[str, Any] | None, a: int, b: int) -> list[Document]:
        """The chunks on pages ``a``-``b`` as the reader counts them: where the PDF labels its pages (front
        matter "i, ii, iii", then "1, 2..."; proceedings starting at "6981") the page labels, as PDF viewers
        show them, else the physical page numbers. A document whose labels lack the page falls back to its
        physical pages."""
        labels = [str(n) for n in range(a, b + 1)]
        by_label = self.document_store.fetch(
            scopes=scopes,
            filters=_and(file_cond, {"operator": "OR", "conditions": [
                {"field": "meta.page_label", "operator": "in", "value": labels},
                {"field": "meta.page_label_end", "operator": "in", "value": labels},
            ]}),
            limit=self.fetch_limit,
        )
        physical = self.physical_pages(scopes, file_cond, a, b)
        found_by_label = {(d.meta or {}).get("doc_id") for d in by_label}
        docs = by_label + [d for d in physical if (d.meta or {}).get("doc_id") not in found_by_label]
        return [replace(d, score=1.0) for d in docs]

    def _nth_page(self, scopes: list[str], file_cond: dict[str, Any] | None, n: int) -> list[Document]:
        """The chunks on physical page ``n`` of each document (``-1``: its last page)."""
        if n > 0:
            return self.physical_pages(scopes, file_cond, n, n)
        names = set((file_cond or {}).get("value") or [])
        docs: list[Document] = []
        for info in self._documents(scopes, recount=True)[0]:  # a document uploaded a moment ago has a last page
            if names and info.file not in names:
                continue
            cond = _and({"field": "meta.doc_id", "operator": "==", "value": info.doc_id},
                        {"field": "meta.page_end", "operator": ">=", "value": info.pages})
            docs += [replace(d, score=1.0) for d in self.document_store.fetch(scopes=scopes, filters=cond,
                                                                             limit=self.fetch_limit)]
        return docs[: self.fetch_limit]

    def physical_pages(self, scopes: list[str], file_cond: dict[str, Any] | None, a: int, b: int) -> list[Document]:
        """The chunks on physical pages ``a`` to ``b`` (as a passage header numbers them; ``file_cond``: a
        filter on the files), at most ``fetch_limit``."""
        return self.document_store.fetch(
            scopes=scopes,
            filters=_and(file_cond, {"operator": "AND", "conditions": [
                {"field": "meta.page_start", "operator": "<=", "value": b},
                {"field": "meta.page_end", "operator": ">=", "value": a},
            ]}),
            limit=self.fetch_limit,
        )

    def aliases(self, scopes: list[str]) -> dict[str, str]:
        """Each file of ``scopes`` whose document says who issued it: its identity spelt as a descriptive file name
        (``Adobe_2022_10K``), for :mod:`pipelines.components.document_names`."""
        out: dict[str, str] = {}
        for info in self._documents(scopes)[0]:
            name = identity_of(info).routing_name()
            if name and info.file not in out:
                out[info.file] = name
        return out

    def company_files(self, question: str, scopes: list[str]) -> list[str]:
        """The files of ``scopes`` named after a company or subject the question names, or issued by it."""
        return named_files(question, [name for name, _ in self._file_names(scopes)], self.aliases(scopes))

    @component.output_types(
        documents=list[Document], filters=dict[str, Any] | None, reference=str, content_question=str, explicit=bool,
        names=list[str],
    )
    def run(self, question: str, scopes: list[str]) -> dict[str, Any]:
        """Find what the question names: pages, sections, tables and figures, files, the company.

        :param question: the question.
        :param scopes: where the asker may read; every fetch is filtered to them.
        :returns: ``documents`` (the chunks it references), ``filters`` (restricting retrieval to the files it
            names, or None), ``reference`` (for people: "pages 5–7"), ``content_question`` (the question without
            its references), ``explicit`` (referenced chunks were found) and ``names`` (its words that name the
            company of the files it was routed to).
        """
        scopes = require_scopes(scopes)
        file_cond, files, phrases = self.file_filter(question, scopes)
        in_files = files or self.company_files(question, scopes)
        if in_files and not files:
            file_cond = {"field": "meta.file_name", "operator": "in", "value": in_files}
        preferred = preferred_files(question, in_files, self.aliases(scopes)) if len(in_files) > 1 else []
        if preferred and len(preferred) < len(in_files):  # everything is read from the filings the period points at
            file_cond = {"field": "meta.file_name", "operator": "in", "value": preferred}
        refs = parse_refs(question)
        docs: list[Document] = []
        if refs.any:
            alternatives: list[dict[str, Any]] = []
            if refs.pages:
                docs.extend(self._pages(scopes, file_cond, *refs.pages))
            if refs.nth_page:
                seen_ids = {d.id for d in docs}
                docs.extend(d for d in self._nth_page(scopes, file_cond, refs.nth_page) if d.id not in seen_ids)
            if refs.section_ids:
                alternatives.append({"field": "meta.section_id", "operator": "in", "value": list(refs.section_ids)})
            if refs.labels:
                alternatives.append({"field": "meta.label", "operator": "in", "value": list(refs.labels)})
            seen: set[str] = {d.id for d in docs}
            for cond in alternatives:
                for d in self.document_store.fetch(
                    scopes=scopes, filters=_and(file_cond, cond), limit=self.fetch_limit
                ):
                    if d.id not in seen:
                        seen.add(d.id)
                        docs.append(replace(d, score=1.0))
        reference = refs.describe()
        if files:
            reference = f"{reference} of {', '.join(files)}" if reference else ", ".join(files)
        content = strip_refs(question, refs)
        for phrase in phrases:
            words = r"[\s_\-]+".join(re.escape(w) for w in phrase.split())
            content = re.sub(rf"(?i)\b(?:the\s+)?{words}\b", " ", content)
        return {
            "documents": docs,
            "filters": file_cond,
            "reference": reference,
            "content_question": " ".join(content.split()),
            "explicit": bool(docs),
            "names": naming_words(question, in_files, self.aliases(scopes)) if in_files else [],
        }
