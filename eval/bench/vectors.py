"""``citebot bench vectors``: what the compact vector formats cost in quality on a development set's eval index.

Each answerable case's question is embedded with the configured model and searched (dense top 20, and hybrid: BM25
top 20 and dense top 20 fused by Haystack's RRF joiner) in its source document's scope ("per file", as the eval's
``--per-doc`` asks) and in every scope of the index at once ("all files": the pool of candidates a compact format
rescores is then a small share of the rows). Per format: page-hit@5 (a top-5 chunk of the source document spans a
source page) and the share of exact search's dense top 10 and hybrid top 5 it returns. The index is copied to a
temporary directory first: opening an older file migrates it, and an eval index is never changed in place.

    citebot bench vectors DATA/eval/index/KEY/chunks.sqlite3 ../shared/devsets/mmlongbench-dev/cases.jsonl
    citebot bench vectors DATA/eval/index/KEY/chunks.sqlite3 ../shared/devsets/financebench-dev/cases.jsonl \
        --pdfs ../shared/devsets/financebench-dev/pdfs     # an index made with --neutral-names: matched by sha256
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connectors.settings import Settings

SETTINGS = ("per file", "all files")


def register(sub: Any) -> None:
    p = sub.add_parser("vectors", help="page-hit@5 of each vector format on a development set's eval index")
    p.add_argument("index", type=Path, help="an eval index's chunks.sqlite3 (copied first, never changed)")
    p.add_argument("cases", type=Path, help="the development set's cases.jsonl")
    p.add_argument("--pdfs", type=Path, help="the set's PDFs, to find documents indexed under neutral names")
    p.add_argument("--formats", default="float32,binary,int8",
                   help="vector formats; the first is the reference (default float32,binary,int8)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


@dataclass(frozen=True)
class Item:
    """One answerable case: its question, its source document's scope and the source pages."""

    question: str
    scope: str
    pages: frozenset[int]


def page_hit(docs: Sequence[Any], item: Item, k: int = 5) -> bool:
    """Whether one of the first ``k`` chunks is of the source document and spans a source page."""
    for d in docs[:k]:
        start = d.meta.get("page_start")
        end = d.meta.get("page_end") or start
        if d.meta.get("scope") == item.scope and start is not None and any(start <= p <= end for p in item.pages):
            return True
    return False


def compare(store: Any, items: Sequence[Item], vectors: Sequence[Sequence[float]],
            formats: Sequence[str]) -> dict[str, Any]:
    """Per setting and format: page-hit@5 (dense, hybrid) and the share of the first format's hits returned."""
    from haystack.components.joiners import DocumentJoiner

    from connectors.sqlite_store import set_vector_format

    joiner = DocumentJoiner(join_mode="reciprocal_rank_fusion")
    every = store.all_scopes()
    out: dict[str, Any] = {}
    for setting in SETTINGS:
        hits: dict[str, tuple[list[list[str]], list[list[str]]]] = {}
        row: dict[str, Any] = {}
        for fmt in formats:
            set_vector_format(store, fmt)
            dense_ids, hybrid_ids, dense_hit, hybrid_hit = [], [], 0, 0
            for item, vec in zip(items, vectors, strict=True):
                scopes = [item.scope] if setting == "per file" else every
                dense = store.embedding_search(list(vec), scopes=scopes, top_k=20)
                fused = joiner.run(documents=[store.bm25_search(item.question, scopes=scopes, top_k=20), dense])
                hybrid = fused["documents"]
                dense_ids.append([d.id for d in dense[:10]])
                hybrid_ids.append([d.id for d in hybrid[:5]])
                dense_hit += page_hit(dense, item)
                hybrid_hit += page_hit(hybrid, item)
            hits[fmt] = (dense_ids, hybrid_ids)
            n = max(1, len(items))
            row[fmt] = {"dense_page_hit@5": round(dense_hit / n, 4), "hybrid_page_hit@5": round(hybrid_hit / n, 4),
                        "dense_top10_shared": _shared(hits[formats[0]][0], dense_ids),
                        "hybrid_top5_shared": _shared(hits[formats[0]][1], hybrid_ids)}
        out[setting] = row
    return out


def _shared(ref: list[list[str]], other: list[list[str]]) -> float:
    shares = [len(set(a) & set(b)) / max(1, len(a)) for a, b in zip(ref, other, strict=True)]
    return round(sum(shares) / max(1, len(shares)), 4)


def load_items(store: Any, cases: Path, pdfs: Path | None) -> tuple[list[Item], int]:
    """The answerable cases whose source document the index holds (by file name, else by the PDF's sha256), and how
    many answerable cases there were."""
    conn = store._conn()  # noqa: SLF001 - a benchmark reading the index's own columns
    by_file = {f: s for s, f in conn.execute("SELECT DISTINCT scope, file_name FROM chunks")}
    by_sha = {h: s for s, h in conn.execute("SELECT DISTINCT scope, json_extract(meta, '$.sha256') FROM chunks")}
    rows = [json.loads(line) for line in cases.read_text(encoding="utf-8").splitlines() if line.strip()]
    answerable = [c for c in rows if c.get("answerable") and c.get("sources")]
    items = []
    for c in answerable:
        src = c["sources"][0]
        scope = by_file.get(src["doc"])
        if scope is None and pdfs is not None and (pdfs / src["doc"]).is_file():
            scope = by_sha.get(hashlib.sha256((pdfs / src["doc"]).read_bytes()).hexdigest())
        if scope is not None:
            items.append(Item(c["question"], scope, frozenset(int(p) for p in src["pages"])))
    return items, len(answerable)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from connectors.embedding import get_encoder
    from connectors.sqlite_store import VECTOR_FORMATS, SQLiteDocumentStore

    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if not formats or any(f not in VECTOR_FORMATS for f in formats):
        print(f"citebot bench vectors: --formats takes {', '.join(VECTOR_FORMATS)}")
        return 2
    if not args.index.is_file() or not args.cases.is_file():
        print("citebot bench vectors: give an eval index's chunks.sqlite3 and a cases.jsonl")
        return 2
    with tempfile.TemporaryDirectory(prefix="citebot-vectors-") as tmp:
        copy = Path(tmp) / "chunks.sqlite3"
        shutil.copyfile(args.index, copy)
        store = SQLiteDocumentStore(copy)
        items, answerable = load_items(store, args.cases, args.pdfs)
        encoder = get_encoder(settings.resolved_model_path, settings.torch_threads,
                              backend=settings.embedding_backend, models_dir=settings.resolved_models_dir)
        vectors = encoder.encode([i.question for i in items], settings.embedding_batch_size).tolist()
        result: dict[str, Any] = {"index": str(args.index), "cases": answerable, "found": len(items),
                  "chunks": store.count_documents(), "scopes": len(store.all_scopes()),
                  "settings": compare(store, items, vectors, formats)}
        store.close()
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"Vector formats on {args.index}: {result['found']} of {result['cases']} answerable cases, "
          f"{result['chunks']} chunks in {result['scopes']} scopes")
    print(f"  {'setting':<10} {'format':<8} {'dense hit@5':>11} {'hybrid hit@5':>12} {'dense top10 shared':>18}"
          f" {'hybrid top5 shared':>18}")
    for setting, row in result["settings"].items():
        for fmt, m in row.items():
            print(f"  {setting:<10} {fmt:<8} {m['dense_page_hit@5']:>11.1%} {m['hybrid_page_hit@5']:>12.1%}"
                  f" {m['dense_top10_shared']:>18.1%} {m['hybrid_top5_shared']:>18.1%}")
    return 0
