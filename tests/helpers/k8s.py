"""deploy/k8s as the deploy tests read it: the manifests, and the validator that checks them against the
Kubernetes schemas it ships (no cluster, no network). Without kubernetes-validate, a module importing this is
skipped (outside CI)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
KUBERNETES_VERSION = "1.30.0"  # the oldest minor still supported upstream when this was written; 1.3x accept it too

if os.environ.get("CI"):
    import kubernetes_validate  # declared in the test extra: CI must have it
else:
    kubernetes_validate = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate is in the test extra: pip install -e '.[test]'"
    )


def manifests() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        out += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    return out


def by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for _, doc in manifests() if doc["kind"] == kind}
