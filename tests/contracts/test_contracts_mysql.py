"""MySQL projector: one JSON representation per value kind, bounded rows and cells."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import msgspec
import pytest
from contract_samples import mysql_upstream
from hypothesis import given
from hypothesis import strategies as st
from msgspec import UNSET

from contracts import (
    DEFAULT_BOUNDS,
    Bounds,
    EvidenceStatus,
    MysqlUpstream,
    project_mysql,
    to_json_cell,
)
from contracts.mysql import CUT_MARK


class Opaque:
    def __str__(self) -> str:
        return "opaque!"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (True, True),
        ("text", "text"),
        (2**53, 2**53),
        (-(2**53), -(2**53)),
        (2**53 + 1, "9007199254740993"),
        (-(2**64), "-18446744073709551616"),
        (1.5, 1.5),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
        (Decimal("12.50"), "12.50"),
        (Decimal("-0.000001"), "-0.000001"),
        (Decimal("1E+30"), "1E+30"),
        # Below 1e-6 too, digits as the server prints them (issue 35, item 12), not `0E-8`.
        (Decimal("0E-8"), "0.00000000"),
        (Decimal("1.200E-7"), "0.0000001200"),
        (Decimal("-5E-10"), "-0.0000000005"),
        (dt.datetime(2024, 5, 1, 9, 41, 7, 120), "2024-05-01T09:41:07.000120"),
        (dt.datetime(2024, 5, 1, tzinfo=dt.UTC), "2024-05-01T00:00:00+00:00"),
        (dt.date(2024, 2, 29), "2024-02-29"),
        (dt.time(23, 59, 1), "23:59:01"),
        (dt.timedelta(hours=838, minutes=59, seconds=59), "838:59:59"),
        (dt.timedelta(hours=-26, seconds=5), "-25:59:55"),
        (dt.timedelta(seconds=1, microseconds=5), "00:00:01.000005"),
        (dt.timedelta(0), "00:00:00"),
        (b"\x00\xffbin", "base64:AP9iaW4="),
        (bytearray(b"ab"), "base64:YWI="),
        (memoryview(b"ab"), "base64:YWI="),
        ({"a": Decimal("1.0"), 2: [b"x", None]}, {"a": "1.0", "2": ["base64:eA==", None]}),
        ((1, 2), [1, 2]),
        (Opaque(), "opaque!"),
    ],
)
def test_one_documented_representation_per_value_kind(value: Any, expected: Any) -> None:
    assert to_json_cell(value) == expected
    msgspec.json.encode(to_json_cell(value))  # always JSON-safe


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary()
    | st.decimals() | st.datetimes() | st.dates() | st.times() | st.timedeltas(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip


@given(json_values)
def test_to_json_cell_is_idempotent_and_json_safe(value: Any) -> None:
    once = to_json_cell(value)
    assert msgspec.json.encode(to_json_cell(once)) == msgspec.json.encode(once)
    encoded = msgspec.json.encode(once)
    assert b"NaN" not in encoded or b'"NaN' in encoded or b'NaN"' in encoded
    assert not any(isinstance(v, float) and not math.isfinite(v) for v in _leaves(once))


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    return [value]


def test_typical_rows_keep_column_order_and_structured_values() -> None:
    result = project_mysql("call_1", mysql_upstream(), DEFAULT_BOUNDS)
    assert result.evidence_status is EvidenceStatus.EVIDENCE_FOUND
    assert result.columns == ["id", "amount", "created_at", "payload", "note"]
    assert result.rows[0] == [
        "9007199254740993", "12.50", "2024-05-01T09:41:07", {"sku": "A-1", "qty": 2, "tags": ["x"]},
        "card declined",
    ]  # fmt: skip
    assert result.rows[1][3] == [1, 2.5, None] and result.rows[1][4] == "base64:AP9iaW4="
    assert result.rows[2][1] == "NaN" and result.rows[2][2] == "-25:59:55"
    assert result.rows[2][4] == "x" * DEFAULT_BOUNDS.mysql_cell_chars  # long text: verbatim prefix
    assert result.returned_count == 3 and result.truncated


def test_no_rows_is_no_evidence() -> None:
    result = project_mysql("call_1", mysql_upstream(rows=False), DEFAULT_BOUNDS)
    assert result.evidence_status is EvidenceStatus.NO_EVIDENCE
    assert result.rows == [] and result.returned_count == 0 and not result.truncated
    assert result.columns == ["id", "amount", "created_at", "payload", "note"]


def test_rows_beyond_max_are_cut() -> None:
    upstream = MysqlUpstream(columns=["n"], rows=[[i] for i in range(4)])
    result = project_mysql("c", upstream, Bounds(mysql_max_rows=3))
    assert result.rows == [[0], [1], [2]] and result.truncated
    exact = project_mysql("c", upstream, Bounds(mysql_max_rows=4))
    assert exact.returned_count == 4 and not exact.truncated


def test_source_that_stopped_early_is_truncated() -> None:
    upstream = MysqlUpstream(columns=["n"], rows=[[1]], stopped_early=True)
    assert project_mysql("c", upstream, DEFAULT_BOUNDS).truncated


def test_columns_are_bounded_and_cut_names_are_truncation() -> None:
    upstream = MysqlUpstream(columns=["a", "b" * 20, "c"], rows=[[1, 2, 3]])
    result = project_mysql("c", upstream, Bounds(mysql_max_columns=2, mysql_cell_chars=5))
    assert result.columns == ["a", "bbbbb"] and result.rows == [[1, 2]] and result.truncated
    name_only = project_mysql(
        "c", MysqlUpstream(columns=["b" * 20], rows=[]), Bounds(mysql_cell_chars=5)
    )
    assert name_only.truncated


def test_row_bytes_are_bounded() -> None:
    upstream = MysqlUpstream(columns=["t"], rows=[["y" * 290] for _ in range(50)])
    bounds = Bounds(mysql_max_bytes=1000)
    result = project_mysql("c", upstream, bounds)
    assert len(msgspec.json.encode(result.rows)) <= bounds.mysql_max_bytes
    assert result.returned_count == 3 and result.truncated


def test_nested_json_too_long_becomes_a_prefix_of_its_json() -> None:
    value = {"k": "v" * 400}
    result = project_mysql("c", MysqlUpstream(columns=["j"], rows=[[value]]), DEFAULT_BOUNDS)
    cell = result.rows[0][0]
    # Marked as cut (issue 35, item 14): a prefix of JSON is no longer JSON.
    assert isinstance(cell, str) and cell.endswith(CUT_MARK)
    assert msgspec.json.encode(value).decode().startswith(cell[: -len(CUT_MARK)])
    assert len(cell) == DEFAULT_BOUNDS.mysql_cell_chars and result.truncated


def test_a_bound_too_small_for_the_mark_cuts_bare() -> None:
    # A cell bound no longer than the mark: a bare prefix of the bound's length (only some
    # of the property tests' random bounds reached it, so line coverage came and went).
    bounds = msgspec.structs.replace(DEFAULT_BOUNDS, mysql_cell_chars=len(CUT_MARK))
    upstream = MysqlUpstream(columns=["b", "j"], rows=[[b"\x00" * 100, {"k": "v" * 100}]])
    result = project_mysql("c", upstream, bounds)
    assert result.rows[0] == ["base64:"[: len(CUT_MARK)], '{"k":"v'[: len(CUT_MARK)]]
    assert result.truncated


def test_cut_bytes_are_marked_and_dropped_columns_named() -> None:
    bounds = DEFAULT_BOUNDS
    columns = [f"c{i}" for i in range(bounds.mysql_max_columns + 2)]
    row = [b"\x00" * 1000, *range(len(columns) - 1)]
    result = project_mysql("c", MysqlUpstream(columns=columns, rows=[row]), bounds)
    cell = result.rows[0][0]
    assert cell.startswith("base64:") and cell.endswith(CUT_MARK)
    assert len(cell) == bounds.mysql_cell_chars and result.truncated
    assert result.dropped_columns == columns[-2:]
    many = [f"c{i}" for i in range(bounds.mysql_max_columns + 60)]
    dropped = project_mysql("c", MysqlUpstream(columns=many, rows=[]), bounds).dropped_columns
    assert dropped == [
        *many[bounds.mysql_max_columns : bounds.mysql_max_columns + 50],
        "and 10 more",
    ]
    assert (
        project_mysql("c", MysqlUpstream(columns=["a"], rows=[]), bounds).dropped_columns is UNSET
    )


def test_nested_json_of_multibyte_text_within_the_char_bound_is_kept_whole() -> None:
    value = {"k": "é" * 160}  # 168 characters, more bytes than the bound
    result = project_mysql("c", MysqlUpstream(columns=["j"], rows=[[value]]), DEFAULT_BOUNDS)
    assert result.rows == [[value]] and not result.truncated
