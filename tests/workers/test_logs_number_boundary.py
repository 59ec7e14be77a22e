"""The number boundary of text matching (`workers.sources.logs.terms`, docs/logs.md "Query
language"): a term that starts or ends with a digit is not found where the text continues with
a digit on that side (`10.0.0.1` is not in `10.0.0.12`, `web-1` not in `web-12`, `80` not in
`8080`), identically on MOCK, FILE and CLICKHOUSE (chDB); words keep substring semantics."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from logs_helpers import cpu_seconds, file_source, search
from test_logs_clickhouse import NOW, fetch, make_table, row, source_for

from workers.sources.logs.mocklog.index import _topic_index
from workers.sources.logs.mocklog.world import MockRecord
from workers.sources.logs.records import format_ms
from workers.sources.logs.source import match_positions, parse_log_query
from workers.sources.logs.terms import contains


@pytest.mark.parametrize(
    ("text", "term", "found"),
    [
        ("client 10.0.0.12 connected", "10.0.0.1", False),
        ("client 110.0.0.1 connected", "10.0.0.1", False),
        ("ip=10.0.0.1, port", "10.0.0.1", True),
        ("dial 10.0.0.1:5432 refused", "10.0.0.1", True),
        ("from 10.0.0.12 then 10.0.0.1", "10.0.0.1", True),  # any occurrence will do
        ("pod web-12 ready", "web-1", False),
        ("pod web-1 ready", "web-1", True),
        ("pod myweb-1 ready", "web-1", True),  # a letter side: substring
        ("listening on 8080", "80", False),
        ("listening on :80/tcp", "80", True),
        ("java.sql.sqltransientconnectionexception", "sqltransientconnectionexception", True),
        ("3 timeouts", "timeout", True),
        ("after 30000ms", "30000ms", True),
        ("after 130000ms", "30000ms", False),
        ("v1.2.3", "1.2", True),  # a point is no digit: `1.2` is in `1.2.3`
        ("v1.23", "1.2", False),
        ("a1b", "1", True),
        ("a12b", "1", False),
        ("a1b", "a1", True),
    ],
)
def test_contains(text: str, term: str, found: bool) -> None:
    assert contains(text, term) is found


# --- the three backends ---------------------------------------------------------------------

END_MS = int(NOW * 1000)


def _mock(records: list[tuple[str, dict[str, str]]], query: str) -> int:
    index = _topic_index(
        tuple(
            MockRecord(
                epoch_ms=END_MS - 60_000 * (n + 1),
                timestamp="",
                level="INFO",
                service="api",
                message=message,
                fields=dict(fields),
            )
            for n, (message, fields) in enumerate(records)
        )
    )
    return len(match_positions(index, parse_log_query(query), range(len(records))))


def _file(root: Path, records: list[tuple[str, dict[str, str]]], query: str) -> int:
    name = f"{uuid.uuid4().hex[:8]}.jsonl"
    with (root / name).open("w") as out:
        for n, (message, fields) in enumerate(records):
            stamp = format_ms(END_MS - 60_000 * (n + 1))
            line = {"timestamp": stamp, "level": "INFO", "service": "api", "message": message}
            out.write(json.dumps({**line, **fields}) + "\n")
    return search(file_source(root, "jsonl", [name], now=NOW), query, 60).match_count


async def _clickhouse(records: list[tuple[str, dict[str, str]]], query: str) -> int:
    rows = [row(60 * (n + 1), "INFO", "api", m, **f) for n, (m, f) in enumerate(records)]
    found = await fetch(source_for(make_table(rows), "row_limit = 1000\n"), query)
    return int(found.match_count)


RECORDS = [
    ("connected from 10.0.0.12", {"host": "10.0.0.12", "pod": "web-12"}),
    ("connected from 10.0.0.1:5432", {"host": "10.0.0.1", "pod": "web-1"}),
    ("ip=10.0.0.1, retry", {"pod": "web-123"}),
    ("listening on 8080", {"uri": "/x:8080"}),
    ("listening on :80/tcp", {"uri": "/port/80"}),
    ("java.sql.SQLTransientConnectionException: 3 timeouts", {"exception": "x"}),
]
QUERIES = {
    "host:10.0.0.1": 1, "10.0.0.1": 2, '"from 10.0.0.1"': 1, "-10.0.0.1": 4, "pod:web-1": 1,
    "-pod:web-1": 5, "80": 1, "uri:80": 1, '"on 80"': 0, "timeout": 1,
    "SQLTransientConnectionException": 1, "web-12": 1, "0.0.1": 2, "10.0.0": 3,
}  # fmt: skip


@pytest.mark.parametrize(("query", "count"), sorted(QUERIES.items()))
async def test_every_backend_keeps_the_number_boundary(
    tmp_path: Path, query: str, count: int
) -> None:
    assert _mock(RECORDS, query) == count
    assert _file(tmp_path, RECORDS, query) == count
    assert await _clickhouse(RECORDS, query) == count


async def test_clickhouse_escapes_the_term_in_its_expression(tmp_path: Path) -> None:
    # the term's characters are literal in `match()`: `.` is no wildcard, `+`, `(`, `\` no
    # syntax, and a term that would be an invalid expression is no error
    records = [
        ("v10x0y0z1 seen", {}), ("v10.0.0.1 seen", {}), ("c++17 build", {}),
        ("f(1) called", {}), ("path a\\1 ok", {}), ("[1] item", {}), ("*1", {}),
    ]  # fmt: skip
    for query, count in [("10.0.0.1", 1), ('"c++17"', 1), ('"f(1"', 1), ('"a\\\\1"', 1),
                         ('"[1"', 1), ('"*1"', 1)]:  # fmt: skip
        assert _mock(records, query) == count, query
        assert _file(tmp_path, records, query) == count, query
        assert await _clickhouse(records, query) == count, query


# --- generated records and queries -------------------------------------------------------------

_PARTS = ["10.0.0.1", "10.0.0.12", "0.0.1", "web-1", "web-12", "8080", "80", "1", "12", "a1",
          "1a", "port", "timeout", "timeouts", "v2", "x9y"]  # fmt: skip
_GLUE = [" ", ",", ":", "=", "-", ".", "/", ""]
_text = st.lists(st.tuples(st.sampled_from(_PARTS), st.sampled_from(_GLUE)), min_size=1,
                 max_size=5).map(lambda parts: "".join(p + g for p, g in parts).strip())  # fmt: skip


def _no_number(text: str) -> bool:
    # a field whose whole value reads as a number compares as one on FILE and CLICKHOUSE
    # (docs/logs.md), where MOCK's typed fields hold text: not this test's subject
    try:
        float(text)
    except ValueError:
        return True
    return False


_field = _text.filter(_no_number)
_records = st.lists(
    st.tuples(_text, st.fixed_dictionaries({}, optional={"pod": _field, "host": _field})),
    min_size=1, max_size=6,
)  # fmt: skip
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9.=/-]*[A-Za-z0-9]|[A-Za-z0-9]")


def _clause(term: str, field: str | None, negated: bool) -> str:
    written = term if _WORD.fullmatch(term) and ":" not in term else '"' + term + '"'
    return ("-" if negated else "") + (f"{field}:" if field else "") + written


_clauses = st.lists(
    st.builds(_clause, st.one_of(st.sampled_from(_PARTS), _text),
              st.sampled_from([None, None, "pod", "host"]), st.booleans()),
    min_size=1, max_size=3,
)  # fmt: skip


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(records=_records, clauses=_clauses)
async def test_generated_queries_agree_on_every_backend(
    tmp_path: Path, records: list[tuple[str, dict[str, str]]], clauses: list[str]
) -> None:
    query = " ".join(clauses)
    expected = _mock(records, query)
    assert _file(tmp_path, records, query) == expected, query
    assert await _clickhouse(records, query) == expected, query


def _oracle(text: str, term: str) -> bool:
    # every occurrence, looked at one by one: the rule as the docs state it
    start = text.find(term)
    while start >= 0:
        end = start + len(term)
        before_ok = not (term[0].isdigit() and start > 0 and text[start - 1].isdigit())
        after_ok = not (term[-1].isdigit() and end < len(text) and text[end].isdigit())
        if before_ok and after_ok:
            return True
        start = text.find(term, start + 1)
    return False


@given(text=_text, term=st.one_of(st.sampled_from(_PARTS), _text))
def test_contains_is_the_stated_rule(text: str, term: str) -> None:
    assert contains(text.lower(), term.lower()) is _oracle(text.lower(), term.lower())


def test_helpers_typed() -> None:
    records: Any = RECORDS
    assert _mock(records, "") == len(RECORDS)


def test_contains_is_linear_in_the_term_on_a_record_made_to_match_its_head() -> None:
    # every second position passes the head's boundary and matches most of the term: an
    # expression that opens with the boundary tries the whole term at each of them (the
    # record times the term); searched as a literal first, the record is read once
    def seconds(term: str) -> float:
        text = "1a" * 500_000 + " " + term
        assert contains(text, term)
        return cpu_seconds(lambda: contains(text, term))

    short, long = seconds("1a" * 124 + "12"), seconds("1a" * 499 + "12")
    assert long < 2.5 * short + 0.02, (short, long)
