"""Arithmetic over quoted figures, small enough to check by eye and to recompute before anyone sees it.

A metric's formula is written over line items (:data:`pipelines.components.statements.FORMULAS`):
``"{revenue} / avg({net PP&E})"``: ``{item}`` is the item's figure in the year asked, ``prev({item})`` the year
before's, ``avg({item})`` the mean of the two. :func:`instantiate` turns it, for a year, into a concrete expression
over operands ``o1, o2, ...``, each one (item, year) figure quoted from a row; :func:`evaluate` computes a concrete
expression with ``+ - * /``, parentheses, numbers and ``mean(...)``, nothing else (no names but the operands, no
calls but ``mean``), in :class:`~decimal.Decimal`. The citation check recomputes the shown result from the
validated quotes with the same :func:`evaluate` (:func:`recompute`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from decimal import Decimal, DivisionByZero, InvalidOperation

from pipelines.figures.numbers import parse_figure, rounded
from pipelines.figures.tables import SCALE
from pipelines.models import Citation, Computation

_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")


class FormulaError(ValueError):
    """A formula or expression outside the small language above, or one that cannot be computed (division by 0)."""


@dataclass(frozen=True)
class Operand:
    """One figure a computation reads: the line ``item``, its ``year``, the printed ``cell`` and the citation ``n``
    of the quoted row it is read from."""

    name: str
    item: str
    year: int
    cell: str = ""
    n: int = 0


def _parse(expr: str) -> ast.expr:
    try:
        return ast.parse(expr, mode="eval").body
    except SyntaxError as e:
        raise FormulaError(f"not an arithmetic expression: {expr!r}") from e


def instantiate(template: str, year: int, operands: list[Operand]) -> str:
    """``template`` for ``year`` as a concrete expression; the (item, year) figures it needs are appended to
    ``operands`` (each once) and named ``o1, o2, ...`` in it."""
    items: list[str] = []

    def name(item: str, y: int) -> str:
        for o in operands:
            if o.item == item and o.year == y:
                return o.name
        o = Operand(name=f"o{len(operands) + 1}", item=item, year=y)
        operands.append(o)
        return o.name

    def sub(m: re.Match[str]) -> str:
        items.append(m.group(1))
        return f"x{len(items) - 1}"

    body = _parse(_PLACEHOLDER.sub(sub, template))

    def expand(node: ast.expr) -> str:
        if isinstance(node, ast.Name) and node.id.startswith("x"):
            return name(items[int(node.id[1:])], year)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 1:
            arg = node.args[0]
            if not (isinstance(arg, ast.Name) and arg.id.startswith("x")):
                raise FormulaError("avg() and prev() take one line item")
            item = items[int(arg.id[1:])]
            if node.func.id == "avg":
                return f"mean({name(item, year)}, {name(item, year - 1)})"
            if node.func.id == "prev":
                return name(item, year - 1)
            raise FormulaError(f"unknown function {node.func.id!r}")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.Div):
            op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}[type(node.op)]
            return f"({expand(node.left)} {op} {expand(node.right)})"
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return str(node.value)
        raise FormulaError(f"not allowed in a formula: {ast.dump(node)[:60]}")

    return expand(body)


def evaluate(expr: str, values: dict[str, Decimal]) -> Decimal:
    """The value of a concrete expression over ``values`` (operand name -> figure)."""

    def ev(node: ast.expr) -> Decimal:
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise FormulaError(f"no figure for {node.id}")
            return values[node.id]
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return Decimal(str(node.value))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "mean" and node.args:
            args = [ev(a) for a in node.args]
            return sum(args, Decimal(0)) / len(args)
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            try:
                if isinstance(node.op, ast.Add):
                    return a + b
                if isinstance(node.op, ast.Sub):
                    return a - b
                if isinstance(node.op, ast.Mult):
                    return a * b
                if isinstance(node.op, ast.Div):
                    return a / b
            except (DivisionByZero, InvalidOperation) as e:
                raise FormulaError("division by zero") from e
        raise FormulaError(f"not allowed in an expression: {ast.dump(node)[:60]}")

    return ev(_parse(expr))


def readable(expr: str, values: dict[str, str]) -> str:
    """``expr`` with each operand replaced by its printed figure and Python's operators by a reader's
    ("(o1 / mean(o2, o3))" -> "6,489 ÷ ((253 + 282) ÷ 2)")."""

    def show(node: ast.expr, top: bool = False) -> str:
        if isinstance(node, ast.Name):
            return values.get(node.id, node.id)
        if isinstance(node, ast.Constant):
            return str(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return f"-{show(node.operand)}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "mean":
            inner = " + ".join(show(a) for a in node.args)
            return f"(({inner}) ÷ {len(node.args)})"
        if isinstance(node, ast.BinOp):
            op = {ast.Add: "+", ast.Sub: "−", ast.Mult: "×", ast.Div: "÷"}.get(type(node.op), "?")
            text = f"{show(node.left)} {op} {show(node.right)}"
            return text if top else f"({text})"
        return "?"

    return show(_parse(expr), top=True)


def recompute(computation: Computation, citations: list[Citation]) -> bool:
    """Whether ``computation``'s result follows from its operands as the *validated* quotes print them: each
    operand's cell must be in its citation's quote; the expression is evaluated again from those figures."""
    quotes = {c.n: c.quote for c in citations}
    values: dict[str, Decimal] = {}
    for o in computation.operands:
        if o.cell not in quotes.get(o.n, ""):
            return False
        value = parse_figure(o.cell)
        if value is None:
            return False
        values[o.name] = (abs(value) if o.outflow else value) * SCALE.get(o.scale, Decimal(1))
    try:
        result = evaluate(computation.expression, values) * Decimal(computation.factor)
    except FormulaError:
        return False
    return rounded(result, computation.decimals) == Decimal(computation.result)
