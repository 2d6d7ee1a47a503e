"""The package installs anywhere: a wheel built from the sources, installed into a fresh venv outside the
checkout, runs ``citebot demo``, ``citebot teams package`` and ``citebot eval run --limit 5`` from an empty
temporary directory. Templates, eval sets and gates must therefore be package data.

Offline and quick: the wheel is built without build isolation (setuptools comes with the test extra) and
installed with ``--no-deps --no-index``; the fresh venv sees the running environment's dependencies through a
``.pth`` line (that directory's own ``.pth`` files, such as an editable install of this checkout, are not run),
and the test checks that ``citebot`` is imported from the new venv, not from the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "bot", "pipelines", "connectors", "eval")
APP_ID = "00000000-0000-4000-8000-00000000c17e"

pytestmark = pytest.mark.slow


def run(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{cmd} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv under a temporary directory with only the built wheel installed into it; returns its bin/."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "runs", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(root / "dist"),
         str(src)], cwd=root, env=env)
    [wheel] = (root / "dist").glob("citebot-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"eval/sets/demo.jsonl", "eval/gates.toml", "bot/teams/manifest.json"} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)

    venv = root / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    run([base, "-m", "venv", "--without-pip", str(venv)], cwd=root, env=env)
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = Path(run([str(venv / "bin" / "python"), "-c", where], cwd=root, env=env).stdout.strip())
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (purelib / "zz_citebot_test_deps.pth").write_text("\n".join(sorted(deps)) + "\n", encoding="utf-8")
    run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-deps", "--no-index",
         str(wheel)], cwd=root, env=env)
    return venv / "bin"


@pytest.fixture
def elsewhere(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """An empty working directory and an environment without this checkout or any Citebot settings in it."""
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith(("CITEBOT_", "SLACK_", "TEAMS_", "OPENAI_"))}
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HAYSTACK_TELEMETRY_ENABLED": "False",
            "HOME": str(tmp_path)}
    return cwd, env


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: Path, elsewhere: tuple[Path, dict]) -> None:
    cwd, env = elsewhere
    out = run([str(installed / "python"), "-c", "import bot, eval, connectors; print(bot.__file__, eval.__file__)"],
              cwd=cwd, env=env).stdout
    assert str(installed.parent) in out and str(REPO) not in out
    version = run([str(installed / "citebot"), "--version"], cwd=cwd, env=env).stdout
    assert version.strip() == "citebot 0.1.0"


def test_demo_indexes_the_samples_and_answers_with_quotes(installed: Path, elsewhere: tuple[Path, dict]) -> None:
    cwd, env = elsewhere
    out = run([str(installed / "citebot"), "demo"], cwd=cwd, env=env).stdout
    assert out.count("✓ ") >= 2 and "Q: " in out and "answered" in out and "refused" in out, out
    assert (cwd / ".citebot" / "chunks.sqlite3").is_file()


def test_teams_package_builds_the_app_zip(installed: Path, elsewhere: tuple[Path, dict]) -> None:
    cwd, env = elsewhere
    run([str(installed / "citebot"), "teams", "package", "--out", "citebot-teams.zip"], cwd=cwd,
        env=env | {"TEAMS_APP_ID": APP_ID})
    with zipfile.ZipFile(cwd / "citebot-teams.zip") as zf:
        assert set(zf.namelist()) == {"manifest.json", "color.png", "outline.png"}
        manifest = json.loads(zf.read("manifest.json"))
    assert manifest["id"] == APP_ID


def test_eval_run_uses_the_shipped_set_and_gates(installed: Path, elsewhere: tuple[Path, dict]) -> None:
    cwd, env = elsewhere
    out = run([str(installed / "citebot"), "eval", "run", "--limit", "5"], cwd=cwd, env=env).stdout
    assert "Run directory:" in out
    [run_dir] = (cwd / ".citebot" / "eval" / "runs").iterdir()
    assert any(run_dir.iterdir())
    # the report's templates and the shipped gates come from the installed package
    run([str(installed / "citebot"), "eval", "report", str(run_dir)], cwd=cwd, env=env)
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert 'id="verdict"' in page and "floor citation_validity" in page and "<svg" in page


def test_quality_report_renders_from_the_installed_templates(installed: Path, elsewhere: tuple[Path, dict]) -> None:
    cwd, env = elsewhere
    out = run([str(installed / "citebot"), "quality", "--check"], cwd=cwd, env=env).stdout
    assert "NOT ENOUGH DATA" in out  # a fresh data directory: nothing to judge, and no alarm
    assert 'id="verdict"' in (cwd / ".citebot" / "quality" / "quality.html").read_text(encoding="utf-8")
