"""ARCHITECTURE.md's "Where to add…": the registries of answer kinds, retrieval modes, chat platforms and document
stores agree with each other, so adding one in one place and forgetting another fails here, naming the place."""

from __future__ import annotations

import argparse
import ast
import inspect
from pathlib import Path
from typing import Any, get_args

import pytest

from bot.cli.main import build_parser
from bot.core import ClaimKey, Platform
from connectors import metrics
from connectors.platforms import CHAT_SDKS
from connectors.scoped_retrievers import ScopedBM25Retriever, ScopedEmbeddingRetriever
from connectors.settings import Settings
from connectors.store_api import ChunkStore
from connectors.stores import STORES, open_store
from eval.records import FUSION_MODES, MODES
from pipelines import models
from pipelines.answerer import Answerer
from pipelines.models import AnswerKind, RetrievalMode
from pipelines.query import build_query_pipeline
from pipelines.questions.kinds import QuestionKind, classify
from pipelines.questions.steps import Steps
from tests.helpers.stores import STORE_KINDS

REPO = Path(__file__).resolve().parents[1]


def _choices(*path: str) -> list[str]:
    """The ``choices`` of the option ``path[-1]`` of the subcommand ``citebot path[:-1]``."""
    parser: argparse.ArgumentParser = build_parser()
    for name in path[:-1]:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    option = next(a for a in parser._actions if path[-1] in a.option_strings)
    return list(option.choices or [])


def _subcommands(*path: str) -> set[str]:
    parser: argparse.ArgumentParser = build_parser()
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


# --- an answer kind ---------------------------------------------------------------------------------


def _order_kinds() -> list[QuestionKind]:
    answerer = Answerer.__new__(Answerer)  # order() only names the handlers; nothing is built or run
    answerer.steps = Steps.__new__(Steps)
    return [kind for kind, _ in answerer.order()]


def test_every_question_kind_is_ordered_once() -> None:
    order = _order_kinds()
    twice = sorted({k.value for k in order if order.count(k) > 1})
    assert not twice, f"pipelines/answerer.py Answerer.order lists {twice} more than once"
    missing = sorted(k.value for k in QuestionKind if k not in order)
    assert not missing, f"QuestionKind {missing} has no place in pipelines/answerer.py Answerer.order"
    assert order[-1] is QuestionKind.LOOKUP, "the look-up answers every question: it is last in Answerer.order"


def test_classify_can_say_every_question_kind() -> None:
    """``classify`` is what lets a kind's handler run: a member it never returns is a handler never tried
    (``TOOLS`` is added to every question by ``Answerer.parse``)."""
    source = inspect.getsource(classify)
    said = {node.attr for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "QuestionKind"}
    missing = sorted(k.value for k in QuestionKind if k.name not in said and k is not QuestionKind.TOOLS)
    assert not missing, f"pipelines/questions/kinds.py classify never returns QuestionKind {missing}"


def _answer_kinds_given() -> dict[str, str]:
    """Every ``Answer.kind`` a handler gives as a literal: ``Steps.finish(draft, "kind")``,
    ``Steps.written(…, "kind")``, ``Answer(kind="kind")``; ``{kind: "file:line"}``."""
    position = {name: list(inspect.signature(getattr(Steps, name)).parameters).index("kind") - 1
                for name in ("finish", "written")}
    out: dict[str, str] = {}
    for path in sorted((REPO / "pipelines").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            given: list[ast.expr] = [kw.value for kw in node.keywords if kw.arg == "kind"] if name == "Answer" else []
            if name in position:
                given += [kw.value for kw in node.keywords if kw.arg == "kind"]
                if len(node.args) > position[name]:
                    given.append(node.args[position[name]])
            for value in given:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    out.setdefault(value.value, f"{path.relative_to(REPO)}:{node.lineno}")
    return out


def test_every_answer_kind_given_is_in_the_literal_and_each_is_given() -> None:
    declared = set(get_args(AnswerKind))
    given = _answer_kinds_given()
    unknown = {kind: where for kind, where in given.items() if kind not in declared}
    assert not unknown, f"add {sorted(unknown)} to pipelines/models.py AnswerKind (given at {unknown})"
    assert "answer" in declared, "'answer' (the look-up, Answer.kind's default) is an AnswerKind"
    unused = sorted(declared - set(given) - {"answer"})
    assert not unused, f"pipelines/models.py AnswerKind lists {unused}, which no handler in pipelines/ gives"


# --- a retrieval mode -------------------------------------------------------------------------------


def test_every_retrieval_mode_runs_a_retriever_and_is_an_eval_and_ask_mode() -> None:
    idle = [m.value for m in RetrievalMode if not (m.dense or m.bm25)]
    assert not idle, f"RetrievalMode {idle} runs no retriever: say which in its dense / bm25 properties"
    product = [m.value for m in RetrievalMode]
    assert not set(product) - set(MODES), "eval/records.py MODES lacks a RetrievalMode"
    eval_choices = _choices("eval", "run", "--mode")
    assert eval_choices == [*MODES, "all"], "citebot eval run --mode takes eval/records.py MODES and all"
    assert _choices("ask", "--mode") == product, "citebot ask --mode takes each RetrievalMode"
    fusions = get_args(Settings.model_fields["fusion"].annotation)
    assert sorted(FUSION_MODES.values()) == sorted(fusions), "an eval mode per CITEBOT_FUSION fusion"


@pytest.mark.parametrize("mode", list(RetrievalMode))
def test_the_query_pipeline_is_built_for_every_retrieval_mode(mode: RetrievalMode, tmp_path: Path) -> None:
    store = open_store(Settings(data_dir=tmp_path))
    try:
        pipe = build_query_pipeline(Settings(data_dir=tmp_path), store, mode)
    finally:
        store.close()  # type: ignore[attr-defined]
    runs = {name for name in ("dense", "bm25") if name in dict(pipe.graph.nodes)}
    assert runs == {name for name in ("dense", "bm25") if getattr(mode, name)}, (
        f"pipelines/query.py build_query_pipeline runs {sorted(runs)} for {mode.value!r}")


# --- a chat platform --------------------------------------------------------------------------------


@pytest.mark.parametrize("platform", get_args(Platform))
def test_every_platform_has_each_of_its_places(platform: str) -> None:
    assert platform in CHAT_SDKS, f"add {platform!r} to connectors/platforms.py CHAT_SDKS (metrics, logs, layers)"
    assert platform in metrics.PLATFORMS, f"connectors/metrics.py PLATFORMS lacks {platform!r}"
    assert callable(getattr(models, f"{platform}_scope", None)), (
        f"pipelines/models.py has no {platform}_scope(...): the scope its channels' documents are kept under")
    factories = [name for name, _ in inspect.getmembers(ClaimKey, inspect.ismethod) if name.startswith(f"{platform}_")]
    assert factories, f"bot/core.py ClaimKey has no {platform}_… factory: the work journal's key of its deliveries"
    folder = REPO / "bot" / platform
    assert (folder / "__init__.py").exists(), f"bot/{platform}/ (its adapter) is missing"
    assert platform in _subcommands("serve"), f"bot/cli/serve_cmds.py has no `citebot serve {platform}`"
    sdks = set(CHAT_SDKS[platform])
    imported = {alias.name.split(".")[0] for path in folder.rglob("*.py")
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                for alias in ([*node.names] if isinstance(node, ast.Import) else [])}
    imported |= {(node.module or "").split(".")[0] for path in folder.rglob("*.py")
                 for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.ImportFrom) and not node.level}
    assert not sdks or sdks & imported, (
        f"connectors/platforms.py CHAT_SDKS[{platform!r}] names {sorted(sdks)}, which bot/{platform}/ never imports")


def test_every_registered_platform_is_in_the_platform_literal() -> None:
    extra = sorted(set(CHAT_SDKS) - set(get_args(Platform)))
    assert not extra, f"connectors/platforms.py CHAT_SDKS has {extra}; add it to bot/core.py Platform too"


# --- a document store -------------------------------------------------------------------------------


def _protocol_members(protocol: type[Any]) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")}


@pytest.mark.parametrize("store_class", list(STORES), ids=lambda c: c.__name__)
def test_every_store_implements_the_contract_and_has_scoped_retrievers(store_class: type[Any]) -> None:
    missing = sorted(name for name in _protocol_members(ChunkStore) if not hasattr(store_class, name))
    assert not missing, f"{store_class.__name__} lacks ChunkStore's {missing} (connectors/store_api.py)"
    bm25, dense = STORES[store_class]
    assert issubclass(bm25, ScopedBM25Retriever), f"{bm25.__name__} subclasses ScopedBM25Retriever"
    assert issubclass(dense, ScopedEmbeddingRetriever), f"{dense.__name__} subclasses ScopedEmbeddingRetriever"
    assert callable(getattr(store_class, "from_dict", None)), f"{store_class.__name__}.from_dict (saved pipelines)"


def test_the_store_contract_runs_against_every_store() -> None:
    assert len(STORE_KINDS) == len(STORES), (
        "tests/helpers/stores.py STORE_KINDS (and store_settings) name a kind per connectors/stores.py STORES entry, "
        "so tests/connectors/test_store_contract.py runs against each")
