"""scope_fingerprint: normalised scope, stable hash, invariant to cosmetic differences."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from contracts import (
    LookupKnowledgeRequest,
    QueryLogsRequest,
    QueryMysqlRequest,
    Request,
    Topic,
    decode_invocation,
    fingerprint_scope,
    normalise_scope,
)
from contracts.fingerprint import DEFAULT_LOOKBACK_MINUTES, normalise_sql

# Pinned values: a change here changes every recorded duplicate identity. Same on every machine.
PINNED = {
    "lookup_knowledge": (
        LookupKnowledgeRequest(query="HikariPool connection timeout"),
        "f459c199212085b204bb2e2ac11c1f7b",
    ),
    "query_logs": (
        QueryLogsRequest(topic=Topic.APPLICATION, query="timeout", lookback_minutes=30),
        "4347668c4ee879457dfe91fcd32c38b1",
    ),
    "query_mysql": (
        QueryMysqlRequest(data_source="orders", sql="select * from t where id = ?", params=[7]),
        "b9202864c462cb7b02da5cfbb842a50b",
    ),
}


def _fp(tool: str, arguments: object) -> str:
    request = decode_invocation(tool, "call_1", arguments)
    assert isinstance(request, LookupKnowledgeRequest | QueryLogsRequest | QueryMysqlRequest)
    return fingerprint_scope(normalise_scope(tool, request))


@pytest.mark.parametrize("tool", sorted(PINNED))
def test_fingerprint_is_pinned(tool: str) -> None:
    request, expected = PINNED[tool]
    assert fingerprint_scope(normalise_scope(tool, request)) == expected


def test_fingerprint_is_sha256_of_sorted_compact_json() -> None:
    # Recomputed by hand, independent of the implementation's encoder.
    canonical = b'{"query":"hikaripool connection timeout","tool":"lookup_knowledge"}'
    assert PINNED["lookup_knowledge"][1] == hashlib.sha256(canonical).hexdigest()[:32]


def test_fingerprint_is_the_same_in_a_fresh_process_with_another_hash_seed() -> None:
    code = (
        "from contracts import *\n"
        "r = QueryMysqlRequest(data_source='orders', sql='select * from t where id = ?', params=[7])\n"
        "print(fingerprint_scope(normalise_scope('query_mysql', r)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""}, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert out.stdout.strip() == PINNED["query_mysql"][1]


@pytest.mark.parametrize(
    ("tool", "a", "b"),
    [
        ("lookup_knowledge", '{"query": "Pool  Timeout\\n"}', '{"query": "pool timeout"}'),
        (
            "query_logs",
            '{"topic": "APPLICATION", "query": "ERROR  timeout", "lookback_minutes": 60}',
            '{"lookback_minutes": 60, "query": "error timeout", "topic": "APPLICATION"}',
        ),
        (
            "query_logs",
            '{"topic": "APPLICATION", "query": "x"}',
            {"topic": "APPLICATION", "query": "x", "lookback_minutes": DEFAULT_LOOKBACK_MINUTES},
        ),
        (
            "query_mysql",
            '{"data_source": "orders", "sql": "SELECT *\\n  FROM t WHERE id = ?", "params": [7]}',
            '{"params": [7], "sql": "select * from t   where id=?", "data_source": "Orders"}',
        ),
        (
            "query_mysql",
            '{"data_source": "o", "sql": "SELECT 1", "params": []}',
            '{"data_source": "o", "sql": "select 1"}',
        ),
    ],
)
def test_cosmetic_differences_give_the_same_fingerprint(tool: str, a: object, b: object) -> None:
    assert _fp(tool, a) == _fp(tool, b)


@pytest.mark.parametrize(
    ("tool", "a", "b"),
    [
        ("lookup_knowledge", {"query": "pool timeout"}, {"query": "pool timeouts"}),
        (
            "query_logs",
            {"topic": "APPLICATION", "query": "x"},
            {"topic": "SYSTEM_EVENTS", "query": "x"},
        ),
        (
            "query_logs",
            {"topic": "APPLICATION", "query": "x", "lookback_minutes": 5},
            {"topic": "APPLICATION", "query": "x", "lookback_minutes": 6},
        ),
        (
            "query_mysql",
            {"data_source": "o", "sql": "SELECT 'A'"},
            {"data_source": "o", "sql": "SELECT 'a'"},
        ),
        (
            "query_mysql",
            {"data_source": "o", "sql": "SELECT ?", "params": [1]},
            {"data_source": "o", "sql": "SELECT ?", "params": ["1"]},
        ),
        (
            "query_mysql",
            {"data_source": "a", "sql": "SELECT 1"},
            {"data_source": "b", "sql": "SELECT 1"},
        ),
    ],
)
def test_different_scopes_give_different_fingerprints(tool: str, a: object, b: object) -> None:
    assert _fp(tool, a) != _fp(tool, b)


def test_fingerprints_differ_between_tools() -> None:
    request: Request = LookupKnowledgeRequest(query="x")
    assert fingerprint_scope(normalise_scope("a", request)) != fingerprint_scope(
        normalise_scope("b", request)
    )


def test_normalise_sql_uses_a_real_parser_and_falls_back_on_garbage() -> None:
    assert normalise_sql("select  a,b from T where x = ? -- note") == normalise_sql(
        "SELECT a, b FROM T WHERE x = ? -- note"
    )
    assert normalise_sql("SELECT '  spaced  '") == "SELECT '  spaced  '"
    assert normalise_sql("SELEC (( x   y") == "SELEC (( x y"
    assert normalise_sql("SELECT 1; SELECT 2") == "SELECT 1; SELECT 2"


def test_scope_has_the_default_lookback_when_omitted() -> None:
    scope = normalise_scope("query_logs", QueryLogsRequest(topic=Topic.APPLICATION, query="X"))
    assert scope == {
        "tool": "query_logs", "topic": "APPLICATION", "query": "x",
        "lookback_minutes": DEFAULT_LOOKBACK_MINUTES,
    }  # fmt: skip
    assert (
        normalise_scope("query_logs", QueryLogsRequest(topic=Topic.APPLICATION, query="X"), 15)[
            "lookback_minutes"
        ]
        == 15
    )


def test_normalise_sql_parses_only_within_its_bounds() -> None:
    # A crafted statement made admission (which normalises every request on a worker's event
    # loop) spend 47-190 ms in the parser, and a RecursionError decided its fingerprint; past
    # the bounds the text is whitespace-folded, the same in every process.
    commas = "select " + ",".join(["a"] * 200) + " from t"
    assert normalise_sql(commas) == commas  # over 256 tokens: folded, not re-rendered
    nested = "select 1 from t where a in " + "(select a from t where a in " * 17 + "(1)" + ")" * 17
    assert normalise_sql(nested) == nested  # nested deeper than 16
    assert normalise_sql("x" * 4001) == "x" * 4001
    functions = "select " + ", ".join(f"sum(c{i})" for i in range(30)) + " from t"
    assert normalise_sql(functions).startswith("SELECT SUM(c0), SUM(c1)")  # 30 ( but depth 1
    shallow = "select 1 from t where a in " + "(select a from t where a in " * 15 + "(1)" + ")" * 15
    assert normalise_sql(shallow).startswith("SELECT 1 FROM t WHERE a IN (SELECT")


def test_normalising_sql_logs_nothing_of_it(caplog: pytest.LogCaptureFixture) -> None:
    # sqlglot logs a statement it reads as a 'Command' at WARNING, whole (a password too).
    caplog.set_level("DEBUG")
    normalise_sql("ALTER USER app IDENTIFIED BY 'Hunter2-prod-secret'")
    assert not caplog.records
