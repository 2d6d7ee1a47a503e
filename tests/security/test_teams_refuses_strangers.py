"""Defect 2 of the security review: the Teams endpoint is never unauthenticated by accident.

Before the fix, with ``TEAMS_APP_ID`` unset (or only ``TEAMS_APP_PASSWORD``, or Bot Framework's own variable
names) the server accepted unsigned activities naming any tenant and posted the answer, quoting that tenant's
PDFs, to the caller's ``serviceUrl``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from bot.cli.main import main
from bot.core import ChatCore
from bot.teams.server import TeamsConfigError, build_app
from connectors.settings import load_settings
from eval.fakes.microsoft import AppThread, FakeMicrosoft

APP_ID = "0b7f9a3c-1d2e-4f50-8a6b-9c0d1e2f3a4b"


def _unsigned_message(service_url: str) -> dict[str, object]:
    return {
        "type": "message", "id": "1", "channelId": "msteams", "serviceUrl": service_url,
        "from": {"id": "29:mallory"}, "recipient": {"id": f"28:{APP_ID}"},
        "conversation": {"id": "19:victim-channel@thread.tacv2", "conversationType": "channel",
                         "tenantId": "victim-tenant"},
        "channelData": {"tenant": {"id": "victim-tenant"}, "channel": {"id": "19:victim-channel@thread.tacv2"}},
        "text": "<at>Citebot</at> what is the budget?",
    }


def test_serve_teams_refuses_to_start_without_credentials(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "teams", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "TEAMS_APP_ID" in err and "--insecure-local" in err


def test_insecure_local_only_binds_to_loopback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "teams", "--insecure-local", "--host", "0.0.0.0", "--port", "0"]) == 2  # noqa: S104
    assert "loopback" in capsys.readouterr().err


@pytest.mark.parametrize("password_var", ["TEAMS_APP_PASSWORD", "MicrosoftAppPassword"])
def test_a_password_without_an_app_id_is_an_error_naming_both(
    password_var: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(password_var, "s3cret")
    assert main(["serve", "teams", "--insecure-local", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "TEAMS_APP_PASSWORD" in err and "TEAMS_APP_ID" in err
    assert "s3cret" not in err


def test_the_app_cannot_be_built_unauthenticated_by_accident(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    with pytest.raises(TeamsConfigError, match="TEAMS_APP_ID"):
        build_app(settings, ChatCore.from_settings(settings))


def test_bot_framework_variable_names_configure_authentication(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With MicrosoftAppId / MicrosoftAppPassword set, an unsigned activity naming another tenant gets 401
    and nothing is posted to the serviceUrl it names."""
    monkeypatch.setenv("MicrosoftAppId", APP_ID)
    monkeypatch.setenv("MicrosoftAppPassword", "fake-app-password")
    monkeypatch.setenv("MicrosoftAppTenantId", "home-tenant")
    settings = load_settings(data_dir=tmp_path)
    assert settings.teams_app_id == APP_ID and settings.teams_app_tenant_id == "home-tenant"
    with FakeMicrosoft() as fake, AppThread(build_app(settings, ChatCore.from_settings(settings))) as app:
        resp = requests.post(f"{app.url}/api/messages", json=_unsigned_message(fake.service_url), timeout=30)
        health = requests.get(f"{app.url}/healthz", timeout=10).json()
    assert resp.status_code == 401
    assert fake.calls == []
    assert health["authenticated"] is True
