"""Prometheus metrics: what an admin scrapes from ``GET /metrics`` on a bot's health port.

Every metric is defined here, once, with its labels; the places that count call the small ``record_*``
functions below (the chat core for questions, uploads and votes, the Slack and Teams worker pools for their
queues, the chat state for claims taken over). Labels are bounded by construction: a platform, an answer mode,
an outcome, a failure reason from a fixed list. Never a channel id, a user, a question or a file name: a label
value that is not in its list is counted as ``other``, so a new code path can never blow up the series count.

The series live in prometheus-client's process-wide default registry (which adds the ``process_*`` and
``python_*`` series: memory, CPU, open files); :func:`exposition` renders it in the text format.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from connectors.platforms import CHAT_SDKS

PLATFORMS = (*CHAT_SDKS, "cli")  # each chat platform, and `citebot ask` on a terminal
ANSWER_MODES = ("extractive", "llm")
QUESTION_OUTCOMES = ("answered", "refused", "failed")
INGEST_OUTCOMES = ("indexed", "unchanged", "failed")
CITATION_OUTCOMES = ("exact", "normalised", "fuzzy", "dropped")
POLARITIES = ("up", "down")
# IngestError codes (pipelines/reading, the writer), the indexer's own, and the chat core's before the download
INGEST_FAILURE_REASONS = (
    "empty", "not_pdf", "too_large", "truncated", "encrypted", "corrupt", "too_many_pages", "memory", "timeout",
    "no_text", "store", "model", "internal", "memory_limit", "reindex", "download",
)
OTHER = "other"

# seconds: answers take ~0.1 s extractive, a few seconds with an LLM; uploads seconds to many minutes (OCR)
ANSWER_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)
INGEST_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0)

QUESTIONS = Counter(
    "citebot_questions", "Questions handled, by how they ended: answered with quotes, refused, or failed (our error)",
    ["platform", "mode", "outcome"],
)
ANSWER_SECONDS = Histogram(
    "citebot_answer_seconds", "Time from question to decided answer (retrieval, answer, validation), seconds",
    ["platform", "outcome"], buckets=ANSWER_BUCKETS,
)
CITATIONS = Counter(
    "citebot_citations", "Quotes checked against their chunk before anyone sees them: matched exactly, after "
    "normalising whitespace and quotes, fuzzily, or dropped (no such chunk, or not found in it)",
    ["platform", "outcome"],
)
INGESTS = Counter("citebot_ingests", "Uploads handled: indexed, unchanged (same bytes), or failed",
                  ["platform", "outcome"])
INGEST_SECONDS = Histogram("citebot_ingest_seconds", "Time to index one upload (read, OCR, chunk, embed, write), "
                           "seconds", ["platform", "outcome"], buckets=INGEST_BUCKETS)
INGEST_FAILURES = Counter("citebot_ingest_failures", "Uploads not indexed, by reason", ["platform", "reason"])
PAGES_INDEXED = Counter("citebot_pages_indexed", "Pages of indexed uploads", ["platform"])
OCR_PAGES = Counter("citebot_ocr_pages", "Pages of indexed uploads read by OCR (scanned)", ["platform"])
CHUNKS_INDEXED = Counter("citebot_chunks_indexed", "Chunks written to the store", ["platform"])
FEEDBACK = Counter("citebot_feedback", "Votes on answers (buttons, reactions, the 👎 form), by polarity",
                   ["platform", "polarity"])
QUEUE_DEPTH = Gauge("citebot_queue_depth", "Jobs (answers, uploads, commands) submitted and not finished yet",
                    ["platform"])
CLAIMS_TAKEN_OVER = Counter(
    "citebot_claims_taken_over", "Journaled work taken over because the worker holding it died (its lease ran out)",
    ["platform"],
)


def bounded(value: str, allowed: Iterable[str]) -> str:
    """``value`` when it is one of ``allowed``, else ``other``: a label never takes an unforeseen value."""
    return value if value in allowed else OTHER


def record_question(platform: str, *, mode: str, refused: bool, seconds: float, exact: int = 0,
                    normalised: int = 0, fuzzy: int = 0, dropped: int = 0) -> None:
    """One decided answer: its outcome, its time, and what validation did with its quotes."""
    platform = bounded(platform, PLATFORMS)
    outcome = "refused" if refused else "answered"
    QUESTIONS.labels(platform, bounded(mode, ANSWER_MODES), outcome).inc()
    ANSWER_SECONDS.labels(platform, outcome).observe(seconds)
    for name, n in (("exact", exact), ("normalised", normalised), ("fuzzy", fuzzy), ("dropped", dropped)):
        if n:
            CITATIONS.labels(platform, name).inc(n)


def record_question_failed(platform: str, *, seconds: float) -> None:
    """A question that ended in our error (the user saw an apology)."""
    platform = bounded(platform, PLATFORMS)
    QUESTIONS.labels(platform, "extractive", "failed").inc()
    ANSWER_SECONDS.labels(platform, "failed").observe(seconds)


def record_ingest(platform: str, *, status: str, seconds: float, pages: int = 0, ocr_pages: int = 0,
                  chunks: int = 0, reason: str = "") -> None:
    """One upload's result (``status``: indexed / unchanged / failed; ``reason``: the failure's code)."""
    platform = bounded(platform, PLATFORMS)
    outcome = bounded(status, INGEST_OUTCOMES)
    INGESTS.labels(platform, outcome).inc()
    INGEST_SECONDS.labels(platform, outcome).observe(seconds)
    if outcome == "failed":
        INGEST_FAILURES.labels(platform, bounded(reason, INGEST_FAILURE_REASONS)).inc()
    elif outcome == "indexed":
        PAGES_INDEXED.labels(platform).inc(pages)
        OCR_PAGES.labels(platform).inc(ocr_pages)
        CHUNKS_INDEXED.labels(platform).inc(chunks)


def record_ingest_refused(platform: str, reason: str) -> None:
    """An upload refused before indexing started (over the size cap, the download failed)."""
    platform = bounded(platform, PLATFORMS)
    INGESTS.labels(platform, "failed").inc()
    INGEST_FAILURES.labels(platform, bounded(reason, INGEST_FAILURE_REASONS)).inc()


def record_feedback(platform: str, polarity: str) -> None:
    FEEDBACK.labels(bounded(platform, PLATFORMS), bounded(polarity, POLARITIES)).inc()


def queue_changed(platform: str, delta: int) -> None:
    """A job was submitted (+1) or ended (-1)."""
    QUEUE_DEPTH.labels(bounded(platform, PLATFORMS)).inc(delta)


def record_claim_taken_over(key: str) -> None:
    """``key`` is a claim key, ``{platform}:{kind}:...``; only its platform becomes a label."""
    CLAIMS_TAKEN_OVER.labels(bounded(key.partition(":")[0], PLATFORMS)).inc()


def exposition() -> tuple[bytes, str]:
    """(the registry in Prometheus' text format, its Content-Type). Version 0.0.4 of the format: every
    Prometheus since 2.0 reads it (our names are plain ASCII, so it is the same text as 1.0.0)."""
    return generate_latest(REGISTRY), CONTENT_TYPE_PLAIN_0_0_4
