"""``citebot bench slack``: 50 signed mentions at once against the real bot, over a 10,000-chunk store.

The bot runs as ``citebot serve slack --http`` in a child process (exactly what production runs),
its Web API pointed at :class:`eval.fakes.slack_api.FakeSlack` on loopback. The store holds the sample
PDFs (ingested for real, so answers are real) plus synthetic chunks with random unit vectors up to
``--chunks``, all in the channel's scope. Measured, per mention: the ack latency (HTTP round trip
of the signed delivery) and mention-to-answer-posted (delivery sent -> ``chat.postMessage`` with the
answer seen by the fake). Every mention must be answered exactly once, and with the same quotes as when its
question is asked alone: after the burst, each question is asked again on its own, one at a time, and the quotes
(text and location line, in order) of the two answers are compared; a difference is printed, and ``--check``
fails on it.

Each compared backend (``--backends``; default torch and the configured one) gets its own bot process on
the same store, one after the other, and the table shows them side by side with the time from spawn to
``/readyz``.

Targets: ack p95 <= 100 ms, answer posted p95 <= 1.5 s (extractive mode), ready <= 4 s. ``--check`` exits 1 when
a target is missed, a mention is not answered exactly once, or an answer's quotes differ from its question's asked
alone.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from connectors.settings import Settings
from eval.bench.common import add_backends_arg

TARGET_ACK_P95_MS = 100.0
TARGET_ANSWER_P95_MS = 1500.0
TARGET_READY_S = 4.0
CHANNEL = "C0BENCH"
USER = "U0BENCHER"


def register(sub: Any) -> None:
    p = sub.add_parser("slack", help="50 signed mentions at once: ack and answer-posted latency")
    p.add_argument("--mentions", type=int, default=50)
    p.add_argument("--chunks", type=int, default=10_000, help="total chunks in the channel's store")
    p.add_argument("--workers", type=int, default=None, help="CITEBOT_SLACK_WORKERS for the bot (default: setting)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--check", action="store_true",
                   help="exit 1 when a target is missed, a mention is not answered exactly once, or an answer's "
                        "quotes differ from those of its question asked alone")
    add_backends_arg(p)
    p.set_defaults(func=run)


def _pct(values: list[float], q: float) -> float:
    from eval.bench.common import percentiles

    return percentiles(values)[f"p{q}_ms"]


def _build_store(settings: Settings, total_chunks: int, scope: str) -> dict[str, int]:
    """Ingest the sample PDFs, then pad the scope with synthetic chunks up to ``total_chunks``."""
    from eval.sample_pdfs import SAMPLE_FILES, sample_bytes
    from pipelines.service import CitebotService

    service = CitebotService(settings)
    real = 0
    for name in SAMPLE_FILES:
        result = service.ingest(sample_bytes(name), file_name=name, scope=scope, uploaded_by=USER)
        if result.status == "failed":
            raise RuntimeError(f"could not ingest {name}: {result.error}")
        real += result.chunks
    from eval.bench.common import sentence_chunks, write_in_batches

    synthetic = max(0, total_chunks - real)
    write_in_batches(service.store, sentence_chunks(synthetic, scope, settings.embedding_dim, seed=7, per_doc=50))
    return {"real_chunks": real, "synthetic_chunks": synthetic, "total_chunks": real + synthetic}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the bot exited with status {proc.returncode} before serving")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - loopback
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the bot did not become healthy in time")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from eval.bench.common import compared_backends, load_average, with_backend
    from eval.fakes.slack_api import TEAM, FakeSlack
    from pipelines.models import slack_scope

    backends = compared_backends(settings, args.backends)
    workers = args.workers or settings.slack_workers
    scope = slack_scope(TEAM, CHANNEL)
    results: dict[str, dict[str, Any]] = {}
    load_start = load_average()
    with tempfile.TemporaryDirectory(prefix="citebot-bench-slack-") as tmp, FakeSlack() as fake:
        data_dir = Path(tmp) / "data"
        bench_settings = with_backend(settings, backends[-1], data_dir=data_dir, openai_api_key=None,
                                      openai_base_url=None, elasticsearch_url=None)
        t0 = time.perf_counter()
        store_info = _build_store(bench_settings, args.chunks, scope)
        build_s = time.perf_counter() - t0
        for backend in backends:  # the same store, one bot after the other
            results[backend] = _measure(bench_settings, backend, fake, Path(tmp), args.mentions, workers)
    out = {"mentions": args.mentions, "workers": workers, "backends": backends, **store_info,
           "store_build_s": round(build_s, 1), "load_avg_1m": [load_start, load_average()], "results": results,
           "target_ack_p95_ms": TARGET_ACK_P95_MS, "target_answer_p95_ms": TARGET_ANSWER_P95_MS,
           "target_ready_s": TARGET_READY_S}
    out["missed"] = missed_targets(results)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        _print(out)
    if args.check:
        return 1 if out["missed"] else 0
    return 0 if all(r["all_answered_once"] for r in results.values()) else 1


def missed_targets(results: dict[str, dict[str, Any]]) -> list[str]:
    """What ``--check`` fails on, per backend: each target missed, a mention not answered exactly once, and
    answers whose quotes differ from their question's asked alone."""
    missed = []
    for b, r in results.items():
        if not r["ack_target_met"]:
            missed.append(f"ack p95 {r['ack_ms_p95']} ms > {TARGET_ACK_P95_MS:g} ms ({b})")
        if not r["answer_target_met"]:
            missed.append(f"answer posted p95 {r['answer_posted_ms_p95']} ms > {TARGET_ANSWER_P95_MS:g} ms ({b})")
        if not r["ready_target_met"]:
            missed.append(f"ready {r['ready_s']} s > {TARGET_READY_S:g} s ({b})")
        if not r["all_answered_once"]:
            missed.append(f"{r['answered_exactly_once']} of {r['mentions']} mentions answered exactly once ({b})")
        if r["quote_mismatches"]:
            missed.append(f"{len(r['quote_mismatches'])} answers quote otherwise than asked alone ({b})")
    return missed


def quotes_of(blocks: list[dict[str, Any]]) -> list[str]:
    """The quotes of a posted answer, in order: each quote's text, then its location line (``file · p. N``)."""
    out: list[str] = []
    for i, block in enumerate(blocks):
        if block.get("type") != "rich_text":
            continue
        text = "".join(
            el.get("text", "")
            for part in block.get("elements", [])
            if part.get("type") == "rich_text_quote"
            for el in part.get("elements", [])
        )
        after = blocks[i + 1] if i + 1 < len(blocks) else {}
        where = ""
        if after.get("type") == "context":
            where = " ".join(el.get("text", "") for el in after.get("elements", []))
        out.append(f"{text} — {where}" if where else text)
    return out


def _measure(settings: Settings, backend: str, fake: Any, tmp: Path, n: int, workers: int) -> dict[str, Any]:
    """Start ``citebot serve slack --http`` on ``backend``, time it to ready, deliver the bursts, stop it."""
    from eval.fakes.slack_api import BOT_TOKEN, SIGNING_SECRET, event_callback, mention, message, post_signed
    from eval.sample_pdfs import facts

    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEBOT_", "SLACK_", "OPENAI_", "TEAMS_"))}
    env.update(
        {
            "CITEBOT_DATA_DIR": str(settings.data_dir),
            "CITEBOT_MODELS_DIR": str(settings.resolved_models_dir),
            "CITEBOT_EMBEDDING_BACKEND": backend,
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "CITEBOT_SLACK_API_URL": fake.url,
            "CITEBOT_SLACK_WORKERS": str(workers),
            "CITEBOT_TORCH_THREADS": str(settings.torch_threads),
            "CITEBOT_EMBEDDING_BATCH_WINDOW_MS": str(settings.embedding_batch_window_ms),
            "CITEBOT_LOG_LEVEL": "warning",
            "HAYSTACK_TELEMETRY_ENABLED": "False",
        }
    )
    if settings.model_path is not None:
        env["CITEBOT_MODEL_PATH"] = str(settings.model_path)
    cmd = [sys.executable, "-m", "bot.cli.main", "serve", "slack", "--http", "--port", str(port)]
    events_url = f"http://127.0.0.1:{port}/slack/events"
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=Path(__file__).resolve().parents[2],  # noqa: S603
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/readyz", proc)
        ready_s = time.perf_counter() - started
        questions = [f.question for f in facts()]
        tag = f"{len(fake.calls_to('chat.postMessage')) + 1:04d}"

        def answers_in(ts: str) -> int:
            return sum(1 for c in fake.calls_to("chat.postMessage", thread_ts=ts) if c.params.get("blocks"))

        # one warm-up question (first query builds the scope's dense matrix)
        post_signed(events_url, event_callback(mention(CHANNEL, USER, questions[0], f"1{tag}.000001")))
        fake.wait_until(lambda: answers_in(f"1{tag}.000001") >= 1, timeout=120)

        def burst(make: Any, prefix: str) -> tuple[dict[str, float], list[float], list[int]]:
            """Deliver ``n`` signed events at once; (ts -> send time, ack ms, HTTP statuses)."""
            barrier = threading.Barrier(n)
            sent: dict[str, float] = {}
            acks: list[float] = []
            statuses: list[int] = []
            lock = threading.Lock()

            def deliver(i: int) -> None:
                ts = f"{prefix}.{i:06d}"
                payload = event_callback(make(i, ts))
                barrier.wait()
                start = time.monotonic()
                status, _ = post_signed(events_url, payload, timeout=30)
                took = time.monotonic() - start
                with lock:
                    sent[ts] = start
                    acks.append(took * 1000)
                    statuses.append(status)

            threads = [threading.Thread(target=deliver, args=(i,)) for i in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return sent, acks, statuses

        asked: dict[str, str] = {}  # ts -> question

        def ask(i: int, ts: str) -> dict[str, Any]:
            asked[ts] = questions[i % len(questions)]
            return mention(CHANNEL, USER, asked[ts], ts)

        sent, acks, statuses = burst(ask, f"2{tag}")
        fake.wait_until(lambda: all(answers_in(ts) >= 1 for ts in sent), timeout=300)
        time.sleep(1.0)  # let any duplicate answer show itself before counting
        # for comparison: a burst of channel chatter the bot only acknowledges (no work queued)
        _, idle_acks, _ = burst(lambda i, ts: message(CHANNEL, USER, "chatter", ts), f"3{tag}")
        # each question once more on its own, one at a time: the quotes its answer should have had in the burst
        alone: dict[str, list[str]] = {}
        for j, q in enumerate(dict.fromkeys(asked[ts] for ts in sorted(sent))):
            ts = f"4{tag}.{j:06d}"
            post_signed(events_url, event_callback(mention(CHANNEL, USER, q, ts)), timeout=30)
            fake.wait_until(lambda ts=ts: answers_in(ts) >= 1, timeout=120)
            alone[q] = quotes_of(next(c for c in fake.calls_to("chat.postMessage", thread_ts=ts)
                                      if c.params.get("blocks")).params["blocks"])
        posts = [c for c in fake.calls_to("chat.postMessage") if c.params.get("blocks")]
        per_thread = Counter(str(c.params.get("thread_ts")) for c in posts if c.params.get("thread_ts") in sent)
        first_post: dict[str, float] = {}
        burst_quotes: dict[str, list[str]] = {}
        for c in posts:
            ts = str(c.params.get("thread_ts"))
            if ts in sent and ts not in first_post:
                first_post[ts] = c.at
                burst_quotes[ts] = quotes_of(c.params["blocks"])
        mismatches = [
            {"ts": ts, "question": asked[ts], "in_burst": burst_quotes[ts], "alone": alone[asked[ts]]}
            for ts in sorted(burst_quotes)
            if burst_quotes[ts] != alone[asked[ts]]
        ]
        answer_ms = [(first_post[ts] - sent[ts]) * 1000 for ts in sent if ts in first_post]
        span_s = max(first_post.values()) - min(sent.values()) if first_post else float("nan")
        refused = sum(
            1
            for c in posts
            if c.params.get("thread_ts") in sent and not any(b["type"] == "rich_text" for b in c.params["blocks"])
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    result: dict[str, Any] = {
        "ready_s": round(ready_s, 2),
        "acks_200": sum(1 for s in statuses if s == 200),
        "ack_ms_p50_no_work": round(_pct(idle_acks, 50), 1),
        "ack_ms_p95_no_work": round(_pct(idle_acks, 95), 1),
        "ack_ms_p50": round(_pct(acks, 50), 1),
        "ack_ms_p95": round(_pct(acks, 95), 1),
        "answer_posted_ms_p50": round(_pct(answer_ms, 50), 1),
        "answer_posted_ms_p95": round(_pct(answer_ms, 95), 1),
        "answered": len(first_post),
        "answers_per_s": round(len(first_post) / span_s, 2),
        "answered_exactly_once": sum(1 for ts in sent if per_thread.get(ts) == 1),
        "answers_without_quotes": refused,
        "mentions": n,
        "same_quotes_as_alone": len(burst_quotes) - len(mismatches),
        "quote_mismatches": mismatches,
    }
    result["ack_target_met"] = result["ack_ms_p95"] <= TARGET_ACK_P95_MS
    result["answer_target_met"] = result["answer_posted_ms_p95"] <= TARGET_ANSWER_P95_MS
    result["ready_target_met"] = result["ready_s"] <= TARGET_READY_S
    result["all_answered_once"] = result["answered_exactly_once"] == n
    return result


def _print(out: dict[str, Any]) -> None:
    from eval.bench.common import ratio

    backends, res = out["backends"], out["results"]
    base = backends[0]
    print(f"Slack bench: {out['mentions']} signed mentions at once, {out['total_chunks']} chunks, {out['workers']} "
          f"workers; backends {', '.join(backends)} on the same store, one bot after the other")
    print(f"  load average (1 min) at start / end: {out['load_avg_1m'][0]} / {out['load_avg_1m'][1]} (2 vCPUs)")
    rows = [
        ("ready (spawn to /readyz)", "ready_s", "s", TARGET_READY_S),
        ("ack, no work p95", "ack_ms_p95_no_work", "ms", None),
        ("ack p95", "ack_ms_p95", "ms", TARGET_ACK_P95_MS),
        ("answer posted p50", "answer_posted_ms_p50", "ms", None),
        ("answer posted p95", "answer_posted_ms_p95", "ms", TARGET_ANSWER_P95_MS),
        ("answers/s", "answers_per_s", "", None),
    ]
    print(f"  {'':26s}" + "".join(f"{b:>14s}" for b in backends) + "   ratio   target")
    for label, key, unit, target in rows:
        cells = "".join(f"{res[b][key]:>11.1f} {unit:2s}" for b in backends)
        if key == "answers_per_s":
            ratios = ", ".join(ratio(res[b][key], res[base][key]) for b in backends[1:])
        else:
            ratios = ", ".join(ratio(res[base][key], res[b][key]) for b in backends[1:])
        met = ", ".join(("met" if res[b][key] <= target else "MISSED") for b in backends) if target else ""
        tgt = f"<= {target:g} {unit} ({met})" if target else ""
        print(f"  {label:26s}{cells}   {ratios:6s}  {tgt}")
    for b in backends:
        r = res[b]
        print(f"  [{b}] answered exactly once: {r['answered_exactly_once']}/{out['mentions']}, "
              f"{r['answers_without_quotes']} without quotes; same quotes as asked alone: "
              f"{r['same_quotes_as_alone']}/{out['mentions']}")
        for m in r["quote_mismatches"]:
            print(f"    quotes differ for {m['question']!r} (mention {m['ts']}):")
            for label, quotes in (("in the burst", m["in_burst"]), ("asked alone", m["alone"])):
                shown = "; ".join(q[:120] for q in quotes) or "(no quotes)"
                print(f"      {label}: {shown}")
    for line in out["missed"]:
        print(f"  missed: {line}")
