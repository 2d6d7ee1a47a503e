"""The indexing pipeline: PDF bytes -> structure-aware chunks with embeddings, written in one transaction.

``reader -> identity, structure -> chunker -> embedder -> writer`` (one Haystack component per step, see
``pipelines/components``; :class:`Indexer` runs them in that order itself, without ``Pipeline.run``'s copies of
every input). The reader (guard, text layer, OCR: everything that parses the upload) runs in a
child process with a memory limit, ``CITEBOT_INGEST_MAX_MEMORY_MB``, and the document's time budget; the
embedding model stays here. :class:`Indexer` wraps the pipeline with what the service
needs: content-hash doc ids (re-ingesting the same bytes is ``unchanged``), a per-document time
budget, progress callbacks and failures returned as :class:`IngestResult` with a user-facing reason. The
file's own problems (refused, unreadable, no text) come out of the reader and the writer as data,
``failed=[IngestFailure]``, and stop the steps after them; exceptions are left for what is not the file's
fault (the store, the embedding model, a bug).
Nothing is written unless every step succeeded; the writer replaces older versions of the same file
name in the same scope atomically. :meth:`Indexer.prepare` runs every step but the writer (several files may be
prepared at once, in threads), :meth:`Indexer.commit` writes one prepared file: ``citebot ingest --workers N``
prepares N files at a time and commits each, in one thread, as it is ready.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from haystack import Document, Pipeline
from haystack import tracing as haystack_tracing

from connectors.embedding import EmbeddingModelError, embedding_fingerprint, previous_embedding_fingerprint
from connectors.log import get_logger
from connectors.settings import Settings
from connectors.store_api import (
    ChunkStore,
    EmbeddingMismatchError,
    StoreError,
    check_embeddings,
    require_scopes,
)
from pipelines.components.chunker import StructureChunker
from pipelines.components.document_identity import DocumentIdentifier
from pipelines.components.embedder import PassageEmbedder
from pipelines.components.isolated_reader import IsolatedPdfReader
from pipelines.components.structure import StructureDetector
from pipelines.components.writer import ChunkWriter
from pipelines.models import IngestProgress, IngestResult, ProgressCallback
from pipelines.reading.isolation import ChildCrashedError, MemoryLimitTooLowError
from pipelines.reading.layout import IngestError, IngestFailure, ParsedPdf

log = get_logger(__name__)


_REPO_ROOT = Path(__file__).resolve().parents[1]

FAILED_INTERNAL = "Citebot could not process this PDF (internal error, logged)."
FAILED_STORE = "The document was read but could not be saved. Please try again in a minute."
FAILED_REINDEX = (
    "The search index was built with another embedding setting, so new documents cannot be added until an "
    "administrator runs `citebot reindex` (or switches the setting back)."
)
TOO_SLOW = (
    "Indexing this PDF took longer than the time allowed per document, so it was not indexed and nothing of it was "
    "saved. Try a smaller PDF, or again when the bot is less busy."
)
TOO_MANY_CHUNKS = (
    "The PDF would make more passages than one document may have here (CITEBOT_MAX_DOCUMENT_CHUNKS), so it was not "
    "indexed. Split it into smaller PDFs."
)
FAILED_MODEL = "The search model is not available on the server, so the document could not be indexed."


def content_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_doc_id(scope: str, sha256: str) -> str:
    """Same bytes in the same scope = same id; the same file in another scope gets another id."""
    return hashlib.sha256(f"{scope}\x00{sha256}".encode()).hexdigest()[:24]


def build_indexing_pipeline(settings: Settings, store: ChunkStore) -> Pipeline:
    model_path = str(settings.resolved_model_path)
    embedding = settings.embedding_args()
    p = Pipeline()
    p.add_component(
        "reader",
        IsolatedPdfReader(
            max_file_mb=settings.max_file_mb,
            max_pages=settings.max_pages,
            max_stream_mb=settings.max_stream_mb,
            max_total_inflated_mb=settings.max_decoded_mb,
            ocr_min_chars=settings.ocr_min_chars,
            ocr_enabled=settings.ocr_enabled,
            ocr_dpi=settings.ocr_dpi,
            ocr_language=settings.ocr_language,
            ocr_page_timeout_s=settings.ocr_page_timeout_s,
            max_memory_mb=settings.ingest_max_memory_mb,
            max_chars=settings.max_document_chars,
            max_lines=settings.max_document_elements,
        ),
    )
    p.add_component("identity", DocumentIdentifier())
    p.add_component("structure", StructureDetector())
    p.add_component(
        "chunker",
        StructureChunker(
            model_path=model_path, max_tokens=settings.chunk_max_tokens, min_tokens=settings.chunk_min_tokens
        ),
    )
    p.add_component(
        "embedder",
        PassageEmbedder(**embedding, batch_size=settings.embedding_batch_size),  # type: ignore[arg-type]
    )
    p.add_component("writer", ChunkWriter(store=store))
    p.connect("reader.parsed", "structure.parsed")
    p.connect("reader.parsed", "identity.parsed")
    p.connect("identity.identity", "chunker.identity")
    p.connect("structure.elements", "chunker.elements")
    p.connect("structure.page_labels", "chunker.page_labels")
    p.connect("chunker.documents", "embedder.documents")
    p.connect("embedder.documents", "writer.documents")
    return p


class _Progress:
    """Forward progress to the caller at most every ``interval`` seconds per phase (first and last always)."""

    def __init__(self, file: str, callback: ProgressCallback | None, interval: float = 0.5) -> None:
        self.file = file
        self.callback = callback
        self.interval = interval
        self.last_phase = ""
        self.last_time = 0.0
        self.pages_total = 0

    def __call__(self, phase: str, done: int = 0, total: int = 0, *, force: bool = False) -> None:
        if self.callback is None:
            return
        now = time.monotonic()
        if not force and phase == self.last_phase and done < total and now - self.last_time < self.interval:
            return
        self.last_phase, self.last_time = phase, now
        try:
            self.callback(IngestProgress(file=self.file, phase=phase, pages_done=done, pages_total=total))  # type: ignore[arg-type]
        except Exception as e:  # noqa: BLE001 - a broken progress display must not fail the ingest
            log.warning("ingest_progress_callback_failed", error=type(e).__name__)


def _frame_place(frame: traceback.FrameSummary) -> str:
    path = Path(frame.filename)
    try:
        shown = path.resolve().relative_to(_REPO_ROOT).as_posix()
    except ValueError:  # a library: from its package folder on, no machine paths
        parts = path.parts
        cut = max((i for i, p in enumerate(parts) if p in ("site-packages", "dist-packages", "lib")), default=-1)
        shown = "/".join(parts[cut + 1:]) if cut >= 0 else path.name
    return f"{shown}:{frame.lineno} in {frame.name}"


def error_place(exc: BaseException) -> dict[str, str]:
    """Where ``exc`` was raised, for the log: ``where`` (innermost frame in Citebot's code) and ``raised_in``
    (innermost frame of all, often a library). Only file, line and function: never the exception's message."""
    return frames_place(traceback.extract_tb(exc.__traceback__))


def frames_place(frames: Sequence[traceback.FrameSummary]) -> dict[str, str]:
    """:func:`error_place` of a traceback's frames, innermost last (also those sent back by the reader's child)."""
    if not frames:
        return {}
    ours = [f for f in frames if _is_ours(f.filename)]
    out = {"raised_in": _frame_place(frames[-1])}
    if ours:
        out["where"] = _frame_place(ours[-1])
    return out


def _is_ours(filename: str) -> bool:
    try:
        rel = Path(filename).resolve().relative_to(_REPO_ROOT)
    except ValueError:
        return False
    return rel.parts[:1] in (("pipelines",), ("connectors",), ("bot",), ("eval",))


def _run_step(pipeline: Pipeline, name: str, **inputs: Any) -> dict[str, Any]:
    """One component of ``pipeline`` run on ``inputs``, in a span named and tagged as ``Pipeline.run``'s."""
    instance = pipeline.get_component(name)
    tags = {"haystack.component.name": name, "haystack.component.type": type(instance).__name__}
    with haystack_tracing.tracer.trace("haystack.component.run", tags=tags):
        return dict(instance.run(**inputs))


@dataclasses.dataclass(frozen=True)
class PreparedFile:
    """One file read, chunked and embedded by :meth:`Indexer.prepare`, not yet written: who uploaded it from where,
    its ``documents`` (chunks with their vectors) and ``parsed`` pages, or its final ``outcome`` already (failed,
    or ``unchanged``)."""

    file_name: str
    scope: str
    doc_id: str
    started: float
    report: _Progress
    uploaded_by: str = ""
    source_url: str = ""
    parsed: ParsedPdf | None = None
    documents: list[Document] = dataclasses.field(default_factory=list)
    outcome: IngestResult | None = None


class Indexer:
    """What :class:`pipelines.service.CitebotService` calls to ingest one file into one scope."""

    def __init__(self, settings: Settings, store: ChunkStore) -> None:
        self.settings = settings
        self.store = store
        self.pipeline = build_indexing_pipeline(settings, store)
        self._warm = False
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        with self._lock:
            if not self._warm:
                self.pipeline.warm_up()
                self._warm = True

    def check_embeddings(self) -> None:
        """Raise :class:`EmbeddingMismatchError` when the store's vectors were made with another model or backend
        (new vectors would be mixed with them); a new store records this embedder's fingerprint."""
        current = str(self.pipeline.get_component("embedder").fingerprint)  # type: ignore[attr-defined]
        legacy = embedding_fingerprint(self.settings.resolved_model_path, self.settings.embedding_dim, "torch")
        previous = previous_embedding_fingerprint(
            self.settings.resolved_model_path, self.settings.embedding_dim, self.settings.embedding_backend
        )
        stored = check_embeddings(self.store, current, legacy=legacy, previous=previous)
        if stored is not None:
            raise EmbeddingMismatchError(stored, current)

    def _run_steps(self, **inputs: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The indexing pipeline's components up to the writer, in its graph order (reader, identity, structure,
        chunker, embedder), each with its own ``inputs`` and what the step before it returned, without
        ``Pipeline.run``; the writer runs in :meth:`commit`.

        ``Pipeline.run`` deep-copies every input of every component: the parsed pages, the structure's elements and
        the 384 floats of each chunk's embedding, one Python call per float; for a 99-page 10-K that measured ~0.6
        CPU-s of an ingest (~3%, and a second copy of the document in memory). The components never mutate their
        inputs (house style), so the copies buy nothing here; ``build_indexing_pipeline`` still describes and
        saves exactly this graph. Each step is traced as ``Pipeline.run`` traces it (a ``haystack.component.run``
        span under a ``haystack.pipeline.run``, names and types only). A reader that returns ``failed`` ends the
        run there, as the pipeline did (the steps after it get no input)."""
        p = self.pipeline
        out: dict[str, dict[str, Any]] = {}
        with haystack_tracing.tracer.trace("haystack.pipeline.run"):
            out["reader"] = _run_step(p, "reader", **inputs["reader"])
            if out["reader"]["failed"]:
                return out
            identity = _run_step(p, "identity", parsed=out["reader"]["parsed"])
            structure = _run_step(p, "structure", parsed=out["reader"]["parsed"])
            chunks = _run_step(p, "chunker", elements=structure["elements"], page_labels=structure["page_labels"],
                               identity=identity["identity"], **inputs["chunker"])
            out["embedder"] = _run_step(p, "embedder", documents=chunks["documents"], **inputs["embedder"])
        return out

    def ingest(
        self,
        data: bytes,
        *,
        file_name: str,
        scope: str,
        uploaded_by: str = "",
        source_url: str = "",
        progress: ProgressCallback | None = None,
        replaces: Sequence[str] = (),
    ) -> IngestResult:
        """``source_url``: where people open the file (Slack permalink, Teams file URL, local ``file://``),
        kept in every chunk's metadata so citations can link to it. ``replaces``: the earlier versions this one
        replaces, removed in the same write (the service decides which: :meth:`CitebotService.ingest`).
        :meth:`prepare` then :meth:`commit`."""
        prepared = self.prepare(data, file_name=file_name, scope=scope, uploaded_by=uploaded_by,
                                source_url=source_url, progress=progress)
        return self.commit(prepared, replaces=replaces)

    def prepare(
        self,
        data: bytes,
        *,
        file_name: str,
        scope: str,
        uploaded_by: str = "",
        source_url: str = "",
        progress: ProgressCallback | None = None,
    ) -> PreparedFile:
        """Everything of an ingest but the write: read, OCR, chunk and embed ``data``; nothing touches the store but
        the look-up of whether these bytes are indexed already. Safe to call from several threads at once (the
        reading runs in a child process each, the model releases the interpreter while it computes), which is how
        ``citebot ingest --workers N`` indexes N files at a time; :meth:`commit` writes the outcome."""
        (scope,) = require_scopes([scope])
        started = time.monotonic()
        report = _Progress(file_name, progress)
        sha = content_sha256(data)
        doc_id = make_doc_id(scope, sha)
        prepared = PreparedFile(file_name=file_name, scope=scope, doc_id=doc_id, started=started, report=report,
                                uploaded_by=uploaded_by, source_url=source_url)

        report("checking", force=True)
        if data and self.store.has_document(doc_id, scope=scope):
            return dataclasses.replace(prepared, outcome=self._unchanged(prepared))

        self.warm_up()
        try:
            self.check_embeddings()
        except EmbeddingMismatchError as e:
            log.error("embedding_mismatch", stored=e.stored, current=e.current, action="run citebot reindex")
            report("done", force=True)
            return dataclasses.replace(prepared, outcome=self._result(
                prepared, status="failed", error=FAILED_REINDEX, error_code="reindex"))
        deadline = started + self.settings.ingest_timeout_s
        pages_total = 0

        def on_page(done: int, total: int) -> None:
            nonlocal pages_total
            pages_total = total
            report("parsing", done, total)

        def on_ocr(done: int, total: int) -> None:
            report("ocr", done, total)

        def on_embed(done: int, total: int) -> None:
            # called once the chunks are cut (done == 0), after every batch, and last before the write: the one
            # deadline of the upload holds for structure, chunking and embedding too, and nothing is written past it
            if total > self.settings.max_document_chunks:
                raise IngestError(TOO_MANY_CHUNKS, code="too_many_chunks")
            if time.monotonic() > deadline:
                raise IngestError(TOO_SLOW, code="timeout")
            report("embedding", round(pages_total * done / total) if total else pages_total, pages_total)
            if done >= total:
                report("writing", pages_total, pages_total, force=True)

        try:
            out = self._run_steps(
                reader={"data": data, "deadline": deadline, "on_page": on_page, "on_ocr": on_ocr},
                chunker={
                    "doc_id": doc_id,
                    "file_name": file_name,
                    "scope": scope,
                    "sha256": sha,
                    "uploaded_by": uploaded_by,
                    "uploaded_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "source_url": source_url,
                },
                embedder={"on_progress": on_embed},
            )
        except Exception as e:  # noqa: BLE001 - every failure becomes a result with a fixed reason
            return dataclasses.replace(prepared, outcome=self._failure(prepared, e))

        failed: list[IngestFailure] = out["reader"]["failed"]
        if failed:  # the file's own problem (refused, unreadable, no text): nothing will be written
            report("done", force=True)
            return dataclasses.replace(prepared, outcome=self._result(
                prepared, status="failed", error=failed[0].reason, error_code=failed[0].code))
        return dataclasses.replace(prepared, parsed=out["reader"]["parsed"], documents=out["embedder"]["documents"])

    def commit(self, prepared: PreparedFile, *, file_name: str | None = None,
               replaces: Sequence[str] = ()) -> IngestResult:
        """Write what :meth:`prepare` made, all or nothing, as ``file_name`` (default: the name it was prepared
        under; a name is only chunk metadata, so the vectors stay the same), removing ``replaces`` in the same
        transaction. A file whose bytes were indexed meanwhile (the same PDF twice in one ``ingest`` of several
        workers) is ``unchanged``, as it is when the two are indexed one after the other."""
        if prepared.outcome is not None:
            return prepared.outcome
        name = file_name or prepared.file_name
        documents = prepared.documents
        if name != prepared.file_name:
            documents = [dataclasses.replace(d, meta={**d.meta, "file_name": name}) for d in documents]
            prepared = dataclasses.replace(prepared, file_name=name, report=_Progress(name, prepared.report.callback))
        if self.store.has_document(prepared.doc_id, scope=prepared.scope):
            return self._unchanged(prepared)
        try:
            with haystack_tracing.tracer.trace("haystack.pipeline.run"):
                written = _run_step(self.pipeline, "writer", documents=documents, scope=prepared.scope,
                                    replaces=list(replaces))
        except Exception as e:  # noqa: BLE001 - every failure becomes a result with a fixed reason
            return self._failure(prepared, e)
        report = prepared.report
        if written["failed"]:  # no chunks (no text): nothing was written
            report("done", force=True)
            return self._result(prepared, status="failed", error=written["failed"][0].reason,
                                error_code=written["failed"][0].code)
        parsed = prepared.parsed
        assert parsed is not None
        replaced = [r for r in written["replaced"] if r != prepared.doc_id]
        report("done", parsed.page_count, parsed.page_count, force=True)
        return self._result(
            prepared,
            status="indexed",
            pages=parsed.page_count,
            chunks=int(written["written"]),
            ocr_pages=len(parsed.ocr_pages),
            skipped_pages=parsed.skipped_pages,
            replaced_doc_id=replaced[0] if replaced else None,
        )

    def _unchanged(self, prepared: PreparedFile) -> IngestResult:
        """These bytes are in the scope already: nothing is read or written."""
        info = next((d for d in self.store.list_documents(scopes=[prepared.scope]) if d.doc_id == prepared.doc_id),
                    None)
        prepared.report("done", force=True)
        return self._result(prepared, status="unchanged", pages=info.pages if info else 0,
                            chunks=info.chunks if info else 0)

    @staticmethod
    def _result(prepared: PreparedFile, **kw: Any) -> IngestResult:
        """The file's result (its ``doc_id`` the prepared one's), logged as its one ``ingest`` line."""
        code = kw.pop("error_code", None)
        res = IngestResult(file=prepared.file_name, scope=prepared.scope, doc_id=prepared.doc_id,
                           seconds=round(time.monotonic() - prepared.started, 3), error_code=code, **kw)
        log.info(
            "ingest", scope=res.scope, doc_id=res.doc_id, status=res.status, pages=res.pages, chunks=res.chunks,
            ocr_pages=res.ocr_pages, seconds=res.seconds, reason=code,
        )
        return res

    def _failure(self, prepared: PreparedFile, cause: Exception) -> IngestResult:
        """The result of an exception in a step: a fixed reason for the user, our own bugs logged by place."""
        scope, doc_id = prepared.scope, prepared.doc_id
        if isinstance(cause, IngestError):  # the file's own problem after reading: a cap or the deadline
            reason, code = cause.reason, cause.code
        elif isinstance(cause, StoreError):
            reason, code = FAILED_STORE, "store"
        elif isinstance(cause, EmbeddingModelError):
            reason, code = FAILED_MODEL, "model"
        elif isinstance(cause, ChildCrashedError):
            # our bug in the reader's child process (an exception in our code, a crash signal): not the file
            reason, code = FAILED_INTERNAL, "internal"
            log.error(
                "ingest_internal_error", scope=scope, doc_id=doc_id, error=cause.error, process="reader",
                **frames_place(cause.frame_summaries()),
            )
        elif isinstance(cause, MemoryLimitTooLowError):
            reason, code = FAILED_INTERNAL, "memory_limit"
            log.error(
                "ingest_memory_limit_too_low", scope=scope, doc_id=doc_id, limit_mb=cause.limit_mb,
                mapped_at_start_mb=cause.mapped_mb, setting="CITEBOT_INGEST_MAX_MEMORY_MB",
            )
        else:
            # our bug, not the user's PDF: say so, and log where it happened (never the message or text)
            reason, code = FAILED_INTERNAL, "internal"
            log.error(  # noqa: TRY400 - a traceback would print the message, which can hold document text
                "ingest_internal_error", scope=scope, doc_id=doc_id, error=type(cause).__name__,
                **error_place(cause),
            )
        prepared.report("done", force=True)
        return self._result(prepared, status="failed", error=reason, error_code=code)
