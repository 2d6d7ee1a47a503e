"""What the benchmarks share: the synthetic corpus, percentiles, and running torch beside the new backend.

* **Corpus.** Chunks of real-ish English: sentence frames filled with Zipf-distributed content words from
  a 30,000-word vocabulary (so BM25 sees realistic term statistics), or plain Zipf word runs; RANDOM unit
  vectors of the model's dimension (embedding 50,000 chunks with the model would take about an hour here,
  and a kNN timing only needs the right shape and count).
* **Percentiles** of wall (and CPU) milliseconds.
* **Backends side by side.** Every benchmark that runs the embedding model measures the torch backend and
  the configured one (``--backends``) in the same run, so their ratio holds on a noisy shared machine.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Sequence
from typing import Any

from connectors.settings import Settings

FUNCTION_WORDS = [
    "the", "of", "and", "to", "a", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
    "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "they", "you", "were", "their",
    "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would", "who", "so",
    "no", "shall", "may", "must", "each", "any", "other", "such", "under", "within", "after", "before", "than",
    "these", "those", "its", "into", "only", "also", "between", "per",
]
SYLLABLES = [
    "ka", "to", "ri", "se", "mu", "la", "ne", "vo", "di", "pa", "gra", "ben", "tor", "mel", "sin", "qua", "rop",
    "lex", "dun", "fi", "ga", "ho", "ju", "ki", "lo", "ma", "nu", "pe", "ru", "sa", "te", "vi", "wo", "xa", "yo",
    "ze", "bar", "con", "dis", "ent", "ex", "for", "gen", "hab", "in", "ject", "lat", "mis", "nov", "ob", "port",
    "quir", "rect", "spec", "tract", "vers",
]

_SUBJECTS = (
    "Employees",
    "The contractor",
    "Each supplier",
    "The line manager",
    "The finance team",
    "New starters",
    "The provider",
    "Visitors",
    "The project lead",
    "Members of the board",
    "Site engineers",
    "The client",
)
_VERBS = (
    "must submit",
    "may request",
    "shall provide",
    "are entitled to",
    "should review",
    "will receive",
    "must approve",
    "can claim",
    "shall maintain",
    "are required to keep",
    "may not transfer",
    "must report",
)
_OBJECTS = (
    "a written summary of the inspection",
    "the quarterly safety report",
    "travel expenses for rail journeys",
    "a copy of the signed purchase order",
    "additional training days",
    "the maintenance schedule",
    "an updated risk assessment",
    "all invoices in euros",
    "the design drawings for approval",
    "confidential records for seven years",
    "overtime hours in the portal",
    "security incidents to the desk",
)
_TAILS = (
    "within {n} days of the request",
    "before the end of each quarter",
    "unless the director agrees otherwise",
    "at least {n} weeks in advance",
    "for every project above {n} thousand pounds",
    "in line with section {s}",
    "during the first {n} months of service",
    "after the annual review in {y}",
    "as described in clause {s}",
)


QUESTION_STARTS = ["what is the", "how many", "when does the", "who must", "which", "is there a", "can an", "how long"]
BACKENDS = ("torch", "onnx", "onnx-int8")


# --------------------------------------------------------------------------------------------------
# backends side by side
# --------------------------------------------------------------------------------------------------
def add_backends_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--backends", default=None,
        help="comma-separated embedding backends to compare in this run (default: torch and CITEBOT_EMBEDDING_BACKEND)",
    )


def compared_backends(settings: Settings, arg: str | None) -> list[str]:
    """torch first (the baseline), then the configured backend, or what ``--backends`` lists."""
    wanted = [b.strip() for b in arg.split(",") if b.strip()] if arg else ["torch", settings.embedding_backend]
    bad = [b for b in wanted if b not in BACKENDS]
    if bad:
        raise ValueError(f"unknown backend(s) {', '.join(bad)}; choose from {', '.join(BACKENDS)}")
    return list(dict.fromkeys(wanted))


def with_backend(settings: Settings, backend: str, **update: Any) -> Settings:
    """``settings`` for ``backend``, keeping the user's model exports (made once, reused by every run)."""
    return settings.model_copy(
        update={"embedding_backend": backend, "models_dir": settings.resolved_models_dir, **update}
    )


def ratio(base: float | None, new: float | None) -> str:
    """``base / new`` as ``2.1x`` (how many times faster ``new`` is), or ``-``."""
    if not base or not new:
        return "-"
    return f"{base / new:.2f}x"


# --------------------------------------------------------------------------------------------------
# percentiles
# --------------------------------------------------------------------------------------------------
def percentiles(ms: Sequence[float], cpu_ms: Sequence[float] | None = None, digits: int = 1) -> dict[str, float]:
    """``n``, ``p50_ms``, ``p95_ms`` (and ``cpu_p50_ms``, ``cpu_p95_ms`` when CPU times are given)."""
    import numpy as np

    if not ms:
        return {"n": 0, "p50_ms": float("nan"), "p95_ms": float("nan")}
    out = {
        "n": len(ms),
        "p50_ms": round(float(np.percentile(ms, 50)), digits),
        "p95_ms": round(float(np.percentile(ms, 95)), digits),
    }
    if cpu_ms:
        out["cpu_p50_ms"] = round(float(np.percentile(cpu_ms, 50)), digits)
        out["cpu_p95_ms"] = round(float(np.percentile(cpu_ms, 95)), digits)
    return out


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


# --------------------------------------------------------------------------------------------------
# synthetic corpus
# --------------------------------------------------------------------------------------------------
def vocabulary(rng: Any, size: int) -> list[str]:
    """The function words, then made-up words of 2-4 syllables, ``size`` in all (deterministic for ``rng``)."""
    words: dict[str, None] = dict.fromkeys(FUNCTION_WORDS)
    while len(words) < size:
        n = int(rng.integers(2, 5))
        words.setdefault("".join(rng.choice(SYLLABLES, size=n)), None)
    return list(words)


def zipf_cdf(n: int, exponent: float = 1.07) -> Any:
    import numpy as np

    ranks = np.arange(1, n + 1, dtype=np.float64)
    cdf = np.cumsum(1.0 / ranks**exponent)
    return cdf / cdf[-1]


class SentenceMaker:
    """English sentence frames with Zipf-distributed content words (the latency corpus of ``bench query``)."""

    def __init__(self, rng: Any) -> None:
        import numpy as np

        self.rng = rng
        self.vocab = np.array(vocabulary(rng, 30_000)[len(FUNCTION_WORDS):])
        self.cdf = zipf_cdf(len(self.vocab))

    def sentences(self, n: int) -> list[str]:
        import numpy as np

        rng, out = self.rng, []
        for _ in range(n):
            w = self.vocab[np.searchsorted(self.cdf, rng.random(4))]
            tail = _TAILS[int(rng.integers(len(_TAILS)))].format(
                n=int(rng.integers(2, 90)),
                s=f"{int(rng.integers(1, 15))}.{int(rng.integers(1, 9))}",
                y=int(rng.integers(2015, 2026)),
            )
            out.append(
                f"{_SUBJECTS[int(rng.integers(len(_SUBJECTS)))]} {_VERBS[int(rng.integers(len(_VERBS)))]} "
                f"the {w[0]} {w[1]} of the {w[2]} {_OBJECTS[int(rng.integers(len(_OBJECTS)))].split()[-1]} "
                f"and {w[3]} {tail}."
            )
        return out


def chunk(doc_id: str, ci: int, scope: str, content: str, embedding: list[float], *, section: str = "") -> Any:
    """One synthetic chunk with every meta key the indexer writes (three chunks a page)."""
    from haystack import Document

    return Document(
        id=f"{doc_id}:{ci:05d}",
        content=content,
        embedding=embedding,
        meta={
            "scope": scope,
            "doc_id": doc_id,
            "file_name": f"{doc_id}.pdf",
            "page_start": ci // 3 + 1,
            "page_end": ci // 3 + 1,
            "section": section,
            "section_id": section.split(" ", 1)[0] if section else "",
            "element_type": "text",
            "label": "",
            "chunk_index": ci,
            "sha256": doc_id,
            "uploaded_by": "",
            "uploaded_at": "2026-01-01T00:00:00+00:00",
        },
    )


def sentence_chunks(n: int, scope: str, dim: int, seed: int, per_doc: int = 100) -> Iterable[Any]:
    """``n`` chunks of 4-8 synthetic sentences under numbered sections, in one scope, random unit vectors."""
    import numpy as np

    rng = np.random.default_rng(seed)
    maker = SentenceMaker(rng)
    for i in range(n):
        doc_i, ci = divmod(i, per_doc)
        vec = rng.standard_normal(dim).astype(np.float32)
        vec /= np.linalg.norm(vec)
        section = f"{ci // 10 + 1} Section {ci // 10 + 1}"
        text = " ".join(maker.sentences(int(rng.integers(4, 9))))
        yield chunk(f"synthetic{doc_i:05d}", ci, scope, f"{section}\n{text}", vec.tolist(), section=section)


def write_in_batches(store: Any, docs: Iterable[Any], batch: int = 2000) -> int:
    n, buf = 0, []
    for d in docs:
        buf.append(d)
        if len(buf) >= batch:
            store.write_documents(buf)
            n, buf = n + len(buf), []
    if buf:
        store.write_documents(buf)
        n += len(buf)
    return n
