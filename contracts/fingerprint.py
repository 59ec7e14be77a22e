"""Normalised scope of a request and its stable fingerprint.

The fingerprint is the harness's identity for "the same question asked again". It is a
SHA-256 over canonical JSON (sorted keys), so it is identical on every machine, process and
run; it never reaches the model.
"""

from __future__ import annotations

import hashlib
import logging
import re
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
_PARSE_MAX_CHARS: Final = 4000
_PARSE_MAX_TOKENS: Final = 256
_PARSE_MAX_DEPTH: Final = 16
_TOKEN: Final = re.compile(r"\w+|[^\w\s]")
_ENCODER: Final = msgspec.json.Encoder(order="sorted")


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def _parse_bounded(sql: str) -> bool:
    # Parsing costs about 7 us a token and grows faster with nesting, and admission normalises
    # every request on a worker's event loop: a crafted 8,000-character statement took 47-190
    # ms. Within these bounds it takes at most about 2 ms, and never nests deep enough for a
    # RecursionError (which would make the fingerprint depend on the process's stack).
    if len(sql) > _PARSE_MAX_CHARS or len(_TOKEN.findall(sql)) > _PARSE_MAX_TOKENS:
        return False
    if sql.count("(") <= _PARSE_MAX_DEPTH:
        return True
    depth = 0
    for char in sql:
        if char == "(":
            depth += 1
            if depth > _PARSE_MAX_DEPTH:
                return False
        elif char == ")":
            depth -= 1
    return True


def normalise_sql(sql: str) -> str:
    """SQL as MySQL's parser reads it, re-rendered: keyword case and whitespace removed as a
    difference. Text that does not parse, or is past the parse bounds (`_PARSE_MAX_*`: longer
    than an agent's query, or nested deeper), falls back to whitespace folding."""
    if not _parse_bounded(sql):
        return " ".join(sql.split())
    import sqlglot  # pure parser; imported lazily to keep contract import time small
    from sqlglot.errors import SqlglotError

    # sqlglot logs the statements it cannot read at WARNING, whole: an agent's `ALTER USER u
    # IDENTIFIED BY '<password>'` went to the log (Python prints it to stderr even where
    # logging is not configured). Nothing it logs is for the operator.
    quiet = logging.getLogger("sqlglot")
    if quiet.level <= logging.CRITICAL:  # once: each setLevel clears every logger's cache
        quiet.setLevel(logging.CRITICAL + 1)
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
