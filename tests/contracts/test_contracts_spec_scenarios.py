"""One test per scenario of seed/aci-evidence-tool-contracts.spec.md, named after it."""

from __future__ import annotations

import json

import msgspec
from contract_cases import run_case
from contract_samples import LOGS_ARGS, MYSQL_ARGS, rag_upstream

from contracts import (
    DEFAULT_BOUNDS,
    ErrorCode,
    ErrorResult,
    EvidenceStatus,
    LifecycleStatus,
    LogsResult,
    LookupKnowledgeRequest,
    MysqlResult,
    QueryLogsRequest,
    QueryMysqlRequest,
    RagResult,
    control_view,
    decode_invocation,
    encode_result,
    encode_view,
    export_tools,
    input_schema,
    observe,
    project,
)


def test_successful_empty_query_result() -> None:
    for name in ("rag_no_evidence", "logs_no_evidence", "mysql_no_evidence"):
        result, meta = run_case(name)
        assert result.evidence_status is EvidenceStatus.NO_EVIDENCE
        assert meta.status is LifecycleStatus.READY  # lifecycle reaches READY independently
        assert not isinstance(result, ErrorResult)


def test_tool_execution_fails() -> None:
    failures = [
        "error_schema",
        "error_projection",
        "error_unknown_tool",
        "error_invalid_tool_call_id",
    ]
    for name in failures:
        result, meta = run_case(name)
        assert result.evidence_status is EvidenceStatus.ERROR, name
        assert meta.status is LifecycleStatus.ERROR
        assert b"NO_EVIDENCE" not in encode_result(result)
        assert b"NO_EVIDENCE" not in encode_view(observe(result, DEFAULT_BOUNDS))
    # authorization and execution failures reported by a source are ERROR results too
    for code in (ErrorCode.AUTHORIZATION, ErrorCode.EXECUTION, ErrorCode.TIMEOUT):
        assert ErrorResult(error={"code": code, "message": "m"}).evidence_status == "ERROR"  # type: ignore[arg-type]


def test_framework_requests_a_tool_call() -> None:
    # Spring AI Alibaba: AssistantMessage.ToolCall.id == ToolCallRequest.getToolCallId()
    tool_call_id = "call_9f8e7d6c5b4a"
    request = decode_invocation("lookup_knowledge", tool_call_id, {"query": "pool timeout"})
    assert isinstance(request, LookupKnowledgeRequest)
    result = project("lookup_knowledge", request, tool_call_id, rag_upstream(), DEFAULT_BOUNDS)
    assert json.loads(encode_view(observe(result, DEFAULT_BOUNDS)))["tool_call_id"] == tool_call_id
    assert json.loads(encode_result(result))["tool_call_id"] == tool_call_id


def test_framework_id_is_invalid() -> None:
    for tool_call_id in (None, "", "  ", "call\t1"):
        result = decode_invocation("lookup_knowledge", tool_call_id, {"query": "x"})
        assert isinstance(result, ErrorResult)
        assert result.error.code is ErrorCode.INVALID_TOOL_CALL_ID
        assert "tool_call_id" not in json.loads(encode_result(result))


def test_rag_evidence_is_serialized() -> None:
    result, _ = run_case("rag_found")
    assert isinstance(result, RagResult)
    data = encode_result(result)
    assert result.relevance_level == "HIGH" and result.evidence
    for noise in (b"contextPack", b"retrievalTrace", b"rerankTrace", b"rerankScore", b"score",
                  b"fallbackAttempts", b"metadata", b"fullBody", b"# Connection pool"):  # fmt: skip
        assert noise not in data


def test_rag_query_has_no_evidence() -> None:
    result, _ = run_case("rag_no_evidence")
    assert isinstance(result, RagResult)
    assert result.evidence_status is EvidenceStatus.NO_EVIDENCE
    assert result.query == "HikariPool connection timeout after deploy"
    assert result.tool_call_id == "call_rag_2"
    assert result.evidence == []
    assert "relevance_level" not in json.loads(encode_result(result))  # not upgraded


def test_mock_log_evidence_is_serialized() -> None:
    result, _ = run_case("logs_found")
    assert isinstance(result, LogsResult)
    assert result.source_kind == "MOCK"
    assert result.scope.topic == "APPLICATION" and result.scope.lookback_minutes == 30
    assert result.patterns and result.events
    assert result.match_count != result.returned_count


def test_agent_creates_a_log_request() -> None:
    request = decode_invocation("query_logs", "call_1", LOGS_ARGS)
    assert isinstance(request, QueryLogsRequest)
    assert set(msgspec.structs.asdict(request)) == {"topic", "query", "lookback_minutes"}
    assert set(input_schema("query_logs")["properties"]) == {"topic", "query", "lookback_minutes"}
    for extra in ("region", "topic_id", "TopicId", "secret_id", "limit"):
        bad = decode_invocation("query_logs", "call_1", {**json.loads(LOGS_ARGS), extra: "x"})
        assert isinstance(bad, ErrorResult) and bad.error.code is ErrorCode.SCHEMA
    names = [t["name"] for t in export_tools("anthropic")]
    assert not any("topic" in n for n in names)  # no topic discovery tool to call first


def test_mysql_evidence_is_serialized() -> None:
    result, _ = run_case("mysql_found")
    assert isinstance(result, MysqlResult)
    assert result.columns == ["id", "amount", "created_at", "payload", "note"]
    assert result.tool_call_id == "call_mysql_1"
    assert result.returned_count == len(result.rows) == 3
    obj = json.loads(encode_result(result))
    assert set(obj) == {
        "evidence_status",
        "tool_call_id",
        "columns",
        "rows",
        "returned_count",
        "truncated",
    }


def test_agent_creates_a_mysql_request() -> None:
    request = decode_invocation("query_mysql", "call_1", MYSQL_ARGS)
    assert isinstance(request, QueryMysqlRequest)
    assert set(input_schema("query_mysql")["properties"]) == {"data_source", "sql", "params"}
    for extra in ("jdbc_url", "host", "password", "read_only", "max_rows"):
        bad = decode_invocation("query_mysql", "call_1", {**json.loads(MYSQL_ARGS), extra: "x"})
        assert isinstance(bad, ErrorResult) and bad.error.code is ErrorCode.SCHEMA


def test_agent_receives_tool_definitions() -> None:
    for fmt in ("openai", "responses", "anthropic", "mcp", "schema"):
        text = json.dumps(export_tools(fmt)).casefold()  # type: ignore[arg-type]
        for word in ("milvus", "l0", "l1", "rerank", "cls", "region", "topicid", "redis",
                     "jdbc", "credential", "topk", "limit", "trace"):  # fmt: skip
            assert word not in text


def test_stage_1_tests_pass() -> None:
    # The contract layer is additive: it stands alone and needs nothing of the runtime.
    import contracts

    assert contracts.CONTRACT_VERSION == 1
    assert all(not n.startswith(("pipeline", "workers")) for n in contracts.__all__)


def test_model_receives_rag_observation() -> None:
    result, _ = run_case("rag_found")
    obj = json.loads(encode_view(observe(result, DEFAULT_BOUNDS)))
    assert set(obj) == {
        "tool_call_id",
        "evidence_status",
        "query",
        "evidence",
        "relevance_level",
        "truncated",
    }
    assert "returned_count" not in obj and b"score" not in encode_view(
        observe(result, DEFAULT_BOUNDS)
    )


def test_harness_evaluates_duplicate_scope() -> None:
    first, first_meta = run_case("rag_found")
    again, again_meta = run_case("rag_no_evidence")  # same query, asked again
    assert first_meta.scope_fingerprint == again_meta.scope_fingerprint
    view = control_view(again, again_meta)
    assert view.scope_fingerprint == first_meta.scope_fingerprint
    assert view.duplicate_of == "call_earlier_1"
    for result in (first, again):
        data = encode_view(observe(result, DEFAULT_BOUNDS))
        assert str(first_meta.scope_fingerprint).encode() not in data
        assert b"fingerprint" not in data and b"duplicate" not in data
