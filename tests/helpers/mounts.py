"""A data directory on a file system of its own, for the bot's process alone, mounted at the data directory inside a
private mount namespace (``unshare -m``): a small tmpfs, which a test fills (ENOSPC) while ``citebot serve`` runs,
through ``nsenter`` into that namespace; or an ext4 image on a loop device, which a test makes fail as a disk does
(the kernel remounts it read-only on a file-system error: EROFS). Tests run as root, so ``chmod`` cannot make a
directory read-only; a read-only mount can, for root too. Nothing outside the bot's process sees the mount: the
test's own view of the directory stays empty.

A read-only remount on request (``mount -o remount,ro``) is refused (EBUSY) while the bot holds its SQLite files
open for writing; only the kernel's own emergency remount after an error turns a busy file system read-only, and only
an unmount (and ``e2fsck``) undoes it: so the ext4 disk, after it failed, comes back with the next start.

Where namespaces or loop devices are not allowed (a container without ``CAP_SYS_ADMIN``), :func:`unavailable` says
why, and the tests that need them are skipped with that reason.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

FILL = ".citebot-test-fill"  # the file that takes the disk's last byte

_SCRIPT = f"""set -e
if [ -n "$4" ]; then mount -o loop,errors=remount-ro "$4" "$2"; else mount -t tmpfs -o "size=$1" citebot-data "$2"; fi
if [ "$3" = full ]; then
    dd if=/dev/zero of="$2/{FILL}" bs=1M 2>/dev/null || true
    dd if=/dev/zero of="$2/{FILL}.tail" bs=1k 2>/dev/null || true
fi
if [ "$3" = read-only ]; then mount -o remount,ro "$2"; fi
shift 4
exec "$@"
"""


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), capture_output=True, text=True, timeout=60, check=False)


@functools.cache
def _namespace_flags() -> tuple[tuple[str, ...], tuple[str, ...]] | str:
    """(unshare's flags, nsenter's) that work here, or why none do."""
    if not (shutil.which("unshare") and shutil.which("nsenter") and shutil.which("mount")):
        return "unshare, nsenter or mount is not installed"
    tried = []
    for unshare, nsenter in ((("-m",), ("-m",)), (("-r", "-m"), ("-U", "-m", "--preserve-credentials"))):
        probe = _run("unshare", *unshare, "sh", "-c", "mount -t tmpfs -o size=1m t /mnt")
        if probe.returncode == 0:
            return unshare, nsenter
        tried.append(f"unshare {' '.join(unshare)}: {probe.stderr.strip() or probe.returncode}")
    return "no private mount namespace for a tmpfs (" + "; ".join(tried) + ")"


def unavailable() -> str:
    """Why a private tmpfs cannot be mounted here, or "" when it can."""
    flags = _namespace_flags()
    return flags if isinstance(flags, str) else ""


@functools.cache
def disk_unavailable() -> str:
    """Why an ext4 image cannot be loop-mounted and made to fail here, or "" when it can."""
    if unavailable():
        return unavailable()
    if not (shutil.which("mkfs.ext4") and shutil.which("e2fsck") and shutil.which("findmnt")):
        return "mkfs.ext4, e2fsck or findmnt is not installed"
    with tempfile.TemporaryDirectory() as tmp:
        image = Path(tmp) / "probe.img"
        made = _run("sh", "-c", f"truncate -s 8M {image} && mkfs.ext4 -q -F {image}")
        if made.returncode != 0:
            return f"mkfs.ext4 failed: {made.stderr.strip()}"
        unshare, _ = _namespace_flags()  # type: ignore[misc]
        probe = _run("unshare", *unshare, "sh", "-c",
                     f"mount -o loop {image} /mnt && test -e /sys/fs/ext4/$(basename $(findmnt -no SOURCE /mnt))"
                     "/trigger_fs_error")
        if probe.returncode != 0:
            return f"no loop-mounted ext4 with trigger_fs_error ({probe.stderr.strip() or probe.returncode})"
    return ""


class DataDisk:
    """A file system of the bot's own at ``path``: a tmpfs of ``size``, or (``image``) an ext4 image made by
    :meth:`make_image`. Pass :meth:`launcher` as the command's prefix, then :meth:`attach` the started process.
    ``start``: ``writable``, ``full`` (every byte taken before the bot starts) or ``read-only``."""

    def __init__(self, path: Path, *, size: str = "256m", start: str = "writable", image: Path | None = None) -> None:
        flags = _namespace_flags()
        assert not isinstance(flags, str), flags
        self._unshare, self._nsenter = flags
        self.path = path
        self.size = size
        self.start = start
        self.image = image
        self.pid = 0
        path.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def make_image(image: Path, size: str = "256M") -> Path:
        made = _run("sh", "-c", f"truncate -s {size} {image} && mkfs.ext4 -q -F {image}")
        assert made.returncode == 0, made.stderr
        return image

    def launcher(self) -> list[str]:
        return ["unshare", *self._unshare, "sh", "-c", _SCRIPT, "sh", self.size, str(self.path), self.start,
                str(self.image or "")]

    def attach(self, pid: int) -> None:
        self.pid = pid

    def _in_namespace(self, *command: str) -> subprocess.CompletedProcess[str]:
        assert self.pid, "attach the bot's process first"
        done = _run("nsenter", "-t", str(self.pid), *self._nsenter, *command)
        assert done.returncode == 0, done.stderr
        return done

    def fill(self) -> None:
        """Take every byte left (as a full disk: writes fail with ENOSPC)."""
        self._in_namespace("sh", "-c", f'dd if=/dev/zero of="$0/{FILL}" bs=1M 2>/dev/null; '
                                       f'dd if=/dev/zero of="$0/{FILL}.tail" bs=1k 2>/dev/null; true', str(self.path))

    def free(self) -> None:
        self._in_namespace("rm", "-f", str(self.path / FILL), str(self.path / f"{FILL}.tail"))

    def fail(self) -> None:
        """An ext4 file-system error, as a failing disk raises one, once what was written so far reached the disk:
        the kernel remounts it read-only (EROFS) at once, with the bot's files open."""
        assert self.image is not None, "only an ext4 image fails this way"
        self._in_namespace("sync", "-f", str(self.path))  # what was written so far reached the disk
        self._in_namespace("sh", "-c", 'echo 1 > "/sys/fs/ext4/$(basename "$(findmnt -no SOURCE "$0")")/'
                                       'trigger_fs_error"', str(self.path))

    def repair(self) -> None:
        """``e2fsck`` on the image, once no process has it mounted (what an operator does before the next start)."""
        assert self.image is not None
        checked = _run("e2fsck", "-fy", str(self.image))
        assert checked.returncode in (0, 1), checked.stdout + checked.stderr  # 1: errors corrected
