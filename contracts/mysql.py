"""Projection of fetched SQL rows into bounded, JSON-safe `MysqlResult` rows.

One representation per value kind (documented in docs/mysql.md):

| value | JSON |
|---|---|
| NULL, bool, int within ±2**53, finite float | as is |
| int beyond ±2**53, DECIMAL | string of its exact digits (`"12.50"`) |
| NaN / ±Infinity | string (`"NaN"`, `"Infinity"`, `"-Infinity"`) |
| DATETIME / TIMESTAMP, DATE, TIME of day | ISO 8601 string, no zone added |
| TIME as a duration (timedelta) | `"[-]HH:MM:SS[.ffffff]"`, as MySQL prints it |
| BINARY / BLOB bytes | `"base64:<data>"` |
| JSON column | the JSON value itself (objects and arrays as objects and arrays) |
| long text | a verbatim prefix; `truncated` becomes true |
| long JSON value or bytes | a prefix of its JSON or base64 text ending `…[cut]` (not valid) |

Columns past `mysql_max_columns` are left out and named in `dropped_columns`.

`to_json_cell` is idempotent, so a recorded upstream answer re-projects identically.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from decimal import Decimal
from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from contracts.bounds import Bounds
from contracts.results import MysqlResult
from contracts.status import EvidenceStatus
from contracts.text import cut

__all__ = ["MysqlUpstream", "project_mysql", "to_json_cell"]

_MAX_SAFE_INT: Final = 2**53
_ENCODER: Final = msgspec.json.Encoder()
_MAX_WARNINGS: Final = 5
CUT_MARK: Final = "…[cut]"  # ends a JSON or base64 cell cut to its bound
_MAX_DROPPED: Final = 50  # names of left-out columns listed (the rest only counted)


class MysqlUpstream(msgspec.Struct, frozen=True, kw_only=True):
    """What a SQL source fetched: column names, at most `max_rows + 1` rows, and whether the
    source itself stopped early (its own byte bound)."""

    columns: list[str]
    rows: list[list[Any]]
    stopped_early: bool = False
    # Server warnings that change no value (1365: a division by zero answered NULL), said as
    # `warning 1365: division by zero`; those that cut or corrupt one are errors instead.
    warnings: list[str] | UnsetType = UNSET


def _timedelta_text(value: dt.timedelta) -> str:
    sign = "-" if value < dt.timedelta(0) else ""
    value = abs(value)
    hours, rest = divmod(value.days * 86400 + value.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    micro = f".{value.microseconds:06d}" if value.microseconds else ""
    return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}{micro}"


def to_json_cell(value: Any) -> Any:
    """The one JSON representation of a fetched value (see the module table)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT else str(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Decimal):
        # Digits as the server prints them: `str` would say `0E-8` or `1.200E-7` below 1e-6.
        exponent = value.as_tuple().exponent
        return format(value, "f") if isinstance(exponent, int) and exponent < 0 else str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return _timedelta_text(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "base64:" + base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, list | tuple):
        return [to_json_cell(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json_cell(v) for k, v in value.items()}
    return str(value)


def _marked(text: str, limit: int) -> str:
    """A prefix of `text` ending with `CUT_MARK`, `limit` characters in all (a bare prefix
    when the bound leaves no room for the mark)."""
    if limit <= len(CUT_MARK):
        return text[:limit]
    return text[: limit - len(CUT_MARK)] + CUT_MARK


def _bound_cell(value: Any, limit: int) -> tuple[Any, bool]:
    value = to_json_cell(value)
    if isinstance(value, str):
        if value.startswith("base64:") and len(value) > limit:
            return _marked(value, limit), True  # a prefix of base64 is not the bytes' prefix
        return cut(value, limit)
    if isinstance(value, dict | list):
        text = _ENCODER.encode(value).decode("utf-8")
        if len(text) > limit:
            # A nested value too large to show whole: a prefix of its JSON, marked as cut.
            return _marked(text, limit), True
    return value, False


def _dropped(names: list[str]) -> list[str] | UnsetType:
    if not names:
        return UNSET
    shown = [cut(str(n), 64)[0] for n in names[:_MAX_DROPPED]]
    return shown + ([f"and {len(names) - _MAX_DROPPED} more"] if len(names) > _MAX_DROPPED else [])


def project_mysql(tool_call_id: str, upstream: MysqlUpstream, bounds: Bounds) -> MysqlResult:
    """Project fetched rows; `NO_EVIDENCE` when the query returned no row."""
    ncols = min(len(upstream.columns), bounds.mysql_max_columns)
    truncated = upstream.stopped_early or len(upstream.columns) > ncols
    columns: list[str] = []
    for name in upstream.columns[:ncols]:
        column, was_cut = cut(str(name), bounds.mysql_cell_chars)
        truncated = truncated or was_cut
        columns.append(column)
    rows: list[list[Any]] = []
    used = len(_ENCODER.encode(columns))
    for raw in upstream.rows:
        if len(rows) == bounds.mysql_max_rows:
            truncated = True
            break
        row: list[Any] = []
        for cell in raw[:ncols]:
            value, was_cut = _bound_cell(cell, bounds.mysql_cell_chars)
            truncated = truncated or was_cut
            row.append(value)
        size = len(_ENCODER.encode(row)) + 1
        if used + size > bounds.mysql_max_bytes:
            truncated = True
            break
        used += size
        rows.append(row)
    found = bool(rows) or bool(upstream.rows)
    return MysqlResult(
        evidence_status=EvidenceStatus.EVIDENCE_FOUND if found else EvidenceStatus.NO_EVIDENCE,
        tool_call_id=tool_call_id,
        columns=columns,
        rows=rows,
        returned_count=len(rows),
        truncated=truncated,
        warnings=upstream.warnings[:_MAX_WARNINGS] if upstream.warnings else UNSET,
        dropped_columns=_dropped(upstream.columns[ncols:]),
    )
