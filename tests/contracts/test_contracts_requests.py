"""decode_invocation: framework tool call ids, argument shapes, schema errors with paths."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from contracts import (
    ErrorCode,
    ErrorResult,
    EvidenceStatus,
    LookupKnowledgeRequest,
    QueryLogsRequest,
    QueryMysqlRequest,
    Topic,
    decode_invocation,
    encode_result,
    is_valid_tool_call_id,
)
from contracts.requests import MAX_ARGUMENTS_BYTES

VALID_IDS = [
    "call_abc123",
    "toolu_01A09q90qw90lq917835lq9",
    "a",
    "x" * 256,
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "MiXeD-Case_Id",
]
INVALID_IDS: list[Any] = [
    "",
    " ",
    "   \t",
    " call_1",
    "call_1 ",
    "call 1",
    "x" * 257,
    "call\x00",
    "call\n1",
    "call\x7f",
    "call_é",
    "调用",
    None,
    123,
    b"call_1",
    ["call_1"],
]


def _error(result: object) -> ErrorResult:
    assert isinstance(result, ErrorResult), result
    assert result.evidence_status is EvidenceStatus.ERROR
    return result


@pytest.mark.parametrize("tool_call_id", VALID_IDS)
def test_valid_tool_call_id_comes_back_byte_identical(tool_call_id: str) -> None:
    assert is_valid_tool_call_id(tool_call_id)
    result = _error(decode_invocation("lookup_knowledge", tool_call_id, "{}"))
    assert result.tool_call_id == tool_call_id
    encoded = msgspec.json.decode(encode_result(result))
    assert encoded["tool_call_id"].encode() == tool_call_id.encode()


@pytest.mark.parametrize("tool_call_id", INVALID_IDS, ids=repr)
def test_invalid_tool_call_id_gives_error_without_any_id(tool_call_id: object) -> None:
    assert not is_valid_tool_call_id(tool_call_id)
    result = _error(decode_invocation("lookup_knowledge", tool_call_id, {"query": "x"}))
    assert result.error.code is ErrorCode.INVALID_TOOL_CALL_ID
    encoded = encode_result(result)
    assert "tool_call_id" not in msgspec.json.decode(encoded)
    assert b"tool_call_id" not in encoded


def test_invalid_id_wins_over_unknown_tool_and_bad_arguments() -> None:
    result = _error(decode_invocation("nope", "", "{not json"))
    assert result.error.code is ErrorCode.INVALID_TOOL_CALL_ID


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        (
            "lookup_knowledge",
            '{"query": "pool timeout"}',
            LookupKnowledgeRequest(query="pool timeout"),
        ),
        (
            "lookup_knowledge",
            {"query": "pool timeout"},
            LookupKnowledgeRequest(query="pool timeout"),
        ),
        ("lookup_knowledge", b'{"query": "q"}', LookupKnowledgeRequest(query="q")),
        (
            "query_logs",
            '{"topic": "SYSTEM_EVENTS", "query": ""}',
            QueryLogsRequest(topic=Topic.SYSTEM_EVENTS, query=""),
        ),
        (
            "query_logs",
            {"topic": "APPLICATION", "query": "x", "lookback_minutes": 1440},
            QueryLogsRequest(topic=Topic.APPLICATION, query="x", lookback_minutes=1440),
        ),
        (
            "query_logs",
            '{"topic": "DATABASE_SLOW_QUERY", "query": "x", "lookback_minutes": null}',
            QueryLogsRequest(topic=Topic.DATABASE_SLOW_QUERY, query="x"),
        ),
        (
            "query_mysql",
            '{"data_source": "orders", "sql": "SELECT 1 WHERE a LIKE \'5%\'", "params": null}',
            QueryMysqlRequest(data_source="orders", sql="SELECT 1 WHERE a LIKE '5%'"),
        ),
        (
            "query_mysql",
            {"data_source": "orders", "sql": "SELECT ?", "params": ["a", 1, 2.5, True, None]},
            QueryMysqlRequest(
                data_source="orders", sql="SELECT ?", params=["a", 1, 2.5, True, None]
            ),
        ),
    ],
)
def test_arguments_as_json_string_or_object_decode_to_typed_request(
    tool: str, arguments: object, expected: object
) -> None:
    assert decode_invocation(tool, "call_1", arguments) == expected


@pytest.mark.parametrize(
    ("tool", "arguments", "path"),
    [
        ("lookup_knowledge", '{"query": 1}', "`$.query`"),
        ("lookup_knowledge", {"query": None}, "`$.query`"),
        ("lookup_knowledge", '{"query": "   "}', "`$.query`"),
        ("lookup_knowledge", '{"query": ""}', "`$.query`"),
        ("lookup_knowledge", {"query": "\n\t"}, "`$.query`"),
        ("lookup_knowledge", "{}", "`$`"),
        ("lookup_knowledge", "[]", "`$`"),
        ("lookup_knowledge", "null", "`$`"),
        ("lookup_knowledge", '"query"', "`$`"),
        ("query_logs", {"topic": "application", "query": "x"}, "`$.topic`"),
        (
            "query_logs",
            {"topic": "APPLICATION", "query": "x", "lookback_minutes": 0},
            "`$.lookback_minutes`",
        ),
        (
            "query_logs",
            {"topic": "APPLICATION", "query": "x", "lookback_minutes": 1441},
            "`$.lookback_minutes`",
        ),
        (
            "query_logs",
            {"topic": "APPLICATION", "query": "x", "lookback_minutes": True},
            "`$.lookback_minutes`",
        ),
        (
            "query_logs",
            {"topic": "APPLICATION", "query": "x", "lookback_minutes": "5"},
            "`$.lookback_minutes`",
        ),
        ("query_logs", {"topic": {"APPLICATION"}, "query": "x"}, "`$.topic`"),
        (
            "query_mysql",
            {"data_source": "o", "sql": "SELECT ?", "params": [1, 2, {"a": 1}]},
            "`$.params[2]`",
        ),
        (
            "query_mysql",
            '{"data_source": "o", "sql": "SELECT ?", "params": [1, [2]]}',
            "`$.params[1]`",
        ),
        ("query_mysql", {"data_source": "o", "sql": "  "}, "`$.sql`"),
        ("query_mysql", {"data_source": "1bad", "sql": "SELECT 1"}, "`$.data_source`"),
        ("query_mysql", {"data_source": "o", "sql": "SELECT 1", "params": "1"}, "`$.params`"),
        ("query_mysql", {1: "o"}, "`$`"),
    ],
)
def test_schema_error_names_the_field_path(tool: str, arguments: object, path: str) -> None:
    result = _error(decode_invocation(tool, "call_1", arguments))
    assert result.error.code is ErrorCode.SCHEMA
    assert path in result.error.message
    assert result.tool_call_id == "call_1"


@pytest.mark.parametrize(
    "arguments", ['{"query": "x", "tool_call_id": "call_1"}', {"query": "x", "tool_call_id": "c"}]
)
def test_tool_call_id_inside_arguments_is_an_unknown_field(arguments: object) -> None:
    result = _error(decode_invocation("lookup_knowledge", "call_1", arguments))
    assert result.error.code is ErrorCode.SCHEMA
    assert "unknown field `tool_call_id`" in result.error.message


@pytest.mark.parametrize(
    ("tool", "field"),
    [
        ("lookup_knowledge", "topK"),
        ("query_logs", "region"),
        ("query_logs", "limit"),
        ("query_mysql", "dsn"),
        ("query_mysql", "timeout"),
    ],
)
def test_operator_settings_are_rejected_from_the_agent(tool: str, field: str) -> None:
    base: dict[str, object] = {
        "lookup_knowledge": {"query": "x"},
        "query_logs": {"topic": "APPLICATION", "query": "x"},
        "query_mysql": {"data_source": "o", "sql": "SELECT 1"},
    }[tool]  # type: ignore[assignment]
    result = _error(decode_invocation(tool, "call_1", {**base, field: 5}))
    assert result.error.code is ErrorCode.SCHEMA
    assert f"unknown field `{field}`" in result.error.message


@pytest.mark.parametrize("arguments", ["{bad", "", '{"query": "x"', b"\xff\xfe"])
def test_malformed_json_is_a_schema_error(arguments: object) -> None:
    result = _error(decode_invocation("lookup_knowledge", "call_1", arguments))
    assert result.error.code is ErrorCode.SCHEMA
    assert result.error.message.startswith("arguments are not valid JSON")


@pytest.mark.parametrize("arguments", [None, 5, ["query"], {"query"}, object()], ids=repr)
def test_arguments_of_a_wrong_type_are_a_schema_error(arguments: object) -> None:
    result = _error(decode_invocation("lookup_knowledge", "call_1", arguments))
    assert result.error.code is ErrorCode.SCHEMA
    assert result.error.message == "arguments must be a JSON object"


@pytest.mark.parametrize(
    "arguments",
    [
        {"data_source": "o", "sql": "S", "params": [object()]},
        {"data_source": "o", "sql": "SELECT '\ud800'"},
        '{"data_source": "o", "sql": "SELECT \'\ud800\'"}',
    ],
    ids=["object", "surrogate-in-dict", "surrogate-in-text"],
)
def test_arguments_that_cannot_be_json_are_a_schema_error(arguments: object) -> None:
    result = _error(decode_invocation("query_mysql", "call_1", arguments))
    assert result.error.code is ErrorCode.SCHEMA
    assert result.error.message == "arguments must be a JSON object of JSON values"


def test_arguments_object_decodes_as_its_json_would() -> None:
    as_object = decode_invocation(
        "query_mysql", "c", {"data_source": "o", "sql": "S", "params": (1, "a")}
    )
    as_text = decode_invocation(
        "query_mysql", "c", '{"data_source": "o", "sql": "S", "params": [1, "a"]}'
    )
    assert as_object == as_text == QueryMysqlRequest(data_source="o", sql="S", params=[1, "a"])


def test_oversized_arguments_are_rejected_before_parsing() -> None:
    arguments = '{"query": "' + "x" * MAX_ARGUMENTS_BYTES + '"}'
    result = _error(decode_invocation("lookup_knowledge", "call_1", arguments))
    assert result.error.message == "arguments are too large"


@pytest.mark.parametrize("tool", ["lookup", "LOOKUP_KNOWLEDGE", "", None, 7])
def test_unknown_tool(tool: object) -> None:
    result = _error(decode_invocation(tool, "call_1", {"query": "x"}))
    assert result.error.code is ErrorCode.UNKNOWN_TOOL
    assert result.tool_call_id == "call_1"
    assert "lookup_knowledge" in result.error.message


def test_error_messages_are_single_line_and_short() -> None:
    bad = {"query": "x", "a" * 500 + "\n\tb": 1}
    result = _error(decode_invocation("lookup_knowledge", "call_1", bad))
    assert "\n" not in result.error.message and "\t" not in result.error.message
    assert len(result.error.message) <= 300
    assert result.error.message.endswith("…")


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"data_source": "shop", "sql": "x" * 8001},
         "sql is longer than its cap of 8,000 characters; shorten it - at `$.sql`"),
        ({"data_source": "shop", "sql": "SELECT ?", "params": ["x" * 4001]},
         "params[0] is longer than its cap of 4,000 characters; shorten it - at `$.params[0]`"),
        ({"data_source": "shop", "sql": "SELECT ?", "params": [1] * 101},
         "params is longer than its cap of 100 items; shorten it - at `$.params`"),
    ],
)  # fmt: skip
def test_a_size_cap_is_said_as_one(arguments: dict[str, object], said: str) -> None:
    # Issue 35, item 14: the agent read a raw "Expected `str` of length <= 4000".
    found = decode_invocation("query_mysql", "c1", arguments)
    assert isinstance(found, ErrorResult) and found.error.code is ErrorCode.SCHEMA
    assert found.error.message == said


@pytest.mark.parametrize(
    "query", ["???", "--", " ?! ", "…", "🔥🔥", "-- ** //", "\uff1f\uff1f", "_"]
)
def test_a_knowledge_query_without_a_letter_or_digit_is_a_schema_error(query: str) -> None:
    # Before: "???" and "--" ran and answered NO_EVIDENCE, as if the runbooks had been searched
    # for something and held nothing: nothing can be looked up by punctuation alone.
    result = _error(decode_invocation("lookup_knowledge", "call_1", {"query": query}))
    assert result.error.code is ErrorCode.SCHEMA
    assert "`$.query`" in result.error.message and "letter or digit" in result.error.message
    assert result.tool_call_id == "call_1"


@pytest.mark.parametrize(
    "query", ["x?", "503", "数据库连接池满了\uff1f", "OOMKilled!!", "é", "--help"]
)
def test_a_knowledge_query_with_a_letter_or_digit_decodes(query: str) -> None:
    assert decode_invocation("lookup_knowledge", "call_1", {"query": query}) == (
        LookupKnowledgeRequest(query=query)
    )
