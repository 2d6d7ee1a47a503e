"""The hashed locks (deploy/requirements.lock for the image, deploy/requirements-test.lock for setup.sh and CI)
cannot go stale against pyproject.toml, and nothing installs around them: every dependency pyproject.toml names
is pinned there with its hashes, at a version its range allows, with its own dependencies (torch's included,
since torch is installed alone) locked too; torch and the CUDA packages stay out (torch's CPU build comes first,
from whichever index set-up uses); and every ``pip install`` in setup.sh and the Dockerfile either reads a lock
with ``--require-hashes`` or resolves nothing (``--no-deps``). A failure here means: ``bash deploy/lock.sh``.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker, default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
REFRESH = "bash deploy/lock.sh"
# Linux and macOS on the Pythons pyproject.toml allows: a pin for each must exist where a dependency applies
PYTHONS = ("3.11", "3.12", "3.13")


@dataclass
class Pin:
    version: Version
    marker: str
    hashes: list[str] = field(default_factory=list)


def read_lock(name: str) -> dict[str, list[Pin]]:
    """A lock file as package name -> its pins (several where markers split it, e.g. by Python version)."""
    pins: dict[str, list[Pin]] = {}
    current: Pin | None = None
    for line in (DEPLOY / name).read_text(encoding="utf-8").splitlines():
        entry = line.split("#", 1)[0].strip().removesuffix("\\").strip()
        if not entry:
            continue
        if entry.startswith("--hash="):
            assert current is not None, f"{name}: a hash before any package"
            current.hashes.append(entry.removeprefix("--hash="))
            continue
        req = Requirement(entry)
        (spec,) = req.specifier  # exactly one `==` pin
        assert spec.operator == "==", f"{name}: {entry} is not pinned"
        current = Pin(Version(spec.version), str(req.marker or ""))
        pins.setdefault(canonicalize_name(req.name), []).append(current)
    return pins


def environments() -> list[dict[str, str]]:
    envs = []
    for python in PYTHONS:
        for system, platform in (("Linux", "linux"), ("Darwin", "darwin")):
            env = default_environment()
            env.update(python_version=python, python_full_version=f"{python}.0", platform_system=system,
                       sys_platform=platform, platform_machine="x86_64", implementation_name="cpython",
                       platform_python_implementation="CPython")
            envs.append(env)
    return envs


def pinned_for(pins: dict[str, list[Pin]], name: str, env: dict[str, str]) -> list[Pin]:
    return [p for p in pins.get(canonicalize_name(name), []) if not p.marker or Marker(p.marker).evaluate(env)]


def project_requirements(*extras: str) -> list[Requirement]:
    reqs = [Requirement(r) for r in PROJECT["dependencies"]]
    for extra in extras:
        reqs += [Requirement(r) for r in PROJECT["optional-dependencies"][extra]]
    return [r for r in reqs if r.name != "torch"]


LOCKS = {"requirements.lock": (), "requirements-test.lock": ("test",)}


@pytest.mark.parametrize(("lock", "extras"), LOCKS.items())
def test_every_dependency_of_pyproject_is_pinned_with_hashes_at_an_allowed_version(
    lock: str, extras: tuple[str, ...]
) -> None:
    pins = read_lock(lock)
    for pin_list in pins.values():
        for pin in pin_list:
            assert pin.hashes and all(h.startswith("sha256:") for h in pin.hashes), pin
    for env in environments():
        for req in project_requirements(*extras):
            if req.marker and not req.marker.evaluate(env):
                continue
            found = pinned_for(pins, req.name, env)
            assert len(found) == 1, f"{lock}: {req.name} has {len(found)} pins for Python {env['python_version']} "
            assert req.specifier.contains(found[0].version, prereleases=True), (
                f"{lock} pins {req.name}=={found[0].version}, outside pyproject's {req}: run {REFRESH}"
            )


def test_the_image_lock_holds_no_test_tool_and_the_test_lock_agrees_with_it() -> None:
    image, test = read_lock("requirements.lock"), read_lock("requirements-test.lock")
    for tool in ("pytest", "ruff", "mypy", "kubernetes-validate"):
        assert tool not in image and tool in test
    for name, pin_list in image.items():
        assert [(p.version, p.marker) for p in test.get(name, [])] == [(p.version, p.marker) for p in pin_list], name


@pytest.mark.parametrize("lock", LOCKS)
def test_torch_and_cuda_stay_out_and_torchs_own_dependencies_are_locked(lock: str) -> None:
    pins = read_lock(lock)
    assert not [n for n in pins if n in {"torch", "triton"} or n.startswith("nvidia-")]
    # torch is installed alone (--no-deps): what its CPU build needs must come from the lock
    torch_requires = [Requirement(r) for r in metadata.requires("torch") or []]
    env = default_environment()
    for req in torch_requires:
        if req.marker and not req.marker.evaluate({**env, "extra": ""}):
            continue
        assert pinned_for(pins, req.name, env), f"{lock}: torch needs {req}"


@pytest.mark.parametrize("lock", LOCKS)
def test_each_locked_package_finds_its_own_dependencies_in_the_lock(lock: str) -> None:
    """Checked through the metadata of the packages installed here, where their version is the locked one
    (setup.sh installs exactly those); extras asked for in pyproject.toml (``pypdf[crypto]``) count too."""
    pins = read_lock(lock)
    env = default_environment()
    wanted = [(name, "") for name in pins if pinned_for(pins, name, env)]
    wanted += [(r.name, extra) for r in project_requirements(*LOCKS[lock]) for extra in r.extras]
    checked = 0
    for name, extra in wanted:
        (pin,) = pinned_for(pins, name, env)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if Version(dist.version) != pin.version:
            continue
        checked += 1
        for req in (Requirement(r) for r in dist.requires or []):
            if req.marker and not req.marker.evaluate({**env, "extra": extra}):
                continue
            if extra and not (req.marker and "extra" in str(req.marker)):
                continue  # the extra's own requirements; the plain ones are checked above
            if canonicalize_name(req.name) == "torch":
                continue  # installed first, alone
            assert pinned_for(pins, req.name, env), f"{lock}: {name}{f'[{extra}]' if extra else ''} needs {req}"
    if checked < len(pins) // 2:
        pytest.skip(f"only {checked} of {len(pins)} locked packages are installed here at the locked version")


def pip_installs(text: str) -> list[str]:
    """Each `pip install` command of a shell script or Dockerfile, continuation lines joined."""
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    joined = re.sub(r"\\\n\s*", " ", code)
    return [m.group(0) for m in re.finditer(r"(?:pip|\"\$\{pip\[@\]\}\"|-m pip) install[^\n&|;]*", joined)]


def test_setup_and_the_image_install_every_package_but_torch_from_the_lock() -> None:
    setup = (DEPLOY / "setup.sh").read_text(encoding="utf-8")
    docker = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^lock=deploy/requirements-test\.lock$", setup, re.MULTILINE)
    assert 'cat pyproject.toml "$lock" | sha256sum' in setup  # a changed lock re-installs
    assert "COPY deploy/requirements.lock ./deploy/" in docker
    for text, lock in ((setup, '"$lock"'), (docker, "deploy/requirements.lock")):
        installs = pip_installs(text)
        assert any(f"--require-hashes --no-deps -r {lock}" in c for c in installs), installs
        for command in installs:
            # pip itself, or nothing resolved: torch alone, the lock, Citebot itself
            assert "--upgrade pip" in command or "--no-deps" in command, command
        assert "pip check" in text  # a lock that misses a dependency fails the install
    # the locks hold the dependencies of this torch release (deploy/lock.sh reads it from setup.sh)
    (torch,) = re.findall(r"^TORCH_VERSION=(\S+)$", setup, re.MULTILINE)
    assert re.search(rf"^ARG TORCH_VERSION={re.escape(torch)}$", docker, re.MULTILINE)


@pytest.mark.parametrize("lock", LOCKS)
def test_the_lock_says_how_it_is_refreshed_and_the_command_exists(lock: str) -> None:
    head = (DEPLOY / lock).read_text(encoding="utf-8").splitlines()[:3]
    assert any(REFRESH in line for line in head), head
    script = (DEPLOY / "lock.sh").read_text(encoding="utf-8")
    assert f"deploy/{lock}" in script and "--generate-hashes" in script and "--no-emit-package torch" in script
