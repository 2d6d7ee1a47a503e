"""Haystack's filter syntax translated to SQL over ``chunks``: ``filters_to_sql``."""

from __future__ import annotations

import json
import sqlite3
import threading
from typing import Any

from haystack.errors import FilterError

from connectors.sqlite_store.schema import _ALL_META_COLUMNS


def _looks_like_iso_date(value: Any) -> bool:
    return (
        isinstance(value, str)
        and len(value) >= 10
        and value[:4].isdigit()
        and value[4] == "-"
        and value[5:7].isdigit()
        and value[7] == "-"
        and value[8:10].isdigit()
        and (len(value) == 10 or value[10] in "Tt ")
    )


def _json_path(key: str) -> str:
    return "$" + "".join("." + json.dumps(part) for part in key.split("."))


def _field_sql(field: str, alias: str) -> tuple[str, str]:
    """SQL expression for a filter field, and its kind ("column" or "json")."""
    if field == "id":
        return f"{alias}.id", "column"
    if field == "content":
        return f"{alias}.content", "column"
    key = field[5:] if field.startswith("meta.") else field
    if not key or key.startswith(".") or key.endswith("."):
        raise FilterError(f"invalid filter field {field!r}")
    if key in _ALL_META_COLUMNS:
        # mirrored in indexed columns: a file-name filter then reads that file's rows, not the whole scope
        return f"{alias}.{key}", "column"
    return f"json_extract({alias}.meta, {_sql_literal(_json_path(key))})", "json"


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _json_type_sql(field: str, alias: str) -> str | None:
    if field in ("id", "content"):
        return None
    key = field[5:] if field.startswith("meta.") else field
    return f"json_type({alias}.meta, {_sql_literal(_json_path(key))})"


def _bind(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float, str)) or value is None:
        return value
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    raise FilterError(f"unsupported filter value of type {type(value).__name__}")


def _comparison_sql(cond: dict[str, Any], alias: str, params: list[Any]) -> str:
    for key in ("field", "operator", "value"):
        if key not in cond:
            raise FilterError(f"'{key}' key missing in {cond}")
    field, op, value = cond["field"], cond["operator"], cond["value"]
    if not isinstance(field, str):
        raise FilterError(f"filter field must be a string, got {field!r}")
    expr, _kind = _field_sql(field, alias)
    jtype = _json_type_sql(field, alias)

    if op in ("==", "!="):
        if value is None:
            return f"{expr} IS NULL" if op == "==" else f"{expr} IS NOT NULL"
        if isinstance(value, (list, dict)) and jtype is not None:
            # meta lists/objects compare as canonical JSON
            clause = f"({jtype} IN ('array','object') AND json({expr}) = json(?))"
            params.append(json.dumps(value))
        elif _looks_like_iso_date(value):
            clause = f"({expr} = ? OR (julianday({expr}) IS NOT NULL AND julianday({expr}) = julianday(?)))"
            params.extend([value, value])
        else:
            clause = f"{expr} IS ?"
            params.append(_bind(value))
        return clause if op == "==" else f"NOT coalesce({clause}, 0)"

    if op in (">", ">=", "<", "<="):
        if value is None:
            return "0"
        if isinstance(value, (list, dict, tuple, set)):
            raise FilterError(f"Filter value can't be of type {type(value).__name__} using operator '{op}'")
        if isinstance(value, str):
            if not _looks_like_iso_date(value):
                raise FilterError(
                    f"Can't compare strings using operator '{op}'; strings are only comparable as ISO dates"
                )
            params.append(value)
            return f"(julianday({expr}) {op} julianday(?))"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FilterError(f"unsupported value {value!r} for operator '{op}'")
        params.append(value)
        if jtype is None:
            return f"({expr} {op} ?)"
        return f"({jtype} IN ('integer','real') AND {expr} {op} ?)"

    if op in ("in", "not in"):
        if not isinstance(value, list):
            raise FilterError(f"Filter value must be a `list` when using operator '{op}', got {type(value).__name__}")
        # Plain values go into one ``IN (...)``: an OR chain per value is one level of SQLite's expression
        # tree each and fails past its depth limit (1,000) with "Expression tree is too large".
        plain: list[Any] = []
        parts = []
        for v in value:
            if v is None or isinstance(v, (list, dict)) or _looks_like_iso_date(v):
                parts.append(_comparison_sql({"field": field, "operator": "==", "value": v}, alias, params))
            else:
                plain.append(v)
        if plain:
            parts.append(f"coalesce({expr} IN ({','.join('?' * len(plain))}), 0)")
            params.extend(_bind(v) for v in plain)
        clause = "(" + " OR ".join(parts) + ")" if parts else "0"
        return clause if op == "in" else f"NOT coalesce({clause}, 0)"

    raise FilterError(f"Unknown comparison operator '{op}'")


def filters_to_sql(filters: dict[str, Any] | None, alias: str = "c") -> tuple[str, list[Any]]:
    """Translate Haystack's filter syntax to a SQL boolean expression over ``chunks`` (aliased ``alias``)."""
    params: list[Any] = []
    if not filters:
        return "1", params
    return _node_sql(filters, alias, params), params


# What an explicit reference filters on ("page 12", "section 4.2", "Figure 1", "table 2"): a page's label as the PDF
# prints it (meta JSON), the physical pages, the section number and the caption label (mirrored columns). Without
# an index each such fetch read every chunk of the scope (page labels: its meta JSON too), 15-80 ms at 50,000
# chunks. These indexes are the query side's, so they live here and not in :mod:`.schema` (whose text is part of
# the development sets' index key): :func:`create_filter_indexes` adds them when a store is opened, to a new file
# or an older one alike, and every later write keeps them. The filtered value comes first in all but the page
# range's, so a search by scope alone never takes one of them for the scope's index.
_PAGE_LABEL_KEYS = ("page_label", "page_label_end")
FILTER_INDEXES = (
    "CREATE INDEX IF NOT EXISTS chunks_section ON chunks(section_id, scope)",
    "CREATE INDEX IF NOT EXISTS chunks_label ON chunks(label, scope)",
    "CREATE INDEX IF NOT EXISTS chunks_scope_pages ON chunks(scope, page_start, page_end)",
    *(
        f"CREATE INDEX IF NOT EXISTS chunks_{key} ON chunks(json_extract(meta, {_sql_literal(_json_path(key))}), scope)"
        for key in _PAGE_LABEL_KEYS
    ),
)
FILTER_INDEX_NAMES = tuple(stmt.split()[5] for stmt in FILTER_INDEXES)


def create_filter_indexes(conn: sqlite3.Connection, write_lock: threading.Lock) -> None:
    """Create :data:`FILTER_INDEXES` that the file lacks (at open; a no-op read once they exist, so opening never
    waits for another process's write then). Building them on 50,000 chunks takes about a second, once."""
    marks = ",".join("?" * len(FILTER_INDEX_NAMES))
    have = {r[0] for r in conn.execute(
        f"SELECT name FROM sqlite_master WHERE type='index' AND name IN ({marks})", FILTER_INDEX_NAMES)}
    if have == set(FILTER_INDEX_NAMES):
        return
    with write_lock:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in FILTER_INDEXES:
                conn.execute(stmt)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")


# Equality and ``in`` on these have an index: ``chunks_scope_doc``, ``chunks_scope_file`` (scope first), and
# ``chunks_section``, ``chunks_label``, ``chunks_page_label(_end)`` (the value first); a bound on the pages has
# ``chunks_scope_pages`` (scope first).
_INDEXED_KEYS = ("doc_id", "file_name", "section_id", "label", *_PAGE_LABEL_KEYS)
_VALUE_FIRST_KEYS = frozenset({"section_id", "label", *_PAGE_LABEL_KEYS})
_RANGE_KEYS = ("page_start", "page_end")


def index_terms(filters: dict[str, Any] | None, alias: str = "c") -> tuple[str, list[Any], str]:
    """Terms on indexed columns that ``filters`` implies, as SQL starting with `` AND `` ("" when none), their
    parameters, and how to write the scope column beside them.

    The terms: an ``==`` or ``in`` of strings on :data:`_INDEXED_KEYS`, a number bound on a page, found at the
    filter's top, inside its ``AND``s, or in every branch of an ``OR`` (then their ``OR``). :func:`filters_to_sql`'s
    expression sits inside ``coalesce(..., 0)``, which SQLite cannot search an index by: without these terms a
    fetch of one document, one section or one page reads every chunk of the scopes (15-80 ms at 50,000 chunks);
    with them, the matching rows. They never change which rows match: each is implied by the filter.

    The scope is ``+c.scope`` when a term's index starts with its value (a section, a label, a page label): SQLite
    without statistics rates ``scope = ?`` as selective as ``section_id = ?`` and would read the whole scope's
    index; the ``+`` leaves it the selective one. Otherwise ``c.scope``, whose index the terms then extend."""
    if not filters:
        return "", [], f"{alias}.scope"
    params: list[Any] = []
    terms = _implied(filters, alias, params)
    scope = f"+{alias}.scope" if any(value_first for _, value_first in terms) else f"{alias}.scope"
    return "".join(f" AND {t}" for t, _ in terms), params, scope


def _implied(node: Any, alias: str, params: list[Any]) -> list[tuple[str, bool]]:
    """The indexable terms ``node`` implies, each with whether its index starts with its value (their parameters
    appended to ``params``, in order)."""
    if not isinstance(node, dict):
        return []
    conditions = node.get("conditions")
    if "field" not in node and isinstance(conditions, list):
        if node.get("operator") == "AND":
            return [t for c in conditions for t in _implied(c, alias, params)]
        if node.get("operator") == "OR" and conditions:
            branch_params: list[Any] = []
            branches: list[list[tuple[str, bool]]] = []
            for c in conditions:
                got = _implied(c, alias, branch_params)
                if not got:
                    return []  # a branch that implies nothing indexable: the OR implies nothing either
                branches.append(got)
            params.extend(branch_params)
            sql = " OR ".join(b[0][0] if len(b) == 1 else "(" + " AND ".join(t for t, _ in b) + ")" for b in branches)
            # SQLite reads an OR by each branch's own index (MULTI-INDEX OR) only when each branch can lead one
            return [(f"({sql})", all(any(v for _, v in b) for b in branches))]
        return []
    field, op, value = node.get("field"), node.get("operator"), node.get("value")
    if not isinstance(field, str) or not field.startswith("meta."):
        return []
    key = field[5:]
    if key in _INDEXED_KEYS:
        expr = _field_sql(field, alias)[0]  # the very expression the index is on
        value_first = key in _VALUE_FIRST_KEYS
        if op == "==" and isinstance(value, str) and not _looks_like_iso_date(value):
            params.append(value)
            return [(f"{expr} = ?", value_first)]
        if (op == "in" and isinstance(value, list) and value
                and all(isinstance(v, str) and not _looks_like_iso_date(v) for v in value)):
            params.extend(value)
            return [(f"{expr} IN ({','.join('?' * len(value))})", value_first)]
    if (key in _RANGE_KEYS and op in ("<", "<=", ">", ">=") and isinstance(value, (int, float))
            and not isinstance(value, bool)):
        params.append(value)
        return [(f"{alias}.{key} {op} ?", False)]
    return []


def _node_sql(node: Any, alias: str, params: list[Any]) -> str:
    if not isinstance(node, dict):
        raise FilterError(f"a filter must be a dict, got {type(node).__name__}")
    if "field" in node:
        return _comparison_sql(node, alias, params)
    if "operator" not in node:
        raise FilterError(f"'operator' key missing in {node}")
    if "conditions" not in node:
        raise FilterError(f"'conditions' key missing in {node}")
    op, conditions = node["operator"], node["conditions"]
    if not isinstance(conditions, list):
        raise FilterError("'conditions' must be a list")
    if op not in ("AND", "OR", "NOT"):
        raise FilterError(f"Unknown logical operator '{op}'. Valid operators are: ['AND', 'NOT', 'OR']")
    parts = [f"coalesce({_node_sql(c, alias, params)}, 0)" for c in conditions]
    if op == "OR":
        return "(" + " OR ".join(parts) + ")" if parts else "0"
    joined = "(" + " AND ".join(parts) + ")" if parts else "1"
    return joined if op == "AND" else f"NOT {joined}"


# --------------------------------------------------------------------------------------------------
