"""Defect 8 of the second security review: ``DATA_DIR``, ``chunks.sqlite3`` and ``state.sqlite3`` were created
world-readable (0755 / 0644), so any local account could read every scope's document text and every question.

Now the folder is 0700 and the databases (with SQLite's ``-wal``/``-shm`` files) 0600 whatever the umask, and a
data folder made by an older version is tightened when the bot opens it. Where the test runs as root it also
tries the read as another account (``nobody``), as that account would.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from connectors.settings import Settings
from connectors.stores import open_state, open_store
from tests.helpers.stores import chunk

SECRET = "The merger with Contoso closes on 3 March"
QUESTION = "when does the merger close?"


def _fill(settings: Settings) -> None:
    store = open_store(settings)
    store.replace_document([chunk("d1", 0, SECRET, scope="slack:T1:CBOARD", embedding=[0.1] * 384)],
                           scope="slack:T1:CBOARD")
    state = open_state(settings)
    state.record_answer(platform="slack", message_ref="m1", thread_ref="t1", scope="slack:T1:CBOARD", user="U1",
                        question=QUESTION, answer_json="{}")


def _modes(data_dir: Path) -> dict[str, int]:
    out = {".": stat.S_IMODE(data_dir.stat().st_mode)}
    for p in data_dir.iterdir():
        if p.is_file():
            out[p.name] = stat.S_IMODE(p.stat().st_mode)
    return out


def _read_as_nobody(paths: list[Path]) -> list[str]:
    """What the account ``nobody`` gets when it reads each path: "denied" or "read"."""
    code = (
        "import os, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "for p in sys.argv[1:]:\n"
        "    try:\n"
        "        open(p, 'rb').read(); print('read')\n"
        "    except PermissionError:\n"
        "        print('denied')\n"
    )
    out = subprocess.run([sys.executable, "-c", code, *map(str, paths)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_a_new_data_dir_and_its_databases_are_the_bots_alone(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", embedding_dim=384)
    old = os.umask(0o022)  # the usual umask, under which the defect showed
    try:
        _fill(settings)
    finally:
        os.umask(old)
    modes = _modes(settings.data_dir)
    assert modes["."] == 0o700
    files = {name: mode for name, mode in modes.items() if name.startswith(("chunks.sqlite3", "state.sqlite3"))}
    assert {"chunks.sqlite3", "state.sqlite3", "chunks.sqlite3-wal", "state.sqlite3-wal"} <= set(files)
    assert all(mode == 0o600 for mode in files.values()), {n: oct(m) for n, m in files.items()}
    if os.geteuid() == 0:
        assert _read_as_nobody([settings.sqlite_path, settings.state_path]) == ["denied", "denied"]


def test_a_data_dir_from_an_older_version_is_tightened_when_opened(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", embedding_dim=384)
    _fill(settings)
    settings.data_dir.chmod(0o755)  # as an older version left it
    for p in settings.data_dir.iterdir():
        p.chmod(0o644)

    _fill(settings)  # the bot starts again

    modes = _modes(settings.data_dir)
    assert modes["."] == 0o700
    assert all(mode == 0o600 for name, mode in modes.items() if name.startswith(("chunks.", "state."))), modes


@pytest.mark.skipif(os.geteuid() != 0, reason="reading as another account needs root to switch to it")
def test_another_local_account_cannot_read_the_document_text_or_the_questions() -> None:
    # the folders above DATA_DIR are open to all, as /var/lib or /srv usually are (pytest's own tmp_path is not)
    with tempfile.TemporaryDirectory(prefix="citebot-") as top:
        Path(top).chmod(0o755)
        settings = Settings(data_dir=Path(top) / "data", embedding_dim=384)
        _fill(settings)
        assert _read_as_nobody([settings.sqlite_path]) == ["denied"]
        settings.data_dir.chmod(0o755)  # even with the folder opened by hand, the files stay closed
        assert _read_as_nobody([settings.sqlite_path, settings.state_path]) == ["denied", "denied"]
