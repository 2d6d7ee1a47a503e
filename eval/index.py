"""The eval index: what decides it, its key, and building or reusing it.

The PDFs go into a store of their own under ``CITEBOT_DATA_DIR/eval/index/<key>`` (always the embedded SQLite
store, so an eval never writes into production's Elasticsearch index), each PDF in a scope of its own. The key
hashes the PDFs' names and bytes, the indexing settings (:data:`INDEX_SETTINGS`) and the indexing code
(:data:`INDEX_CODE`, not the query side), so an unchanged corpus is indexed once and reused by later runs, and an
interrupted build resumes where it stopped. :mod:`eval.runner` asks the questions over it.
"""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connectors.settings import Settings
from eval.cases import Case

if TYPE_CHECKING:  # imported where a service is built: pipelines.service loads Haystack
    from pipelines.service import CitebotService

REPO = Path(__file__).resolve().parents[1]
# Settings that change what the index holds (the rest only change answers). The ingest time budgets and memory
# limit are left out on purpose: they are machine-dependent limits, and a PDF that ran out of time or memory is
# reported as failed.
INDEX_SETTINGS = ("chunk_max_tokens", "chunk_min_tokens", "embedding_dim", "ocr_enabled", "ocr_dpi",
                  "ocr_min_chars", "ocr_language", "max_pages", "max_file_mb", "max_stream_mb", "max_decoded_mb",
                  "max_document_chars", "max_document_elements", "max_document_chunks")
# The code that decides what an eval index holds: the indexing pipeline and its components (the isolated reader,
# whose guard, parser and its page model, and OCR are in pipelines/reading; the document's identity, structure,
# chunker, embedder, writer), the embedding and OCR connectors, and the store's schema and write path. Its hash is
# part of the index key, so editing any of it rebuilds the index; editing the query side (retrievers, structure
# router, query rewriter, extractive and LLM answerers, refusal, citation validator, pipelines/query.py) reuses it.
# tests/eval/test_runner.py checks that every module the indexing code imports is either listed here or in
# INDEX_CODE_IMPORTS_NOT_HASHED.
INDEX_CODE = (
    "pipelines/indexing.py",
    "pipelines/reading/clean_text.py",
    "pipelines/reading/layout.py",
    "pipelines/components/isolated_reader.py",
    "pipelines/reading/reader.py",
    "pipelines/reading/guard.py",
    "pipelines/reading/text.py",
    "pipelines/reading/ocr.py",
    "pipelines/components/document_identity.py",
    "pipelines/reading/identity.py",
    "pipelines/components/structure.py",
    "pipelines/components/structure_lines.py",
    "pipelines/components/printed_page_numbers.py",
    "pipelines/components/chunker.py",
    "pipelines/components/_text.py",
    "pipelines/components/embedder.py",
    "pipelines/components/writer.py",
    "connectors/embedding.py",
    "connectors/embedding_backends.py",
    "connectors/embedding_fingerprints.py",
    "connectors/onnx_export.py",
    "connectors/ocr.py",
    "connectors/uploads.py",
    "connectors/sqlite_store/schema.py",
    "connectors/sqlite_store/connection.py",
    "connectors/sqlite_store/rows.py",
    "connectors/sqlite_store/store.py",
)
# Definitions inside INDEX_CODE files that only read the index (the store's search side): left out of the hash.
# (The store's BM25, dense search and filters live in files of their own, not hashed: see below.)
QUERY_ONLY_DEFINITIONS = {
    "connectors/sqlite_store/store.py": ("SQLiteDocumentStore.fetch", "SQLiteDocumentStore.embedding_search",
                                         "SQLiteDocumentStore.bm25_search", "SQLiteDocumentStore.bm25_matches",
                                         "SQLiteDocumentStore.bm25_matches_each",
                                         "SQLiteDocumentStore.document_vectors"),
    # how answers label a file and routing spells an identity read the stored doc_* fields; what is stored is the rest
    "pipelines/reading/identity.py": ("_GENERIC_NAME_WORDS", "name_says_nothing", "file_label",
                                      "DocumentIdentity.describe", "DocumentIdentity.routing_name",
                                      "DocumentIdentity.from_meta", "bare_company"),
    # the chunker cuts with chunk_sentences (and _CHUNK_SENT); the rest is the query side's
    "pipelines/components/_text.py": ("STOPWORDS", "GENERIC", "_TOKEN", "stem", "coverage", "terms", "_SENT_END",
                                      "_ABBREV", "_BULLET", "_ANSWER_SENT", "_QUESTION_SENT", "answer_sentences",
                                      "question_sentences", "sentence_spans", "_strip"),
}
# Modules the indexing code imports that do not decide what the index holds, and why.
INDEX_CODE_IMPORTS_NOT_HASHED = {
    "connectors/settings.py": "the values that matter are hashed (INDEX_SETTINGS)",
    "connectors/log.py": "logging only",
    "connectors/store_api.py": "the store protocol and scope checks",
    "connectors/scoped_retrievers.py": "query side",
    "connectors/sqlite_store/__init__.py": "the store's public name and its retriever components (query side)",
    "connectors/sqlite_store/filters.py": "query side: Haystack filters to SQL",
    "connectors/sqlite_store/fulltext.py": "query side: BM25",
    "connectors/sqlite_store/vectors.py": "query side: dense search and its matrix cache",
    "connectors/stores.py": "picks the store class and rebuilds a saved one; the store's own code is hashed",
    "pipelines/models.py": "result and progress models; chunk metadata is written by the chunker",
    "pipelines/components/query_embedder.py": "the shared encoder factory the embedder uses; the vectors are "
    "decided by connectors/embedding.py and the embedding fingerprint, both hashed",
    "pipelines/reading/isolation.py": "where the reading runs (a child process, its limits), not what it reads",
    "connectors/private_files.py": "the store's file and folder modes (0600/0700), not what they hold",
    "connectors/embedding_batching.py": "query side: concurrent questions sharing one encoder call",
    "connectors/torch_imports.py": "keeps Haystack's eager torch import out of the process, not what vectors are made",
}
KEEP_INDEXES = 4

ServiceFactory = Callable[[Settings], "CitebotService"]
Progress = Callable[[str, int, int], None]  # (what, done, total), e.g. ("hybrid cases", 12, 40)


def default_service(settings: Settings) -> CitebotService:
    from pipelines.service import CitebotService

    return CitebotService(settings)


@dataclass
class EvalIndex:
    settings: Settings
    path: Path
    key: str
    checksum: str
    scopes: dict[str, str]  # file name -> scope
    reused: bool
    ingest: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def all_scopes(self) -> list[str]:
        return sorted(set(self.scopes.values()))

    def scopes_for(self, case: Case, per_doc: bool) -> list[str]:
        """Per document: an unanswerable case in the scopes of the PDFs it is ``asked_in``, an answerable one in
        its first source document's scope; across every PDF otherwise (or when none of those is indexed)."""
        if not per_doc:
            return self.all_scopes
        asked = sorted({self.scopes[d] for d in case.asked_in if d in self.scopes})
        if asked:
            return asked
        for s in case.sources:
            if s.doc in self.scopes:
                return [self.scopes[s.doc]]
        return self.all_scopes


def _without(source: str, names: Sequence[str]) -> str:
    """``source`` with the top-level definitions and class methods named in ``names`` (``f``, ``Class.method``,
    a ``NAME = ...`` constant) blanked out; names it does not define are ignored."""
    tree = ast.parse(source)
    wanted = set(names)
    spans: list[tuple[int, int]] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = prefix + node.name
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                name = prefix + node.targets[0].id
            else:
                continue
            if name in wanted:
                first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
                spans.append((first, node.end_lineno or node.lineno))
            elif isinstance(node, ast.ClassDef) and not prefix:
                visit(node.body, name + ".")

    visit(tree.body, "")
    lines = source.splitlines(keepends=True)
    for first, last in spans:
        lines[first - 1:last] = [""] * (last - first + 1)
    return "".join(lines)


def _code_fingerprint(repo: Path = REPO) -> str:
    """Hash of :data:`INDEX_CODE` under ``repo`` (less :data:`QUERY_ONLY_DEFINITIONS`): what decides the index."""
    h = hashlib.sha256()
    for rel in INDEX_CODE:
        path = repo / rel
        text = path.read_text(encoding="utf-8") if path.exists() else "<missing>"
        if rel in QUERY_ONLY_DEFINITIONS and path.exists():
            text = _without(text, QUERY_ONLY_DEFINITIONS[rel])
        h.update(rel.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()


def neutral_names(pdfs: Sequence[Path]) -> dict[str, str]:
    """``--neutral-names``: each PDF's name -> a name that says nothing of it (``doc-001.pdf``...), numbered in the
    order of the names (deterministic: the same folder gets the same names)."""
    return {p.name: f"doc-{n:03d}.pdf" for n, p in enumerate(sorted(pdfs, key=lambda p: p.name), 1)}


def index_key(pdfs: Sequence[Path], settings: Settings, names: Mapping[str, str] | None = None) -> str:
    """What the index holds: the PDFs (the names they are indexed under, and bytes) and the scope each goes into,
    the indexing settings, the embedding model and backend (its fingerprint) and the indexing code. Nothing about
    how questions are asked (per-doc or not)."""
    h = hashlib.sha256()
    for p in pdfs:
        name = (names or {}).get(p.name, p.name)
        h.update(name.encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest() + _scope_of(name).encode())
    h.update(json.dumps({k: getattr(settings, k) for k in INDEX_SETTINGS}, sort_keys=True).encode())
    h.update(str(settings.resolved_model_path).encode())
    # the vectors' fingerprint: an onnx-int8 index is not an fp32 one (torch and fp32 ONNX share theirs)
    h.update(settings.embedding_fingerprint.encode())
    h.update(_code_fingerprint().encode())
    return h.hexdigest()


def _scope_of(file_name: str) -> str:
    """Each PDF's own scope in an eval index."""
    return f"eval:doc:{hashlib.sha256(file_name.encode()).hexdigest()[:12]}"


def _prune(root: Path, keep: int) -> None:
    """Delete all but the ``keep`` most recently used eval indexes (each code change makes a new one; a reuse
    touches its READY.json, so an index asked a minute ago is not deleted for being built long ago)."""
    built = sorted((p for p in root.iterdir() if (p / "READY.json").exists()),
                   key=lambda p: (p / "READY.json").stat().st_mtime, reverse=True)
    for old in built[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def index_checksum(store: Any, scopes: Sequence[str]) -> str:
    """sha256 over every chunk's id and text in ``scopes``: two runs with the same checksum saw the same index."""
    h = hashlib.sha256()
    docs = store.fetch(scopes=list(scopes), limit=10_000_000)
    for d in sorted(docs, key=lambda d: d.id):
        h.update(d.id.encode() + b"\0" + (d.content or "").encode() + b"\0")
    return h.hexdigest()


def build_index(
    settings: Settings,
    pdfs: list[Path],
    *,
    service_factory: ServiceFactory = default_service,
    cache_root: Path | None = None,
    log: Callable[[str], None] = print,
    progress: Progress | None = None,
    only: Collection[str] | None = None,
    names: Mapping[str, str] | None = None,
) -> tuple[EvalIndex, CitebotService]:
    """Index (or reuse) ``pdfs`` (a folder's PDFs), each into its own scope; returns the index and a service over it.
    ``only``: just these file names (a per-document smoke run), unless the whole folder's index is built already.
    ``names``: the name each PDF is indexed under (:func:`neutral_names`); ``only`` and the index's scopes use them.

    An interrupted build is resumed: each PDF is written in one transaction, and ingesting the same bytes
    into the same scope again is a no-op (``unchanged``), so only the PDFs not yet written are indexed."""
    root = cache_root or settings.data_dir / "eval" / "index"
    names = dict(names or {})

    def name(p: Path) -> str:
        return names.get(p.name, p.name)

    if only is not None:
        wanted = [p for p in pdfs if name(p) in set(only)]
        whole = root / index_key(pdfs, settings, names)[:20] / "READY.json"
        if wanted and not whole.exists():
            pdfs = wanted
    key = index_key(pdfs, settings, names)
    path = root / key[:20]
    # the model's ONNX export is the user's one (DATA_DIR/models or CITEBOT_MODELS_DIR), not one per eval index
    eval_settings = settings.model_copy(update={"data_dir": path, "elasticsearch_url": None,
                                                "models_dir": settings.resolved_models_dir})
    scopes = {name(p): _scope_of(name(p)) for p in pdfs}
    ready = path / "READY.json"
    if ready.exists():
        info = json.loads(ready.read_text(encoding="utf-8"))
        if info.get("key") == key:
            ready.touch()  # last used now: pruning keeps the indexes in use, not the ones built last
            service = service_factory(eval_settings)
            return EvalIndex(eval_settings, path, key, info["checksum"], scopes, True, info.get("ingest", []),
                             info.get("seconds", 0.0)), service
        shutil.rmtree(path)  # another key sharing the folder name's 20-hex-digit prefix
    building = path / "BUILDING.json"
    if building.exists() and json.loads(building.read_text(encoding="utf-8")).get("key") == key:
        log(f"resuming the interrupted index build in {path}")
    elif path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    building.write_text(json.dumps({"key": key}), encoding="utf-8")
    service = service_factory(eval_settings)
    t0 = time.perf_counter()
    ingest: list[dict[str, Any]] = []
    if progress is not None:
        progress("indexing PDFs", 0, len(pdfs))
    for n, p in enumerate(pdfs, 1):
        t_doc = time.perf_counter()
        res = service.ingest(p.read_bytes(), file_name=name(p), scope=scopes[name(p)])
        ingest.append({"file": name(p), "status": res.status, "pages": res.pages, "chunks": res.chunks,
                       "error": res.error})
        why = f" ({res.error})" if res.error else ""
        log(f"indexed {n}/{len(pdfs)} {name(p)}: {res.status}{why}, {res.pages} pages, {res.chunks} chunks, "
            f"{time.perf_counter() - t_doc:.1f} s")
        if progress is not None:
            progress("indexing PDFs", n, len(pdfs))
    seconds = time.perf_counter() - t0
    checksum = index_checksum(service.store, sorted(set(scopes.values())))
    ready.write_text(json.dumps({"key": key, "checksum": checksum, "ingest": ingest, "seconds": seconds}),
                     encoding="utf-8")
    building.unlink(missing_ok=True)
    _prune(root, keep=KEEP_INDEXES)
    return EvalIndex(eval_settings, path, key, checksum, scopes, False, ingest, seconds), service
