"""The service layer: ingest a file into a scope, answer a question over scopes. No chat platform here.

Both the CLI and the chat core hold one :class:`CitebotService` per process; the embedding model
and the pipelines inside are built once and shared (the service is safe to call from threads).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from connectors.log import get_logger
from connectors.settings import Settings
from connectors.store_api import ChunkStore, DocInfo, require_scopes
from connectors.tracing import span, tag
from pipelines.catalogue import DocumentCatalogue
from pipelines.file_names import clean_name, name_key
from pipelines.models import Answer, IngestResult, ProgressCallback, RetrievalMode, Turn

if TYPE_CHECKING:
    from pipelines.answerer import Answerer
    from pipelines.indexing import Indexer, PreparedFile
    from pipelines.query import QueryEngine
    from pipelines.streaming import ShowText

log = get_logger(__name__)

# Longer questions are cut to this many characters (a pasted document is not a question, and every
# reference in it costs a lookup); the answer then says so.
MAX_QUESTION_CHARS = 4000
NOTE_QUESTION_CUT = f"Your question was longer than {MAX_QUESTION_CHARS:,} characters, so I only read its beginning."


# a store that cannot count chunks cheaply (count_in_scopes None) recounts its documents this often
DOC_COUNT_TTL_S = 30.0


def _configure_logging_once(settings: Settings) -> None:
    """A script using the library directly gets the configured level and format too (structlog left unconfigured
    prints every debug line); the command line and the bots have configured it already."""
    import logging

    import structlog

    from connectors.log import configure_logging

    if not structlog.is_configured():
        configure_logging(settings.log_level, settings.log_format, stdlib=not logging.getLogger().handlers)


class CitebotService:
    def __init__(self, settings: Settings, store: ChunkStore | None = None) -> None:
        from connectors.stores import open_store

        _configure_logging_once(settings)
        self.settings = settings
        self.store: ChunkStore = store if store is not None else open_store(settings)
        self._lock = threading.Lock()
        self._indexer: Indexer | None = None
        self._query: QueryEngine | None = None
        self._answerer: Answerer | None = None
        self._store_settings: Settings | None = None
        # one listing of each scope's documents, shared by the status line and the answer (router, answer kinds)
        self.catalogue = DocumentCatalogue(self.store)

    # --- lazily built, shared pipelines ----------------------------------------------------------
    def _pipeline_settings(self) -> Settings:
        """The settings both pipelines are built with (called under the lock): the embedding backend the store's
        vectors were made with, unless one is configured (``connectors.stores.settings_for_store``)."""
        if self._store_settings is None:
            from connectors.stores import settings_for_store

            self._store_settings = settings_for_store(self.settings, self.store)
        return self._store_settings

    @property
    def embedding_backend(self) -> str:
        """The embedding backend this service indexes and searches with."""
        with self._lock:
            return self._pipeline_settings().embedding_backend

    @property
    def indexer(self) -> Indexer:
        with self._lock:
            if self._indexer is None:
                from pipelines.indexing import Indexer

                self._indexer = Indexer(self._pipeline_settings(), self.store)
            return self._indexer

    @property
    def query(self) -> QueryEngine:
        with self._lock:
            if self._query is None:
                from pipelines.query import QueryEngine

                self._query = QueryEngine(self._pipeline_settings(), self.store, catalogue=self.catalogue)
            return self._query

    @property
    def answerer(self) -> Answerer:
        """The one chooser of how a question is answered, built once over :attr:`query`."""
        query = self.query
        with self._lock:
            if self._answerer is None:
                from pipelines.answerer import Answerer

                self._answerer = Answerer(query)
            return self._answerer

    def warm_up(self) -> None:
        """Load the model and build the pipelines now rather than on the first request."""
        self.query.warm_up()
        self.indexer.warm_up()

    # --- operations ------------------------------------------------------------------------------
    def ingest(
        self,
        data: bytes,
        *,
        file_name: str,
        scope: str,
        uploaded_by: str = "",
        is_admin: bool | Callable[[], bool] = False,
        source_url: str = "",
        progress: ProgressCallback | None = None,
        same_source_only: bool = False,
    ) -> IngestResult:
        """Index ``data`` as ``file_name`` in ``scope``: the one place that decides which earlier documents an upload
        replaces (the stores only remove what they are told to). A new version replaces the uploader's own earlier one;
        a document of that name that someone else uploaded is replaced only for an admin (``is_admin``, a
        callable is asked only then). Otherwise the file is indexed beside it under a free name
        (``expenses (2).pdf``) and ``renamed_from`` says so; forget's uploader-or-admin rule holds for uploads too.

        ``same_source_only`` (the command line, where a file's path is its identity): only a document indexed
        from the same ``source_url`` is an earlier version; a same-named one from elsewhere (``a/report.pdf``
        beside ``b/report.pdf``) is kept and this one gets a free name."""
        (scope,) = require_scopes(scope)
        with span("ingest", **{"ingest.bytes": len(data)}) as s:
            prepared = self.prepare(data, file_name=file_name, scope=scope, uploaded_by=uploaded_by,
                                    source_url=source_url, progress=progress)
            result = self.commit(prepared, is_admin=is_admin, same_source_only=same_source_only)
            tag(s, **{"ingest.status": result.status, "ingest.reason": result.error_code or "",
                      "ingest.pages": result.pages, "ingest.ocr_pages": result.ocr_pages,
                      "ingest.chunks": result.chunks})
        return result

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
        """Read, OCR, chunk and embed ``data`` (:meth:`Indexer.prepare`), writing nothing: safe from several threads
        at once. :meth:`commit` decides the name it is indexed under and writes it."""
        (scope,) = require_scopes(scope)
        return self.indexer.prepare(data, file_name=clean_name(file_name), scope=scope, uploaded_by=uploaded_by,
                                    source_url=source_url, progress=progress)

    def commit(
        self,
        prepared: PreparedFile,
        *,
        is_admin: bool | Callable[[], bool] = False,
        same_source_only: bool = False,
    ) -> IngestResult:
        """Write a :meth:`prepare`d file under the name :meth:`ingest`'s rules give it, with the store as it is now
        (call it from one thread at a time when files are prepared in parallel: the name a file gets depends on
        what was written before it)."""
        file_name, scope = prepared.file_name, prepared.scope
        uploaded_by, source_url = prepared.uploaded_by, prepared.source_url  # as it was prepared
        if prepared.outcome is not None:  # failed, or these bytes are here already: nothing is named or replaced
            return prepared.outcome
        key = name_key(file_name)
        docs = self.store.list_documents(scopes=[scope])

        def mine(d: DocInfo) -> bool:
            if same_source_only:
                return d.source_url == source_url and d.uploaded_by == uploaded_by
            return d.uploaded_by == uploaded_by

        others = [d for d in docs if name_key(d.file) == key and not mine(d)]
        exact = [d for d in others if d.file == file_name]
        # an admin may replace someone's document of exactly this name; a look-alike name never replaces anything
        admin = (bool(exact) and len(exact) == len(others) and not same_source_only
                 and (is_admin() if callable(is_admin) else is_admin))
        name = file_name if admin or not others else self._free_name(file_name, docs, mine)
        # Who may replace what, decided here and nowhere else: the uploader's own earlier versions of the name the
        # file gets, and for an admin someone else's of exactly that name. The store removes exactly these, in the
        # transaction that writes the new version (replaced_doc_id: the first of them, the uploader's own first).
        replaces = [d.doc_id for d in docs if d.file == name and d.uploaded_by == uploaded_by]
        replaces += [d.doc_id for d in exact if d.doc_id not in replaces] if admin else []
        result = self.indexer.commit(prepared, file_name=name, replaces=replaces)
        if result.status != "indexed":  # failed, or these bytes are here already: nothing was named or replaced
            return result.model_copy(update={"file": file_name})
        if name != file_name:
            return result.model_copy(update={"renamed_from": file_name})
        return result

    @staticmethod
    def _free_name(file_name: str, docs: Sequence[DocInfo], mine: Callable[[DocInfo], bool]) -> str:
        """``stem (n).ext`` for the smallest n >= 2 that no one else's document in the scope is called, or looks
        like (the uploader's own may be: a new version of their copy replaces it)."""
        taken = {name_key(d.file) for d in docs if not mine(d)}
        stem, dot, ext = file_name.rpartition(".")
        if not dot or not stem:
            stem, ext = file_name, ""
        n = 2
        while True:
            candidate = f"{stem} ({n}).{ext}" if ext else f"{stem} ({n})"
            if name_key(candidate) not in taken:
                return candidate
            n += 1

    def answer(
        self,
        question: str,
        scopes: str | Sequence[str],
        history: Sequence[Turn] = (),
        *,
        mode: RetrievalMode | str = RetrievalMode.HYBRID,
        k: int | None = None,
        show: ShowText | None = None,
    ) -> Answer:
        """The answer to ``question`` over ``scopes``; logs the one summary line of the answer (counts and
        timings, never text: the chat core binds who asked where). ``show``: in LLM mode, the answer's sentences
        as they are written and checked (:mod:`pipelines.streaming`); the answer returned is the same with or
        without it."""
        t0 = time.perf_counter()
        scopes = require_scopes(scopes)
        if len(question) <= MAX_QUESTION_CHARS:
            answer = self._answer(question, scopes, history, mode=mode, k=k, show=show)
        else:
            answer = self._answer(question[:MAX_QUESTION_CHARS], scopes, history, mode=mode, k=k, show=show)
            note = f"{NOTE_QUESTION_CUT} {answer.note}" if answer.note else NOTE_QUESTION_CUT
            answer = answer.model_copy(update={"note": note})
        latency_ms = round((time.perf_counter() - t0) * 1000, 1)
        if not answer.timings_ms.total:  # answer kinds other than the look-up do not time themselves
            timed = answer.timings_ms.model_copy(update={"total": latency_ms})
            answer = answer.model_copy(update={"timings_ms": timed})
        log.info(
            "answer",
            mode=answer.mode,
            kind=answer.kind,
            retrieval=mode,
            refused=answer.refused,
            n_retrieved=len(answer.retrieved),
            n_citations=len(answer.citations),
            n_choices=len(answer.choices),
            confidence=None if answer.confidence is None else round(answer.confidence, 3),
            latency_ms=latency_ms,
            validation=answer.validation.model_dump(),
        )
        return answer

    def _answer(
        self, question: str, scopes: list[str], history: Sequence[Turn], *, mode: RetrievalMode | str,
        k: int | None, show: ShowText | None = None,
    ) -> Answer:
        """The first answer kind of :class:`pipelines.answerer.Answerer` that answers (compare, summarise, not
        there, which one, table max / min, document type, partly covered, the LLM with tools, the look-up)."""
        return self.answerer.answer(question, scopes, history, mode=mode, k=k, show=show)

    def list_documents(self, scopes: str | Sequence[str]) -> list[DocInfo]:
        return self.store.list_documents(scopes=require_scopes(scopes))

    def document_count(self, scopes: str | Sequence[str]) -> int:
        """How many documents ``scopes`` hold, for a status line ("Searching 3 PDFs…"), asked once a question.

        Listing documents reads every chunk's metadata (most of a second at 50,000 chunks), so the listing is kept
        (in :attr:`catalogue`, where the answer that follows finds it) until the scopes' chunk count changes (an
        upload or a removal; an index look-up, made every time) or :data:`DOC_COUNT_TTL_S` passes."""
        return len(self.catalogue.documents(scopes, max_age_s=DOC_COUNT_TTL_S))

    def find_documents(self, file_name_or_id: str, scopes: str | Sequence[str]) -> list[DocInfo]:
        """Documents in ``scopes`` whose doc_id or file name (case-insensitive) is ``file_name_or_id``."""
        key = clean_name(file_name_or_id).casefold()
        return [
            d for d in self.list_documents(scopes)
            if d.doc_id == file_name_or_id or clean_name(d.file).casefold() == key
        ]

    def forget(self, doc_id: str, scopes: str | Sequence[str]) -> int:
        """Delete a document's chunks within ``scopes``; returns how many chunks were deleted."""
        return self.store.delete_document(doc_id, scopes=require_scopes(scopes))
