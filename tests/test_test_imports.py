"""Test code shared between test modules lives in ``tests/helpers``: no test module (nor a conftest, nor a helper)
imports another test module, so moving or deleting one test never breaks another."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _test_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import of a ``tests.`` module in ``path``, at the top or inside a function."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "tests"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tests":
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names if node.module == "tests"]
        elif isinstance(node, ast.ImportFrom) and node.level:
            found.append((node.lineno, "." * node.level + (node.module or "")))  # relative: not allowed either
    return found


def test_tests_import_only_tests_helpers() -> None:
    wrong = [
        f"{path.relative_to(TESTS.parent)}:{line} imports {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, module in _test_imports(path)
        if not (module == "tests.helpers" or module.startswith("tests.helpers."))
    ]
    assert wrong == [], "\n".join(wrong)
