"""Issue 40 row 12: SECURITY.md said the LLM "has no tools" (triage gives it five), and it and the Kubernetes
ConfigMap said Teams reads uploads on its answer workers (both bots have CITEBOT_UPLOAD_WORKERS since). The threat
model is checked against the code it describes, so it cannot drift that way again."""

from __future__ import annotations

from pathlib import Path

import bot.slack.server as slack_server
import bot.teams.server as teams_server
from connectors.settings import Settings
from pipelines.triage import TOOLS

ROOT = Path(__file__).resolve().parents[2]
SECURITY = (ROOT / "SECURITY.md").read_text(encoding="utf-8")


def test_the_llms_tools_and_their_bounds_are_named() -> None:
    assert "no tools" not in SECURITY
    for tool in TOOLS:
        assert f"`{tool['function']['name'] if 'function' in tool else tool['name']}`" in SECURITY
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert f"`CITEBOT_LLM_MAX_TOOL_CALLS` ({settings.llm_max_tool_calls})" in SECURITY
    assert f"`CITEBOT_LLM_TOOL_RESULT_CHARS` ({settings.llm_tool_result_chars:,})" in SECURITY


def test_uploads_are_read_on_their_own_workers_on_both_platforms() -> None:
    configmap = (ROOT / "deploy" / "k8s" / "configmap.yaml").read_text(encoding="utf-8")
    for text in (SECURITY, configmap):
        assert "answer pool" not in text and "reads them on its 4 workers" not in text
    assert "Both bots" in SECURITY and "`CITEBOT_UPLOAD_WORKERS`" in SECURITY


def test_the_limits_and_the_rest_of_the_threat_model_match_the_code() -> None:
    assert f"at most {slack_server.MAX_CONNECTIONS} connections at once and " \
           f"{slack_server.MAX_CONNECTIONS_PER_CLIENT} from one" in SECURITY.replace("\n  ", " ")
    assert f"at most {teams_server.MAX_CONNECTIONS} connections open at once" in SECURITY.replace("\n  ", " ")
    default = Settings(_env_file=None).retention_days  # type: ignore[call-arg]
    assert f"`CITEBOT_RETENTION_DAYS` ({default} by default" in SECURITY.replace("\n  ", " ")
    for named in ("`CHILD_ENVIRONMENT`", "`citebot_reader`", "deploy/k8s/networkpolicy.yaml", "`deploy/.env`",
                  "`citebot.env`" if "`citebot.env`" in SECURITY else "`deploy/citebot.env`"):
        assert named in SECURITY, named
