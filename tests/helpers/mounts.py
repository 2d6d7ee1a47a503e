"""A data directory on a file system of its own, for the bot's process alone: a small tmpfs mounted at the data
directory inside a private mount namespace (``unshare -m``), so a test can fill it (ENOSPC), turn it read-only (EROFS)
and back while ``citebot serve`` runs, through ``nsenter`` into that namespace. Tests run as root, so ``chmod``
cannot make a directory read-only; a read-only mount can, for root too. Nothing outside the bot's process sees the
mount: the test's own view of the directory stays empty.

Where namespaces are not allowed (a container without ``CAP_SYS_ADMIN`` and without unprivileged user namespaces),
:func:`unavailable` says why, and the tests that need it are skipped with that reason.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

FILL = ".citebot-test-fill"  # the file that takes the disk's last byte

_SCRIPT = f"""set -e
mount -t tmpfs -o "size=$1" citebot-data "$2"
if [ "$3" = full ]; then
    dd if=/dev/zero of="$2/{FILL}" bs=1M 2>/dev/null || true
    dd if=/dev/zero of="$2/{FILL}.tail" bs=1k 2>/dev/null || true
fi
if [ "$3" = read-only ]; then mount -o remount,ro "$2"; fi
shift 3
exec "$@"
"""


@functools.cache
def _namespace_flags() -> tuple[tuple[str, ...], tuple[str, ...]] | str:
    """(unshare's flags, nsenter's) that work here, or why none do."""
    if not (shutil.which("unshare") and shutil.which("nsenter") and shutil.which("mount")):
        return "unshare, nsenter or mount is not installed"
    tried = []
    for unshare, nsenter in ((("-m",), ("-m",)), (("-r", "-m"), ("-U", "-m", "--preserve-credentials"))):
        probe = subprocess.run(["unshare", *unshare, "sh", "-c", "mount -t tmpfs -o size=1m t /mnt"],
                               capture_output=True, text=True, timeout=30, check=False)
        if probe.returncode == 0:
            return unshare, nsenter
        tried.append(f"unshare {' '.join(unshare)}: {probe.stderr.strip() or probe.returncode}")
    return "no private mount namespace for a tmpfs (" + "; ".join(tried) + ")"


def unavailable() -> str:
    """Why a private tmpfs cannot be mounted here, or "" when it can."""
    flags = _namespace_flags()
    return flags if isinstance(flags, str) else ""


class DataDisk:
    """A tmpfs of ``size`` at ``path`` for one process: pass :meth:`launcher` as the command's prefix, then
    :meth:`attach` the started process. ``start``: ``writable``, ``full`` (every byte taken before the bot starts) or
    ``read-only``."""

    def __init__(self, path: Path, *, size: str = "256m", start: str = "writable") -> None:
        flags = _namespace_flags()
        assert not isinstance(flags, str), flags
        self._unshare, self._nsenter = flags
        self.path = path
        self.size = size
        self.start = start
        self.pid = 0
        path.mkdir(parents=True, exist_ok=True)

    def launcher(self) -> list[str]:
        return ["unshare", *self._unshare, "sh", "-c", _SCRIPT, "sh", self.size, str(self.path), self.start]

    def attach(self, pid: int) -> None:
        self.pid = pid

    def _run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert self.pid, "attach the bot's process first"
        return subprocess.run(["nsenter", "-t", str(self.pid), *self._nsenter, *command], capture_output=True,
                              text=True, timeout=60, check=check)

    def fill(self) -> None:
        """Take every byte left (as a full disk: writes fail with ENOSPC)."""
        self._run("sh", "-c", f'dd if=/dev/zero of="$0/{FILL}" bs=1M 2>/dev/null; '
                              f'dd if=/dev/zero of="$0/{FILL}.tail" bs=1k 2>/dev/null; true', str(self.path))

    def free(self) -> None:
        self._run("rm", "-f", str(self.path / FILL), str(self.path / f"{FILL}.tail"))

    def read_only(self) -> None:
        self._run("mount", "-o", "remount,ro", str(self.path))

    def writable(self) -> None:
        self._run("mount", "-o", "remount,rw", str(self.path))

    def used(self) -> str:
        return self._run("df", "-k", str(self.path)).stdout
