"""``citebot ingest PATH... [--scope S] [--json]``: index PDF files or folders into a scope.

One line per file (``--json``: one JSON object per line with ``file, doc_id, status, pages, chunks,
ocr_pages, seconds, error, indexed_as, renamed_from, replaced_doc_id``); a progress bar on stderr when it is a
terminal; exit status 1 when any file failed.

``--workers N`` (default: the CPUs this process may run on) files are read, OCR'd, chunked and embedded at a time,
each in a thread of its own: the reading runs in a child process per file and the model computes without holding
the interpreter, so the threads share the cores and one copy of the model. The main thread is the one writer: it
writes each file, in one transaction, as it is ready, and prints its line, so lines come in the order files finish;
a file waits only for an earlier file of the same name (the first listed keeps the name, as with one worker).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import queue
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connectors.settings import Settings
from pipelines.models import LOCAL_SCOPE, IngestProgress, IngestResult

if TYPE_CHECKING:
    from pipelines.indexing import PreparedFile
    from pipelines.service import CitebotService


def register(sub: Any) -> None:
    p = sub.add_parser("ingest", help="index PDF files (or folders of PDFs) into a scope")
    p.add_argument("paths", nargs="+", metavar="PATH", help="PDF files or folders (searched recursively)")
    p.add_argument("--scope", default=LOCAL_SCOPE, help=f"scope to index into (default {LOCAL_SCOPE})")
    p.add_argument("--json", action="store_true", help="one JSON object per file")
    p.add_argument("--workers", type=_positive_int, default=None, metavar="N",
                   help=f"files indexed at a time (default: the CPUs this process may use, here {default_workers()})")
    p.set_defaults(func=run_ingest)


def _positive_int(raw: str) -> int:
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {raw!r}")
    return n


def default_workers() -> int:
    """The CPUs this process may run on (its affinity: a container's or ``taskset``'s share, not the machine's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


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
    """Progress on a terminal (rich), one line per file in progress: ``2/5 report.pdf ━━━━━━╺━━━ 12/40 pages ·
    embedding · 0:00:31 left``, as wide as the terminal, the file name shortened in the middle when it must be.
    Silent when stderr is no terminal. Called from the workers' threads (rich's display takes its own lock)."""

    def __init__(self, stream: Any, n_files: int) -> None:
        self.enabled = bool(getattr(stream, "isatty", lambda: False)())
        self.n_files = n_files
        self.n = 0
        self._lock = threading.Lock()
        self._progress: Any = None
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("{task.description}", style="bold"), BarColumn(),
                TextColumn("{task.fields[pages]}"), TextColumn("{task.fields[phase]}", style="cyan"),
                TimeRemainingColumn(compact=True, elapsed_when_finished=True),
                console=Console(file=stream), transient=True,
            )

    def start(self, name: str) -> Any:
        """A line for ``name``, the next file started; what :meth:`update` and :meth:`finish` take."""
        with self._lock:
            self.n += 1
            if not self.enabled:
                return None
            if self.n == 1:
                self._progress.start()
            counter = f"{self.n}/{self.n_files} " if self.n_files > 1 else ""
        width = max(16, self._progress.console.width // 3)
        shown = name if len(name) <= width else name[: width // 2 - 1] + "…" + name[-(width - width // 2):]
        return self._progress.add_task(counter + shown, total=None, pages="", phase="checking")

    def update(self, task: Any, p: IngestProgress) -> None:
        if task is None or not self.enabled:
            return
        pages = f"{p.pages_done}/{p.pages_total} {'page' if p.pages_total == 1 else 'pages'}" if p.pages_total else ""
        self._progress.update(task, total=p.pages_total or None, completed=p.pages_done, pages=pages, phase=p.phase)

    def finish(self, task: Any) -> None:
        if task is not None and self.enabled:
            self._progress.remove_task(task)

    @staticmethod
    def print(line: str) -> None:
        """A result line on stdout (while the bar shows, rich puts it above the bar)."""
        print(line, flush=True)

    def clear(self) -> None:
        with self._lock:
            if self.enabled:
                self._progress.stop()
                self.enabled = False


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
        failed += _ingest_all(service, files, args, bar, settings, min(args.workers or default_workers(), len(files)))
    except ScopeRequiredError as e:
        print(f"citebot ingest: {e}", file=sys.stderr)
        return 2
    finally:
        bar.clear()
    return 1 if failed else 0


def _interrupted(done: int, in_progress: list[str]) -> str:
    """The end of the line a Ctrl-C prints after ``done`` files were listed, while ``in_progress`` were being
    indexed."""
    current = ", ".join(in_progress)
    if not done:
        return f"; nothing was indexed (nothing of {current}, in progress, is kept)" if current else \
            "; nothing was indexed"
    listed = "the file listed above is" if done == 1 else f"the {done} files listed above are"
    return f"; {listed} done, nothing of {current} (in progress) is kept" if current else f"; {listed} done"


UNREADABLE = "The file could not be read (permissions?)."
# how long a Ctrl-C waits for the workers to stop their files (each at its next page or passage) and end their
# reading children, before the command ends without them
_STOP_WAIT_S = 10.0


class _Cancelled(BaseException):
    """Raised in a worker's file at its next progress report once Ctrl-C was pressed: the file stops unwritten, and
    its reading child is killed on the way out. Not an ``Exception``, so that no step turns it into a result."""


@dataclasses.dataclass(frozen=True)
class _Ready:
    """A file a worker has prepared, waiting for the writer: its bar line, and what :meth:`CitebotService.prepare`
    made of it (``None``: the file could not be read)."""

    task: Any
    prepared: PreparedFile | None


def _ingest_all(service: CitebotService, files: list[Path], args: argparse.Namespace, bar: _Bar, settings: Settings,
                workers: int) -> int:
    """Index ``files``: ``workers`` threads prepare them (read, OCR, chunk, embed), this thread writes each as it is
    ready and prints its line; how many failed. A Ctrl-C stops the workers' files, writes nothing more, and says
    which were done (``args.interrupted``, printed by ``main``)."""
    from pipelines.file_names import clean_name, name_key

    jobs: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    results: queue.SimpleQueue[tuple[int, _Ready | BaseException]] = queue.SimpleQueue()
    for i in range(len(files)):
        jobs.put(i)
    for _ in range(workers):
        jobs.put(None)
    cancel = threading.Event()
    started: list[int] = []

    def work() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # Ctrl-C is the main thread's to answer
        while not cancel.is_set():
            i = jobs.get()
            if i is None:
                return
            started.append(i)
            outcome: _Ready | BaseException
            try:
                outcome = _prepare_one(service, files[i], args.scope, bar, cancel.is_set)
            except BaseException as e:  # noqa: BLE001 - the main thread raises it (or, after a Ctrl-C, drops it)
                outcome = e
            results.put((i, outcome))

    threads = [threading.Thread(target=work, name=f"citebot-ingest-{n}", daemon=True) for n in range(workers)]
    for t in threads:
        t.start()
    # each name's files in the order given: a file waits for the earlier ones of its name (the first listed keeps
    # the name, as with one worker); every other file is written as soon as it is ready
    keys = [name_key(clean_name(path.name)) for path in files]
    waiting: dict[str, deque[int]] = {}
    for i, key in enumerate(keys):
        waiting.setdefault(key, deque()).append(i)
    ready: dict[int, _Ready] = {}
    listed: list[int] = []
    failed = 0
    try:
        while len(listed) < len(files):
            try:  # a timeout, so that a Ctrl-C delivered to another thread is still answered here soon
                i, outcome = results.get(timeout=0.2)
            except queue.Empty:
                continue
            if isinstance(outcome, BaseException):
                raise outcome
            ready[i] = outcome
            turn = waiting[keys[i]]
            while turn and turn[0] in ready:
                j = turn.popleft()
                failed += _commit_one(service, files[j], ready.pop(j), args, bar, settings)
                listed.append(j)
    except KeyboardInterrupt:
        cancel.set()
        done = set(listed)
        args.interrupted = _interrupted(len(listed), [files[i].name for i in started if i not in done])
        for t in threads:
            t.join(_STOP_WAIT_S / len(threads))
        raise
    finally:
        cancel.set()
    return failed


def _prepare_one(service: CitebotService, path: Path, scope: str, bar: _Bar,
                 cancelled: Callable[[], bool]) -> _Ready:
    """In a worker: read ``path`` and prepare it, its bar line showing how far it is."""
    task = bar.start(path.name)

    def progress(p: IngestProgress) -> None:
        if cancelled():
            raise _Cancelled
        bar.update(task, p)

    try:
        data = path.read_bytes()
    except OSError:
        return _Ready(task, None)
    # a path is a file's identity here: the same path again replaces its earlier version, another file of the
    # same name (a/report.pdf, b/report.pdf) is indexed beside it as "report (2).pdf"
    prepared = service.prepare(data, file_name=path.name, scope=scope, progress=progress,
                               source_url=path.resolve().as_uri())
    return _Ready(task, prepared)


def _commit_one(service: CitebotService, path: Path, ready: _Ready, args: argparse.Namespace, bar: _Bar,
                settings: Settings) -> int:
    """Write one prepared file and print its line; 1 when it failed."""
    try:
        if ready.prepared is None:
            row = _failed_row(str(path), UNREADABLE)
            bar.print(json.dumps(row) if args.json else f"{path}: failed — {row['error']}")
            return 1
        res = service.commit(ready.prepared, is_admin=True, same_source_only=True)
    finally:
        bar.finish(ready.task)
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
