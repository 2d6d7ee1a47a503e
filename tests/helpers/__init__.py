"""What the tests share, and the only test code a test module imports (``tests/test_test_imports.py`` checks).

* :mod:`tests.helpers.pdfs` — the PDFs tests upload, built with reportlab;
* :mod:`tests.helpers.slack` — the Slack bot in this process behind the local fake Slack, and ``citebot serve
  slack`` as a process of its own (:mod:`tests.helpers.process`);
* :mod:`tests.helpers.teams` — the Teams app behind the local fake Microsoft, a turn through a recording adapter,
  and ``citebot serve teams`` as a process of its own;
* :mod:`tests.helpers.stores` — both document stores for the contract and security suites;
* :mod:`tests.helpers.deploy`, :mod:`tests.helpers.k8s` — the settings' environment names, the Kubernetes
  manifests and their validator;
* :mod:`tests.helpers.runs` — eval runs written to disk by hand;
* :mod:`tests.helpers.isolation_targets` — what the isolation tests run in the reader's child process.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED_PDFS = REPO.parent / "shared" / "pdfs"
