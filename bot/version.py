"""Citebot's version, as the CLI prints it and the health endpoints report it."""

from __future__ import annotations


def version() -> str:
    """The installed package's version (the source tree's pyproject when it is not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("citebot")
    except PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"])
