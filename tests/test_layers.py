"""Arrows point down: a module imports only from its own layer and the layers below it (ARCHITECTURE.md).

    connectors  <-  pipelines  <-  bot
                               <-  eval
    bot.cli is the front end over bot and eval, the only module that imports eval; nothing imports it.
    pipelines.reading (it runs in a small child process) imports only itself and connectors.

No private name crosses a class or a module in pipelines/ and bot/: ``engine._run_retrieval(...)`` from another
class, or ``from pipelines.x import _helper``, means the step should be public (:func:`_private_uses`).

And no circles: no module reaches itself again through the modules it imports (STYLE.md: "No import circles, not
even through imports inside functions"). Every import in the source, at the top of a module, inside a function or
under ``if TYPE_CHECKING``, is read with ``ast``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from connectors.platforms import SDK_PACKAGES

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("connectors", "pipelines", "bot", "eval")

# The most specific prefix of the importing module decides; each entry lists the packages (or subpackages)
# it may import besides itself. A longer prefix narrows or widens what its parent allows.
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "connectors": (),
    "pipelines": ("connectors",),
    "bot": ("connectors", "pipelines"),
    "bot.cli": ("connectors", "pipelines", "bot", "eval"),
    "eval": ("connectors", "pipelines"),
    "eval.bench": ("connectors", "pipelines", "eval"),
}
# Within its own package, a module may not import these (stand-ins and the front end are not the product).
NOT_WITHIN: dict[str, tuple[str, ...]] = {
    "bot": ("bot.cli",),
    "eval": ("eval.fakes", "eval.bench"),
}
NOT_WITHIN_EXCEPT = {"bot.cli": ("bot.cli",), "eval.bench": ("eval.fakes", "eval.bench"), "eval.fakes": ("eval.fakes",)}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            out.append((node.lineno, target))
            # ``from eval import sample_pdfs`` imports eval.sample_pdfs
            out += [(node.lineno, f"{target}.{a.name}") for a in node.names if a.name != "*"]
    return out


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _rule(module: str, table: dict[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    keys = [k for k in table if _within(module, k)]
    return table[max(keys, key=len)] if keys else None


def _violation(module: str, target: str) -> str | None:
    top = module.split(".")[0]
    target_top = target.split(".")[0]
    if target_top in SDK_PACKAGES:
        if top in ("connectors", "pipelines"):
            return "connectors and pipelines import no chat SDK"
        if target_top == "microsoft_agents" and not _within(module, "bot.teams"):
            return "the Microsoft 365 Agents SDK stays inside bot/teams"
        return None
    if target_top not in PACKAGES:
        return None
    if target_top == top:
        banned = _rule(module, NOT_WITHIN) or ()
        allowed_here = _rule(module, NOT_WITHIN_EXCEPT) or ()
        for b in banned:
            if _within(target, b) and not any(_within(target, a) for a in allowed_here):
                return f"{b} is not imported from inside {top} (only its own package and the front end use it)"
        return None
    allowed = _rule(module, MAY_IMPORT) or ()
    if any(_within(target, a) or (_within(a, target) and a != target_top) for a in allowed):
        return None
    return f"{module} may import only {', '.join(allowed) or 'its own package'} of Citebot's packages"


def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py"))


def _module_edges() -> dict[str, dict[str, str]]:
    """``{module: {imported module: "path:line"}}`` over Citebot's own modules: an import names the longest of
    them its target starts with (``from connectors.sqlite_store import X`` is ``connectors.sqlite_store``)."""
    paths = {_module_name(p): p for p in _sources()}
    edges: dict[str, dict[str, str]] = {m: {} for m in paths}
    for module, path in paths.items():
        for line, target in _imports(path):
            parts = target.split(".")
            hit = next((".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in paths), None)
            if hit is not None and hit != module:
                edges[module].setdefault(hit, f"{path.relative_to(REPO)}:{line}")
    return edges


def _circles(edges: dict[str, dict[str, str]]) -> list[list[str]]:
    """One circle through each group of modules that reach one another (Tarjan's strongly connected
    components), as the list of its modules with the first repeated at the end."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return [_shortest_circle(edges, group) for group in sorted(groups)]


def _shortest_circle(edges: dict[str, dict[str, str]], group: list[str]) -> list[str]:
    """The shortest way from the group's first module back to itself, staying inside the group."""
    start, members = group[0], set(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges[v]):
                if w not in members or w in came_from:
                    continue
                came_from[w] = v
                if w == start:
                    path = [start]
                    while path[-1] != start or len(path) == 1:
                        path.append(came_from[path[-1]])
                    return path[::-1]
                nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{group} is not a circle")  # pragma: no cover - Tarjan's groups always are


def _describe(edges: dict[str, dict[str, str]], circle: list[str]) -> str:
    steps = [f"  {a} -> {b} ({edges[a][b]})" for a, b in zip(circle, circle[1:], strict=False)]
    return "import circle: " + " -> ".join(circle) + "\n" + "\n".join(steps)


def test_no_import_circles() -> None:
    edges = _module_edges()
    circles = _circles(edges)
    assert not circles, "\n".join(_describe(edges, c) for c in circles)


def test_a_circle_is_found_and_named() -> None:
    edges = {"a": {"b": "a.py:1"}, "b": {"c": "b.py:2"}, "c": {"a": "c.py:3", "d": "c.py:4"}, "d": {}}
    assert _circles(edges) == [["a", "b", "c", "a"]]
    assert _describe(edges, ["a", "b", "c", "a"]).splitlines()[1:] == [
        "  a -> b (a.py:1)", "  b -> c (b.py:2)", "  c -> a (c.py:3)"]
    assert _circles({"a": {"b": "a.py:1"}, "b": {}}) == []


def test_every_package_is_walked() -> None:
    assert len(_sources()) > 50


@pytest.mark.parametrize("pkg", PACKAGES)
def test_imports_point_down(pkg: str) -> None:
    bad = []
    for path in _sources():
        module = _module_name(path)
        if not _within(module, pkg):
            continue
        for line, target in _imports(path):
            why = _violation(module, target)
            if why:
                bad.append(f"{path.relative_to(REPO)}:{line} imports {target}: {why}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    ("module", "target", "ok"),
    [
        ("connectors.sqlite_store", "pipelines.models", False),
        ("connectors.log", "slack_sdk", False),
        ("pipelines.query", "connectors.stores", True),
        ("pipelines.query", "bot.core", False),
        ("bot.core", "eval.metrics", False),
        ("bot.cli.eval_cmds", "eval.runner", True),
        ("bot.slack.app", "bot.cli.main", False),
        ("bot.slack.app", "microsoft_agents.hosting.core", False),
        ("bot.teams.bot", "microsoft_agents.hosting.core", True),
        ("connectors.log", "microsoft_agents.activity", False),
        ("eval.runner", "bot.core", False),
        ("eval.runner", "eval.fakes.openai_api", False),
        ("eval.bench.slack", "bot.core", False),
        ("eval.bench.slack", "bot.cli.main", False),
        ("bot.cli.bench_teams", "bot.teams.server", True),
        ("bot.cli.bench_teams", "eval.fakes.microsoft", True),
        ("eval.bench.slack", "eval.fakes.slack_api", True),
        ("eval.fakes.slack_api", "bot.core", False),
    ],
)
def test_the_rule_itself(module: str, target: str, ok: bool) -> None:
    assert (_violation(module, target) is None) is ok


def _importers_of(pkg: str) -> list[str]:
    """Every ``path:line imports target`` in the source whose target is in ``pkg``, from outside ``pkg``."""
    out = []
    for path in _sources():
        module = _module_name(path)
        if _within(module, pkg):
            continue
        out += [f"{path.relative_to(REPO)}:{line} imports {target}"
                for line, target in _imports(path) if _within(target, pkg)]
    return out


def test_only_the_front_end_imports_eval() -> None:
    """The command line is the top: it imports eval (and the bots); nothing in bot below it does, and nothing in
    eval imports bot (a benchmark that drives a bot lives in bot/cli/, e.g. ``bench_teams.py``)."""
    assert not [i for i in _importers_of("eval") if not i.startswith("bot/cli/")], _importers_of("eval")
    from_eval = [i for i in _importers_of("bot") if i.startswith("eval/")]
    assert not from_eval, "\n".join(from_eval)


def test_reading_is_a_leaf() -> None:
    """pipelines/reading runs in a child process that must not load Haystack or the components: it imports
    its own modules and connectors only (the page model and text cleaning it produces are its own)."""
    bad = []
    for path in sorted((REPO / "pipelines" / "reading").rglob("*.py")):
        for line, target in _imports(path):
            if target.split(".")[0] in PACKAGES and not (
                _within(target, "pipelines.reading") or _within(target, "connectors")
            ):
                bad.append(f"{path.relative_to(REPO)}:{line} imports {target}")
            elif target.split(".")[0] == "haystack":
                bad.append(f"{path.relative_to(REPO)}:{line} imports {target} (Haystack loads torch)")
    assert not bad, "\n".join(bad)


# Private names of other libraries that have no public equivalent, and why (a Citebot name never goes here: make it
# public instead).
FOREIGN_PRIVATE = {
    ("pipelines/reading/guard.py", "_data"): "pypdf's stream objects expose their raw bytes no other way",
    ("pipelines/reading/isolation.py", "_exit"): "os._exit is how a forked child ends without running atexit",
    ("bot/cli/main.py", "_actions"): "argparse offers no public walk of its subparsers",
    ("bot/cli/main.py", "_SubParsersAction"): "argparse offers no public walk of its subparsers",
}
_PRIVATE = re.compile(r"^_[^_]")


def _own_names(cls: ast.ClassDef) -> set[str]:
    """The private names a class defines: its methods and what it assigns on ``self``."""
    names = {n.name for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
    return names


def _private_uses(path: Path) -> list[str]:
    """``x._name`` where ``x`` is not ``self``, ``cls`` or ``super()`` and the enclosing class does not define
    ``_name`` itself; and ``from <Citebot module> import _name``."""
    rel = path.relative_to(REPO).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[str] = []

    def walk(node: ast.AST, own: set[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                walk(child, _own_names(child))
                continue
            if isinstance(child, ast.Attribute) and _PRIVATE.match(child.attr):
                v = child.value
                mine = (isinstance(v, ast.Name) and v.id in ("self", "cls")) or (
                    isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super")
                if not mine and child.attr not in own and (rel, child.attr) not in FOREIGN_PRIVATE:
                    out.append(f"{rel}:{child.lineno} uses {ast.unparse(child)}")
            if isinstance(child, ast.ImportFrom) and (child.module or "").split(".")[0] in PACKAGES:
                out.extend(f"{rel}:{child.lineno} imports {a.name} from {child.module}"
                           for a in child.names if _PRIVATE.match(a.name))
            walk(child, own)

    walk(tree, set())
    return out


@pytest.mark.parametrize("pkg", ["pipelines", "bot"])
def test_no_private_name_crosses_a_class(pkg: str) -> None:
    """A step another class needs is public: three places once decided how a question is answered through
    each other's private methods, each call silenced with ``# noqa: SLF001``."""
    bad = [use for path in sorted((REPO / pkg).rglob("*.py")) for use in _private_uses(path)]
    assert not bad, "\n".join(bad)


def test_a_private_call_across_classes_is_found(tmp_path: Path) -> None:
    src = REPO / "pipelines" / "_probe_private.py"
    src.write_text("class A:\n    def __init__(self, b):\n        self._mine = 1\n        b._steal()\n"
                   "        self._mine += other._mine if (other := self) else 0\n"
                   "from pipelines.query import _in_scope\n", encoding="utf-8")
    try:
        found = _private_uses(src)
    finally:
        src.unlink()
    assert found == ["pipelines/_probe_private.py:4 uses b._steal",
                     "pipelines/_probe_private.py:6 imports _in_scope from pipelines.query"]


def test_loggers_are_named_after_their_module() -> None:
    """Loggers come from ``get_logger(__name__)`` (STYLE.md), never a name typed by hand: 35 hand-typed names in two
    schemes had drifted ("citebot.slack", "connectors.sqlite_store", a module borrowing another's)."""
    bad = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = getattr(node.func, "id", getattr(node.func, "attr", "")) if isinstance(node, ast.Call) else ""
            if name not in ("get_logger", "getLogger") or not node.args or not isinstance(node.args[0], ast.Constant):
                continue
            typed = str(node.args[0].value)
            # logging.getLogger("pypdf") quietens a library's logger; a name of our own is typed by hand
            if name == "get_logger" or typed.split(".")[0] in (*PACKAGES, "citebot"):
                bad.append(f"{path.relative_to(REPO)}:{node.lineno} {name}({typed!r})")
    assert not bad, "\n".join(bad)


def test_every_component_run_says_its_params_and_returns() -> None:
    """STYLE.md: a Haystack component's ``run`` has ``:param:`` and ``:returns:`` in its docstring, as haystack's
    own ``document_joiner.py`` has (issue 42 item 5: only score_fusion had them)."""
    bad = []
    for path in _sources():
        for cls in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(cls, ast.ClassDef) or not any(ast.unparse(d) == "component" for d in cls.decorator_list):
                continue
            for fn in cls.body:
                if not isinstance(fn, ast.FunctionDef) or fn.name != "run":
                    continue
                doc = ast.get_docstring(fn) or ""
                if not (":param " in doc and ":returns:" in doc):
                    bad.append(f"{path.relative_to(REPO)}:{fn.lineno} {cls.name}.run")
    assert not bad, "\n".join(bad)
