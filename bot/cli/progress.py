"""A one-line progress display for long commands (``eval run``, ``reindex``) on a terminal.

``progress(what, done, total)`` redraws ``hybrid cases 12/40 · about 2 min left`` in place on stderr; the
time left is the pace of the items done since this command started (a resumed run's earlier items do not
count). Log lines go above it through :meth:`TerminalProgress.log`. When stderr is not a terminal (CI, a
file) it shows nothing and the log lines print as they are.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO


def time_left(seconds: float) -> str:
    if seconds < 60:
        return f"{max(1, round(seconds))} s left"
    if seconds < 3600:
        return f"about {round(seconds / 60)} min left"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"about {hours} h {minutes:02d} min left"


class TerminalProgress:
    def __init__(self, stream: TextIO | Any = None, *, clock: Callable[[], float] = time.monotonic,
                 print_log: Callable[[str], None] = print) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self._clock = clock
        self._print = print_log
        self._started: dict[str, tuple[float, int]] = {}
        self._shown = ""

    def __call__(self, what: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = self._clock()
        t0, done0 = self._started.setdefault(what, (now, done))
        line = f"{what} {done}/{total}"
        if total and done >= total:
            line += " · done"
        elif done > done0:
            line += " · " + time_left((now - t0) / (done - done0) * (total - done))
        self._draw(line)
        if total and done >= total:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = ""

    def log(self, message: str) -> None:
        """Print a log line above the progress line (which is drawn again after it)."""
        shown = self._shown
        self.clear()
        self._print(message)
        if shown:
            self._draw(shown)

    def clear(self) -> None:
        if self.enabled and self._shown:
            self.stream.write("\r" + " " * len(self._shown) + "\r")
            self.stream.flush()
            self._shown = ""

    def _draw(self, line: str) -> None:
        pad = " " * max(0, len(self._shown) - len(line))
        self.stream.write("\r" + line + pad)
        self.stream.flush()
        self._shown = line
