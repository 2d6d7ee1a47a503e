"""``citebot eval run``: index a folder of PDFs into an eval store and run an eval set through the service.

* **Index**: the PDFs go into a store of their own under ``CITEBOT_DATA_DIR/eval/index/<key>`` (always the
  embedded SQLite store, so an eval never writes into production's Elasticsearch index). By default every PDF
  goes into one scope, ``eval``, like a channel holding every document; with ``--per-doc`` each PDF gets its
  own scope and each question is asked in the scope of its first source document (unanswerable cases without
  sources are asked across all of them). The key hashes the PDFs' names and bytes, the indexing settings and
  the indexing code, so an unchanged corpus is indexed once and reused by later runs.
* **Answers**: every case goes through :class:`pipelines.service.CitebotService.answer`, the production path.
  Every shown quote is rechecked verbatim against its cited chunk's stored text.
* **Resumable**: one JSON line per finished case is appended (flushed and fsynced) to ``results.jsonl``; a
  rerun with the same ``--out`` skips cases already there (a torn last line or an errored case is redone).
* **Metadata**: ``meta.json`` holds the git commit, settings without secrets, model names, prompt version,
  index key and checksum, eval set checksum, timings.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from connectors.log import error_fields
from connectors.settings import Settings
from eval.cases import Case, load_cases, set_checksum
from eval.records import META_FILE, RESULTS_FILE, CaseResult, CitedQuote, Hit, read_results

REPO = Path(__file__).resolve().parents[1]
ALL_SCOPE = "eval"
MODES = ("hybrid", "bm25", "dense")
# Settings that change what the index holds (the rest only change answers).
INDEX_SETTINGS = ("chunk_max_tokens", "chunk_min_tokens", "embedding_dim", "ocr_enabled", "ocr_dpi",
                  "ocr_min_chars", "ocr_language", "max_pages")
# Settings that must match for a resumed run to continue an earlier one.
KEEP_INDEXES = 4
RESUME_KEYS = ("set_sha256", "retrieval_mode", "k", "per_doc", "index_key", "judge", "limit")


class EvalRunError(Exception):
    """The run cannot start; the message says what to change."""


ServiceFactory = Callable[[Settings], Any]


def _default_service(settings: Settings) -> Any:
    from pipelines.service import CitebotService

    return CitebotService(settings)


# --- selection --------------------------------------------------------------------------------------


def stratified(cases: Sequence[Case], limit: int | None) -> list[Case]:
    """The first ``limit`` cases taken round-robin over categories (in file order), so a short smoke run
    still covers every category; all cases when ``limit`` is None."""
    if limit is None or limit >= len(cases):
        return list(cases)
    by_cat: dict[str, list[Case]] = {}
    for c in cases:
        by_cat.setdefault(c.category, []).append(c)
    picked: list[Case] = []
    i = 0
    while len(picked) < limit:
        for group in by_cat.values():
            if i < len(group) and len(picked) < limit:
                picked.append(group[i])
        i += 1
    order = {c.id: n for n, c in enumerate(cases)}
    return sorted(picked, key=lambda c: order[c.id])


# --- index ------------------------------------------------------------------------------------------


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
        if not per_doc:
            return [ALL_SCOPE]
        for s in case.sources:
            if s.doc in self.scopes:
                return [self.scopes[s.doc]]
        return self.all_scopes


def _code_fingerprint() -> str:
    """Hash of the code that decides what the index holds (indexing pipeline, components, store, embedding)."""
    h = hashlib.sha256()
    files = [REPO / "pipelines" / "indexing.py", REPO / "connectors" / "embedding.py",
             REPO / "connectors" / "sqlite_store.py", *sorted((REPO / "pipelines" / "components").glob("*.py"))]
    for f in files:
        if f.exists():
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def list_pdfs(docs_dir: Path) -> list[Path]:
    if not docs_dir.is_dir():
        raise EvalRunError(f"--docs {docs_dir} is not a folder of PDFs")
    pdfs = sorted(p for p in docs_dir.iterdir() if p.is_file() and p.suffix.lower() == ".pdf")
    if not pdfs:
        raise EvalRunError(f"no .pdf files in {docs_dir}")
    return pdfs


def index_key(pdfs: Sequence[Path], settings: Settings, per_doc: bool) -> str:
    h = hashlib.sha256()
    for p in pdfs:
        h.update(p.name.encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    h.update(json.dumps({k: getattr(settings, k) for k in INDEX_SETTINGS}, sort_keys=True).encode())
    h.update(str(settings.resolved_model_path).encode())
    h.update(b"per_doc" if per_doc else b"one_scope")
    h.update(_code_fingerprint().encode())
    return h.hexdigest()


def _scope_of(file_name: str, per_doc: bool) -> str:
    if not per_doc:
        return ALL_SCOPE
    return f"eval:doc:{hashlib.sha256(file_name.encode()).hexdigest()[:12]}"


def _prune(root: Path, keep: int) -> None:
    """Delete all but the ``keep`` most recently built eval indexes (each code change makes a new one)."""
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
    docs_dir: Path,
    *,
    per_doc: bool,
    service_factory: ServiceFactory = _default_service,
    cache_root: Path | None = None,
    log: Callable[[str], None] = print,
) -> tuple[EvalIndex, Any]:
    """Index (or reuse) ``docs_dir``'s PDFs; returns the index description and a service over it."""
    pdfs = list_pdfs(docs_dir)
    key = index_key(pdfs, settings, per_doc)
    root = cache_root or settings.data_dir / "eval" / "index"
    path = root / key[:20]
    eval_settings = settings.model_copy(update={"data_dir": path, "elasticsearch_url": None})
    scopes = {p.name: _scope_of(p.name, per_doc) for p in pdfs}
    ready = path / "READY.json"
    if ready.exists():
        info = json.loads(ready.read_text(encoding="utf-8"))
        if info.get("key") == key:
            service = service_factory(eval_settings)
            return EvalIndex(eval_settings, path, key, info["checksum"], scopes, True, info.get("ingest", []),
                             info.get("seconds", 0.0)), service
    if path.exists():
        shutil.rmtree(path)  # a partial index from an interrupted build
    path.mkdir(parents=True)
    service = service_factory(eval_settings)
    t0 = time.perf_counter()
    ingest: list[dict[str, Any]] = []
    for p in pdfs:
        res = service.ingest(p.read_bytes(), file_name=p.name, scope=scopes[p.name])
        ingest.append({"file": p.name, "status": res.status, "pages": res.pages, "chunks": res.chunks,
                       "error": res.error})
        log(f"indexed {p.name}: {res.status}, {res.pages} pages, {res.chunks} chunks")
    seconds = time.perf_counter() - t0
    checksum = index_checksum(service.store, sorted(set(scopes.values())))
    ready.write_text(json.dumps({"key": key, "checksum": checksum, "ingest": ingest, "seconds": seconds}),
                     encoding="utf-8")
    _prune(root, keep=KEEP_INDEXES)
    return EvalIndex(eval_settings, path, key, checksum, scopes, False, ingest, seconds), service


# --- metadata ---------------------------------------------------------------------------------------


def git_commit() -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10,  # noqa: S603,S607
                                 check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"git_commit": git("rev-parse", "HEAD"), "git_dirty": bool(status) if status is not None else None}


def public_settings(settings: Settings) -> dict[str, Any]:
    """Settings as JSON with every secret replaced by whether it is set."""
    from pydantic import SecretStr

    out: dict[str, Any] = {}
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr) or "password" in name or "token" in name or name.endswith("_key"):
            out[name] = "set" if value else None
        elif isinstance(value, Path):
            out[name] = str(value)
        else:
            out[name] = value
    return out


def _prompt_version() -> str | None:
    try:
        from pipelines.query import PROMPT_VERSION

        return str(PROMPT_VERSION)
    except ImportError:
        return None


# --- one case ---------------------------------------------------------------------------------------


def ranking(service: Any, question: str, scopes: list[str], mode: str, k: int) -> list[Hit]:
    """The retrieval ranking to depth max(10, k) through the production query engine (same routing and
    fusion as the answer), so MRR and nDCG@10 see ten passages even when answers use five."""
    query = getattr(service, "query", None)
    if query is None or not hasattr(query, "retrieve"):
        return []
    docs = query.retrieve(question, scopes, mode=mode, k=max(10, k))
    return [
        Hit(chunk_id=d.id, file=str(d.meta.get("file_name", "")), page_start=int(d.meta.get("page_start") or 0),
            page_end=int(d.meta.get("page_end") or d.meta.get("page_start") or 0), score=float(d.score or 0.0))
        for d in docs
    ]


def to_result(case: Case, answer: Any, *, mode: str, scopes: list[str], latency_ms: float,
              store: Any) -> CaseResult:
    cits = [
        CitedQuote(n=c.n, chunk_id=c.chunk_id, file=c.file, page_start=c.page_start, page_end=c.page_end,
                   quote=c.quote, verbatim=None)
        for c in answer.citations
    ]
    if cits:
        ids = sorted({c.chunk_id for c in cits})
        texts = {d.id: d.content or "" for d in store.fetch(scopes=scopes, filters={
            "field": "id", "operator": "in", "value": ids}, limit=len(ids))}
        for c in cits:
            c.verbatim = c.chunk_id in texts and bool(c.quote) and c.quote in texts[c.chunk_id]
    return CaseResult(
        id=case.id,
        question=case.question,
        category=case.category,
        critical=case.critical,
        answerable=case.answerable,
        expected_answer=case.answer,
        sources=case.sources,
        scopes=scopes,
        retrieval_mode=mode,
        answer_mode=answer.mode,
        answer=answer.text,
        refused=answer.refused,
        citations=cits,
        retrieved=[Hit(chunk_id=r.chunk_id, file=r.file, page_start=r.page_start, page_end=r.page_end,
                       score=r.score) for r in answer.retrieved],
        latency_ms=latency_ms,
        timings_ms=answer.timings_ms.model_dump(),
    )


# --- run --------------------------------------------------------------------------------------------


@dataclass
class RunOptions:
    set_path: Path
    docs_dir: Path
    out_dir: Path
    modes: Sequence[str] = ("hybrid",)
    k: int = 5
    per_doc: bool = False
    judge: bool = False
    limit: int | None = None
    fresh: bool = False


def _error_text(e: BaseException) -> str:
    """A failed case's error as recorded (and shown in reports): type and place, never the message, which can
    hold a store URL with its password."""
    fields = error_fields(e)
    return f"{fields['error']} at {fields['where']}" if fields["where"] else fields["error"]


def _append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def run_eval(
    settings: Settings,
    opts: RunOptions,
    *,
    service_factory: ServiceFactory = _default_service,
    log: Callable[[str], None] = print,
) -> dict[str, tuple[dict[str, Any], list[CaseResult]]]:
    """Run the set in each mode; returns ``{mode: (meta, results)}`` and leaves them in ``opts.out_dir``."""
    for m in opts.modes:
        if m not in MODES:
            raise EvalRunError(f"unknown mode {m!r}; use one of {', '.join(MODES)} or all")
    cases = stratified(load_cases(opts.set_path), opts.limit)
    judge_client = None
    if opts.judge:
        from eval.judge import build_client

        judge_client = build_client(settings)
    t_start = time.perf_counter()
    index, service = build_index(settings, opts.docs_dir, per_doc=opts.per_doc, service_factory=service_factory,
                                 log=log)
    if hasattr(service, "warm_up"):
        service.warm_up()  # build the pipelines now, so the first case's latency is not start-up time
    missing = sorted({s.doc for c in cases for s in c.sources} - set(index.scopes))
    if missing:
        log(f"warning: the set cites files not in {opts.docs_dir}: {', '.join(missing)}")

    base_meta: dict[str, Any] = {
        "set": opts.set_path.name,
        "set_path": str(opts.set_path),
        "set_sha256": set_checksum(opts.set_path),
        "docs_dir": str(opts.docs_dir),
        "k": opts.k,
        "per_doc": opts.per_doc,
        "judge": opts.judge,
        "limit": opts.limit,
        "index_key": index.key,
        "index_checksum": index.checksum,
        "index_reused": index.reused,
        "index_seconds": round(index.seconds, 2),
        "ingest": index.ingest,
        **git_commit(),
        "prompt_version": _prompt_version(),
        "embedding_model": str(settings.model_path) if settings.model_path else "all-MiniLM-L6-v2 (packaged)",
        "answer_model": settings.llm_model if settings.llm_configured else "extractive",
        "judge_model": settings.judge_model if opts.judge else None,
        "settings": public_settings(settings),
        "python": sys.version.split()[0],
    }
    if opts.judge:
        from eval.judge import JUDGE_PROMPT_VERSION

        base_meta["judge_prompt_version"] = JUDGE_PROMPT_VERSION

    out: dict[str, tuple[dict[str, Any], list[CaseResult]]] = {}
    for mode in opts.modes:
        run_dir = opts.out_dir / mode if len(opts.modes) > 1 else opts.out_dir
        meta = {**base_meta, "retrieval_mode": mode}
        results_path, meta_path = run_dir / RESULTS_FILE, run_dir / META_FILE
        if opts.fresh and run_dir.exists():
            results_path.unlink(missing_ok=True)
            meta_path.unlink(missing_ok=True)
        done: dict[str, CaseResult] = {}
        if meta_path.exists():
            old = json.loads(meta_path.read_text(encoding="utf-8"))
            diff = [key for key in RESUME_KEYS if old.get(key) != meta.get(key)]
            if diff:
                raise EvalRunError(
                    f"{run_dir} holds a run with different {', '.join(diff)}; pass a new --out or add --fresh"
                )
            meta["started_at"] = old.get("started_at")
            done = {r.id: r for r in read_results(results_path) if not r.error}
        else:
            meta["started_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        run_dir.mkdir(parents=True, exist_ok=True)
        # rewrite the results without torn lines and errored cases, so the file stays one line per case
        tmp = results_path.with_suffix(".tmp")
        tmp.write_text("".join(r.to_line() + "\n" for r in done.values()), encoding="utf-8")
        tmp.replace(results_path)
        meta_path.write_text(json.dumps(meta, indent=2), encoding="utf-8")

        todo = [c for c in cases if c.id not in done]
        if done:
            log(f"{mode}: resuming, {len(done)} of {len(cases)} cases already done")
        t_mode = time.perf_counter()
        for n, case in enumerate(todo, 1):
            scopes = index.scopes_for(case, opts.per_doc)
            t0 = time.perf_counter()
            try:
                answer = service.answer(case.question, scopes, mode=mode, k=opts.k)
                latency = (time.perf_counter() - t0) * 1000
                result = to_result(case, answer, mode=mode, scopes=scopes, latency_ms=latency, store=service.store)
                result.ranking = ranking(service, case.question, scopes, mode, opts.k)
            except Exception as e:  # noqa: BLE001 - one failing case is recorded, the run goes on
                result = CaseResult(id=case.id, question=case.question, category=case.category,
                                    critical=case.critical, answerable=case.answerable, expected_answer=case.answer,
                                    sources=case.sources, scopes=scopes, retrieval_mode=mode,
                                    error=_error_text(e))
            if judge_client is not None and not result.error:
                from eval.judge import judge_case

                result.judge = judge_case(judge_client, result)
            _append(results_path, result.to_line())
            done[case.id] = result
            if n % 10 == 0 or n == len(todo):
                log(f"{mode}: {len(done)}/{len(cases)} cases")
        meta["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        meta["cases"] = len(cases)
        meta["cases_run_now"] = len(todo)
        meta["wall_seconds_this_invocation"] = round(time.perf_counter() - t_mode, 2)
        meta_path.write_text(json.dumps(meta, indent=2), encoding="utf-8")
        ordered = [done[c.id] for c in cases if c.id in done]
        out[mode] = (meta, ordered)
    log(f"eval run finished in {time.perf_counter() - t_start:.1f} s; results in {opts.out_dir}")
    return out
