"""``citebot bench query``: answer latency at scale, cold start, and answer quality on the sample PDFs.

Three parts, each on its own temporary data dir (the user's store is never touched):

1. **Quality** — the sample PDFs (:mod:`eval.sample_pdfs`) are ingested with the production indexer and
   the shipped eval set ``eval/sets/demo.jsonl`` is asked in every retrieval mode: page-hit@5 per mode
   (a retrieved passage of the top 5 on an expected page), the share of shown quotes that are verbatim
   spans of their chunk, and refusal rates (answerable answered, unanswerable refused). The refusal
   threshold is *calibrated* on a separate dev set (the sample PDFs' fact questions plus the
   unanswerable questions in :data:`DEV_UNANSWERABLE`), reported as ``calibration``.
2. **Latency** — a store of ``--chunks`` synthetic chunks in ONE scope (the worst case: every chunk is
   searched) plus the sample PDFs' real chunks; the synthetic corpus is :mod:`eval.bench.common`'s (real-ish
   sentences, RANDOM unit vectors: only a kNN timing needs them). The query path is real: the question is
   embedded by the model, BM25 and dense search run, the fusion ranks, and the extractive answerer embeds
   the candidate sentences (its sentence cache is cleared before every timed answer, so no repeat is free).
3. **Cold start** — ``citebot ask`` in a new Python process on the latency store, timed from spawn to exit
   (the answer printed), and whether the process imported torch or transformers.

Every part runs for each compared backend (``--backends``; default torch and the configured one) in the
same run, questions alternating between them, so the ratio holds on a noisy shared machine.

Targets at 50,000 chunks: retrieval p95 <= 40 ms including the query embedding, extractive
answer p95 <= 120 ms, cold start (``citebot ask``) <= 3 s; 100% of shown quotes verbatim; hybrid
page-hit@5 >= BM25 and >= dense; unanswerable refused >= 90% while answerable answered >= 90%.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from connectors.settings import Settings
from eval.bench.common import add_backends_arg

TARGETS = {
    "retrieval_p95_ms": 40.0,
    "answer_p95_ms": 120.0,
    "cold_start_s": 3.0,
    "verbatim": 1.0,
    "answered_rate": 0.9,
    "refused_rate": 0.9,
}
SCOPE = "bench:query"

# Calibration-only questions the sample PDFs do not answer (the eval set's unanswerables are different).
DEV_UNANSWERABLE = (
    "What is the company's policy on bringing dogs to the office?",
    "How many parking spaces are there at the Leeds office?",
    "Who is the chairman of the board?",
    "What is the maternity leave policy in Germany?",
    "How much does the canteen charge for lunch?",
    "What is the share price of Halvorsen & Pike?",
    "Which software licences does the Provider resell?",
    "What is the penalty for losing a security badge?",
    "How many vacation days do contractors get?",
    "What programming languages does the IT team use?",
    "When is the company Christmas party?",
    "What is the insurance excess for company cars?",
    "Does the agreement include an arbitration clause in Singapore?",
    "What is the capital of Peru?",
    "How tall is the Aberdeen office building?",
)

def register(sub: Any) -> None:
    p = sub.add_parser("query", help="answer latency at N chunks, cold start, and answer quality on the samples")
    p.add_argument("--chunks", type=int, default=50_000, help="synthetic chunks in the latency store (default 50000)")
    p.add_argument("--queries", type=int, default=100, help="timed questions (default 100)")
    p.add_argument("--skip-quality", action="store_true")
    p.add_argument("--skip-latency", action="store_true")
    p.add_argument("--skip-cold", action="store_true")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--json", action="store_true", help="print JSON")
    add_backends_arg(p)
    p.set_defaults(func=run)


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------
def _settings(base: Settings, data_dir: Path, backend: str | None = None, **over: Any) -> Settings:
    return Settings(
        data_dir=data_dir,
        model_path=base.model_path,
        models_dir=base.resolved_models_dir,  # the user's exports: made once, reused by every run
        embedding_backend=backend or base.embedding_backend,  # type: ignore[arg-type]
        torch_threads=base.torch_threads,
        refusal_threshold=base.refusal_threshold,
        **over,
    )


def _ingest_samples(settings: Settings, scope: str) -> Any:
    from eval.sample_pdfs import write_samples
    from pipelines.service import CitebotService

    service = CitebotService(settings)
    for path in write_samples(settings.data_dir / "samples"):
        r = service.ingest(path.read_bytes(), file_name=path.name, scope=scope)
        if r.status == "failed":
            raise RuntimeError(f"could not index the sample {path.name}: {r.error}")
    return service


def _page_hit(docs: list[Any], expected: set[tuple[str, int]], k: int = 5) -> bool:
    for d in docs[:k]:
        m = d.meta or {}
        for page in range(int(m.get("page_start", 0)), int(m.get("page_end", 0)) + 1):
            if (m.get("file_name"), page) in expected:
                return True
    return False


# --------------------------------------------------------------------------------------------------
# 1. quality and calibration
# --------------------------------------------------------------------------------------------------
def calibrate(relevances: list[tuple[float, bool]]) -> dict[str, Any]:
    """The threshold maximising balanced accuracy over (relevance, answerable) pairs: the midpoint of the
    widest gap among the best candidates."""
    values = sorted({round(r, 4) for r, _ in relevances})
    cuts = [0.0] + [(a + b) / 2 for a, b in zip(values, values[1:], strict=False)] + [1.0]
    pos = [r for r, ok in relevances if ok]
    neg = [r for r, ok in relevances if not ok]

    def bal(t: float) -> float:
        tpr = sum(r >= t for r in pos) / max(1, len(pos))
        tnr = sum(r < t for r in neg) / max(1, len(neg))
        return (tpr + tnr) / 2

    best = max(bal(t) for t in cuts)
    good = [t for t in cuts if bal(t) == best]
    threshold = round((min(good) + max(good)) / 2, 3)
    return {
        "threshold": threshold,
        "balanced_accuracy": round(best, 3),
        "answerable_answered": round(sum(r >= threshold for r in pos) / max(1, len(pos)), 3),
        "unanswerable_refused": round(sum(r < threshold for r in neg) / max(1, len(neg)), 3),
        "answerable_min": round(min(pos), 3) if pos else None,
        "unanswerable_max": round(max(neg), 3) if neg else None,
        "n_answerable": len(pos),
        "n_unanswerable": len(neg),
    }


def bench_quality(base: Settings, tmp: Path, backend: str | None = None) -> dict[str, Any]:
    from eval.cases import load_cases
    from eval.sample_pdfs import facts

    settings = _settings(base, tmp / f"quality-{backend or base.embedding_backend}", backend)
    service = _ingest_samples(settings, SCOPE)
    engine = service.query
    engine.warm_up()

    dev = [(f.question, True) for f in facts()] + [(q, False) for q in DEV_UNANSWERABLE]
    rel = [(engine.relevance(q, [SCOPE]), ok) for q, ok in dev]
    calibration = calibrate(rel)

    cases = load_cases(Path(__file__).resolve().parents[1] / "sets" / "demo.jsonl")
    hits: dict[str, list[bool]] = {"hybrid": [], "bm25": [], "dense": []}
    for case in cases:
        if not case.answerable or not case.sources:
            continue
        expected = case.expected_pages()
        for mode in hits:
            hits[mode].append(_page_hit(engine.passages(case.question, [SCOPE], mode=mode, k=5), expected))  # type: ignore[arg-type]

    quotes = verbatim = 0
    answered = refused = n_ans = n_unans = 0
    misses: list[str] = []
    for case in cases:
        a = service.answer(case.question, [SCOPE])
        for c in a.citations:
            quotes += 1
            doc = service.store.fetch(
                scopes=[SCOPE], filters={"field": "meta.doc_id", "operator": "==", "value": c.doc_id}, limit=10_000
            )
            content = next(
                (d.content or "" for d in doc if f"{d.meta['doc_id']}:{d.meta['chunk_index']:05d}" == c.chunk_id), ""
            )
            verbatim += c.quote in content
        if case.answerable:
            n_ans += 1
            answered += not a.refused
            if a.refused:
                misses.append(f"refused answerable: {case.id}")
        else:
            n_unans += 1
            refused += a.refused
            if not a.refused:
                misses.append(f"answered unanswerable: {case.id}")
    return {
        "eval_set": "eval/sets/demo.jsonl",
        "cases": len(cases),
        "refusal_threshold_used": settings.refusal_threshold,
        "calibration": calibration,
        "page_hit_at_5": {m: round(sum(v) / max(1, len(v)), 3) for m, v in hits.items()},
        "quotes_shown": quotes,
        "verbatim": round(verbatim / quotes, 4) if quotes else None,
        "answered_rate": round(answered / max(1, n_ans), 3),
        "refused_rate": round(refused / max(1, n_unans), 3),
        "misses": misses,
    }


# --------------------------------------------------------------------------------------------------
# 2. latency at N chunks
# --------------------------------------------------------------------------------------------------
def build_latency_store(settings: Settings, n: int, seed: int, real_chunks: list[Any]) -> dict[str, Any]:
    from connectors.stores import open_store
    from eval.bench.common import sentence_chunks, write_in_batches

    store = open_store(settings)
    t0 = time.perf_counter()
    write_in_batches(store, sentence_chunks(n, SCOPE, settings.embedding_dim, seed))
    store.write_documents(real_chunks)
    return {"store": store, "build_s": round(time.perf_counter() - t0, 1)}


def bench_latency(base: Settings, tmp: Path, n: int, queries: int, seed: int, backends: list[str]) -> dict[str, Any]:
    """Every question is timed on each backend in turn (same store, same moment), so the ratios hold."""
    from dataclasses import replace

    from eval.bench.common import percentiles
    from eval.cases import load_cases
    from eval.sample_pdfs import facts
    from pipelines.query import QueryEngine

    # the sample PDFs' real chunks (with their real embeddings) join the synthetic ones
    src = _settings(base, tmp / "samples-src", backends[-1])
    service = _ingest_samples(src, "local")
    real = [
        replace(d, meta={**d.meta, "scope": SCOPE})
        for d in service.store.fetch(scopes=["local"], limit=10_000, return_embedding=True)
    ]  # type: ignore[call-arg]
    settings = _settings(base, tmp / "latency", backends[-1])
    built = build_latency_store(settings, n, seed, real)
    store = built["store"]
    engines, warm_s = {}, {}
    for b in backends:
        engines[b] = QueryEngine(_settings(base, tmp / "latency", b), store)
        t0 = time.perf_counter()
        # One store for every backend: its vectors are random (and the real chunks' from one backend), and each
        # backend only times its searches on them. Marked as this backend's, so warming up does not warn about
        # the bench's own temporary store as it would about a user's store made with another backend.
        store.set_embedding_fingerprint(engines[b].embedder.fingerprint)
        engines[b].warm_up()
        warm_s[b] = round(time.perf_counter() - t0, 2)

    questions = [c.question for c in load_cases(Path(__file__).resolve().parents[1] / "sets" / "demo.jsonl")]
    questions += [f.question for f in facts()]
    questions = (questions * (queries // len(questions) + 1))[:queries]
    for q in questions[:5]:  # warm caches that a running bot has warm (SQLite pages, matrices)
        for engine in engines.values():
            engine.passages(q, [SCOPE])
    times: dict[str, dict[str, list[float]]] = {
        b: {k: [] for k in ("embed", "retrieve", "answer", "embed_cpu", "retrieve_cpu", "answer_cpu")} for b in backends
    }

    def timed(b: str, key: str, fn: Any) -> None:
        # wall and CPU time of the process: on a shared machine the CPU time is what the code costs
        t, c = time.perf_counter(), time.process_time()
        fn()
        times[b][f"{key}_cpu"].append((time.process_time() - c) * 1000)
        times[b][key].append((time.perf_counter() - t) * 1000)

    for q in questions:
        for b, engine in engines.items():
            timed(b, "embed", lambda e=engine, q=q: e.embedder.run(text=q))
            timed(b, "retrieve", lambda e=engine, q=q: e.passages(q, [SCOPE]))
            engine.extractive._cache.clear()
            timed(b, "answer", lambda e=engine, q=q: e.answer(q, [SCOPE]))
    return {
        "chunks": n + len(real),
        "synthetic": n,
        "real_sample_chunks": len(real),
        "store_build_s": built["build_s"],
        "backends": {
            b: {
                "running": engines[b].embedder.fingerprint and engines[b].embedder._encoder.backend,
                "warm_up_s": warm_s[b],
                "query_embedding": percentiles(times[b]["embed"], times[b]["embed_cpu"]),
                "retrieval": percentiles(times[b]["retrieve"], times[b]["retrieve_cpu"]),
                "extractive_answer": percentiles(times[b]["answer"], times[b]["answer_cpu"]),
            }
            for b in backends
        },
        "data_dir": str(settings.data_dir),
        "store": store,
        "fingerprints": {b: engines[b].embedder.fingerprint for b in backends},
    }


# --------------------------------------------------------------------------------------------------
# 3. cold start
# --------------------------------------------------------------------------------------------------
def bench_cold(base: Settings, lat: dict[str, Any], backends: list[str], runs: int = 2) -> dict[str, Any]:
    """``citebot ask`` in a fresh process on the latency store (``lat``, from :func:`bench_latency`), spawn to exit
    (the answer printed), per backend, the backends alternating; ``imports_torch`` says whether the process loaded
    torch or transformers."""
    data_dir = Path(lat["data_dir"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("CITEBOT_")}
    env.update({"CITEBOT_LOG_LEVEL": "warning", "HAYSTACK_TELEMETRY_ENABLED": "False",
                "CITEBOT_DATA_DIR": str(data_dir), "CITEBOT_MODELS_DIR": str(base.resolved_models_dir),
                "CITEBOT_TORCH_THREADS": str(base.torch_threads)})
    if base.model_path is not None:
        env["CITEBOT_MODEL_PATH"] = str(base.model_path)
    code = ("import sys; from bot.cli.main import main; rc = main(sys.argv[1:]); "
            "from connectors.embedding import heavy_modules_loaded as h; print('HEAVY', ','.join(h())); sys.exit(rc)")
    out: dict[str, Any] = {b: {"runs_s": []} for b in backends}
    for _ in range(runs):
        for b in backends:
            # the latency store is each backend's in turn (see bench_latency): `citebot ask` refuses a store whose
            # vectors another backend made, rightly for a user's store, and this one's are random anyway
            lat["store"].set_embedding_fingerprint(lat["fingerprints"][b])
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-c", code, "ask", "What are the core working hours?", "--scope", SCOPE],
                capture_output=True, text=True, env={**env, "CITEBOT_EMBEDDING_BACKEND": b}, timeout=300,
                check=False, cwd=Path(__file__).resolve().parents[2],
            )
            took = time.perf_counter() - t0
            if proc.returncode != 0:
                raise RuntimeError(f"cold-start child ({b}) failed: {proc.stderr[-2000:]}")
            out[b]["runs_s"].append(round(took, 2))
            heavy = proc.stdout.rsplit("HEAVY", 1)[-1].strip()
            out[b]["imports_torch"] = bool(heavy)
    for b in backends:
        out[b]["best_s"] = min(out[b]["runs_s"])
    return out


# --------------------------------------------------------------------------------------------------
def run(args: argparse.Namespace, settings: Settings) -> int:
    from eval.bench.common import compared_backends, load_average

    backends = compared_backends(settings, args.backends)
    out: dict[str, Any] = {"targets": TARGETS, "backends": backends, "load_avg_1m": load_average()}
    with tempfile.TemporaryDirectory(prefix="citebot-bench-query-") as tmp_s:
        tmp = Path(tmp_s)
        if not args.skip_quality:
            out["quality"] = {b: bench_quality(settings, tmp, b) for b in backends}
        if not args.skip_latency:
            lat = bench_latency(settings, tmp, args.chunks, args.queries, args.seed, backends)
            out["latency"] = {k: v for k, v in lat.items() if k not in ("data_dir", "store", "fingerprints")}
            if not args.skip_cold:
                out["cold_start"] = bench_cold(settings, lat, backends)
    out["load_avg_1m_end"] = load_average()
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        _print(out)
    return 0


def _print(out: dict[str, Any]) -> None:
    from eval.bench.common import ratio

    backends = out["backends"]
    base = backends[0]
    print(f"load average at start {out['load_avg_1m']}, at end {out['load_avg_1m_end']} (2 vCPUs); "
          f"backends {', '.join(backends)} (ratios: {base} / other, >1 = faster)")
    for b, q in (out.get("quality") or {}).items():
        c = q["calibration"]
        print(f"quality [{b}] on {q['eval_set']} ({q['cases']} cases), refusal_threshold={q['refusal_threshold_used']}")
        print("  page-hit@5: " + ", ".join(f"{m} {v:.3f}" for m, v in q["page_hit_at_5"].items()))
        print(f"  quotes shown {q['quotes_shown']}, verbatim {q['verbatim']}")
        print(f"  answerable answered {q['answered_rate']}, unanswerable refused {q['refused_rate']}")
        for m in q["misses"]:
            print(f"    {m}")
        print(
            f"  calibration (dev set, {c['n_answerable']} answerable / {c['n_unanswerable']} unanswerable): "
            f"threshold {c['threshold']} -> answered {c['answerable_answered']}, refused {c['unanswerable_refused']} "
            f"(answerable min {c['answerable_min']}, unanswerable max {c['unanswerable_max']})"
        )
    lat = out.get("latency")
    if lat:
        print(
            f"latency at {lat['chunks']} chunks ({lat['synthetic']} synthetic with random vectors, "
            f"{lat['real_sample_chunks']} real), store built in {lat['store_build_s']} s; each question on every "
            "backend in turn"
        )
        per = lat["backends"]
        head = "".join(f"{b + ' p50':>16}{b + ' p95':>16}" for b in backends)
        print(f"  {'':18s}{head}   p95 ratio")
        for key in ("query_embedding", "retrieval", "extractive_answer"):
            cells = "".join(f"{per[b][key]['p50_ms']:13.1f} ms{per[b][key]['p95_ms']:13.1f} ms" for b in backends)
            ratios = ", ".join(ratio(per[base][key]["p95_ms"], per[b][key]["p95_ms"]) for b in backends[1:])
            print(f"  {key:18s}{cells}   {ratios}")
        print("  CPU time of the process (steadier than wall clock on a shared machine):")
        for key in ("query_embedding", "retrieval", "extractive_answer"):
            cpu = "".join(
                f"{per[b][key]['cpu_p50_ms']:13.1f} ms{per[b][key]['cpu_p95_ms']:13.1f} ms" for b in backends)
            print(f"  {key:18s}{cpu}")
        print(f"  targets at 50k chunks: retrieval p95 <= {TARGETS['retrieval_p95_ms']:.0f} ms, extractive answer "
              f"p95 <= {TARGETS['answer_p95_ms']:.0f} ms")
    cold = out.get("cold_start")
    if cold:
        print("cold start, `citebot ask` in a fresh process to the printed answer (best of runs):")
        for b in backends:
            c = cold[b]
            print(f"  {b:10s} {c['best_s']:6.2f} s  runs {c['runs_s']}  torch/transformers imported: "
                  f"{'yes' if c['imports_torch'] else 'no'}   {ratio(cold[base]['best_s'], c['best_s'])}")
        print(f"  target <= {TARGETS['cold_start_s']:.0f} s")
