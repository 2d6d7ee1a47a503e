"""Jinja2 templates of the reports (``eval/templates/``): HTML escaped by default, Markdown not.

Every value a run or the chat state holds (questions, answers, quotes, file names, comments) reaches a page
through a template, so it is escaped by Jinja's autoescape, never glued into HTML by hand. Charts come from
:mod:`eval.charts` and are marked safe by :func:`chart`.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup


def fmt(v: Any, digits: int = 3) -> str:
    """A metric value for a table: 3 decimals below 10, whole numbers above, "—" for none."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.{digits}f}" if abs(v) < 10 else f"{v:,.0f}"
    return str(v)


def pct(v: float | None, digits: int = 1) -> str:
    return "—" if v is None else f"{v * 100:.{digits}f}%"


def signed(v: float | None, digits: int = 3) -> str:
    if v is None:
        return "—"
    return f"{v:+.{digits}f}" if abs(v) < 10 else f"{v:+,.0f}"


def anchor(case_id: str) -> str:
    """The HTML id of a case's section (``#case-…``): letters, digits, ``-``, ``_`` and ``.`` only."""
    return "case-" + re.sub(r"[^A-Za-z0-9_.-]", "-", case_id)


def md_cell(v: Any) -> str:
    """A Markdown table cell: formatted, one line, pipes escaped."""
    return " ".join(fmt(v).split()).replace("|", "\\|")


def figure_class(svg: str) -> str:
    """``full`` for a chart drawn wide (:data:`eval.charts.WIDE_IN`), which then takes a whole row of the page."""
    from eval.charts import WIDE_IN

    return "full" if f'width="{WIDE_IN * 72:g}pt"' in svg else ""


def chart(svg: str) -> Markup:
    """An SVG made by :mod:`eval.charts` (its text is escaped by matplotlib), safe to put in a page as is."""
    return Markup(svg)  # noqa: S704 - our own drawing, not input


@cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("eval", "templates"),
        autoescape=select_autoescape(enabled_extensions=("html.j2",), default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(fmt=fmt, pct=pct, signed=signed, anchor=anchor, md=md_cell, figure_class=figure_class)
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
