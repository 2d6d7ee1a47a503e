"""Haystack's filter syntax translated to SQL over ``chunks``: ``filters_to_sql``."""

from __future__ import annotations

import json
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


# Columns with an index beside ``scope`` (``chunks_scope_doc``, ``chunks_scope_file``).
_INDEXED_COLUMNS = ("doc_id", "file_name")


def index_terms(filters: dict[str, Any] | None, alias: str = "c") -> tuple[str, list[Any]]:
    """``AND`` terms on indexed columns that ``filters`` implies (a ``meta.doc_id ==`` or ``meta.file_name in``
    condition at its top, or inside its top ``AND``), as SQL starting with `` AND `` ("" when none), and their
    parameters. :func:`filters_to_sql`'s expression sits inside ``coalesce(..., 0)``, which SQLite cannot search
    an index by: without these terms a fetch of one document reads every chunk of the scopes (~25 ms at 50,000
    chunks); with them, that document's rows. They never change which rows match: each is implied by the filter."""
    if not filters:
        return "", []
    nodes = filters.get("conditions", []) if filters.get("operator") == "AND" and "field" not in filters else [filters]
    sql: list[str] = []
    params: list[Any] = []
    for node in nodes if isinstance(nodes, list) else []:
        if not isinstance(node, dict) or not isinstance(node.get("field"), str):
            continue
        field, op, value = node["field"], node.get("operator"), node.get("value")
        key = field[5:] if field.startswith("meta.") else ""
        if key not in _INDEXED_COLUMNS:
            continue
        if op == "==" and isinstance(value, str) and not _looks_like_iso_date(value):
            sql.append(f"{alias}.{key} = ?")
            params.append(value)
        elif (op == "in" and isinstance(value, list) and value
              and all(isinstance(v, str) and not _looks_like_iso_date(v) for v in value)):
            sql.append(f"{alias}.{key} IN ({','.join('?' * len(value))})")
            params.extend(value)
    return "".join(f" AND {t}" for t in sql), params


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
