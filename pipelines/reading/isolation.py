"""Run a function in a child process with a memory limit and a deadline: for the code that parses uploads.

A PDF can ask for more memory than any check before parsing can see (a parser difference, an image codec, a
native library's own buffers). So the reading runs in a child whose address space ``setrlimit(RLIMIT_AS)``
caps; whatever it allocates past the cap fails in the child, and the bot goes on.

The child is forked from multiprocessing's fork server, a small interpreter started once that has imported
pdfium, pypdf and Pillow, ~64 MB mapped: a child costs a fork, not an interpreter start (~1 s with those
imports). Measured per upload against reading in-process: ~20 ms when the server could preload our reading
modules too, ~30-35 ms when each child imports them (see :func:`_preload`); starting the server ~0.3 s, once.
Forking the bot itself is not an option: it is multithreaded, and with the embedding model loaded it has
~0.9 GB (ONNX Runtime) to ~1.3 GB (torch) of address
space mapped already, most of a 1.5 GB limit.

What the caller gets:

- the target's return value;
- the target's own :class:`IngestError`, as raised;
- ``IngestError(TOO_LARGE, code="memory")`` when the child ran out of memory: a ``MemoryError``, a SIGKILL we
  did not send (the kernel's out-of-memory killer), or a SIGABRT (a native library whose allocation failed:
  pdfium aborts so, measured);
- ``IngestError(TIMEOUT, code="timeout")`` when the child was still running ``GRACE_S`` after the deadline (it
  checks the deadline itself between pages; a page stuck in native code is killed, its process group with it;
  a child whose parent died ends itself by ``alarm`` soon after);
- :class:`ChildCrashedError` for anything else: an exception in our code, another signal, a silent exit. That is
  our bug, not the user's file, and is reported as such.

The fork server starts with an environment of its own, :data:`CHILD_ENVIRONMENT`'s variables only (locale, paths,
the Python and Tesseract settings): the bot's credentials (Slack, Teams, OpenAI, Elasticsearch...) are in the
bot's environment, and a child that parses a hostile PDF never holds them, not even in its process's original
environment block (``/proc/self/environ``), nor does Tesseract, which it starts.

Neither the server nor a child imports the caller's main module (multiprocessing would, to find the target: ours
lives in this package). A script that calls the library at its top level, without ``if __name__ ==
"__main__":``, runs once, and its children do not start a second fork server from inside the first.
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
import os
import resource
import signal
import subprocess
import sys
import threading
import time
import traceback
import types
import warnings
from collections.abc import Callable, Iterator
from multiprocessing import forkserver, resource_tracker, util
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from pipelines.reading.guard import TOO_LARGE
from pipelines.reading.layout import IngestError
from pipelines.reading.text import TIMEOUT

GRACE_S = 5.0
_MB = 1024 * 1024
# what the fork server imports once: the libraries and the standard modules the reading uses (see _preload)
_PRELOAD = [
    "pypdfium2", "pypdf", "pypdf.filters", "PIL.Image",
    "ctypes", "dataclasses", "shutil", "statistics", "unicodedata", "zlib",
]
# the only variables of the bot's environment the fork server, the children and Tesseract see: no credentials
CHILD_ENVIRONMENT = frozenset({
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "LD_LIBRARY_PATH",
    "PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "PYTHONNOUSERSITE", "PYTHONDONTWRITEBYTECODE", "PYTHONUTF8",
    "PYTHONIOENCODING", "VIRTUAL_ENV", "TESSDATA_PREFIX", "OMP_THREAD_LIMIT",
})
_HEADROOM_MB = 64  # below what the child has mapped at start plus this, the limit is misconfigured
_MEMORY_SIGNALS = (signal.SIGKILL, signal.SIGABRT)
_EXIT_UNREPORTED = 70
_EXIT_WAIT_S = 5.0

Frames = list[tuple[str, int, str]]


class ChildCrashedError(Exception):
    """The child failed in a way that is our bug, not the file's. ``error``: the exception type or signal name;
    ``frames``: (file, line, function) of the exception's traceback, innermost last (no message, no values)."""

    def __init__(self, error: str, frames: Frames | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.frames = frames or []

    def frame_summaries(self) -> list[traceback.FrameSummary]:
        return [traceback.FrameSummary(path, line, name, lookup_line=False) for path, line, name in self.frames]


class MemoryLimitTooLowError(Exception):
    """The limit leaves the child no room to work: it has ``mapped_mb`` mapped before it starts."""

    def __init__(self, limit_mb: int, mapped_mb: int) -> None:
        super().__init__(f"limit {limit_mb} MB, {mapped_mb} MB mapped at start")
        self.limit_mb = limit_mb
        self.mapped_mb = mapped_mb


def child_environment(environ: Any = None) -> dict[str, str]:
    """The variables of ``environ`` (default: this process's) that a reading child may see."""
    source = os.environ if environ is None else environ
    return {k: v for k, v in source.items() if k in CHILD_ENVIRONMENT}


_SERVERS: list[subprocess.Popen[bytes]] = []  # kept: a collected Popen would reap the server behind forkserver


def _spawn_scrubbed(path: str, args: list[str], passfds: Any) -> int:
    """``multiprocessing.util.spawnv_passfds`` (how the fork server is started) with :func:`child_environment`
    instead of the whole environment."""
    proc = subprocess.Popen(args, executable=path, pass_fds=tuple(sorted(map(int, passfds))),  # noqa: S603
                            env=child_environment(), close_fds=True)
    _SERVERS.append(proc)
    return proc.pid


class _ScrubbedUtil:
    """What ``multiprocessing.forkserver`` calls ``util``: the standard one, but the fork server is started with
    :func:`child_environment` (multiprocessing has no setting for the server's environment)."""

    spawnv_passfds = staticmethod(_spawn_scrubbed)

    def __getattr__(self, name: str) -> Any:
        return getattr(util, name)


def _context() -> Any:
    forkserver.util = _ScrubbedUtil()  # type: ignore[attr-defined]
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_preload())  # takes effect when the server starts; harmless later
    return ctx


def _preload() -> list[str]:
    """What the fork server imports once. Our own modules only when the server will find this very copy: it
    resolves them from its working directory (ours, when it starts) and, in Python 3.11, ignores our ``sys.path``;
    from anywhere else (a test's temporary directory, another checkout) each child imports them instead."""
    names = list(_PRELOAD)
    here = Path(__file__).resolve()
    same = (Path.cwd() / "pipelines" / "reading" / here.name).resolve() == here
    if same and not (sys.flags.safe_path or sys.flags.isolated):
        names.append("pipelines.reading.reader")
    return names


def start() -> None:
    """Start the fork server now rather than on the first upload (about a second, once per process)."""
    _context()
    _ensure_server()


def _ensure_server() -> None:
    """Start the fork server unless it runs, with Ctrl-C (SIGINT) blocked in it and so in every child it forks:
    a terminal's Ctrl-C goes to the whole process group, and the server ignores SIGINT only once it has
    imported its preload (~1 s), so a Ctrl-C then printed the server's ``KeyboardInterrupt`` traceback under the
    command's own one-line message. Only the caller handles Ctrl-C; its children are killed by it
    (:func:`_kill`) or end with it (the server reads EOF when the caller exits). A signal mask is per thread and
    inherited across fork and exec, so this works from any thread (``signal.signal`` works only in the main one);
    a Ctrl-C that arrives meanwhile is delivered to the caller when the mask is restored. The resource tracker
    is started first: starting it unblocks SIGINT on its way out (it guards its own start-up the same way)."""
    resource_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def run_isolated(
    target: Callable[..., Any],
    *args: Any,
    max_memory_mb: int,
    deadline: float | None,
    on_progress: Callable[..., None] | None = None,
) -> Any:
    """``target(report, *args)`` in a child limited to ``max_memory_mb`` of address space; ``report(*values)``
    there calls ``on_progress(*values)`` here. ``target`` and ``args`` must pickle (a module-level function);
    ``deadline`` is a ``time.monotonic()`` value (the clock is the same in the child)."""
    ctx = _context()
    _ensure_server()  # here, not inside process.start(): the server starts with Ctrl-C blocked
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(
        target=_child_main, args=(send, target, args, max_memory_mb, deadline), name="citebot-reader", daemon=True
    )
    try:
        with _main_module_hidden():
            process.start()
    finally:
        send.close()
    outcome: tuple[Any, ...] = ("died",)
    try:
        outcome = _wait(process, receive, deadline, on_progress)
    finally:
        if outcome[0] not in ("died", "overtime"):
            process.join(_EXIT_WAIT_S)  # it has reported and is on its way out
        if process.exitcode is None:
            _kill(process)
            process.join(_EXIT_WAIT_S)
        receive.close()
    exitcode = process.exitcode
    if exitcode is not None:
        process.close()
    return _result(outcome, exitcode)


_START_LOCK = threading.Lock()
_CPU_LOCK = threading.Lock()
_children_cpu_s = 0.0


def children_cpu_s() -> float:
    """CPU seconds (user + system) the children of :func:`run_isolated` in this process have used so far, as each
    reported at its end. The fork server, not this process, reaps them, so ``RUSAGE_CHILDREN`` never sees them;
    benchmarks add this to their own CPU time so that a reading is not free."""
    with _CPU_LOCK:
        return _children_cpu_s


def _add_child_cpu(seconds: float) -> None:
    global _children_cpu_s
    with _CPU_LOCK:
        _children_cpu_s += seconds


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    """While a child is started, ``__main__`` is a blank module: multiprocessing tells the child to import the
    caller's main module (by path or name) so that a target defined there unpickles, which would run a script's
    top-level code again in the child (and an unguarded ``ingest`` call there fails: a process started while
    bootstrapping). Our targets live in this package; the child needs no ``__main__``. Held for the pickling only."""
    with _START_LOCK:
        real = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            sys.modules["__main__"] = real


def _wait(
    process: Any, receive: Connection, deadline: float | None, on_progress: Callable[..., None] | None
) -> tuple[Any, ...]:
    while True:
        timeout = None if deadline is None else max(0.0, deadline + GRACE_S - time.monotonic())
        ready = wait([receive, process.sentinel], timeout)
        if not ready:
            return ("overtime",)
        if receive in ready:
            try:
                message = receive.recv()
            except EOFError:  # the child is gone without a word: its exit status says why
                return ("died",)
            if message[0] == "cpu":
                _add_child_cpu(float(message[1]))
                continue
            if message[0] != "progress":
                return tuple(message)
            if on_progress is not None:
                on_progress(*message[1])
            continue
        return ("died",)  # only the sentinel: exited, nothing left in the pipe


def _kill(process: Any) -> None:
    """SIGKILL the child's process group (it leads one: Tesseract goes too), else the child alone."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


def _result(outcome: tuple[Any, ...], exitcode: int | None) -> Any:
    kind = outcome[0]
    if kind == "done":
        return outcome[1]
    if kind == "refused":
        raise IngestError(outcome[1], code=outcome[2])
    if kind == "memory":
        raise IngestError(TOO_LARGE, code="memory")
    if kind == "crashed":
        raise ChildCrashedError(outcome[1], outcome[2])
    if kind == "limit_too_low":
        raise MemoryLimitTooLowError(outcome[1], outcome[2])
    if kind == "overtime":
        raise IngestError(TIMEOUT, code="timeout")
    if exitcode is not None and exitcode < 0:
        if -exitcode in _MEMORY_SIGNALS:
            raise IngestError(TOO_LARGE, code="memory")
        if -exitcode == signal.SIGALRM:  # its own alarm, set past the deadline
            raise IngestError(TIMEOUT, code="timeout")
        raise ChildCrashedError(signal.Signals(-exitcode).name)
    raise ChildCrashedError(f"exit status {exitcode}")


def _mapped_mb() -> int:
    """The address space the process has mapped now (VmSize), 0 where /proc is not there."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmSize:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def _child_main(
    conn: Connection, target: Callable[..., Any], args: tuple[Any, ...], max_memory_mb: int, deadline: float | None
) -> None:
    """In the child: limit, run, report one outcome. Nothing is logged or printed here: library warnings and
    tracebacks can quote the document, so only types, places and counts go back through the pipe."""
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # a group of its own, so that a kill reaches Tesseract too
    if deadline is not None:  # the parent kills it at the deadline plus GRACE_S; this is for a parent that died
        signal.alarm(max(1, math.ceil(deadline - time.monotonic() + 2 * GRACE_S)))
    outcome: tuple[Any, ...]
    mapped = _mapped_mb()
    if mapped + _HEADROOM_MB > max_memory_mb:
        outcome = ("limit_too_low", max_memory_mb, mapped)
    else:
        resource.setrlimit(resource.RLIMIT_AS, (max_memory_mb * _MB, max_memory_mb * _MB))
        try:
            outcome = ("done", target(lambda *values: conn.send(("progress", values)), *args))
        except IngestError as e:
            outcome = ("refused", e.reason, e.code)
        except MemoryError:
            outcome = ("memory",)
        except BaseException as e:  # noqa: BLE001 - our bug: its type and place go back, never its message
            frames = [(f.f_code.co_filename, line, f.f_code.co_name) for f, line in traceback.walk_tb(e.__traceback__)]
            outcome = ("crashed", type(e).__name__, frames)
    try:
        try:
            conn.send(("cpu", time.process_time()))  # a forked child's clock starts at zero
            conn.send(outcome)
        except MemoryError:  # pickling a large result may not fit either
            conn.send(("memory",))
        conn.close()
    except BaseException:  # noqa: BLE001 - the parent is gone or the pipe broke: exit without a word
        os._exit(_EXIT_UNREPORTED)
