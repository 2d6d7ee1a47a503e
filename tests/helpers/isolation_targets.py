"""What the isolation tests run in the reader's child process. The child imports this module by name, so it
imports nothing heavy (a test module would pull in Haystack and torch)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import time
from collections.abc import Callable

Report = Callable[..., None]


def echo(report: Report, value: object) -> object:
    report("parsing", 1, 1)
    return value


def our_bug(report: Report) -> None:
    raise KeyError("Dana Okafor earns EUR 184,000")  # a message that carries document text


def allocate(report: Report, megabytes: int) -> int:
    return len(bytearray(megabytes * 1024 * 1024))


def native_abort(report: Report) -> None:
    os.abort()  # what pdfium does when an allocation fails


def native_crash(report: Report) -> None:
    ctypes.string_at(0)  # a segmentation fault: a bug in native code, not a lack of memory


def hang_with_a_helper(report: Report) -> None:
    """Start a helper process (as Tesseract is started), report its pid, then never finish."""
    helper = subprocess.Popen(["sleep", "60"])  # noqa: S607 - a test helper
    report("helper", helper.pid)
    time.sleep(60)


def busy(report: Report, cpu_seconds: float) -> int:
    """Use ``cpu_seconds`` of CPU time (a parse that works hard), then return how many rounds it took."""
    rounds = 0
    end = time.process_time() + cpu_seconds
    while time.process_time() < end:
        rounds += sum(range(1000)) > 0
    return rounds


def environment(report: Report) -> dict[str, str]:
    """What the child can see of its environment: ``os.environ``, the process's original environment block, and
    what a program it starts (as Tesseract is started) gets."""
    with open("/proc/self/environ", "rb") as f:  # noqa: PTH123 - a tiny target
        block = f.read().decode(errors="replace")
    started = subprocess.run(["env"], capture_output=True, text=True, check=True, timeout=30).stdout  # noqa: S607
    return {"environ": "\n".join(f"{k}={v}" for k, v in os.environ.items()), "block": block, "started": started}
