"""``citebot ingest PATH... [--scope S] [--json]``: index PDF files or folders into a scope.

One line per file (``--json``: one JSON object per line with ``file, doc_id, status, pages, chunks,
ocr_pages, seconds, error, indexed_as, renamed_from, replaced_doc_id``); a progress bar on stderr when it is a
terminal; exit status 1 when any file failed.
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
    """Progress on a terminal (rich): ``2/5 report.pdf ━━━━━━╺━━━ 12/40 pages · embedding · 0:00:31 left``, as wide as
    the terminal, the file name shortened in the middle when it must be. Silent when stderr is no terminal."""

    def __init__(self, stream: Any, n_files: int) -> None:
        self.enabled = bool(getattr(stream, "isatty", lambda: False)())
        self.n_files = n_files
        self.n = 0
        self._progress: Any = None
        self._task: Any = None
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("{task.description}", style="bold"), BarColumn(),
                TextColumn("{task.fields[pages]}"), TextColumn("{task.fields[phase]}", style="cyan"),
                TimeRemainingColumn(compact=True, elapsed_when_finished=True),
                console=Console(file=stream), transient=True,
            )

    def start(self, name: str) -> None:
        self.n += 1
        if not self.enabled:
            return
        counter = f"{self.n}/{self.n_files} " if self.n_files > 1 else ""
        width = max(16, self._progress.console.width // 3)
        shown = name if len(name) <= width else name[: width // 2 - 1] + "…" + name[-(width - width // 2):]
        if self._task is None:
            self._progress.start()
            self._task = self._progress.add_task(counter + shown, total=None, pages="", phase="checking")
        else:
            self._progress.reset(self._task, total=None, description=counter + shown, pages="", phase="checking")

    def __call__(self, p: IngestProgress) -> None:
        if not self.enabled or self._task is None:
            return
        pages = f"{p.pages_done}/{p.pages_total} {'page' if p.pages_total == 1 else 'pages'}" if p.pages_total else ""
        self._progress.update(self._task, total=p.pages_total or None, completed=p.pages_done, pages=pages,
                              phase=p.phase)

    @staticmethod
    def print(line: str) -> None:
        """A result line on stdout (while the bar shows, rich puts it above the bar)."""
        print(line, flush=True)

    def clear(self) -> None:
        if self.enabled and self._progress is not None:
            self._progress.stop()
            self._task = None


def _pages(n: int) -> str:
    return f"{n} page" if n == 1 else f"{n} pages"


def chunks(n: int) -> str:
    """``1 chunk``, ``12 chunks``: what ingest and demo call the passages a PDF is cut into."""
    return f"{n} chunk" if n == 1 else f"{n} chunks"


# The chat's words for "send it again", and the terminal's: here the file is a path, not an upload.
_CHAT_WORDS = (("; please upload it again.", "; check the file, or make a new copy of it."),
               (" and upload it again.", " and index that."))


def for_operator(res: IngestResult, settings: Settings) -> str:
    """A failed file's reason as the person running ``ingest`` can act on it: worded for a terminal, and naming the
    setting (and its value) that a limit comes from, since here it is they who can change it."""
    error = res.error or ""
    for chat, terminal in _CHAT_WORDS:
        error = error.replace(chat, terminal)
    s = settings
    code = res.error_code or ""
    if code == "too_large" and "MB limit" in error:
        limit = f"CITEBOT_MAX_FILE_MB, now {s.max_file_mb:g}"
    elif code in ("too_large", "memory"):
        limit = (f"CITEBOT_MAX_STREAM_MB, CITEBOT_MAX_DECODED_MB and CITEBOT_INGEST_MAX_MEMORY_MB, now "
                 f"{s.max_stream_mb:g}, {s.max_decoded_mb:g} and {s.ingest_max_memory_mb}; raise them only for a file "
                 "you trust")
    elif code == "too_many_pages":
        limit = f"CITEBOT_MAX_PAGES, now {s.max_pages}"
    elif code == "timeout":
        limit = f"CITEBOT_INGEST_TIMEOUT_S, now {s.ingest_timeout_s:g} seconds for the whole file"
    elif code == "too_much_text":
        limit = (f"CITEBOT_MAX_DOCUMENT_CHARS and CITEBOT_MAX_DOCUMENT_ELEMENTS, now {s.max_document_chars} and "
                 f"{s.max_document_elements}")
    elif code == "too_many_chunks":
        limit = f"CITEBOT_MAX_DOCUMENT_CHUNKS, now {s.max_document_chunks}"
    else:
        return error
    return f"{error.rstrip('.')} (the limit is set by {limit})."


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
        # the name it is indexed and listed under: another file of the same name from elsewhere keeps its own
        "indexed_as": res.file,
        "renamed_from": res.renamed_from,
        "replaced_doc_id": res.replaced_doc_id,
    }


def _failed_row(file: str, error: str) -> dict[str, Any]:
    return {"file": file, "doc_id": "", "status": "failed", "pages": 0, "chunks": 0, "ocr_pages": 0, "seconds": 0.0,
            "error": error, "indexed_as": None, "renamed_from": None, "replaced_doc_id": None}


def run_ingest(args: argparse.Namespace, settings: Settings) -> int:
    from connectors.store_api import ScopeRequiredError
    from pipelines.service import CitebotService

    files, missing = collect_files(args.paths)
    failed = 0
    for raw in missing:
        failed += 1
        row = _failed_row(raw, "No such file or folder.")
        print(json.dumps(row) if args.json else f"{raw}: failed — No such file or folder.")
    if not files:
        if not missing:
            message = f"no PDF files found in {', '.join(args.paths)} (folders are searched for *.pdf, recursively)"
            if args.json:  # a script reading stdout gets an object it can branch on, as `ask --json` does
                print(json.dumps({"error": "no_pdfs", "message": message, "paths": args.paths}))
            else:
                print(f"citebot ingest: {message}", file=sys.stderr)
        return 1
    from bot.cli.notices import announce_model_export, ocr_language_problem

    problem = ocr_language_problem(settings)
    if problem:
        print(f"citebot ingest: {problem}", file=sys.stderr)
        return 2
    try:
        service = CitebotService(settings)
    except ScopeRequiredError as e:  # pragma: no cover - scope is always set by argparse
        print(f"citebot ingest: {e}", file=sys.stderr)
        return 2

    announce_model_export(settings)
    bar = _Bar(sys.stderr, len(files))
    try:
        for done, path in enumerate(files):
            args.interrupted = _interrupted(done, path.name)  # what a Ctrl-C now leaves (main says it)
            failed += _ingest_one(service, path, args, bar, settings)
    except ScopeRequiredError as e:
        print(f"citebot ingest: {e}", file=sys.stderr)
        return 2
    finally:
        bar.clear()
    return 1 if failed else 0


def _interrupted(done: int, current: str) -> str:
    """The end of the line a Ctrl-C prints while ``current`` is being indexed after ``done`` files."""
    if not done:
        return f"; nothing was indexed (nothing of {current}, in progress, is kept)"
    listed = "the file listed above is" if done == 1 else f"the {done} files listed above are"
    return f"; {listed} done, nothing of {current} (in progress) is kept"


def _ingest_one(service: Any, path: Path, args: argparse.Namespace, bar: _Bar, settings: Settings) -> int:
    """Index one file and print its line; 1 when it failed."""
    bar.start(path.name)
    try:
        data = path.read_bytes()
    except OSError:
        row = _failed_row(str(path), "The file could not be read (permissions?).")
        bar.print(json.dumps(row) if args.json else f"{path}: failed — {row['error']}")
        return 1
    # a path is a file's identity here: the same path again replaces its earlier version, another file of the
    # same name (a/report.pdf, b/report.pdf) is indexed beside it as "report (2).pdf"
    res = service.ingest(data, file_name=path.name, scope=args.scope, is_admin=True, progress=bar,
                         source_url=path.resolve().as_uri(), same_source_only=True)
    if res.status == "failed":
        res = res.model_copy(update={"error": for_operator(res, settings)})
    if args.json:
        bar.print(json.dumps(_row(path, res)))
    elif res.status == "failed":
        bar.print(f"{path}: failed — {res.error}")
    else:
        extra = f", {res.ocr_pages} OCR'd" if res.ocr_pages else ""
        skipped = f", pages {res.skipped_pages} unreadable" if res.skipped_pages else ""
        name = ""
        if res.renamed_from:
            name = f" as “{res.file}” (another {res.renamed_from} is indexed already, from elsewhere)"
        elif res.replaced_doc_id:
            name = f", replacing its earlier version {res.replaced_doc_id}"
        bar.print(f"{path}: {res.status} {res.doc_id}{name} ({_pages(res.pages)}, {chunks(res.chunks)}{extra}"
                  f"{skipped}, {res.seconds:.1f} s)")
    return 1 if res.status == "failed" else 0
