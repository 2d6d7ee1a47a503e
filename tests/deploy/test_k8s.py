"""deploy/k8s validates against the Kubernetes schemas (kubernetes-validate ships them: no cluster, no network)
and holds what issue 12 asks: two replicas per bot, a Service, probes on the health endpoints, resources,
credentials from a Secret, every setting a real one."""

from __future__ import annotations

import copy
import tomllib

import pytest
import yaml

from bot.health import HEALTH_PATH, METRICS_PATH, READY_PATH
from tests.helpers.deploy import setting_names
from tests.helpers.k8s import K8S, KUBERNETES_VERSION, by_kind, kubernetes_validate, manifests


@pytest.mark.parametrize("version", [KUBERNETES_VERSION, kubernetes_validate.latest_version()])
def test_every_manifest_validates_strictly(version: str) -> None:
    found = manifests()
    assert {doc["kind"] for _, doc in found} == {"ConfigMap", "Secret", "Deployment", "Service", "PodDisruptionBudget",
                                                 "CronJob", "NetworkPolicy"}
    for name, doc in found:
        kubernetes_validate.validate(doc, version, strict=True)  # raises with the path of what is wrong
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "citebot", name


def test_the_validator_does_catch_mistakes() -> None:
    deployment = copy.deepcopy(by_kind("Deployment")["citebot-slack"])
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}  # a typo
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_kustomization_lists_the_manifests_but_not_the_secret_example() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))
    assert set(kustomization["resources"]) == {"configmap.yaml", "slack.yaml", "teams.yaml", "quality-cronjob.yaml",
                                               "networkpolicy.yaml"}
    # the package version: a rollout of a new release changes what runs (issue 29 row 18)
    version = tomllib.loads((K8S.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert kustomization["images"] == [{"name": "citebot", "newTag": version}]


@pytest.mark.parametrize("bot", ["slack", "teams"])
def test_each_bot_runs_two_probed_non_root_replicas_behind_a_service(bot: str) -> None:
    deployment = by_kind("Deployment")[f"citebot-{bot}"]
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == "citebot" and container["args"][:2] == ["serve", bot]
    assert "8080" in container["args"] and container["ports"] == [{"name": "http", "containerPort": 8080},
                                                                   {"name": "metrics", "containerPort": 9090}]
    # /metrics on its own port, announced to Prometheus, and not behind the Service the Ingress reaches
    assert container["args"][container["args"].index("--metrics-port") + 1] == "9090"
    annotations = spec["template"]["metadata"]["annotations"]
    assert (annotations["prometheus.io/port"], annotations["prometheus.io/path"]) == ("9090", METRICS_PATH)
    assert container["readinessProbe"]["httpGet"] == {"path": READY_PATH, "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": HEALTH_PATH, "port": "http"}
    assert container["startupProbe"]["httpGet"]["path"] == HEALTH_PATH
    assert container["resources"]["requests"]["cpu"] and container["resources"]["limits"]["memory"]
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] == 10001
    assert container["securityContext"]["readOnlyRootFilesystem"]
    assert {v["mountPath"] for v in container["volumeMounts"]} == {"/data", "/tmp", "/etc/citebot/es-ca"}
    sources = {next(iter(k for k in s if k.endswith("Ref"))): s for s in container["envFrom"]}
    assert sources["secretRef"]["secretRef"]["name"] == f"citebot-{bot}-credentials"
    assert f"citebot-{bot}-credentials" in by_kind("Secret")
    assert sources["configMapRef"]["configMapRef"]["name"] == "citebot-settings"

    service = by_kind("Service")[f"citebot-{bot}"]
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
    assert by_kind("PodDisruptionBudget")[f"citebot-{bot}"]["spec"]["selector"]["matchLabels"] == service["spec"][
        "selector"]


def test_settings_and_credentials_are_real_settings_and_secrets_stay_in_the_secret() -> None:
    names = setting_names()
    config = by_kind("ConfigMap")["citebot-settings"]["data"]
    secret = {k: v for s in by_kind("Secret").values() for k, v in s["stringData"].items()}
    assert set(config) <= names and set(secret) <= names, (set(config) | set(secret)) - names
    assert config["CITEBOT_ELASTICSEARCH_URL"].startswith(("http://", "https://"))  # Elasticsearch by URL
    assert not any(v for v in secret.values())  # an example: no value anyone could keep
    secretish = {n for n in names if any(w in n for w in ("TOKEN", "SECRET", "PASSWORD", "API_KEY"))}
    assert not secretish & set(config)


def test_each_workload_gets_a_secret_with_only_what_it_uses() -> None:
    """Issue 29 row 17: the Teams pods hold no Slack token, the Slack pods no Teams password, the quality check
    only the Elasticsearch password."""
    secrets = {name: set(s["stringData"]) for name, s in by_kind("Secret").items()}
    assert set(secrets) == {"citebot-slack-credentials", "citebot-teams-credentials", "citebot-quality-credentials"}
    assert not any(k.startswith("TEAMS_") for k in secrets["citebot-slack-credentials"])
    assert not any(k.startswith("SLACK_") for k in secrets["citebot-teams-credentials"])
    assert secrets["citebot-quality-credentials"] == {"CITEBOT_ELASTICSEARCH_PASSWORD"}
    cron = by_kind("CronJob")["citebot-quality"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert {"secretRef": {"name": "citebot-quality-credentials"}} in cron["envFrom"]


def test_a_daily_cronjob_runs_the_quality_check_and_fails_on_an_alarm() -> None:
    cron = by_kind("CronJob")["citebot-quality"]
    job = cron["spec"]["jobTemplate"]["spec"]
    pod = job["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == "citebot" and container["args"][:2] == ["quality", "--check"]
    assert job["backoffLimit"] == 0 and pod["restartPolicy"] == "Never"  # a failed check stays failed: the alert
    assert cron["spec"]["concurrencyPolicy"] == "Forbid" and len(cron["spec"]["schedule"].split()) == 5
    # the same settings and credentials as the bots: it reads their shared chat state
    assert {next(iter(k for k in s if k.endswith("Ref"))) for s in container["envFrom"]} == {"configMapRef",
                                                                                             "secretRef"}
    assert pod["securityContext"]["runAsNonRoot"] and container["securityContext"]["readOnlyRootFilesystem"]
    out = container["args"][container["args"].index("--out") + 1]
    assert any(out.startswith(v["mountPath"]) for v in container["volumeMounts"])  # a writable place for the page


def test_a_networkpolicy_limits_what_every_citebot_pod_reaches() -> None:
    """Issue 40 row 10: the bot pods (which parse untrusted PDFs) could reach anything, the cloud metadata endpoint
    included. Every Citebot pod is selected; it may reach DNS, Elasticsearch's 9200 and HTTPS on public addresses,
    never 169.254.169.254 nor a private range, and no other port."""
    import ipaddress

    (policy,) = by_kind("NetworkPolicy").values()
    spec = policy["spec"]
    assert "Egress" in spec["policyTypes"]
    selector = spec["podSelector"]["matchLabels"]
    pods = [d["spec"]["template"] for d in by_kind("Deployment").values()]
    pods += [c["spec"]["jobTemplate"]["spec"]["template"] for c in by_kind("CronJob").values()]
    for pod in pods:
        assert selector.items() <= pod["metadata"]["labels"].items(), pod["metadata"]["labels"]
    allowed = {(53, "UDP"), (53, "TCP"), (9200, "TCP"), (443, "TCP")}
    seen = set()
    metadata = ipaddress.ip_address("169.254.169.254")
    for rule in spec["egress"]:
        ports = {(p["port"], p["protocol"]) for p in rule["ports"]}  # every rule names its ports: none is "any"
        assert ports and ports <= allowed, ports
        seen |= ports
        for peer in rule["to"]:  # every rule names its peers: none is "anywhere on those ports" by omission
            if "ipBlock" in peer:
                assert ports == {(443, "TCP")}, "only HTTPS goes to addresses outside the cluster"
                block = ipaddress.ip_network(peer["ipBlock"]["cidr"])
                excepted = [ipaddress.ip_network(e) for e in peer["ipBlock"].get("except", [])]
                if block.version == 4:
                    assert any(metadata in e for e in excepted), "the metadata endpoint is not excepted"
                    for private in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"):
                        assert any(ipaddress.ip_network(private).subnet_of(e) for e in excepted  # type: ignore[arg-type]
                                   if e.version == 4), private
            else:
                assert peer["namespaceSelector"]["matchLabels"] and peer["podSelector"]["matchLabels"], peer
    assert seen == allowed
