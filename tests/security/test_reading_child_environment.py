"""Issue 40 row 5: the fork server and the reading children (pdfium, pypdf, Tesseract on uploaded PDFs) inherited
every credential in the bot's environment. Now the server starts with an allow-listed environment, so a child that
a hostile PDF takes over finds no token: not in ``os.environ``, not in its original environment block, not in what
it starts. Run in a fresh interpreter: the fork server is started once per process, with that process's
environment at the time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pipelines.reading.isolation import CHILD_ENVIRONMENT, child_environment

REPO = Path(__file__).resolve().parents[2]
SECRETS = {
    "SLACK_BOT_TOKEN": "xoxb-child-must-not-see", "SLACK_SIGNING_SECRET": "signing-child-must-not-see",
    "TEAMS_APP_PASSWORD": "teams-child-must-not-see", "OPENAI_API_KEY": "sk-child-must-not-see",
    "CITEBOT_ELASTICSEARCH_PASSWORD": "es-child-must-not-see", "AWS_SECRET_ACCESS_KEY": "aws-child-must-not-see",
}
SCRIPT = """
import json
from pipelines.reading.isolation import run_isolated
from tests.helpers.isolation_targets import environment
print(json.dumps(run_isolated(environment, max_memory_mb=1024, deadline=None)))
"""


def test_the_reading_child_holds_no_credential(tmp_path: Path) -> None:
    env = {**os.environ, **SECRETS, "PYTHONPATH": str(REPO), "LANG": "C.UTF-8"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    for where, text in seen.items():
        for name, value in SECRETS.items():
            assert value not in text, (where, name)
    assert "LANG=C.UTF-8" in seen["environ"] and "PATH=" in seen["started"]  # what it needs is still there


def test_the_allow_list_names_no_credential() -> None:
    assert child_environment({**SECRETS, "PATH": "/usr/bin", "HTTPS_PROXY": "http://u:p@proxy"}) == {"PATH": "/usr/bin"}
    assert not {n for n in CHILD_ENVIRONMENT if any(w in n for w in ("TOKEN", "SECRET", "PASSWORD", "KEY"))}
