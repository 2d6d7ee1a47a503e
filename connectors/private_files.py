"""Files only the bot's own account may read: the embedded store and the chat state hold every scope's document
text and every question, so ``DATA_DIR`` is 0700 and their SQLite files (and the ``-wal``/``-shm`` files SQLite
creates with the database file's mode) are 0600, whatever the umask. An older data folder is tightened when it
is opened. The one place this rule lives."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) as 0700; an existing folder of ours is set to 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    _tighten(path, DIR_MODE)
    return path


def private_sqlite_file(path: Path) -> Path:
    """Create the SQLite database at ``path`` as an empty 0600 file before SQLite opens it (SQLite gives its
    ``-wal`` and ``-shm`` files the database file's mode); an existing one and its side files are set to 0600.
    Its folder is made private only when this creates it (a path the operator chose elsewhere keeps its mode)."""
    if not path.parent.exists():
        private_dir(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    os.close(fd)
    for candidate in (path, *(path.with_name(path.name + s) for s in _SQLITE_SIDE_FILES)):
        if candidate.exists():
            _tighten(candidate, FILE_MODE)
    return path


def _tighten(path: Path, mode: int) -> None:
    """chmod to ``mode`` when the file is ours and looser; someone else's file (a shared mount) is left alone."""
    with contextlib.suppress(OSError):
        st = path.stat()
        if st.st_uid == os.geteuid() and (st.st_mode & 0o777) != mode:
            path.chmod(mode)
