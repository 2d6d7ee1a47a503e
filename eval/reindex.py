"""``citebot reindex``: re-embed every stored document with the current embedding model, scope by scope.

What is possible: the store keeps each chunk's text and metadata but not the PDF's bytes (uploads are
held in memory only, by design), so a *model* change is handled here by re-embedding every chunk's stored
text with the current model, document by document; a *chunker* change needs the original files, which the
store does not have: re-upload them (or ``citebot ingest`` them again) and the new chunks replace the old
version of the same file.

``citebot reindex --from FILE`` copies an embedded store's documents into the configured store (Elasticsearch, when
one machine no longer holds the archive): each document whole, in its scope, with its stored vectors when they
were made with the configured model and backend, else re-embedded.

Each document is rewritten in one store write (the SQLite store commits a write as one transaction), and
finished documents are recorded in ``CITEBOT_DATA_DIR/reindex.json`` keyed by the model fingerprint, so an
interrupted reindex resumes where it stopped and a second run with the same model does nothing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connectors.settings import Settings

STATE_FILE = "reindex.json"
COPY_STATE_FILE = "reindex-copy.json"

Embedder = Callable[[list[str]], list[list[float]]]


class ReindexError(Exception):
    """Reindexing cannot go on; the message says what to do."""


def model_fingerprint(settings: Settings) -> str:
    """The configured model and backend's embedding fingerprint (:func:`connectors.embedding.embedding_fingerprint`):
    changes with the model folder's config or weights, the dimension, or a switch to or from int8."""
    return settings.embedding_fingerprint


def reindex_status(settings: Settings, store: Any) -> tuple[str, str]:
    """(the store's recorded fingerprint, this configuration's): a reindex is needed when they differ."""
    from connectors.embedding import embedding_fingerprint, previous_embedding_fingerprint
    from connectors.store_api import check_embeddings

    current = settings.embedding_fingerprint
    legacy = embedding_fingerprint(settings.resolved_model_path, settings.embedding_dim, "torch")
    previous = previous_embedding_fingerprint(
        settings.resolved_model_path, settings.embedding_dim, settings.embedding_backend
    )
    stored = check_embeddings(store, current, legacy=legacy, previous=previous)
    return stored or current, current


def embedding_text(doc: Any) -> str:
    """The text the indexing pipeline embeds for a chunk (section path + newline + chunk text)."""
    try:
        from pipelines.components.embedder import passage_text
    except ImportError:  # the indexing components are not installed: embed the stored text as is
        return str(doc.content or "")
    return str(passage_text(doc))


@dataclass
class ReindexResult:
    scopes: int = 0
    documents: int = 0
    chunks: int = 0
    skipped: int = 0
    per_scope: dict[str, int] = field(default_factory=dict)


def _target(store: Any) -> str:
    """What a copy writes into, for its progress file: the store's file or its server and index."""
    return str(getattr(store, "path", "") or f"{getattr(store, 'hosts', '')}/{getattr(store, 'index', '')}")


def _load_state(path: Path, fingerprint: str) -> dict[str, list[str]]:
    if not path.exists():
        return {}
    state = json.loads(path.read_text(encoding="utf-8"))
    if state.get("model") != fingerprint:
        return {}  # a different model: everything is redone
    return {k: list(v) for k, v in state.get("done", {}).items()}


def _save_state(path: Path, fingerprint: str, done: dict[str, list[str]]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"model": fingerprint, "done": done}), encoding="utf-8")
    tmp.replace(path)


def reindex(
    settings: Settings,
    store: Any,
    *,
    scopes: Sequence[str] | None = None,
    embedder: Embedder | None = None,
    restart: bool = False,
    batch_size: int | None = None,
    log: Callable[[str], None] = print,
    progress: Callable[[str, int, int], None] | None = None,
    source: Any | None = None,
) -> ReindexResult:
    """Re-embed every document of ``scopes`` (default: every scope in the store). ``progress(what, done, total)``
    hears of every document re-embedded (a terminal display). With ``source`` (another store), copy its documents
    into ``store`` instead, re-embedding only when ``source``'s vectors are not this configuration's."""
    from haystack.document_stores.types import DuplicatePolicy

    def default_embedder(texts: list[str]) -> list[list[float]]:
        from connectors.embedding import embed

        return embed(texts, path=settings.resolved_model_path, threads=settings.torch_threads,
                     batch_size=batch_size or settings.embedding_batch_size, backend=settings.embedding_backend,
                     models_dir=settings.resolved_models_dir)

    embed_fn = embedder or default_embedder
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    fingerprint = model_fingerprint(settings)
    state_path = settings.data_dir / STATE_FILE
    state_key = fingerprint
    reader = store if source is None else source
    keep_vectors = source is not None and embedder is None and source.embedding_fingerprint() == fingerprint
    if source is not None:  # a copy's progress is its own: the source file and the target, beside the model
        state_path = settings.data_dir / COPY_STATE_FILE
        state_key = f"{fingerprint} {getattr(source, 'path', '')} -> {_target(store)}"
    done = {} if restart else _load_state(state_path, state_key)
    result = ReindexResult()
    all_scopes = reader.all_scopes()
    wanted = list(scopes) if scopes else all_scopes
    listed = [(scope, reader.list_documents(scopes=[scope])) for scope in wanted]
    total = sum(1 for scope, infos in listed for i in infos if i.doc_id not in set(done.get(scope, [])))
    if progress is not None:
        progress("re-embedding documents", 0, total)
    for scope, infos in listed:
        result.scopes += 1
        finished = set(done.get(scope, []))
        for info in infos:
            if info.doc_id in finished:
                result.skipped += 1
                continue
            chunks = reader.fetch(scopes=[scope], filters={"field": "meta.doc_id", "operator": "==",
                                                           "value": info.doc_id}, limit=10_000_000,
                                  return_embedding=keep_vectors)
            if chunks and keep_vectors:
                store.replace_document(chunks, scope=scope)
            elif chunks:
                vectors = embed_fn([embedding_text(d) for d in chunks])
                if vectors and len(vectors[0]) != settings.embedding_dim:
                    raise ReindexError(
                        f"the model gives {len(vectors[0])}-dimensional vectors but CITEBOT_EMBEDDING_DIM is "
                        f"{settings.embedding_dim}: set it to {len(vectors[0])}, move {settings.data_dir} aside "
                        "and upload the PDFs again (a store holds one dimension)"
                    )
                new = [dataclasses.replace(d, embedding=list(v)) for d, v in zip(chunks, vectors, strict=True)]
                if source is None:
                    store.write_documents(new, policy=DuplicatePolicy.OVERWRITE)
                else:
                    store.replace_document(new, scope=scope)
            result.documents += 1
            result.chunks += len(chunks)
            result.per_scope[scope] = result.per_scope.get(scope, 0) + 1
            finished.add(info.doc_id)
            done[scope] = sorted(finished)
            _save_state(state_path, state_key, done)
            log(f"{scope}: {'re-embedded' if not keep_vectors else 'copied'} {info.file} ({len(chunks)} chunks)")
            if progress is not None:
                progress("re-embedding documents", result.documents, total)
    if set(all_scopes) <= set(done) and embedder is None:  # every vector is now this configuration's
        store.set_embedding_fingerprint(fingerprint)
    return result
