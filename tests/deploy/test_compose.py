"""deploy/docker-compose.yml, deploy/.env.example and deploy/Dockerfile cannot drift from the code: parsed here
and checked against the settings object, the health endpoints and each other. (No Docker engine runs in these
tests: ``docker compose config`` and an image build are the admin's first step, deploy/README.md.)"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.health import READY_PATH
from connectors.settings import Settings
from tests.helpers.deploy import setting_names

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
VERSION = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
BOTS = {"citebot-slack": "slack", "citebot-teams": "teams"}
# Read by compose itself (interpolation), not by Citebot.
COMPOSE_ONLY = {
    "ELASTIC_PASSWORD", "CITEBOT_ES_PASSWORD", "CITEBOT_ES_READER_PASSWORD", "ES_HEAP", "ES_MEM_LIMIT", "CITEBOT_IMAGE",
    "CITEBOT_TEAMS_PUBLISH_PORT",
}


@pytest.fixture(scope="module")
def compose_text() -> str:
    return (DEPLOY / "docker-compose.yml").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def compose(compose_text: str) -> dict[str, Any]:
    return yaml.safe_load(compose_text)


def read_env(name: str) -> dict[str, str]:
    out = {}
    for line in (DEPLOY / name).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            var, _, value = line.partition("=")
            out[var.strip()] = value.strip()
    return out


@pytest.mark.parametrize("name", [".env.example", "citebot.env.example", "slack.env.example", "teams.env.example"])
def test_env_examples_have_no_comment_after_a_value(name: str) -> None:
    """`docker run --env-file` keeps everything after the `=`, an inline comment too, as the value."""
    for line in (DEPLOY / name).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            assert "#" not in line.partition("=")[2] and line == line.strip(), line


@pytest.fixture(scope="module")
def env_example() -> dict[str, str]:
    return read_env(".env.example")


def test_services_and_what_they_wait_for(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"elasticsearch", "es-setup", "citebot-quality", *BOTS}
    for name, platform in BOTS.items():
        bot = services[name]
        assert bot["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
        assert (DEPLOY.parent / bot["build"]["dockerfile"]).is_file()
        assert bot["depends_on"] == {"elasticsearch": {"condition": "service_healthy"},
                                     "es-setup": {"condition": "service_completed_successfully"}}
        assert bot["command"][:2] == ["serve", platform] and "0.0.0.0" in bot["command"]
        assert "8080" in bot["command"] and bot["env_file"] == ["citebot.env", f"{platform}.env"]
        assert bot["restart"] == "unless-stopped"
    assert "--http" not in services["citebot-slack"]["command"]  # Socket Mode: no public URL on one server
    assert services["citebot-teams"]["ports"] == ["127.0.0.1:${CITEBOT_TEAMS_PUBLISH_PORT:-3978}:8080"]
    # /metrics: on the compose network for a Prometheus there, never published on the host
    assert services["citebot-slack"]["expose"] == ["8080"] and "--health-port" in services["citebot-slack"]["command"]
    teams = services["citebot-teams"]["command"]
    assert teams[teams.index("--metrics-port") + 1] == "9090" and services["citebot-teams"]["expose"] == ["9090"]


def test_elasticsearch_has_security_a_password_a_heap_a_memory_limit_and_a_volume(compose: dict[str, Any]) -> None:
    es = compose["services"]["elasticsearch"]
    assert re.fullmatch(r"docker\.elastic\.co/elasticsearch/elasticsearch:8\.19\.\d+", es["image"])
    env = es["environment"]
    assert env["xpack.security.enabled"] == "true" and env["discovery.type"] == "single-node"
    assert env["ELASTIC_PASSWORD"].startswith("${ELASTIC_PASSWORD:?")  # compose refuses to start without it
    heap = re.fullmatch(r"-Xms(\S+) -Xmx(\S+)", env["ES_JAVA_OPTS"])
    assert heap and heap.group(1) == heap.group(2)
    assert es["mem_limit"]
    assert es["ports"] == ["127.0.0.1:9200:9200"]  # never on a public interface
    data, certs = es["volumes"]
    assert data.split(":")[0] in compose["volumes"] and certs.endswith(":ro")
    assert "ELASTIC_PASSWORD" in " ".join(es["healthcheck"]["test"]) and "_cluster/health" in " ".join(
        es["healthcheck"]["test"])


def test_every_service_has_a_healthcheck_and_the_bots_probe_readiness(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        if "tools" in service.get("profiles", []):
            continue  # a one-shot command (citebot-quality), not a service to probe
        check = service["healthcheck"]
        assert check["test"][0] in ("CMD", "CMD-SHELL") and check["interval"] and check["retries"], name
    for name in BOTS:
        probe = " ".join(compose["services"][name]["healthcheck"]["test"])
        assert f"http://127.0.0.1:8080{READY_PATH}" in probe, name


def test_the_bots_environment_is_made_of_settings(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    names = setting_names()
    ca = tmp_path / "ca.crt"  # what es-setup writes to the certs volume the bots mount at /certs
    ca.write_text("-----BEGIN CERTIFICATE-----\n", encoding="utf-8")
    for name in BOTS:
        env = compose["services"][name]["environment"]
        assert set(env) <= names, set(env) - names
        for var, value in env.items():  # as compose would pass them, with CITEBOT_ES_PASSWORD=pw
            value = re.sub(r"\$\{CITEBOT_ES_PASSWORD[^}]*\}", "pw", value)
            monkeypatch.setenv(var, str(ca) if var == "CITEBOT_ELASTICSEARCH_CA_CERTS" else value)
        assert env["CITEBOT_ELASTICSEARCH_CA_CERTS"] == "/certs/ca/ca.crt"
        settings = Settings(_env_file=None)  # type: ignore[call-arg]
        # the store AND the chat state on the shared Elasticsearch: the bots are stateless replicas
        assert settings.elasticsearch_url == "https://elasticsearch:9200"
        assert settings.elasticsearch_username == "citebot_writer" and settings.elasticsearch_password is not None
        assert settings.elasticsearch_password.get_secret_value() == "pw" and settings.log_format == "json"


def test_env_example_lists_every_variable_and_only_real_ones(compose_text: str, env_example: dict[str, str]) -> None:
    used = set(re.findall(r"(?<!\$)\$\{([A-Z_][A-Z0-9_]*)", compose_text))
    assert used <= set(env_example), used - set(env_example)  # every variable the compose file reads
    assert used >= COMPOSE_ONLY
    assert set(env_example) == COMPOSE_ONLY  # compose's own: no container reads deploy/.env (issue 40 row 1)
    assert env_example["CITEBOT_IMAGE"] == f"citebot:{VERSION}"
    for credential in ("ELASTIC_PASSWORD", "CITEBOT_ES_PASSWORD", "CITEBOT_ES_READER_PASSWORD"):
        assert env_example[credential] == "", credential  # no example secret that someone might keep


def test_no_container_reads_the_superusers_password(compose: dict[str, Any]) -> None:
    """Issue 40 row 1: every line of an env_file reaches the container, so deploy/.env (the `elastic` superuser's
    password, compose's own interpolation) is nobody's env_file, and no bot's env_file or environment names it."""
    superuser = {"ELASTIC_PASSWORD"}
    for name, service in compose["services"].items():
        files = service.get("env_file", [])
        files = [files] if isinstance(files, str) else files
        for file in files:
            path = file if isinstance(file, str) else file["path"]
            assert Path(path).name != ".env", (name, path)  # compose's own file: the superuser's password is in it
            if name in BOTS:
                held = set(read_env(f"{path}.example")) | set(service.get("environment", {}))
                assert not held & (superuser | COMPOSE_ONLY - {"CITEBOT_ES_PASSWORD"}), (name, held & superuser)
                assert "ELASTIC_PASSWORD" not in " ".join(map(str, service.get("environment", {}).values()))
    for name in ("es-setup", "elasticsearch"):
        assert "ELASTIC_PASSWORD" in compose["services"][name]["environment"]


def test_each_bot_reads_only_its_own_credentials() -> None:
    """Issue 29 row 17: deploy/citebot.env reaches both bots, so no platform's token is there; each bot's own file
    holds its credentials and no other platform's."""
    shared = read_env("citebot.env.example")
    assert not set(shared) - setting_names(), set(shared) - setting_names()
    assert not {v for v in shared if v.startswith(("SLACK_", "TEAMS_"))}
    slack, teams = read_env("slack.env.example"), read_env("teams.env.example")
    assert set(slack) == {"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET"}
    assert {"TEAMS_APP_ID", "TEAMS_APP_PASSWORD", "TEAMS_APP_TENANT_ID"} <= set(teams)
    assert all(v.startswith("TEAMS_") for v in teams) and set(slack) | set(teams) <= setting_names()
    assert not any(slack.values()) and not (teams["TEAMS_APP_ID"] or teams["TEAMS_APP_PASSWORD"])


def test_the_build_context_leaves_out_secret_files_anywhere() -> None:
    """Issue 29 row 19: `.env` in .dockerignore matches the root only; deploy/.env is where the tokens are."""
    import fnmatch

    patterns = [ln.strip() for ln in (DEPLOY.parent / ".dockerignore").read_text(encoding="utf-8").splitlines()
                if ln.strip() and not ln.startswith("#")]

    def ignored(path: str) -> bool:  # Docker's rule: the last matching pattern wins; `!` re-includes
        result = False
        for pat in patterns:
            negate = pat.startswith("!")
            pat = pat.lstrip("!")
            if fnmatch.fnmatch(path, pat) or (pat.startswith("**/") and fnmatch.fnmatch(path, pat[3:])):
                result = not negate
        return result

    for secret in (".env", "deploy/.env", "deploy/slack.env", "deploy/teams.env", "deploy/.env.local",
                   "deploy/k8s/secret.yaml", "deploy/tls.key"):
        assert ignored(secret), secret
    for secret in ("deploy/citebot.env",):
        assert ignored(secret), secret
    for needed in ("deploy/.env.example", "deploy/citebot.env.example", "deploy/slack.env.example", "bot/cli/main.py",
                   "pyproject.toml"):
        assert not ignored(needed), needed


def test_env_example_loads_as_the_bots_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = (DEPLOY / "citebot.env.example").read_text(encoding="utf-8")
    (tmp_path / ".env").write_text(env, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    settings = Settings()
    assert settings.slack_app_token is None and settings.teams_app_id is None  # blank means unset
    assert settings.elasticsearch_state_prefix == "citebot-state" and settings.ocr_language == "eng"


def test_the_dockerfile_builds_what_compose_and_kubernetes_expect() -> None:
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    stages = re.findall(r"^FROM\s+(\S+)\s+AS\s+(\w+)", text, re.MULTILINE)
    assert [s for _, s in stages] == ["build", "runtime"]
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim", text, re.MULTILINE)
    assert "--index-url https://download.pytorch.org/whl/cpu" in text  # CPU torch, never the CUDA build
    assert "tesseract-ocr" in text and "encode(['offline check'])" in text  # OCR; the model loads offline
    assert "citebot models prepare" in text and "COPY --from=build /opt/citebot-models" in text  # ONNX export inside
    assert re.search(r"^\s+CITEBOT_MODELS_DIR=/opt/citebot-models", text, re.MULTILINE)
    assert re.search(r"^USER 10001:10001$", text, re.MULTILINE)  # non-root (numeric: runAsNonRoot can check it)
    assert re.search(r"^HEALTHCHECK .*\n.*http://127\.0\.0\.1:8080/readyz", text, re.MULTILINE)
    assert re.search(r'^ENTRYPOINT \["citebot"\]$', text, re.MULTILINE)
    assert re.search(r"^EXPOSE 8080$", text, re.MULTILINE)
    ignored = (DEPLOY.parent / ".dockerignore").read_text(encoding="utf-8").split()
    assert {".git", ".venv", "**/.env", ".citebot"} <= set(ignored)
    for copied in re.findall(r"^COPY (?!--from)(\S+)", text, re.MULTILINE):
        assert (DEPLOY.parent / copied).exists(), copied
