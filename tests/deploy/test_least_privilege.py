"""Defect 4 of the second security review, the deployment's half: the shipped manifests logged in to
Elasticsearch as the superuser (`elastic`), Kubernetes reached it over plain ``http://``, and no NetworkPolicy
kept other pods away from it, so a bot pod (which parses untrusted PDFs) owned the whole cluster.

What an operator applies now: the bots (ConfigMap, compose) use ``https://`` with the CA mounted and the user
``citebot_writer``, whose role (``deploy/k8s/elasticsearch/access.yaml``) reaches only ``citebot-*`` indices and
the NetworkPolicy admits only Citebot's pods and the operator to port 9200. The objects validate against the
Kubernetes schemas; every mounted path and Secret a pod needs is there."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.k8s import K8S, KUBERNETES_VERSION, by_kind, kubernetes_validate

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ACCESS = K8S / "elasticsearch" / "access.yaml"


def _access() -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(ACCESS.read_text(encoding="utf-8")) if d}


def test_the_access_objects_validate_and_live_beside_the_cluster() -> None:
    docs = _access()
    assert set(docs) == {"Secret", "NetworkPolicy"}
    for doc in docs.values():
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        assert doc["metadata"]["namespace"] == "elastic"
    kustomization = yaml.safe_load((K8S / "elasticsearch" / "kustomization.yaml").read_text(encoding="utf-8"))
    assert kustomization["resources"] == ["access.yaml"]
    assert "elasticsearch/access.yaml" not in (K8S / "kustomization.yaml").read_text(encoding="utf-8")


def test_the_bots_role_reaches_only_citebots_indices() -> None:
    roles = yaml.safe_load(_access()["Secret"]["stringData"]["roles.yml"])
    role = roles["citebot_writer"]
    assert role["cluster"] == ["monitor"]  # cluster health, read-only: no users, roles, settings or snapshots
    assert [i["names"] for i in role["indices"]] == [["citebot-*"]]
    config = by_kind("ConfigMap")["citebot-settings"]["data"]
    # the indices the bots use are all under that pattern
    assert config["CITEBOT_ELASTICSEARCH_INDEX"].startswith("citebot-")
    assert config["CITEBOT_ELASTICSEARCH_STATE_PREFIX"].startswith("citebot-")


def test_only_citebots_pods_and_the_operator_reach_elasticsearch() -> None:
    policy = _access()["NetworkPolicy"]["spec"]
    assert policy["podSelector"]["matchLabels"] == {"elasticsearch.k8s.elastic.co/cluster-name": "citebot"}
    http, transport = policy["ingress"]
    assert [p["port"] for p in http["ports"]] == [9200] and [p["port"] for p in transport["ports"]] == [9300]
    peers = http["from"]
    assert peers[0]["podSelector"]["matchLabels"] == {"app.kubernetes.io/part-of": "citebot"}
    assert peers[0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "citebot"}
    assert peers[1]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "elastic-system"}
    assert len(peers) == 2
    # every Citebot pod that talks to Elasticsearch carries the label the policy admits
    for name in ("citebot-slack", "citebot-teams"):
        labels = by_kind("Deployment")[name]["spec"]["template"]["metadata"]["labels"]
        assert labels["app.kubernetes.io/part-of"] == "citebot"
    job = by_kind("CronJob")["citebot-quality"]["spec"]["jobTemplate"]["spec"]["template"]
    assert job["metadata"]["labels"]["app.kubernetes.io/part-of"] == "citebot"


@pytest.mark.parametrize("kind_name", [("Deployment", "citebot-slack"), ("Deployment", "citebot-teams"),
                                       ("CronJob", "citebot-quality")])
def test_kubernetes_uses_tls_and_the_writer_never_the_superuser(kind_name: tuple[str, str]) -> None:
    config = by_kind("ConfigMap")["citebot-settings"]["data"]
    assert config["CITEBOT_ELASTICSEARCH_URL"].startswith("https://")
    assert config["CITEBOT_ELASTICSEARCH_USERNAME"] == "citebot_writer"
    kind, name = kind_name
    spec = by_kind(kind)[name]["spec"]
    pod = spec["jobTemplate"]["spec"]["template"]["spec"] if kind == "CronJob" else spec["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    ca = Path(config["CITEBOT_ELASTICSEARCH_CA_CERTS"])
    assert mounts["es-ca"]["mountPath"] == str(ca.parent) and mounts["es-ca"]["readOnly"] is True
    assert volumes["es-ca"]["secret"]["secretName"] == "citebot-es-ca"


def test_compose_uses_tls_and_a_limited_user_and_the_superuser_password_stays_in_setup() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text(encoding="utf-8"))
    services = compose["services"]
    es = services["elasticsearch"]["environment"]
    assert es["xpack.security.http.ssl.enabled"] == "true"
    for bot in ("citebot-slack", "citebot-teams"):
        env = services[bot]["environment"]
        assert env["CITEBOT_ELASTICSEARCH_URL"].startswith("https://")
        assert env["CITEBOT_ELASTICSEARCH_USERNAME"] == "citebot_writer"
        assert "ELASTIC_PASSWORD" not in env["CITEBOT_ELASTICSEARCH_PASSWORD"]
        assert any(v.endswith(":ro") and "certs" in v for v in services[bot]["volumes"])
        assert services[bot]["depends_on"]["es-setup"]["condition"] == "service_completed_successfully"
    setup = services["es-setup"]
    script = " ".join(setup["command"]) if isinstance(setup["command"], list) else setup["command"]
    assert "_security/role/citebot_writer" in script and '"names": ["citebot-*"]' in script
    assert "_security/user/citebot_writer" in script


def test_the_quality_check_signs_in_read_only() -> None:
    """Issue 40 row 11: the quality CronJob signed in as citebot_writer (read, write, delete). It reads the chat
    state only: a role that can read citebot-* and nothing more, in Kubernetes and in compose."""
    roles = yaml.safe_load(_access()["Secret"]["stringData"]["roles.yml"])
    reader = roles["citebot_reader"]
    assert reader["cluster"] == ["monitor"]
    (indices,) = reader["indices"]
    assert indices["names"] == ["citebot-*"] and set(indices["privileges"]) == {"read", "view_index_metadata"}
    container = by_kind("CronJob")["citebot-quality"]["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "containers"][0]
    env = {e["name"]: e["value"] for e in container.get("env", [])}
    assert env["CITEBOT_ELASTICSEARCH_USERNAME"] == "citebot_reader"  # overrides the ConfigMap's writer
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text(encoding="utf-8"))
    quality = compose["services"]["citebot-quality"]
    assert quality["command"][0] == "quality" and "env_file" not in quality
    assert quality["environment"]["CITEBOT_ELASTICSEARCH_USERNAME"] == "citebot_reader"
    assert "READER" in quality["environment"]["CITEBOT_ELASTICSEARCH_PASSWORD"]
    setup = compose["services"]["es-setup"]["command"]
    script = " ".join(setup) if isinstance(setup, list) else setup
    role = re.search(r"_security/role/citebot_reader \\\s*-d '([^']+)'", script)
    assert role, "es-setup makes the citebot_reader role"
    body = json.loads(role.group(1))
    assert body["indices"] == [{"names": ["citebot-*"], "privileges": ["view_index_metadata", "read"]}]
