"""Extractive answers: the 1-3 sentences or table rows of the top passages that best answer the question.

Candidates are the sentences of text chunks and the lines of table and list chunks. Each is scored
by cosine similarity of its embedding to the question's plus a term-overlap bonus (IDF-weighted
over the candidates), with small bonuses for the passage's rank and for holding an answer in the form the
question asks for (a count, a share, a date: :mod:`pipelines.components.answer_forms`). The answer is a fixed lead
line and the chosen spans as quotes: nothing but the lead line is written that is not in the source. When the best
quote is a table row and the question names one or two of its columns, the lead line reads the row's cells
under those columns ("2021: Headcount at year end 1,050 [2]"), its label and values copied from the quoted
header and row.

Special cases:

* a table named in the question ("table 2") is quoted whole (up to ``max_table_chars``), since the
  answer to "which year has the highest revenue" is the table itself;
* a metric no statement prints ("free cash flow", "quick ratio"; :func:`pipelines.components.statements.formula_for`)
  quotes, under their header, the row of each statement line its definition computes it from (the best-ranked
  passage's), and the lead line gives the definition: the figure is the reader's to compute, never written here;
* a structural question with no content words ("summarize pages 5-7") quotes the opening sentence
  of up to three of the referenced chunks (distinct pages first).

Outputs for the refusal check: ``max_cosine`` (the highest cosine similarity between the question and a
scored sentence or row), ``coverage`` (the share of the question's specific terms found in the passages),
and ``relevance``, ``cosine_weight`` x the first + (1 - ``cosine_weight``) x the second. The query engine
combines ``max_cosine`` with whether the question's terms occur in the scope at all
(:func:`pipelines.components.refusal.confidence`). An explicit reference (page, section, table) scores 1.0.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
from haystack import Document, component, default_from_dict, default_to_dict

from pipelines.components._text import coverage, sentence_spans, terms
from pipelines.components.answer_forms import asked_form
from pipelines.components.citation_validator import chunk_id_of
from pipelines.components.query_embedder import check_embedding_args, shared_encoder
from pipelines.components.statements import Formula, formula_for, is_line
from pipelines.models import RawCitation

LEAD = "Here is what the PDFs say"
_MIN_CHARS = 20
_MAX_CHARS = 700
_EMBED_CHARS = 300  # scoring needs the gist; long sentences cost embedding time
_CACHE_SIZE = 4096
# A quote from a page no other quote shows is kept down to ``keep_ratio - _OTHER_PAGE_SLACK`` of the best score.
_OTHER_PAGE_SLACK = 0.15
_FORM_BONUS = 0.1  # a sentence in the answer's form (:mod:`pipelines.components.answer_forms`)


@dataclass
class Candidate:
    doc_rank: int
    doc: Document
    start: int
    end: int
    terms: set[str]
    overlap: float = 0.0
    cosine: float = 0.0
    score: float = 0.0
    header: tuple[int, int] | None = None  # a table row's header line, scored with it and quoted before it
    in_form: bool = False  # holds an answer in the form the question asks for

    @property
    def text(self) -> str:
        return (self.doc.content or "")[self.start : self.end]

    @property
    def header_text(self) -> str:
        return (self.doc.content or "")[self.header[0] : self.header[1]] if self.header else ""

    @property
    def scoring_text(self) -> str:
        return f"{self.header_text} / {self.text}" if self.header else self.text


def is_heading_line(text: str, doc: Document) -> bool:
    section = str((doc.meta or {}).get("section", "") or "")
    if not section:
        return False
    flat = " ".join(text.split())
    return flat in section or flat == section.split(" > ")[-1]


def _page(doc: Document) -> tuple[Any, Any]:
    meta = doc.meta or {}
    return meta.get("doc_id"), meta.get("page_start")


_CAPTION = re.compile(r"^(?:table|figure|fig\.)\s*\d", re.I)
_NUMBERED_HEADING = re.compile(r"^(?:\d+(?:\.\d+)*\.?|[IVXLC]+\.|article\s+\w+|section\s+\d+)\s+\S", re.I)


def _looks_like_heading(line: str, doc: Document) -> bool:
    return is_heading_line(line, doc) or (
        len(line) <= 100 and line[-1:] not in ".!?:;," and (" > " in line or bool(_NUMBERED_HEADING.match(line)))
    )


def skip_heading_lines(content: str, s: int, e: int, doc: Document) -> int:
    """Move ``s`` past heading lines ("4 Leave > 4.2 Parental leave") that open the span."""
    while True:
        nl = content.find("\n", s, e)
        if nl < 0:
            return s
        if not _looks_like_heading(content[s:nl].strip(), doc):
            return s
        s = nl + 1
        while s < e and content[s].isspace():
            s += 1


def _lead(lead: str, citations: list[RawCitation]) -> str:
    """The one line written by Citebot: a fixed lead and the [n] markers; the quotes are the citations."""
    return lead + " " + "".join(f"[{c['n']}]" for c in citations) + ":"


def cells_line(qterms: set[str], header: str, row: str) -> str:
    """The row's label and its cells under the columns the question names ("2021: Offices 4"), or "" when the
    header and row do not split into the same cells or the question names no column (or more than two)."""
    heads = [h.strip() for h in header.split("|")]
    cells = [c.strip() for c in row.split("|")]
    if len(heads) < 2 or len(heads) != len(cells) or not cells[0]:
        return ""
    named = [j for j in range(1, len(heads)) if heads[j] and set(terms(heads[j])) & qterms and cells[j]]
    if not 1 <= len(named) <= 2:
        return ""
    return f"{cells[0]}: " + "; ".join(f"{heads[j]} {cells[j]}" for j in named)


def completing(top: Candidate, cands: list[Candidate], qterms: set[str]) -> Candidate | None:
    """The sentence right after ``top`` in its passage when it holds a word of the question that ``top`` lacks:
    the best match often restates the question's condition ("If "--" is displayed as the resting heart rate
    reading, it indicates…") and the next sentence answers it ("…stay in a quiet and relaxed environment")."""
    if top.header is not None:
        return None
    text = top.doc.content or ""
    following = [c for c in cands if c.doc.id == top.doc.id and c.start >= top.end and c.header is None
                 and not text[top.end : c.start].strip()]
    if not following:
        return None
    after = min(following, key=lambda c: c.start)
    return after if (qterms - top.terms) & after.terms else None


def _formula_rows(formula: Formula, cands: list[Candidate]) -> list[tuple[str, Candidate]]:
    """For each statement line the metric is computed from, the table row of the best-ranked passage that
    is that line and holds a figure (a passage's first row, which heads its other rows, counts too)."""
    rows = {(c.doc.id, c.start): c for c in cands if c.header is not None}
    for c in list(rows.values()):
        if c.header is not None:
            rows.setdefault((c.doc.id, c.header[0]), Candidate(c.doc_rank, c.doc, *c.header, set()))
    found: list[tuple[str, Candidate]] = []
    for line in formula.lines:
        for c in sorted(rows.values(), key=lambda c: (c.doc_rank, c.start)):
            label, bar, figures = c.text.partition("|")
            if bar and any(ch.isdigit() for ch in figures) and is_line(label, line):
                found.append((line, c))
                break
    return found


def _computed_answer(formula: Formula, found: list[tuple[str, Candidate]]) -> dict[str, Any]:
    """A metric no statement prints: its definition, and each row it is computed from quoted under its header.
    The figure itself is left to the reader (or to the LLM mode, which computes it from the same rows)."""
    spans: list[tuple[Document, str]] = []
    for c in sorted({id(c): c for _, c in found}.values(), key=lambda c: (c.doc_rank, c.start)):
        if c.header is not None and (c.doc, c.header_text) not in spans:
            spans.append((c.doc, c.header_text))
        if (c.doc, c.text) not in spans:
            spans.append((c.doc, c.text))
    citations = [RawCitation(n=i, chunk_id=chunk_id_of(d), quote=text) for i, (d, text) in enumerate(spans, 1)]
    row_ns = "".join(f"[{cit['n']}]" for cit in citations if any(cit["quote"] == c.text for _, c in found))
    missing = [line for line in formula.lines if line not in {name for name, _ in found}]
    name = formula.name[:1].upper() + formula.name[1:]
    text = f"{name} is not printed as such: it is {formula.formula}, to compute from the quoted rows {row_ns}"
    text += f" ({', '.join(missing)}: not in these passages). " if missing else ". "
    return {"text": text + _lead(LEAD, citations), "citations": citations}


def _nothing() -> dict[str, Any]:
    return {"text": "", "citations": [], "relevance": 0.0, "max_cosine": 0.0, "coverage": 0.0}


def _label_for(doc: Document) -> str:
    return str((doc.meta or {}).get("label", "") or "")


@component
class ExtractiveAnswerer:
    """Question + passages in; a lead line with quoted spans (``text``), ``citations`` as
    ``{n, chunk_id, quote}``, and ``relevance`` (best question-sentence cosine) out."""

    def __init__(
        self,
        *,
        model_path: str,
        threads: int = 1,
        backend: str = "torch",
        models_dir: str = "",
        batch_window_ms: float = 0.0,
        max_quotes: int = 3,
        max_candidates: int = 5,
        overlap_weight: float = 0.35,
        keep_ratio: float = 0.85,
        max_table_chars: int = 1500,
        cosine_weight: float = 0.7,
    ) -> None:
        check_embedding_args(model_path, threads, backend, str(models_dir or ""), batch_window_ms)
        if not 1 <= max_quotes <= 3:
            raise ValueError("max_quotes must be 1, 2 or 3")
        if not 4 <= max_candidates <= 256:
            raise ValueError("max_candidates must be between 4 and 256")
        if not 0.0 <= overlap_weight <= 2.0:
            raise ValueError("overlap_weight must be between 0 and 2")
        if not 0.0 < keep_ratio <= 1.0:
            raise ValueError("keep_ratio must be in (0, 1]")
        if max_table_chars < 100:
            raise ValueError("max_table_chars must be at least 100")
        if not 0.0 <= cosine_weight <= 1.0:
            raise ValueError("cosine_weight must be between 0 and 1")
        self.model_path = str(model_path)
        self.threads = threads
        self.backend = backend
        self.models_dir = str(models_dir or "")
        self.batch_window_ms = batch_window_ms
        self._encoder: Any = None
        self.max_quotes = max_quotes
        self.max_candidates = max_candidates
        self.overlap_weight = overlap_weight
        self.keep_ratio = keep_ratio
        self.max_table_chars = max_table_chars
        self.cosine_weight = cosine_weight
        self._ready = False
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            model_path=self.model_path,
            threads=self.threads,
            backend=self.backend,
            models_dir=self.models_dir,
            batch_window_ms=self.batch_window_ms,
            max_quotes=self.max_quotes,
            max_candidates=self.max_candidates,
            overlap_weight=self.overlap_weight,
            keep_ratio=self.keep_ratio,
            max_table_chars=self.max_table_chars,
            cosine_weight=self.cosine_weight,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExtractiveAnswerer:
        return default_from_dict(cls, data)

    def warm_up(self) -> None:
        if self._encoder is None:
            self._encoder = shared_encoder(
                self.model_path, self.threads, self.backend, self.models_dir, self.batch_window_ms
            )

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Embeddings of ``texts``; repeated sentences (popular passages) come from a small LRU cache."""
        self.warm_up()
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            vecs = self._encoder.encode([t[:_EMBED_CHARS] for t in missing], 64)
            with self._cache_lock:
                for t, v in zip(missing, vecs, strict=True):
                    self._cache[t] = np.asarray(v, "float32")
                while len(self._cache) > _CACHE_SIZE:
                    self._cache.popitem(last=False)
        with self._cache_lock:
            out = []
            for t in texts:
                cached = self._cache.get(t)
                if cached is None:  # evicted by a concurrent call between the two steps
                    cached = np.asarray(self._encoder.encode([t[:_EMBED_CHARS]], 1)[0])
                else:
                    self._cache.move_to_end(t)
                out.append(cached)
        return np.stack(out).astype("float32")

    # --- candidates ----------------------------------------------------------------------------
    def _candidates(self, docs: list[Document], qterms: set[str]) -> list[Candidate]:
        """The sentences (a table's rows, with its header) of ``docs`` an answer may quote. Headings and lines
        under ``_MIN_CHARS`` are not quoted, except in a passage that has nothing else: there a line holding every
        content word of the question (``qterms``) is (a one-line page that reads "Hello, World!" asked "Hello,
        World")."""
        out: list[Candidate] = []
        for rank, doc in enumerate(docs):
            content = doc.content or ""
            etype = (doc.meta or {}).get("element_type", "text")
            header: tuple[int, int] | None = None
            found = len(out)
            for s0, e in sentence_spans(content, lines=etype in ("table", "list")):
                s = skip_heading_lines(content, s0, e, doc)
                text = content[s:e]
                if etype == "table":
                    if _CAPTION.match(text) or (header is None and "|" not in text and _looks_like_heading(text, doc)):
                        continue
                    if header is None:  # the first line after the caption names the columns
                        header = (s, e)
                        continue
                elif len(text) < _MIN_CHARS:
                    continue
                if e - s > _MAX_CHARS or is_heading_line(text, doc):
                    continue
                c = Candidate(rank, doc, s, e, set(terms(text)), header=header if etype == "table" else None)
                c.terms |= set(terms(c.header_text))
                out.append(c)
            if len(out) == found and qterms and etype != "table":
                out += [Candidate(rank, doc, s, e, words) for s, e in sentence_spans(content, lines=True)
                        if e - s <= _MAX_CHARS and qterms <= (words := set(terms(content[s:e])))]
        return out

    @component.output_types(text=str, citations=list[RawCitation], relevance=float, max_cosine=float,
                            coverage=float)
    def run(
        self,
        question: str,
        documents: list[Document],
        routed: list[Document] | None = None,
        query_embedding: list[float] | None = None,
        content_question: str | None = None,
        reference: str = "",
    ) -> dict[str, Any]:
        """Pick the sentences or table rows that best answer the question.

        :param question: the question.
        :param documents: retrieved passages, best first.
        :param routed: chunks the question referenced explicitly (page, section, table...).
        :param query_embedding: the question's embedding, when the caller has it already.
        :param content_question: the question without its structural references (defaults to ``question``).
        :param reference: what the question referenced, for the lead line ("pages 5–7").
        :returns: ``text`` (a lead line and quoted spans), ``citations`` (``{n, chunk_id, quote}``), and the
            signals ``relevance``, ``max_cosine`` (the best candidate's cosine to the question) and ``coverage``
            (how many of the question's terms the passages hold).
        """
        routed = list(routed or [])
        routed_ids = {d.id for d in routed}
        context = routed + [d for d in documents if d.id not in routed_ids]
        if not context:
            return _nothing()
        cq = question if content_question is None else content_question
        qterms = set(terms(cq))

        # a table the question names: quote it whole
        named_tables = [d for d in routed if (d.meta or {}).get("element_type") == "table" and _label_for(d)]
        if named_tables and _label_for(named_tables[0]).lower() in question.lower():
            table = named_tables[0]
            content = (table.content or "").strip()
            quote = (
                content[: self.max_table_chars].rsplit("\n", 1)[0] if len(content) > self.max_table_chars else content
            )
            return {
                "text": f"{_label_for(table)} in {table.meta.get('file_name', 'the PDF')} [1]:",
                "citations": [RawCitation(n=1, chunk_id=chunk_id_of(table), quote=quote)],
                "relevance": 1.0,
                "max_cosine": 1.0,
                "coverage": 1.0,
            }

        # a structural question without content words: the opening sentence of the referenced chunks
        if routed and not qterms:
            return self._summary(routed, reference)

        cands = self._candidates(context, qterms)
        if not cands:
            return _nothing()
        df: dict[str, int] = {}
        for c in cands:
            for t in c.terms:
                df[t] = df.get(t, 0) + 1
        n = len(cands)
        # summed in a fixed order: a set's order changes with Python's hash seed, and a float sum with its order,
        # which once decided a tie between two quotes differently from one process to the next
        idf = {t: math.log(1 + n / df.get(t, 0.5)) for t in sorted(qterms)}
        total = sum(idf.values()) or 1.0
        for c in cands:
            c.overlap = sum(idf[t] for t in sorted(qterms & c.terms)) / total if qterms else 0.0
        # a sentence in the form the question asks for (a count, a share, a date) answers; one that restates it does not
        form = asked_form(cq)
        for c in cands:
            c.in_form = form is not None and form.holds(c.text)
        # pre-select by overlap, form and passage rank, then embed
        every = list(cands)
        cands.sort(key=lambda c: c.overlap + 0.15 / (1 + c.doc_rank) + _FORM_BONUS * c.in_form, reverse=True)
        cands = cands[: self.max_candidates]
        q_vec = np.asarray(query_embedding, "float32") if query_embedding is not None else self._embed([question])[0]
        vecs = self._embed([c.scoring_text for c in cands])
        cos = vecs @ q_vec
        for c, s in zip(cands, cos, strict=True):
            c.cosine = float(s)
            c.score = c.cosine + self.overlap_weight * c.overlap + 0.05 / (1 + c.doc_rank) + _FORM_BONUS * c.in_form
            if c.doc.id in routed_ids:
                c.score += 0.1
        cov = coverage(qterms, [d.content or "" for d in context])
        max_cos = max(c.cosine for c in cands)
        relevance = self.cosine_weight * max_cos + (1 - self.cosine_weight) * cov
        signals = {"relevance": relevance, "max_cosine": max_cos, "coverage": cov}
        formula = formula_for(cq)
        computed = _formula_rows(formula, every) if formula else []
        if formula and len(computed) >= 2:
            return _computed_answer(formula, computed) | signals
        cands.sort(key=lambda c: c.score, reverse=True)
        chosen: list[Candidate] = []
        best = cands[0].score
        for c in cands:
            if len(chosen) >= self.max_quotes:
                break
            # below the bar, a passage on a page no quote shows yet may still be where the answer is: show it too
            if chosen and c.score < best * self.keep_ratio and (
                c.score < best * (self.keep_ratio - _OTHER_PAGE_SLACK) or _page(c.doc) in {_page(o.doc) for o in chosen}
            ):
                continue
            if any(o.doc.id == c.doc.id and o.start < c.end and c.start < o.end for o in chosen):
                continue
            if any(o.text == c.text for o in chosen):
                continue
            chosen.append(c)
        top = chosen[0]
        after = completing(top, every, qterms)
        if after is not None and all(o.doc.id != after.doc.id or o.start != after.start for o in chosen):
            if len(chosen) < self.max_quotes:
                chosen.insert(1, after)
            elif len(chosen) > 1 and _page(chosen[-1].doc) == _page(top.doc):  # never push another page out
                chosen = [top, after, *chosen[1:-1]]
        # show quotes in document order within a passage, passages in rank order
        chosen.sort(key=lambda c: (c.doc_rank, c.start))
        spans: list[tuple[Document, str]] = []
        for c in chosen:
            if c.header and (c.doc, c.header_text) not in spans:
                spans.append((c.doc, c.header_text))  # "Year | Revenue | Headcount" before "2019 | 70.4 | 940"
            spans.append((c.doc, c.text))
        citations = [
            RawCitation(n=i, chunk_id=chunk_id_of(d), quote=text)
            for i, (d, text) in enumerate(spans[: self.max_quotes + 1], 1)
        ]
        text = _lead(LEAD, citations)
        line = cells_line(qterms, top.header_text, top.text) if top.header else ""
        row_n = next((c["n"] for c in citations if c["quote"] == top.text), None)
        if line and row_n is not None:
            text = f"{line} [{row_n}]. {text}"
        return {"text": text, "citations": citations} | signals

    def _summary(self, routed: list[Document], reference: str) -> dict[str, Any]:
        picked: list[tuple[Document, int, int]] = []
        pages_seen: set[int] = set()
        for pass_ in (0, 1):
            for doc in routed:
                if len(picked) >= self.max_quotes:
                    break
                page = int((doc.meta or {}).get("page_start", 0) or 0)
                if pass_ == 0 and page in pages_seen:
                    continue
                if any(p[0].id == doc.id for p in picked):
                    continue
                etype = (doc.meta or {}).get("element_type", "text")
                for s0, e in sentence_spans(doc.content or "", lines=etype in ("table", "list")):
                    s = skip_heading_lines(doc.content or "", s0, e, doc)
                    text = (doc.content or "")[s:e]
                    if len(text) >= _MIN_CHARS and e - s <= _MAX_CHARS and not is_heading_line(text, doc):
                        picked.append((doc, s, e))
                        pages_seen.add(page)
                        break
        picked.sort(key=lambda p: (int((p[0].meta or {}).get("page_start", 0) or 0), str(p[0].id)))
        citations = [
            RawCitation(n=i, chunk_id=chunk_id_of(d), quote=(d.content or "")[s:e])
            for i, (d, s, e) in enumerate(picked, 1)
        ]
        if not citations:
            return _nothing()
        return {
            "text": _lead(f"From {reference}" if reference else "From the part you named", citations),
            "citations": citations,
            "relevance": 1.0,
            "max_cosine": 1.0,
            "coverage": 1.0,
        }
