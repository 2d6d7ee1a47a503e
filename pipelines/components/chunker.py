"""StructureChunker: elements -> chunk Documents that never cross a section boundary.

Budget: at most ``max_tokens`` tokens of the embedding model's tokenizer for the passage that gets
embedded (section path + newline + chunk text). Paragraphs and lists are packed greedily; a
paragraph too long for one chunk is split at sentence ends (then at word windows); a list that does
not fit is split between items. Tables become their own chunks, rows as ``a | b | c`` lines, and
every table chunk repeats the caption and the header row. OCR'd text is kept apart
(``element_type=ocr``, with the page's mean confidence). An un-numbered section smaller than
``min_tokens`` is merged into the chunk that follows when they share the same parent, and a
section's short introduction is merged into its first subsection (which keeps the deeper meta).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict

from pipelines.components._text import chunk_sentences
from pipelines.reading.clean_text import clean_text
from pipelines.reading.identity import DocumentIdentity
from pipelines.reading.layout import Element

TokenCounter = Callable[[str], int]

MAX_PAGE_SPAN = 2  # a chunk (and so a citation) covers at most this many pages


@dataclass
class _Piece:
    text: str
    page_start: int
    page_end: int
    kind: str  # text | list | table | caption | ocr
    label: str = ""
    ocr_confidence: float | None = None


@dataclass
class _Draft:
    section: str
    section_id: str
    numbered: bool
    pieces: list[_Piece] = field(default_factory=list)
    tokens: int = 0
    starts_with_heading: bool = False

    @property
    def heading_only(self) -> bool:
        return self.starts_with_heading and len(self.pieces) == 1

    @property
    def page_start(self) -> int:
        return min(p.page_start for p in self.pieces)

    @property
    def page_end(self) -> int:
        return max(p.page_end for p in self.pieces)

    @property
    def element_type(self) -> str:
        kinds = {p.kind for p in self.pieces}
        for k in ("table", "ocr", "list"):
            if k in kinds:
                return k
        if kinds == {"caption"}:
            return "caption"
        return "text"


def load_token_counter(model_path: Path) -> TokenCounter:
    """Count tokens with the model folder's fast tokenizer only (no model weights, no transformers import).

    BERT word-piece pre-tokenisation splits on whitespace, so counts of whitespace-joined texts add up.
    """
    tok_file = model_path / "tokenizer.json"
    if tok_file.exists():
        from tokenizers import Tokenizer

        fast = Tokenizer.from_file(str(tok_file))
        fast.no_truncation()
        fast.no_padding()

        def count(text: str) -> int:
            return len(fast.encode(text, add_special_tokens=False).ids)

        return count
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_path), local_files_only=True)

    def count_slow(text: str) -> int:
        return len(tok(text, add_special_tokens=False, truncation=False, verbose=False)["input_ids"])

    return count_slow


@component
class StructureChunker:
    def __init__(self, *, model_path: str, max_tokens: int = 200, min_tokens: int = 40) -> None:
        if not 32 <= max_tokens <= 256:
            raise ValueError("max_tokens must be between 32 and 256 (the model truncates at 256)")
        if not 0 <= min_tokens < max_tokens:
            raise ValueError("min_tokens must be >= 0 and smaller than max_tokens")
        if not model_path:
            raise ValueError("model_path is required (the tokenizer counts the chunk budget)")
        self.model_path = model_path
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        self._count: TokenCounter | None = None

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self, model_path=self.model_path, max_tokens=self.max_tokens, min_tokens=self.min_tokens
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StructureChunker:
        return default_from_dict(cls, data)

    def warm_up(self) -> None:
        if self._count is None:
            self._count = lru_cache(maxsize=8192)(load_token_counter(Path(self.model_path)))

    @component.output_types(documents=list[Document])
    def run(
        self,
        elements: list[Element],
        doc_id: str,
        file_name: str,
        scope: str,
        sha256: str = "",
        uploaded_by: str = "",
        uploaded_at: str = "",
        page_labels: dict[int, str] | None = None,
        source_url: str = "",
        identity: DocumentIdentity | None = None,
    ) -> dict[str, Any]:
        """Cut the document's elements into chunks, each within one section.

        :param elements: the structure step's elements, in reading order.
        :param doc_id: the document's id (each chunk's id is ``{doc_id}:{n}``).
        :param file_name: the file's name, on every chunk.
        :param scope: where the document may be found (a channel, a chat), on every chunk.
        :param sha256: the file's content hash.
        :param uploaded_by: who uploaded it.
        :param uploaded_at: when (ISO time).
        :param page_labels: page number -> its label where the PDF labels its pages (chunk meta ``page_label``,
            the label of the chunk's first page, so "page 17" finds the page a reader sees numbered 17).
        :param source_url: where people open the file, for the citations' links.
        :param identity: what the document says it is (:mod:`pipelines.reading.identity`), its ``doc_*`` fields
            on every chunk.
        :returns: ``documents``, the chunks (new Documents, without embeddings).
        """
        self.warm_up()
        drafts = self._drafts(elements)
        drafts = self._merge_small(drafts)
        docs: list[Document] = []
        for d in drafts:
            # the parser and OCR already clean their text; this keeps any other source out of quotes too
            content = clean_text("\n".join(p.text for p in d.pieces)).strip()
            if not content:
                continue
            label = next((p.label for p in d.pieces if p.label), "")
            meta: dict[str, Any] = {
                "scope": scope,
                "doc_id": doc_id,
                "file_name": file_name,
                "page_start": min(p.page_start for p in d.pieces),
                "page_end": max(p.page_end for p in d.pieces),
                "section": d.section,
                "section_id": d.section_id,
                "element_type": d.element_type,
                "label": label,
                "chunk_index": len(docs),
                "sha256": sha256,
                "uploaded_by": uploaded_by,
                "uploaded_at": uploaded_at,
                "source_url": source_url,
            }
            if identity is not None:
                meta.update(identity.meta())
            if page_labels:
                meta["page_label"] = page_labels.get(meta["page_start"], "")
                if meta["page_end"] != meta["page_start"]:  # a chunk over two pages answers to both labels
                    meta["page_label_end"] = page_labels.get(meta["page_end"], "")
            confs = [p.ocr_confidence for p in d.pieces if p.ocr_confidence is not None]
            if confs:
                meta["ocr_confidence"] = round(sum(confs) / len(confs), 1)
            docs.append(Document(id=f"{doc_id}:{len(docs):05d}", content=content, meta=meta))
        return {"documents": docs}

    # --- building -------------------------------------------------------------------------
    def _tokens(self, text: str) -> int:
        assert self._count is not None
        return self._count(text)

    def _budget(self, section: str) -> int:
        prefix = self._tokens(section) + 1 if section else 0
        return max(16, self.max_tokens - prefix)

    def _drafts(self, elements: list[Element]) -> list[_Draft]:
        drafts: list[_Draft] = []
        cur: _Draft | None = None
        budget = self.max_tokens

        def new_draft(section: str, section_id: str, numbered: bool) -> _Draft:
            d = _Draft(section=section, section_id=section_id, numbered=numbered)
            drafts.append(d)
            return d

        numbered_section = False
        for e in elements:
            if e.kind == "heading":
                numbered_section = bool(e.numbering)
                cur = new_draft(e.section, e.section_id, numbered_section)
                cur.starts_with_heading = True
                budget = self._budget(e.section)
                piece = _Piece(e.text, e.page_start, e.page_end, "text")
                cur.pieces.append(piece)
                cur.tokens = self._tokens(e.text)
                continue
            if cur is None or cur.section != e.section:
                cur = new_draft(e.section, e.section_id, numbered_section)
                budget = self._budget(e.section)
            for piece in self._pieces(e, budget):
                n = self._tokens(piece.text)
                heading_only = len(cur.pieces) == 1 and cur.pieces[0].kind == "text" and cur.tokens < 40
                mixes = bool(cur.pieces) and not heading_only and (
                    (piece.kind in ("table", "ocr")) != (cur.element_type in ("table", "ocr"))
                    or (piece.kind == "table" and cur.element_type == "table")
                )
                # a chunk that already holds min_tokens does not reach onto the next page for more
                turns_page = bool(cur.pieces) and piece.page_start > cur.page_end and cur.tokens >= self.min_tokens
                if cur.pieces and (
                    cur.tokens + n + 1 > budget or mixes or turns_page or not _fits_pages(cur, piece)
                ):
                    cur = new_draft(e.section, e.section_id, numbered_section)
                cur.pieces.append(piece)
                cur.tokens += n + (1 if len(cur.pieces) > 1 else 0)
        return [d for d in drafts if d.pieces]

    def _pieces(self, e: Element, budget: int) -> list[_Piece]:
        if e.kind == "table":
            return self._table_pieces(e, budget)
        kind = {"paragraph": "ocr" if e.ocr else "text", "list": "list", "caption": "caption"}[e.kind]
        conf = e.ocr_confidence if e.ocr else None
        if self._tokens(e.text) <= budget:
            return [_Piece(e.text, e.page_start, e.page_end, kind, e.label, conf)]
        parts = e.items if e.kind == "list" and e.items else chunk_sentences(e.text)
        if e.kind == "list":
            parts = [f"- {p}" for p in parts]
        out: list[_Piece] = []
        buf = ""
        buf_tokens = 0
        for part in parts:
            for sub in self._fit(part, budget):
                n = self._tokens(sub)
                if buf and buf_tokens + n > budget:
                    out.append(_Piece(buf, e.page_start, e.page_end, kind, e.label, conf))
                    buf, buf_tokens = sub, n
                else:
                    buf = (buf + ("\n" if e.kind == "list" else " ") + sub) if buf else sub
                    buf_tokens += n
        if buf:
            out.append(_Piece(buf, e.page_start, e.page_end, kind, e.label, conf))
        return _place_on_pages(out, e) if e.page_offsets else out

    def _fit(self, text: str, budget: int) -> list[str]:
        """``text`` as-is when it fits, else word windows that do."""
        if self._tokens(text) <= budget:
            return [text]
        words = text.split()
        out: list[str] = []
        cur: list[str] = []
        cur_tokens = 0
        for w in words:
            n = self._tokens(w)
            if cur and cur_tokens + n > budget:
                out.append(" ".join(cur))
                cur, cur_tokens = [], 0
            cur.append(w)
            cur_tokens += n
        if cur:
            out.append(" ".join(cur))
        return out

    def _table_pieces(self, e: Element, budget: int) -> list[_Piece]:
        head = [e.caption] if e.caption else []
        if e.header:
            head.append(" | ".join(e.header))
        head_text = "\n".join(head)
        head_tokens = self._tokens(head_text) if head_text else 0
        pieces: list[_Piece] = []
        rows: list[str] = []
        pages: list[int] = []
        tokens = head_tokens
        row_pages = e.row_pages or [e.page_start] * len(e.rows)
        for row, page in zip(e.rows, row_pages, strict=False):
            line = " | ".join(row)
            n = self._tokens(line) + 1
            first_page = min(pages + [page] + ([] if pieces else [e.page_start]))  # part 1 also holds the caption
            too_wide = max(pages + [page]) - first_page >= MAX_PAGE_SPAN
            if rows and (tokens + n > budget or too_wide):
                start = min(e.page_start, *pages) if not pieces else min(pages)  # part 1 also holds the caption
                pieces.append(_Piece("\n".join([*head, *rows]), start, max(pages), "table", e.label))
                rows, pages, tokens = [], [], head_tokens
            rows.append(line)
            pages.append(page)
            tokens += n
        if rows or not pieces:
            first = e.page_start if not pieces else min(pages)  # the first part also holds the caption
            pieces.append(_Piece("\n".join([*head, *rows]), min(first, *pages) if pages else first,
                                 max(pages or [e.page_end]), "table", e.label))
        return pieces

    def _merge_small(self, drafts: list[_Draft]) -> list[_Draft]:
        out: list[_Draft] = []
        i = 0
        while i < len(drafts):
            d = drafts[i]
            nxt = drafts[i + 1] if i + 1 < len(drafts) else None
            if (
                nxt is not None
                and d.tokens < self.min_tokens
                and d.element_type == "text"
                and nxt.element_type in ("text", "list")
                and d.tokens + nxt.tokens + 1 <= self._budget(nxt.section)
                and (nxt.section.startswith(d.section + " > ") if d.section else True)
                and self._single_chunk(drafts, i)
                and _merge_keeps_pages(d, nxt)
            ):
                # a parent's short intro joins its first subsection (deeper meta kept)
                nxt.pieces = d.pieces + nxt.pieces
                nxt.tokens += d.tokens + 1
                i += 1
                continue
            if (
                nxt is not None
                and not d.numbered
                and d.tokens < self.min_tokens
                and d.element_type == "text"
                and nxt.element_type in ("text", "list")
                and _parent(d.section) == _parent(nxt.section)
                and d.tokens + nxt.tokens + 1 <= self._budget(nxt.section)
                and self._single_chunk(drafts, i)
                and _merge_keeps_pages(d, nxt)
            ):
                # a small un-numbered sibling joins the next section
                nxt.pieces = d.pieces + nxt.pieces
                nxt.tokens += d.tokens + 1
                i += 1
                continue
            if (
                nxt is not None
                and d.heading_only
                and d.tokens < self.min_tokens
                and d.tokens + nxt.tokens + 1 <= self._budget(nxt.section)
                and _merge_keeps_pages(d, nxt)
            ):
                # a heading with nothing under it before the next heading (or a table) is no chunk of its own:
                # it leads the next chunk, which keeps its own section
                nxt.pieces = d.pieces + nxt.pieces
                nxt.tokens += d.tokens + 1
                nxt.starts_with_heading = True
                i += 1
                continue
            out.append(d)
            i += 1
        return out

    @staticmethod
    def _single_chunk(drafts: list[_Draft], i: int) -> bool:
        d = drafts[i]
        before = i > 0 and drafts[i - 1].section == d.section
        after = i + 1 < len(drafts) and drafts[i + 1].section == d.section
        return not before and not after


def _fits_pages(draft: _Draft, piece: _Piece) -> bool:
    """``piece`` may join ``draft``: the chunk still spans at most two pages, and OCR'd text (a scanned page,
    a slide) only ever shares a chunk with text of its own page."""
    if not draft.pieces:
        return True
    start = min(draft.page_start, piece.page_start)
    end = max(draft.page_end, piece.page_end)
    if end - start > MAX_PAGE_SPAN - 1:
        return False
    ocr = piece.kind == "ocr" or any(p.kind == "ocr" for p in draft.pieces)
    return not (ocr and start != end)


def _place_on_pages(pieces: list[_Piece], e: Element) -> list[_Piece]:
    """Parts of a paragraph that runs over a page break get the pages they are on, not the paragraph's."""
    placed: list[_Piece] = []
    cursor = 0
    for piece in pieces:
        start = e.text.find(piece.text, cursor)
        if start < 0:  # not a verbatim part of the text (should not happen): keep the paragraph's pages
            placed.append(piece)
            continue
        cursor = start + len(piece.text)
        placed.append(dataclasses.replace(piece, page_start=_page_at(e, start), page_end=_page_at(e, cursor - 1)))
    return placed


def _page_at(e: Element, offset: int) -> int:
    page = e.page_start
    for start, number in e.page_offsets:
        if offset >= start:
            page = number
    return page


def _merge_keeps_pages(small: _Draft, nxt: _Draft) -> bool:
    """Merging a small draft into the next adds no page boundary: a small chunk is only worth an embedding
    saved when its citation stays as precise as it was."""
    start = min(small.page_start, nxt.page_start)
    end = max(small.page_end, nxt.page_end)
    widest = max(small.page_end - small.page_start, nxt.page_end - nxt.page_start)
    return end - start == widest


def _parent(section: str) -> str:
    return section.rsplit(" > ", 1)[0] if " > " in section else ""
