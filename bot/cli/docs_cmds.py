"""``citebot docs`` and ``citebot forget``: what is indexed in a scope, and removing a document."""

from __future__ import annotations

import argparse
import json
from typing import Any

from connectors.settings import Settings
from pipelines.models import LOCAL_SCOPE


def register(sub: Any) -> None:
    p = sub.add_parser("docs", help="list indexed documents of a scope")
    p.add_argument("--scope", action="append", help=f"scope to list (repeatable; default {LOCAL_SCOPE})")
    p.add_argument("--all-scopes", action="store_true", help="admin: list every scope in the store")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--stats", action="store_true", help="add chunk diagnostics")
    p.set_defaults(func=run_docs)

    f = sub.add_parser("forget", help="delete a document from a scope")
    f.add_argument("doc_id")
    f.add_argument("--scope", default=LOCAL_SCOPE)
    f.set_defaults(func=run_forget)


def run_docs(args: argparse.Namespace, settings: Settings) -> int:
    from connectors.stores import open_store

    store = open_store(settings)
    scopes = store.all_scopes() if args.all_scopes else (args.scope or [LOCAL_SCOPE])
    docs = store.list_documents(scopes=scopes) if scopes else []
    stats: dict[str, Any] | None = None
    if args.stats and scopes:
        from pipelines.chunk_stats import chunk_stats

        stats = chunk_stats(store, scopes)
    if args.json:
        out: Any = [d.model_dump() for d in docs]
        if stats is not None:
            out = {"documents": out, "stats": stats}
        print(json.dumps(out, indent=2))
        return 0
    if not docs:
        print(f"No documents in {', '.join(scopes) or 'any scope'}.")
    for d in docs:
        print(f"{d.file}  {d.doc_id}  scope={d.scope}  pages={d.pages}  chunks={d.chunks}  at={d.uploaded_at}")
    if stats is not None:
        for key, value in stats.items():
            print(f"{key}: {value}")
    return 0


def run_forget(args: argparse.Namespace, settings: Settings) -> int:
    from connectors.stores import open_store

    n = open_store(settings).delete_document(args.doc_id, scopes=[args.scope])
    if n == 0:
        print(f"No document {args.doc_id} in scope {args.scope}. `citebot docs --scope {args.scope}` lists them.")
        return 1
    print(f"Deleted {args.doc_id} ({n} chunks) from {args.scope}.")
    return 0
