from __future__ import annotations

from pathlib import Path

import pytest

from connectors.settings import Settings, SettingsError, load_settings


def test_defaults_need_no_server_and_no_key(tmp_path: Path) -> None:
    s = load_settings()
    assert s.elasticsearch_url is None
    assert not s.llm_configured
    assert s.resolved_model_path.joinpath("modules.json").exists()
    assert s.sqlite_path.parent == s.data_dir


def test_vendor_variable_names_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-123")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("TEAMS_APP_ID", "app-1")
    s = load_settings()
    assert s.slack_bot_token is not None and s.slack_bot_token.get_secret_value() == "xoxb-123"
    assert s.llm_configured
    assert s.teams_app_id == "app-1"
    assert "xoxb-123" not in repr(s)  # secrets never show up in a repr or a log line


def test_dotenv_file_is_read(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("CITEBOT_RETRIEVAL_TOP_K=7\n")
    assert load_settings().retrieval_top_k == 7


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("CITEBOT_RETRIEVAL_TOP_K", "zero"),
        ("CITEBOT_CHUNK_MAX_TOKENS", "5000"),
        ("CITEBOT_ELASTICSEARCH_URL", "localhost:9200"),
        ("TEAMS_APP_TYPE", "Everyone"),
    ],
)
def test_invalid_settings_fail_naming_the_variable(monkeypatch: pytest.MonkeyPatch, var: str, value: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(SettingsError) as e:
        load_settings()
    assert var in str(e.value) or "ELASTICSEARCH_URL" in str(e.value)


def test_cli_reports_bad_settings_without_traceback(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from bot.cli.main import main

    monkeypatch.setenv("CITEBOT_MAX_PAGES", "-3")
    assert main(["docs"]) == 2
    assert "CITEBOT_MAX_PAGES" in capsys.readouterr().err


def test_env_example_lists_every_setting_and_loads_when_uncommented(tmp_path: Path) -> None:
    """`.env.example` is what an admin copies: it must name every setting, nothing that is not one, and work as
    a .env file with every line uncommented."""
    import re

    from connectors.settings import Settings, _env_name

    example = (Path(__file__).resolve().parents[2] / ".env.example").read_text(encoding="utf-8")
    lines = [m.group(1) for m in re.finditer(r"^# ([A-Z][A-Z0-9_]+=\S*)", example, re.MULTILINE)]
    names = [line.split("=", 1)[0] for line in lines]
    assert sorted(set(names)) == sorted(_env_name(f) for f in Settings.model_fields)
    (tmp_path / ".env").write_text("\n".join(line for line in lines if not line.endswith("=")) + "\n")
    settings = load_settings()
    assert settings.ocr_language == "eng" and settings.log_level == "info" and settings.slack_workers == 4


def test_empty_variables_count_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compose passes `SLACK_APP_TOKEN=` from an env file as an empty variable: it must not turn on Socket Mode,
    an LLM endpoint or a Teams password without an app id."""
    for var in ("SLACK_APP_TOKEN", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TEAMS_APP_PASSWORD", "TEAMS_APP_ID",
                "CITEBOT_ELASTICSEARCH_URL"):
        monkeypatch.setenv(var, "")
    settings = load_settings()
    assert settings.slack_app_token is None and settings.teams_app_password is None
    assert not settings.llm_configured and settings.elasticsearch_url is None


@pytest.mark.parametrize("value", ["eng,deu", "eng+", "de-DE", "eng deu"])
def test_an_ocr_language_that_is_no_tesseract_code_names_the_variable(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CITEBOT_OCR_LANGUAGE", value)
    with pytest.raises(SettingsError, match=r"CITEBOT_OCR_LANGUAGE: .*eng\+deu"):
        load_settings()


@pytest.mark.parametrize("value", ["eng", "eng+deu", "chi_sim"])
def test_tesseract_language_codes_are_accepted(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITEBOT_OCR_LANGUAGE", value)
    assert load_settings().ocr_language == value


def test_the_model_is_prepared_once_per_machine_in_the_users_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CITEBOT_MODELS_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    one, two = (Settings(_env_file=None, data_dir=tmp_path / d) for d in ("one", "two"))  # type: ignore[call-arg]
    assert one.resolved_models_dir == two.resolved_models_dir == tmp_path / "xdg" / "citebot" / "models"
    assert one.embedding_args()["models_dir"] == str(tmp_path / "xdg" / "citebot" / "models")

    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG spec: ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert Settings(_env_file=None).resolved_models_dir == tmp_path / "home" / ".cache" / "citebot" / "models"

    monkeypatch.setenv("CITEBOT_MODELS_DIR", str(tmp_path / "models"))  # a configured path wins (CI, the image)
    assert Settings(_env_file=None).resolved_models_dir == tmp_path / "models"
