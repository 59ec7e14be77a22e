"""Normalised scope of a request and its stable fingerprint.

The fingerprint is the harness's identity for "the same question asked again". It is a
SHA-256 over canonical JSON (sorted keys), so it is identical on every machine, process and
run; it never reaches the model.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

import msgspec

from contracts.requests import (
    LookupKnowledgeRequest,
    QueryLogsRequest,
    QueryMysqlRequest,
    Request,
)

__all__ = ["DEFAULT_LOOKBACK_MINUTES", "fingerprint_scope", "normalise_scope", "normalise_sql"]

DEFAULT_LOOKBACK_MINUTES: Final = 60
_ENCODER: Final = msgspec.json.Encoder(order="sorted")


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def normalise_sql(sql: str) -> str:
    """SQL as MySQL's parser reads it, re-rendered: keyword case and whitespace removed as a
    difference. Text that does not parse falls back to whitespace folding."""
    import sqlglot  # pure parser; imported lazily to keep contract import time small
    from sqlglot.errors import SqlglotError

    try:
        statements = sqlglot.parse(sql, read="mysql")
        rendered = [s.sql(dialect="mysql") for s in statements if s is not None]
    except (SqlglotError, RecursionError, ValueError):
        return " ".join(sql.split())
    return "; ".join(rendered)


def normalise_scope(
    tool: str, request: Request, default_lookback: int = DEFAULT_LOOKBACK_MINUTES
) -> dict[str, Any]:
    """The scope a request asks for, with differences that do not change its answer removed."""
    match request:
        case LookupKnowledgeRequest(query=query):
            return {"tool": tool, "query": _fold(query)}
        case QueryLogsRequest(topic=topic, query=query, lookback_minutes=lookback):
            return {
                "tool": tool,
                "topic": topic.value,
                "query": _fold(query),
                "lookback_minutes": lookback if lookback is not None else default_lookback,
            }
        case QueryMysqlRequest(data_source=data_source, sql=sql, params=params):
            return {
                "tool": tool,
                "data_source": data_source.casefold(),
                "sql": normalise_sql(sql),
                "params": list(params or ()),
            }
    raise TypeError(f"not a request: {type(request).__name__}")  # pragma: no cover


def fingerprint_scope(scope: dict[str, Any]) -> str:
    """Stable hex fingerprint of a normalised scope."""
    return hashlib.sha256(_ENCODER.encode(scope)).hexdigest()[:32]
