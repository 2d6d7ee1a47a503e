"""``citebot ingest PATH... [--scope S] [--json]``: index PDF files or folders into a scope.

One line per file (``--json``: one JSON object per line with ``file, doc_id, status, pages, chunks,
ocr_pages, seconds, error``); a progress bar on stderr when it is a terminal; exit status 1 when
any file failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from connectors.settings import Settings
from pipelines.models import LOCAL_SCOPE, IngestProgress, IngestResult


def register(sub: Any) -> None:
    p = sub.add_parser("ingest", help="index PDF files (or folders of PDFs) into a scope")
    p.add_argument("paths", nargs="+", metavar="PATH", help="PDF files or folders (searched recursively)")
    p.add_argument("--scope", default=LOCAL_SCOPE, help=f"scope to index into (default {LOCAL_SCOPE})")
    p.add_argument("--json", action="store_true", help="one JSON object per file")
    p.set_defaults(func=run_ingest)


def collect_files(paths: list[str]) -> tuple[list[Path], list[str]]:
    """PDF files named or found under folders (sorted, de-duplicated), and paths that do not exist."""
    files: list[Path] = []
    missing: list[str] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files.extend(sorted(q for q in p.rglob("*") if q.is_file() and q.suffix.lower() == ".pdf"))
        elif p.is_file():
            files.append(p)
        else:
            missing.append(raw)
    seen: set[Path] = set()
    unique = []
    for f in files:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique, missing


class _Bar:
    """A one-line progress display on a terminal; silent otherwise."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.enabled = bool(getattr(stream, "isatty", lambda: False)())
        self.width = 0

    def __call__(self, p: IngestProgress) -> None:
        if not self.enabled:
            return
        if p.pages_total:
            filled = int(24 * p.pages_done / p.pages_total)
            bar = "#" * filled + "-" * (24 - filled)
            line = f"{p.file[:40]:40} [{bar}] {p.pages_done}/{p.pages_total} {p.phase}"
        else:
            line = f"{p.file[:40]:40} {p.phase}"
        self.stream.write("\r" + line.ljust(self.width))
        self.width = len(line)
        self.stream.flush()

    def clear(self) -> None:
        if self.enabled and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


def _row(path: Path, res: IngestResult) -> dict[str, Any]:
    return {
        "file": str(path),
        "doc_id": res.doc_id,
        "status": res.status,
        "pages": res.pages,
        "chunks": res.chunks,
        "ocr_pages": res.ocr_pages,
        "seconds": res.seconds,
        "error": res.error,
    }


def run_ingest(args: argparse.Namespace, settings: Settings) -> int:
    from connectors.store_api import ScopeRequiredError
    from pipelines.service import CitebotService

    files, missing = collect_files(args.paths)
    failed = 0
    for raw in missing:
        failed += 1
        row = {"file": raw, "doc_id": "", "status": "failed", "pages": 0, "chunks": 0, "ocr_pages": 0,
               "seconds": 0.0, "error": "No such file or folder."}
        print(json.dumps(row) if args.json else f"{raw}: failed — No such file or folder.")
    if not files:
        if not missing:
            print("citebot ingest: no PDF files found in the given paths", file=sys.stderr)
        return 1
    try:
        service = CitebotService(settings)
    except ScopeRequiredError as e:  # pragma: no cover - scope is always set by argparse
        print(f"citebot ingest: {e}", file=sys.stderr)
        return 2
    bar = _Bar(sys.stderr)
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            failed += 1
            row = {"file": str(path), "doc_id": "", "status": "failed", "pages": 0, "chunks": 0, "ocr_pages": 0,
                   "seconds": 0.0, "error": "The file could not be read (permissions?)."}
            print(json.dumps(row) if args.json else f"{path}: failed — {row['error']}")
            continue
        try:
            # the local user owns the store: a new version replaces the old one whoever uploaded it
            res = service.ingest(data, file_name=path.name, scope=args.scope, is_admin=True, progress=bar,
                                 source_url=path.resolve().as_uri())
        except ScopeRequiredError as e:
            bar.clear()
            print(f"citebot ingest: {e}", file=sys.stderr)
            return 2
        bar.clear()
        if res.status == "failed":
            failed += 1
        if args.json:
            print(json.dumps(_row(path, res)), flush=True)
        elif res.status == "failed":
            print(f"{path}: failed — {res.error}", flush=True)
        else:
            extra = f", {res.ocr_pages} OCR'd" if res.ocr_pages else ""
            skipped = f", pages {res.skipped_pages} unreadable" if res.skipped_pages else ""
            print(
                f"{path}: {res.status} {res.doc_id} ({res.pages} pages, {res.chunks} chunks{extra}{skipped}, "
                f"{res.seconds:.1f} s)",
                flush=True,
            )
    return 1 if failed else 0
