"""Layer 1 (pure): the SQL guard."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.status import ErrorCode
from tests.workers.sql_corpus import CORPUS
from workers.source import SourceError
from workers.sqlguard import guard_sql

_SERVER_SIDE = {"ok", "EXECUTION", "TIMEOUT"}


@pytest.mark.parametrize(("name", "sql", "params", "expected"), CORPUS, ids=[c[0] for c in CORPUS])
def test_corpus_guard_verdict(name: str, sql: str, params: list[Any], expected: str) -> None:
    if expected in _SERVER_SIDE:
        guard_sql(sql, params, schema="shop")
        return
    with pytest.raises(SourceError) as info:
        guard_sql(sql, params, schema="shop")
    assert info.value.code == ErrorCode(expected), info.value.message


def test_percent_is_literal_and_placeholders_become_driver_marks() -> None:
    g = guard_sql("SELECT 'err%', '?' FROM t WHERE a LIKE ? -- ? %\n AND b = ?;", ["x%", 2])
    assert g.text == "SELECT 'err%%', '?' FROM t WHERE a LIKE %s -- ? %%\n AND b = %s "
    assert g.text % ("A", "B") == "SELECT 'err%', '?' FROM t WHERE a LIKE A -- ? %\n AND b = B "
    assert g.params == ("x%", 2)


def test_kinds_and_tables() -> None:
    assert guard_sql("EXPLAIN SELECT * FROM orders", []).kind == "explain"
    assert guard_sql("DESC orders", []).kind == "describe"
    g = guard_sql(
        "SELECT * FROM shop.orders o JOIN customers c ON c.id = o.user_id", [], schema="shop"
    )
    assert g.tables == ("customers", "orders")


def test_other_schema_refused_without_schema() -> None:
    with pytest.raises(SourceError):
        guard_sql("SELECT * FROM shop.orders", [])


def test_size_cap() -> None:
    with pytest.raises(SourceError):
        guard_sql("SELECT " + "1+" * 5000 + "1", [])


def test_deep_nesting_is_refused_not_crashing() -> None:
    with pytest.raises(SourceError):
        guard_sql("SELECT " + "(" * 3000 + "1" + ")" * 3000, [])


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_accepted_or_refused_cleanly(sql: str) -> None:
    try:
        guard_sql(sql, [])
    except SourceError as exc:
        assert exc.code in (ErrorCode.FORBIDDEN_QUERY, ErrorCode.SCHEMA)


_LITERAL = st.text(alphabet=st.sampled_from("ab?%;'\\\"-#/* \n"), max_size=20)


@settings(max_examples=200, deadline=None)
@given(st.lists(_LITERAL, min_size=1, max_size=4))
def test_literals_never_yield_placeholders(values: list[str]) -> None:
    def lit(v: str) -> str:
        return "'" + v.replace("\\", "\\\\").replace("'", "''") + "'"

    sql = "SELECT " + ", ".join(f"{lit(v)}, ?" for v in values)
    g = guard_sql(sql, list(range(len(values))))
    marks = tuple(f"<{i}>" for i in range(len(values)))
    rendered = g.text % marks
    positions = [rendered.index(m) for m in marks]
    assert positions == sorted(positions)
    assert rendered.replace("<", "").count(">") == len(values)
