"""``citebot docs`` and ``citebot forget``: what is indexed in a scope, and removing a document."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from connectors.settings import Settings
from connectors.store_api import DocInfo
from pipelines.models import LOCAL_SCOPE


def register(sub: Any) -> None:
    p = sub.add_parser("docs", help="list indexed documents of a scope")
    p.add_argument("--scope", action="append", help=f"scope to list (repeatable; default {LOCAL_SCOPE})")
    p.add_argument("--all-scopes", action="store_true", help="admin: list every scope in the store")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--stats", action="store_true", help="add chunk diagnostics (sizes, page spans, tables, OCR)")
    p.set_defaults(func=run_docs)

    f = sub.add_parser("forget", help="delete a document from a scope, by file name or doc id")
    f.add_argument("document", metavar="FILE_OR_DOC_ID", help="a file name as `citebot docs` lists it, or a doc id")
    f.add_argument("--scope", default=LOCAL_SCOPE)
    f.set_defaults(func=run_forget)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, right: Sequence[int] = ()) -> list[str]:
    """Rows under a header, columns padded to their widest cell (numbers in ``right`` columns aligned right)."""
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(r: list[str]) -> str:
        padded = (c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        return "  ".join(padded)

    return [line(cells[0]).rstrip(), "  ".join("-" * w for w in widths), *(line(r).rstrip() for r in cells[1:])]


MAX_CELL = 48  # a 250-character file name must not widen every row of the table to 200 columns


def shorten(text: str, width: int = MAX_CELL) -> str:
    """``text`` cut in the middle to ``width`` with an ellipsis, keeping its end (a file's extension, a channel id);
    `--json` has it whole."""
    if len(text) <= width:
        return text
    tail = width // 3
    return text[: width - tail - 1] + "…" + text[-tail:]


def docs_table(docs: Sequence[DocInfo], *, with_scope: bool) -> list[str]:
    header = ["file", "pages", "chunks", "added", "doc id"] + (["scope"] if with_scope else [])
    rows = [
        [shorten(d.file), d.pages, d.chunks, d.uploaded_at[:16].replace("T", " "), d.doc_id]
        + ([shorten(d.scope)] if with_scope else [])
        for d in docs
    ]
    return table(header, rows, right=(1, 2))


_STAT_LABELS = {
    "documents": "documents",
    "chunks": "chunks",
    "tokens": "tokens per chunk",
    "chars": "characters per chunk",
    "share_spanning_pages": "chunks spanning pages",
    "with_section": "chunks with a section",
    "tables_found": "tables found",
    "table_chunks": "table chunks",
    "ocr_pages": "pages read with OCR",
    "ocr_mean_confidence": "mean OCR confidence",
    "element_types": "chunks by element type",
    "embedding_backend": "embedding backend (whole store)",
}


def _stat_value(key: str, value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, dict) and {"min", "p50", "max"} <= set(value):
        v = value
        return f"min {v['min']} · median {v['p50']} · p90 {v['p90']} · max {v['max']} · mean {v['mean']}"
    if isinstance(value, dict):
        return " · ".join(f"{k} {v}" for k, v in value.items()) or "—"
    if key == "share_spanning_pages":
        return f"{float(value):.1%}"
    if key == "ocr_mean_confidence":
        return f"{value} / 100"
    return str(value)


def stats_table(stats: dict[str, Any]) -> list[str]:
    keys = [k for k in _STAT_LABELS if k in stats] + [k for k in stats if k not in _STAT_LABELS]
    return table(["chunk statistic", "value"], [[_STAT_LABELS.get(k, k), _stat_value(k, stats[k])] for k in keys])


def run_docs(args: argparse.Namespace, settings: Settings) -> int:
    from bot.cli.ask_cmd import store_exists, store_place
    from connectors.stores import open_store

    store = open_store(settings) if store_exists(settings) else None  # listing never creates the data directory
    requested = args.scope or [LOCAL_SCOPE]
    scopes = (store.all_scopes() if args.all_scopes else requested) if store is not None else requested
    docs = store.list_documents(scopes=scopes) if scopes and store is not None else []
    stats: dict[str, Any] | None = None
    if args.stats and scopes and store is not None:
        from connectors.stores import stored_backend
        from pipelines.chunk_stats import chunk_stats

        stats = {**chunk_stats(store, scopes), "embedding_backend": stored_backend(store) or "none yet"}
    if args.json:
        out: Any = [d.model_dump() for d in docs]
        if stats is not None:
            out = {"documents": out, "stats": stats}
        print(json.dumps(out, indent=2))
        return 0
    if not docs:
        where = "any scope" if args.all_scopes else ", ".join(scopes)
        print(f"No documents in {where}, in {store_place(settings)}.")
    else:
        print("\n".join(docs_table(docs, with_scope=len(scopes) > 1)))
    if stats is not None and docs:
        print()
        print("\n".join(stats_table(stats)))
    return 0


def _by_path(service: Any, raw: str, scope: str) -> list[DocInfo]:
    """``citebot forget some/dir/file.pdf``, the path ``ingest`` echoed: the document indexed from that file (which
    may be listed under another name, "report (2).pdf"), else a document of that file name when only one has it."""
    path = Path(raw).expanduser()
    if path.name == raw:
        return []
    uri = path.resolve().as_uri()
    docs = service.list_documents(scope)
    from_there = [d for d in docs if d.source_url == uri]
    if from_there:
        return from_there
    named = service.find_documents(path.name, scope)
    return named if len(named) == 1 and not named[0].source_url.startswith("file:") else []


def run_forget(args: argparse.Namespace, settings: Settings) -> int:
    from bot.cli.ask_cmd import store_exists, store_place
    from pipelines.service import CitebotService

    service = CitebotService(settings) if store_exists(settings) else None
    found = (service.find_documents(args.document, args.scope) or _by_path(service, args.document, args.scope)
             if service is not None else [])
    if not found:
        print(f"No document “{args.document}” in scope {args.scope}, in {store_place(settings)}. "
              f"`citebot docs --scope {args.scope}` lists them; forget takes a listed file name, a doc id or the "
              "path it was indexed from.")
        return 1
    assert service is not None
    for doc in found:
        n = service.forget(doc.doc_id, args.scope)
        print(f"Deleted {doc.file} ({doc.doc_id}, {n} chunks) from {args.scope}.")
    return 0
