"""Platform-neutral models shared by the pipelines, the chat core, the CLI and the eval suite.

Chunk metadata (on every Haystack ``Document`` the indexing pipeline writes):

=================  ==========================================================================
``scope``          ``local`` (CLI), ``slack:{team}:{channel}``, ``teams:{tenant}:{conversation}``
``doc_id``         hash of (scope, content sha256): same bytes in the same scope = same id
``file_name``      as uploaded (display only; never used to build a path)
``page_start``     1-based first page of the chunk
``page_end``       1-based last page
``page_label``     the first page's label where the PDF labels its pages ("iii", "17"), else the number it prints in
                   its header or footer when that differs from the physical count; absent otherwise
``page_label_end`` the last page's label, for a chunk over two labelled pages
``section``        heading path, ``" > "``-joined ("4 Leave > 4.2 Parental leave"); "" if none
``section_id``     numbering of the innermost numbered heading ("4.2", "12", "IV"); "" if none
``element_type``   ``text`` | ``table`` | ``list`` | ``caption`` | ``ocr``
``label``          "Table 3" / "Figure 2" for tables and figures with a numbered caption, else ""
``chunk_index``    0-based position of the chunk in its document
``sha256``         sha256 of the file's bytes
``uploaded_by``    platform user id ("" for the CLI)
``uploaded_at``    ISO-8601 UTC time of ingestion
``source_url``     where a person opens the file: its Slack permalink, its Teams/SharePoint ``webUrl`` or
                   ``contentUrl``, a ``file://`` URI for the CLI; "" when unknown (display only, never fetched)
``ocr_confidence`` mean Tesseract word confidence 0-100 (OCR chunks only)
``doc_issuer``,    what the document says it is, read off its first pages (:mod:`pipelines.reading.identity`):
``doc_form``,      issuer, form ("10-K", "earnings release"), the period's last day (ISO), fiscal year, quarter;
``doc_period``,    a title for what is no filing; absent when not read
``doc_year``,
``doc_quarter``,
``doc_title``
=================  ==========================================================================

Chunk ids are ``f"{doc_id}:{chunk_index:05d}"``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import BaseModel, Field

from pipelines.reading.identity import file_label

if TYPE_CHECKING:
    from haystack import Document

ElementType = Literal["text", "table", "list", "caption", "ocr"]


class RetrievalMode(StrEnum):
    """How a question's passages are retrieved: BM25 and dense fused (``hybrid``), or one retriever alone (for
    ablations). The one place that says which retrievers a mode runs (:attr:`dense`, :attr:`bm25`); a new mode is
    a member here and its branch in :func:`pipelines.query.build_query_pipeline`."""

    HYBRID = "hybrid"
    BM25 = "bm25"
    DENSE = "dense"

    @classmethod
    def from_str(cls, value: str | RetrievalMode) -> RetrievalMode:
        try:
            return cls(value)
        except ValueError as e:
            raise ValueError(f"mode must be one of {', '.join(m.value for m in cls)}") from e

    @property
    def dense(self) -> bool:
        """Whether the dense (embedding) retriever runs."""
        return self is not RetrievalMode.BM25

    @property
    def bm25(self) -> bool:
        """Whether the BM25 retriever runs."""
        return self is not RetrievalMode.DENSE

# What kind of answer it is: a look-up, or one of the question types of pipelines/questions/.
AnswerKind = Literal["answer", "compare", "summary", "not_found", "clarify", "table", "document_type", "partial",
                     "multi_part", "figure", "computed", "drivers", "geographies"]

LOCAL_SCOPE = "local"


def slack_scope(team_id: str, channel_id: str) -> str:
    return f"slack:{team_id}:{channel_id}"


def teams_scope(tenant_id: str, conversation_id: str) -> str:
    return f"teams:{tenant_id}:{conversation_id}"


def chunk_id_of(doc: Document) -> str:
    """The chunk id (``doc_id:00042``) of a stored chunk."""
    meta = doc.meta or {}
    if meta.get("doc_id") and meta.get("chunk_index") is not None:
        return f"{meta['doc_id']}:{int(meta['chunk_index']):05d}"
    return doc.id


class ChunkLocation(BaseModel):
    """Where a passage is: its chunk, document, file, pages and section, and where the file opens. What a
    citation and a retrieved passage both say; :meth:`of` reads it from a chunk's metadata."""

    chunk_id: str
    doc_id: str
    file: str
    page_start: int
    page_end: int
    section: str = ""
    url: str = Field("", description="Where the file opens (the chunk's ``source_url``); '' if unknown.")
    label: str = Field(default="", description="How an answer names the file: the name, with what the document "
                       "says it is when the name says nothing ('filing-01.pdf (Adobe Inc., 10-K, fiscal 2022)'); "
                       "'' = the name.")

    @property
    def file_label(self) -> str:
        """The name people are shown for the file."""
        return self.label or self.file

    @staticmethod
    def of(doc: Document) -> dict[str, Any]:
        """The location fields of a stored chunk, to build a :class:`Citation` or :class:`RetrievedChunk` with."""
        meta = doc.meta or {}
        return {
            "chunk_id": chunk_id_of(doc),
            "doc_id": str(meta.get("doc_id", "")),
            "file": str(meta.get("file_name", "")),
            "page_start": int(meta.get("page_start", 0) or 0),
            "page_end": int(meta.get("page_end", meta.get("page_start", 0)) or 0),
            "section": str(meta.get("section", "") or ""),
            "url": str(meta.get("source_url", "") or ""),
            "label": file_label(str(meta.get("file_name", "")), meta),
        }


class RawCitation(TypedDict):
    """A quote as an answerer wrote it, before validation: the [n] marker, the chunk it quotes, the quoted text.
    The extractive answerer and the question types build these; :class:`CitationValidator
    <pipelines.components.citation_validator.CitationValidator>` turns the ones that hold into :class:`Citation`."""

    n: int
    chunk_id: str
    quote: str


class Citation(ChunkLocation):
    n: int = Field(description="The [n] marker in the answer text.")
    quote: str = Field(description="An exact span of the chunk's text, validated before it is shown.")


# Which score put a retrieved passage where an answer lists it: the question named it (page 12, table 2, a section's
# heading; score 1.0), page ranking put its page first (the page's score), or retrieval ranked it (the fused score).
RankedBy = Literal["reference", "page", "retrieval"]


class RetrievedChunk(ChunkLocation):
    score: float = Field(description="The score named by ``ranked_by``, rounded to six places.")
    ranked_by: RankedBy | None = Field(
        default=None,
        description="Which score ``score`` is and put the passage here: 'reference' (the question named it), "
        "'page' (page ranking's score of its page) or 'retrieval' (the fused retrieval score). None where an answer "
        "kind gathered its passages otherwise (a comparison, a figure's statement page).",
    )

    @classmethod
    def of_document(cls, doc: Document, *, ranked_by: RankedBy | None = None) -> RetrievedChunk:
        """A retrieved chunk as an answer lists it (its score rounded to six places)."""
        return cls(**ChunkLocation.of(doc), score=round(float(doc.score or 0.0), 6), ranked_by=ranked_by)


class Timings(BaseModel):
    retrieve: float = 0.0
    generate: float = 0.0
    total: float = 0.0


class ValidationCounts(BaseModel):
    """Outcomes of citation validation for one answer."""

    exact: int = 0
    normalised: int = 0
    fuzzy: int = 0
    unknown_chunk: int = 0
    unmatched: int = 0
    retried: bool = False


class ComputedOperand(BaseModel):
    """One figure a computed answer reads: its name in the expression, the citation ``n`` of the quoted row it is
    read from, the ``cell`` as printed there, and whether its amount is taken (an ``outflow`` printed "(442)")."""

    name: str
    n: int
    cell: str
    outflow: bool = False
    scale: str = Field(default="", description="The unit its table states ('thousands', 'millions', 'billions'): "
                       "operands from tables in different units are compared in dollars.")


class Computation(BaseModel):
    """How a computed answer's figure follows from its quotes, recomputed before anyone sees it
    (:func:`pipelines.figures.arithmetic.recompute`): ``expression`` over the ``operands`` (``+ - * /``, ``mean``),
    times ``factor`` (100 for a percentage, a unit conversion), rounded to ``decimals``, is ``result``."""

    expression: str
    operands: list[ComputedOperand]
    factor: str = "1"
    decimals: int = 2
    result: str


class Answer(BaseModel):
    text: str
    citations: list[Citation] = Field(default_factory=list)
    refused: bool = False
    mode: Literal["extractive", "llm"] = "extractive"
    retrieved: list[RetrievedChunk] = Field(
        default_factory=list,
        description="The passages the answer was chosen from, in the order the answerer read them: those the question "
        "names (page 12, table 2) first, then the chunks page ranking leads with, then the other retrieval hits. "
        "Each passage's ``ranked_by`` says which of those three it is and which score ``score`` is; within each the "
        "scores fall.",
    )
    timings_ms: Timings = Field(default_factory=Timings)
    note: str = Field("", description="Why the answer fell back or refused, for the user (e.g. 'LLM unavailable').")
    validation: ValidationCounts = Field(default_factory=ValidationCounts)
    confidence: float | None = Field(
        default=None,
        description="The relevance the refusal check compared with settings.refusal_threshold (refused below it); "
        "None when no check ran.",
    )
    kind: AnswerKind = Field(default="answer", description="A look-up ('answer'), or the question type answered.")
    choices: list[str] = Field(
        default_factory=list,
        description="For kind 'clarify': follow-up questions, one per reading, in the order the text numbers them.",
    )
    computation: Computation | None = Field(
        default=None, description="For kind 'computed': the arithmetic from the quoted figures to the result.")


# C0 and C1 control characters except tab and newline: a PDF font without a usable ToUnicode map turns
# glyphs into them ("\x04"), and a person must never see one in a quote.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` without control characters (tab and newline kept, a carriage return becomes a newline)."""
    if text.isprintable():
        return text
    return _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def for_people(answer: Answer) -> Answer:
    """The answer as people are shown it: no control characters in its text, quotes, files or sections.
    (The eval runner keeps the raw answer, so its verbatim check still compares with the stored chunk.)"""
    def clean(c: Citation) -> Citation:
        return c.model_copy(
            update={"quote": printable(c.quote), "file": printable(c.file), "label": printable(c.label),
                    "section": printable(c.section)}
        )

    def where(r: RetrievedChunk) -> RetrievedChunk:
        return r.model_copy(update={"file": printable(r.file), "label": printable(r.label),
                                    "section": printable(r.section)})

    return answer.model_copy(
        update={
            "text": printable(answer.text),
            "note": printable(answer.note),
            "citations": [clean(c) for c in answer.citations],
            "retrieved": [where(r) for r in answer.retrieved],
        }
    )


class Turn(BaseModel):
    """One earlier turn of a chat thread."""

    role: Literal["user", "assistant"]
    text: str


IngestStatus = Literal["indexed", "unchanged", "failed"]


class IngestResult(BaseModel):
    file: str
    doc_id: str = ""
    scope: str
    status: IngestStatus
    pages: int = 0
    chunks: int = 0
    ocr_pages: int = 0
    skipped_pages: list[int] = Field(default_factory=list, description="Pages whose OCR failed or timed out.")
    seconds: float = 0.0
    error: str | None = Field(None, description="A clear, user-facing reason when status is failed.")
    error_code: str | None = Field(
        None, description="The failure's short name (``corrupt``, ``timeout``...), for logs and metrics."
    )
    replaced_doc_id: str | None = Field(None, description="The older version of the same file that was replaced.")
    renamed_from: str | None = Field(
        None, description="The uploaded name, when the file was indexed as ``file`` because someone else's has it."
    )


class IngestProgress(BaseModel):
    file: str
    phase: Literal["checking", "parsing", "ocr", "chunking", "embedding", "writing", "done"]
    pages_done: int = 0
    pages_total: int = 0


# How an upload's steps report: one IngestProgress per step and page (the chat adapters edit a status message,
# the command line draws a bar).
ProgressCallback = Callable[[IngestProgress], None]
