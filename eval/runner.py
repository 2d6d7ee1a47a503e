"""``citebot eval run``: index a folder of PDFs into an eval store and run an eval set through the service.

* **Index**: the PDFs go into a store of their own under ``CITEBOT_DATA_DIR/eval/index/<key>`` (always the
  embedded SQLite store, so an eval never writes into production's Elasticsearch index), each PDF in a scope
  of its own. By default every question is asked across all of those scopes, like a channel holding every
  document (the stores apply the scope filter at query time, so that is the same search); with
  ``--per-doc`` an answerable case is asked in its first source document's scope and an unanswerable one in
  the scopes of the PDFs it is ``asked_in`` (across all of them without that). One index thus serves both
  kinds of run. The key hashes the PDFs' names and bytes, the indexing settings and the indexing code
  (:data:`eval.index.INDEX_CODE`, not the query side), so an unchanged corpus is indexed once and reused by later
  runs, and an interrupted build resumes where it stopped; :mod:`eval.index` builds it.
* **Answers**: every case goes through :class:`pipelines.service.CitebotService.answer`, the production path.
  Every shown quote is rechecked verbatim against its cited chunk's stored text.
* **Modes**: ``hybrid`` (fused as ``CITEBOT_FUSION`` says), ``hybrid-weighted`` and ``hybrid-rrf`` (that fusion,
  on a service built with it), ``bm25``, ``dense``, and ``pages``: the naive one-vector-per-page baseline
  (:mod:`eval.page_baseline`), asked in the same scopes, ranking pages and answering nothing.
* **Resumable**: one JSON line per finished case is appended (flushed and fsynced) to ``results.jsonl``; a
  rerun with the same ``--out`` skips cases already there (a torn last line or an errored case is redone).
* **Neutral names** (``--neutral-names``): the PDFs are indexed as ``doc-001.pdf``... (in name order) and the set's
  ``sources[].doc`` and ``asked_in`` are mapped the same way, so routing and labels must go by what each document
  says it is; the mapping is in ``meta.json`` and the index key (names are part of it) differs from the named one.
* **Metadata**: ``meta.json`` holds the git commit, settings without secrets, model names, prompt version,
  index key and checksum, eval set checksum, timings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connectors.log import error_fields
from connectors.settings import Settings
from eval.cases import Case, apply_asked_in, asked_in_file, load_cases, set_checksum
from eval.index import REPO, Progress, ServiceFactory, build_index, default_service, neutral_names
from eval.page_baseline import PageBaseline
from eval.records import (
    FUSION_MODES,
    META_FILE,
    MODES,
    PAGES,
    RESULTS_FILE,
    RETRIEVAL_ONLY,
    CaseResult,
    CitedQuote,
    Hit,
    read_results,
)
from pipelines.models import Answer, RetrievalMode

if TYPE_CHECKING:
    from connectors.store_api import ChunkStore
    from pipelines.service import CitebotService

# Settings that must match for a resumed run to continue an earlier one.
RESUME_KEYS = ("set_sha256", "retrieval_mode", "fusion", "k", "per_doc", "index_key", "judge", "limit",
               "cases_filter", "categories_filter", "neutral_names")
# Depth of the recorded ranking (MRR, nDCG@10); with --k at least this, the answer's own passages are it.
RANKING_DEPTH = 10


class EvalRunError(Exception):
    """The run cannot start; the message says what to change."""


def all_modes(settings: Settings) -> list[str]:
    """What ``--mode all`` runs: hybrid (the configured fusion), hybrid with the other fusion, bm25, dense and
    the naive page baseline."""
    return [m for m in MODES if FUSION_MODES.get(m) != settings.fusion]


def mode_fusion(mode: str, settings: Settings) -> str | None:
    """The fusion a mode's hybrid retrieval uses (None: a mode that fuses nothing)."""
    if mode == RetrievalMode.HYBRID:
        return settings.fusion
    return FUSION_MODES.get(mode)


# --- selection --------------------------------------------------------------------------------------


def select(cases: Sequence[Case], ids: Sequence[str] | None = None,
           categories: Sequence[str] | None = None) -> list[Case]:
    """The cases with one of ``ids`` and in one of ``categories`` (each filter only when given), in file order.
    A name matching nothing is an error listing what the set has, so a typo never runs an empty set."""
    out = list(cases)
    if ids:
        unknown = sorted(set(ids) - {c.id for c in cases})
        if unknown:
            raise EvalRunError(f"--cases: no case with id {', '.join(unknown)} in the set")
        out = [c for c in out if c.id in set(ids)]
    if categories:
        have = sorted({c.category for c in cases})
        unknown = sorted(set(categories) - set(have))
        if unknown:
            raise EvalRunError(f"--category: the set has no {', '.join(unknown)}; it has {', '.join(have)}")
        out = [c for c in out if c.category in set(categories)]
    if not out:
        raise EvalRunError("--cases and --category together select no case")
    return out


def stratified(cases: Sequence[Case], limit: int | None) -> list[Case]:
    """The first ``limit`` cases taken round-robin over categories, so a short smoke run still covers every
    category (any ``limit`` at least the number of categories); all cases when ``limit`` is None. Categories go in
    file order, except that one holding unanswerable cases goes first: even a tiny run measures refusals."""
    if limit is None or limit >= len(cases):
        return list(cases)
    by_cat: dict[str, list[Case]] = {}
    for c in sorted(cases, key=lambda c: c.answerable):  # stable: file order within each group
        by_cat.setdefault(c.category, []).append(c)
    for group in by_cat.values():
        group.sort(key=lambda c: cases.index(c))
    picked: list[Case] = []
    i = 0
    while len(picked) < limit:
        for group in by_cat.values():
            if i < len(group) and len(picked) < limit:
                picked.append(group[i])
        i += 1
    order = {c.id: n for n, c in enumerate(cases)}
    return sorted(picked, key=lambda c: order[c.id])


# --- the PDFs -------------------------------------------------------------------------------------


def list_pdfs(docs_dir: Path) -> list[Path]:
    if not docs_dir.is_dir():
        raise EvalRunError(f"--docs {docs_dir} is not a folder of PDFs")
    pdfs = sorted(p for p in docs_dir.iterdir() if p.is_file() and p.suffix.lower() == ".pdf")
    if not pdfs:
        raise EvalRunError(f"no .pdf files in {docs_dir}")
    return pdfs


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


def ranking(service: CitebotService, question: str, scopes: list[str], mode: str, k: int) -> list[Hit]:
    """The retrieval ranking to depth max(10, k) through the production query engine (same routing and
    fusion as the answer), so MRR and nDCG@10 see ten passages even when answers use five."""
    query = getattr(service, "query", None)  # a stand-in service (the runner's tests) has no query engine
    if query is None or not hasattr(query, "retrieve"):
        return []
    docs = query.passages(question, scopes, mode=mode, k=max(RANKING_DEPTH, k))
    return [
        Hit(chunk_id=d.id, file=str(d.meta.get("file_name", "")), page_start=int(d.meta.get("page_start") or 0),
            page_end=int(d.meta.get("page_end") or d.meta.get("page_start") or 0), score=float(d.score or 0.0))
        for d in docs
    ]


def to_result(case: Case, answer: Answer, *, mode: str, scopes: list[str], latency_ms: float,
              store: ChunkStore) -> CaseResult:
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
        answer_kind=answer.kind,
        answer=answer.text,
        refused=answer.refused,
        confidence=answer.confidence,
        citations=cits,
        retrieved=[Hit(chunk_id=r.chunk_id, file=r.file, page_start=r.page_start, page_end=r.page_end,
                       score=r.score) for r in answer.retrieved],
        latency_ms=latency_ms,
        timings_ms=answer.timings_ms.model_dump(),
    )


# --- run --------------------------------------------------------------------------------------------


def load_set(set_path: Path) -> tuple[list[Case], str]:
    """The set's cases, with ``asked_in`` filled from an ``unanswerable_asked_in.json`` lying beside it (for the
    unanswerable cases that lack the field); and a line saying so, or "" when there is no such file."""
    cases = load_cases(set_path)
    side = asked_in_file(set_path)
    if side is None:
        return cases, ""
    cases, filled = apply_asked_in(cases, side)
    return cases, f"asked_in of {filled} unanswerable case(s) read from {side}"


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
    case_ids: Sequence[str] | None = None
    categories: Sequence[str] | None = None
    neutral_names: bool = False


def renamed(case: Case, names: Mapping[str, str]) -> Case:
    """``case`` with its sources' documents and ``asked_in`` under the names the PDFs were indexed as."""
    sources = [s.model_copy(update={"doc": names.get(s.doc, s.doc)}) for s in case.sources]
    return case.model_copy(update={"sources": sources, "asked_in": [names.get(d, d) for d in case.asked_in]})


def _page_result(case: Case, baseline: PageBaseline, scopes: list[str], k: int) -> CaseResult:
    """A case asked of the naive page retriever: its ranking only, no answer (answer metrics stay empty)."""
    t0 = time.perf_counter()
    hits = baseline.search(case.question, scopes, max(RANKING_DEPTH, k))
    return CaseResult(id=case.id, question=case.question, category=case.category, critical=case.critical,
                      answerable=case.answerable, expected_answer=case.answer, sources=case.sources, scopes=scopes,
                      retrieval_mode=PAGES, answer_mode=RETRIEVAL_ONLY, retrieved=hits[:k], ranking=hits,
                      latency_ms=(time.perf_counter() - t0) * 1000)


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


def _documents_asked(cases: Sequence[Case], opts: RunOptions) -> set[str] | None:
    """The PDFs a per-document run of a selection (``--cases``, ``--category``, ``--limit``) asks in: it indexes
    those only. ``None`` (every PDF) for a whole run, an all-PDF run, or a case asked across every PDF."""
    if not opts.per_doc or not (opts.case_ids or opts.categories or opts.limit):
        return None
    names: set[str] = set()
    for c in cases:
        named = set(c.asked_in) if not c.answerable else {s.doc for s in c.sources}
        if not named:
            return None
        names |= named
    return names


def run_eval(
    settings: Settings,
    opts: RunOptions,
    *,
    service_factory: ServiceFactory = default_service,
    log: Callable[[str], None] = print,
    progress: Progress | None = None,
) -> dict[str, tuple[dict[str, Any], list[CaseResult]]]:
    """Run the set in each mode; returns ``{mode: (meta, results)}`` and leaves them in ``opts.out_dir``.
    ``progress(what, done, total)`` hears of every PDF indexed and every case answered (a terminal display)."""
    for m in opts.modes:
        if m not in MODES:
            raise EvalRunError(f"unknown mode {m!r}; use one of {', '.join(MODES)} or all")
    if len(set(opts.modes)) != len(opts.modes):
        raise EvalRunError("each mode once, please")
    cases, asked_in_note = load_set(opts.set_path)
    if asked_in_note:
        log(asked_in_note)
    cases = stratified(select(cases, opts.case_ids, opts.categories), opts.limit)
    names = neutral_names(list_pdfs(opts.docs_dir)) if opts.neutral_names else {}
    if names:  # the documents are indexed under names that say nothing; the set follows them
        cases = [renamed(c, names) for c in cases]
    judge_client = None
    if opts.judge:
        from eval.judge import build_client

        judge_client = build_client(settings)
    t_start = time.perf_counter()
    index, service = build_index(settings, list_pdfs(opts.docs_dir), service_factory=service_factory, log=log,
                                 progress=progress, only=_documents_asked(cases, opts), names=names)
    if hasattr(service, "warm_up"):
        service.warm_up()  # build the pipelines now, so the first case's latency is not start-up time
    named = {s.doc for c in cases for s in c.sources} | {d for c in cases for d in c.asked_in}
    missing = sorted(named - set(index.scopes))
    if missing:
        log(f"warning: the set cites files not in {opts.docs_dir}: {', '.join(missing)}")
    failed = [i for i in index.ingest if i.get("status") == "failed"]
    if failed:  # their cases can only miss: say so on every run over this index, not just the one that built it
        log(f"warning: {len(failed)} PDF(s) failed to index: "
            + "; ".join(f"{i['file']}: {i.get('error')}" for i in failed))
    if opts.per_doc:
        everywhere = sum(1 for c in cases if not c.answerable and not c.asked_in)
        if everywhere:
            log(f"note: {everywhere} unanswerable case(s) have no asked_in and are asked across every PDF")

    base_meta: dict[str, Any] = {
        "set": opts.set_path.name,
        "set_path": str(opts.set_path),
        "set_sha256": set_checksum(opts.set_path),
        "docs_dir": str(opts.docs_dir),
        "k": opts.k,
        "per_doc": opts.per_doc,
        "judge": opts.judge,
        "limit": opts.limit,
        "cases_filter": sorted(opts.case_ids) if opts.case_ids else None,
        "categories_filter": sorted(opts.categories) if opts.categories else None,
        "neutral_names": names or None,  # original name -> the name it was indexed and scored under
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
    services: dict[str, CitebotService] = {index.settings.fusion: service}  # one service per fusion the modes need
    page_baseline: PageBaseline | None = None
    for mode in opts.modes:
        run_dir = opts.out_dir / mode if len(opts.modes) > 1 else opts.out_dir
        fusion = mode_fusion(mode, settings)
        query_mode = RetrievalMode.HYBRID.value if mode in FUSION_MODES else mode
        if fusion is not None and fusion not in services:
            services[fusion] = service_factory(index.settings.model_copy(update={"fusion": fusion}))
            if hasattr(services[fusion], "warm_up"):
                services[fusion].warm_up()
        mode_service = services[fusion] if fusion is not None else service
        meta = {**base_meta, "retrieval_mode": mode, "fusion": fusion}
        results_path, meta_path = run_dir / RESULTS_FILE, run_dir / META_FILE
        if opts.fresh and run_dir.exists():
            results_path.unlink(missing_ok=True)
            meta_path.unlink(missing_ok=True)
        done: dict[str, CaseResult] = {}
        if meta_path.exists():
            old = json.loads(meta_path.read_text(encoding="utf-8"))
            if "fusion" not in old:  # written before fusion was a setting: hybrid then always fused by weights
                old["fusion"] = "weighted" if old.get("retrieval_mode") == "hybrid" else None
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
        if mode == PAGES and todo and page_baseline is None:
            page_baseline = PageBaseline.build(index.settings, list_pdfs(opts.docs_dir), index.scopes, index.path,
                                               log=log, names=names)
        t_mode = time.perf_counter()
        if progress is not None:
            progress(f"{mode} cases", len(done), len(cases))
        for n, case in enumerate(todo, 1):
            scopes = index.scopes_for(case, opts.per_doc)
            t0 = time.perf_counter()
            try:
                if page_baseline is not None and mode == PAGES:
                    result = _page_result(case, page_baseline, scopes, opts.k)
                else:
                    answer = mode_service.answer(case.question, scopes, mode=query_mode, k=opts.k)
                    latency = (time.perf_counter() - t0) * 1000
                    result = to_result(case, answer, mode=mode, scopes=scopes, latency_ms=latency,
                                       store=mode_service.store)
                    if opts.k >= RANKING_DEPTH and result.answer_kind == "answer":
                        # a look-up's passages are that ranking: no second retrieval. A question type's passages are
                        # its own pick (the quoted rows, each section's opening; none for "there is no Figure 1"),
                        # not a ranking: MRR and nDCG@10 would read that pick, or nothing.
                        result.ranking = list(result.retrieved)
                    else:
                        result.ranking = ranking(mode_service, case.question, scopes, query_mode, opts.k)
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
            if progress is not None:
                progress(f"{mode} cases", len(done), len(cases))
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
