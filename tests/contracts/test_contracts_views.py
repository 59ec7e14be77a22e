"""The two views: exact field sets (CONTRACT.md §6), byte budget, deterministic cut; both built
at once with the status the result puts its invocation in."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from contract_cases import CASES, run_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts import (
    DEFAULT_BOUNDS,
    Bounds,
    ErrorCode,
    ErrorResult,
    EvidenceStatus,
    InvocationMeta,
    LifecycleStatus,
    LookupKnowledgeRequest,
    MysqlResult,
    MysqlUpstream,
    RagResult,
    Timings,
    Topic,
    build_error_views,
    build_views,
    control_view,
    encode_view,
    error_result,
    final_status,
    is_valid_tool_call_id,
    observe,
    project_mysql,
    project_rag,
)

OBSERVATION_KEYS = {
    "RagResult": {
        "tool_call_id",
        "evidence_status",
        "query",
        "evidence",
        "relevance_level",
        "truncated",
    },
    "LogsResult": {
        "tool_call_id",
        "evidence_status",
        "source_kind",
        "scope",
        "patterns",
        "events",
        "truncated",
        "notes",  # FILE: how the answer was read (lines not in their format), when it matters
    },
    "MysqlResult": {
        "tool_call_id",
        "evidence_status",
        "columns",
        "rows",
        "truncated",
        "warnings",
        "dropped_columns",
    },
    "ErrorResult": {"tool_call_id", "evidence_status", "error"},
}
REQUIRED_OBSERVATION_KEYS = {
    "RagResult": OBSERVATION_KEYS["RagResult"] - {"relevance_level"},
    "LogsResult": OBSERVATION_KEYS["LogsResult"] - {"notes"},
    "MysqlResult": OBSERVATION_KEYS["MysqlResult"] - {"warnings", "dropped_columns"},
    "ErrorResult": {"evidence_status", "error"},
}
NESTED_KEYS = {
    "evidence": {"document_id", "source", "title", "breadcrumb", "excerpt"},
    "patterns": {"template", "count", "level", "first_seen", "last_seen"},
    "events": {"timestamp", "level", "service", "message", "fields"},
    "scope": {"topic", "query", "lookback_minutes", "start_time", "end_time"},
    "error": {"code", "message"},
}
CONTROL_KEYS = {
    "tool", "tool_call_id", "session_id", "status", "evidence_status", "scope",
    "scope_fingerprint", "duplicate_of", "returned_count", "match_count", "relevance_level",
    "truncated", "source_kind", "error_code", "attempts", "timings", "match_count_lower_bound",
    "indexed_chunks", "source", "warnings", "index_rebuilding", "skipped_runbooks",
    "unparsed_lines", "unread_files", "broken_files", "skipped_files", "record_times",
}  # fmt: skip
FORBIDDEN_IN_OBSERVATION = (
    "fingerprint", "match_count", "returned_count", "score", "trace", "attempt", "timing",
    "_ms", "session", "budget", "duplicate",
)  # fmt: skip


def assert_observation_field_set(kind: str, data: bytes) -> None:
    """The model observation holds exactly its contract fields, nested ones included."""
    obj: dict[str, Any] = msgspec.json.decode(data)
    assert REQUIRED_OBSERVATION_KEYS[kind] <= set(obj) <= OBSERVATION_KEYS[kind]
    for name, keys in NESTED_KEYS.items():
        value = obj.get(name)
        for item in value if isinstance(value, list) else [value] if value else []:
            assert set(item) == keys
    keys_text = " ".join(_all_keys(obj)).casefold()
    for word in FORBIDDEN_IN_OBSERVATION:
        assert word not in keys_text


def _all_keys(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [k for k, v in value.items() if k != "fields"] + [
            x for k, v in value.items() if k != "fields" for x in _all_keys(v)
        ]
    if isinstance(value, list):
        return [x for v in value for x in _all_keys(v)]
    return []


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_observation_has_exactly_its_field_set(name: str) -> None:
    result, _ = run_case(name)
    assert_observation_field_set(
        type(result).__name__, encode_view(observe(result, DEFAULT_BOUNDS))
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_control_view_has_its_field_set_and_no_evidence_bodies(name: str) -> None:
    result, meta = run_case(name)
    data = encode_view(control_view(result, meta))
    obj = msgspec.json.decode(data)
    assert {"tool", "session_id", "status", "evidence_status", "attempts", "timings"} <= set(obj)
    assert set(obj) <= CONTROL_KEYS
    for body in (b'"evidence"', b'"excerpt"', b'"events"', b'"rows"', b'"patterns"', b'"message"'):
        assert body not in data
    assert ("tool_call_id" in obj) == (name != "error_invalid_tool_call_id")


def test_control_view_reports_counts_relevance_and_model_cut() -> None:
    result, meta = run_case("rag_found")
    assert isinstance(result, RagResult) and not result.truncated
    view = control_view(result, meta)
    assert (view.returned_count, view.relevance_level, view.truncated) == (2, "HIGH", False)
    tiny = Bounds(observation_max_bytes=1024, rag_excerpt_chars=700)
    big = msgspec.structs.replace(result, evidence=result.evidence * 3)
    observation = observe(big, tiny)
    assert observation.truncated  # type: ignore[union-attr]
    assert control_view(big, meta, observation).truncated is True
    logs, logs_meta = run_case("logs_found")
    logs_view = control_view(logs, logs_meta)
    assert (logs_view.match_count, logs_view.returned_count, logs_view.source_kind) == (
        37,
        6,
        "MOCK",
    )
    error, error_meta = run_case("error_schema")
    error_view = control_view(error, error_meta, observe(error, DEFAULT_BOUNDS))
    assert error_view.error_code is ErrorCode.SCHEMA and error_view.status is LifecycleStatus.ERROR
    assert error_view.truncated is msgspec.UNSET


def test_lifecycle_finality() -> None:
    assert not LifecycleStatus.PROJECTING.is_final
    assert LifecycleStatus.READY.is_final and LifecycleStatus.ERROR.is_final


def test_timings_default_and_omitted_when_zero() -> None:
    meta = InvocationMeta(tool="query_logs", session_id="s", status=LifecycleStatus.PROJECTING)
    assert meta.timings == Timings() and meta.attempts == 1
    assert encode_view(Timings(total_ms=1.5)) == b'{"total_ms":1.5}'


def _big_rag(n: int, excerpt: str = "e" * 600, query: str = "q") -> RagResult:
    hits = [{"id": f"doc-{i}", "content": f"{i} {excerpt}"} for i in range(n)]
    bounds = Bounds(rag_max_evidence=n)
    result = project_rag(LookupKnowledgeRequest(query=query), "call_1", {"hits": hits}, bounds)
    assert isinstance(result, RagResult)
    return result


@pytest.mark.parametrize("budget", [1024, 1500, 4096, 16_384])
def test_observation_within_budget_cut_deterministically(budget: int) -> None:
    result = _big_rag(40)
    bounds = Bounds(observation_max_bytes=budget)
    first = encode_view(observe(result, bounds))
    assert len(first) <= budget
    assert first == encode_view(observe(result, bounds))  # same cut every time
    view = observe(result, bounds)
    assert view.truncated  # type: ignore[union-attr]
    kept = view.evidence  # type: ignore[union-attr]
    assert kept == result.evidence[: len(kept)]  # whole trailing items go first
    assert view.query == result.query  # type: ignore[union-attr]


def test_observation_under_budget_is_untouched() -> None:
    result = _big_rag(3)
    view = observe(result, DEFAULT_BOUNDS)
    assert not view.truncated  # type: ignore[union-attr]
    assert view.evidence == result.evidence  # type: ignore[union-attr]


def test_single_item_exactly_over_budget() -> None:
    # The last item of a list carries no separating comma: the cut must count it exactly.
    for size in range(850, 1000):
        result = _big_rag(1, excerpt="e" * size, query="a long question " * 3)
        data = encode_view(
            observe(result, Bounds(observation_max_bytes=1024, rag_excerpt_chars=2000))
        )
        assert len(data) <= 1024
        view = msgspec.json.decode(data)
        if not view["evidence"]:
            assert view["query"] == "a long question " * 3 and view["truncated"]


def test_echoed_query_is_halved_last() -> None:
    result = _big_rag(2, query="why " * 1000)
    view = observe(result, Bounds(observation_max_bytes=1024))
    assert len(encode_view(view)) <= 1024
    assert view.evidence == [] and view.truncated  # type: ignore[union-attr]
    assert result.query.startswith(view.query)  # type: ignore[union-attr]


def test_logs_scope_text_is_halved_when_nothing_else_is_left() -> None:
    result, _ = run_case("logs_found")
    scope = msgspec.structs.replace(result.scope, query="timeout " * 300)  # type: ignore[union-attr]
    big = msgspec.structs.replace(result, scope=scope, source_kind="MOCK" * 100)
    view = observe(big, Bounds(observation_max_bytes=1024))
    data = encode_view(view)
    assert len(data) <= 1024 and view.truncated  # type: ignore[union-attr]
    assert view.events == [] and view.patterns == []  # type: ignore[union-attr]
    assert big.scope.query.startswith(view.scope.query)  # type: ignore[union-attr]
    assert view.scope.topic is Topic.APPLICATION  # type: ignore[union-attr]


def test_mysql_columns_dropped_when_rows_are_gone() -> None:
    upstream = MysqlUpstream(columns=[f"c{i}_" + "\x00" * 290 for i in range(40)], rows=[[1] * 40])
    result = project_mysql("call_1", upstream, DEFAULT_BOUNDS)
    assert isinstance(result, MysqlResult)
    view = observe(result, DEFAULT_BOUNDS)
    assert len(encode_view(view)) <= DEFAULT_BOUNDS.observation_max_bytes
    assert view.rows == [] and view.truncated  # type: ignore[union-attr]
    assert view.columns == result.columns[: len(view.columns)]  # type: ignore[union-attr]


def test_error_observation_is_within_budget() -> None:
    result = error_result(ErrorCode.EXECUTION, "\x01" * 400, "c" * 256)
    view = observe(result, Bounds(observation_max_bytes=1024))
    data = encode_view(view)
    assert len(data) <= 1024
    assert view.evidence_status is EvidenceStatus.ERROR and view.tool_call_id == "c" * 256
    assert result.error.message.startswith(view.error.message)  # type: ignore[union-attr]
    short = error_result(ErrorCode.TIMEOUT, "the source did not answer in time", "c")
    assert observe(short, DEFAULT_BOUNDS).error == short.error  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "settings",
    [{"rag_max_evidence": 0}, {"mysql_max_bytes": -1}, {"observation_max_bytes": 1023}],
)
def test_bounds_must_be_positive_and_the_budget_sensible(settings: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="bound"):
        Bounds(**settings)


@pytest.mark.parametrize("name", sorted(CASES))
def test_build_views_is_observe_and_control_view_with_the_final_status(name: str) -> None:
    result, meta = run_case(name)
    assert final_status(result) is meta.status
    observation, control = build_views(
        result,
        DEFAULT_BOUNDS,
        tool=meta.tool,
        session_id=meta.session_id,
        scope=meta.scope,
        fingerprint=meta.scope_fingerprint,
        duplicate_of=meta.duplicate_of,
        attempts=meta.attempts,
        timings=meta.timings,
        indexed_chunks=meta.indexed_chunks,
    )
    expected = observe(result, DEFAULT_BOUNDS)
    assert encode_view(observation) == encode_view(expected)
    assert encode_view(control) == encode_view(control_view(result, meta, expected))


def test_final_status_follows_the_evidence_status_only() -> None:
    statuses = {name: final_status(run_case(name)[0]) for name in CASES}
    for name, status in statuses.items():
        want = LifecycleStatus.ERROR if name.startswith("error") else LifecycleStatus.READY
        assert status is want, name


def test_build_views_defaults_and_the_model_cut() -> None:
    result = _big_rag(40)
    observation, control = build_views(
        result, Bounds(observation_max_bytes=1024), tool="t", session_id="s"
    )
    assert observation.truncated and control.truncated is True  # type: ignore[union-attr]
    assert (control.attempts, control.timings, control.status) == (1, Timings(), "READY")
    assert control.scope is control.scope_fingerprint is control.duplicate_of is msgspec.UNSET


def test_build_error_views_keeps_a_valid_id_and_cuts_the_tool_name() -> None:
    result, observation, control = build_error_views(
        ErrorCode.UNAVAILABLE, "  the queue\nis down  ", "call_9", tool="x" * 100,
        session_id="sess-1", bounds=DEFAULT_BOUNDS,
    )  # fmt: skip
    assert result == error_result(ErrorCode.UNAVAILABLE, "the queue is down", "call_9")
    assert observation == observe(result, DEFAULT_BOUNDS)
    assert control.tool == "x" * 64
    assert (control.tool_call_id, control.session_id) == ("call_9", "sess-1")
    assert (control.status, control.error_code) == (LifecycleStatus.ERROR, ErrorCode.UNAVAILABLE)


@pytest.mark.parametrize("tool_call_id", [None, "", " call", "c" * 257, "caf\u00e9", 7, b"call"])
def test_build_error_views_never_carries_an_invalid_id(tool_call_id: object) -> None:
    result, observation, control = build_error_views(
        ErrorCode.UNAVAILABLE, "down", tool_call_id, tool="query_logs", session_id="s",
        bounds=DEFAULT_BOUNDS,
    )  # fmt: skip
    assert result.tool_call_id is observation.tool_call_id is control.tool_call_id is msgspec.UNSET
    assert b"tool_call_id" not in encode_view(observation) + encode_view(control)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    code=st.sampled_from(ErrorCode),
    message=st.text(max_size=2000),
    tool_call_id=st.text(max_size=300) | st.none() | st.integers(),
    tool=st.text(max_size=200),
)
def test_error_views_agree_and_stay_within_budget(
    code: ErrorCode, message: str, tool_call_id: object, tool: str
) -> None:
    bounds = Bounds(observation_max_bytes=1024)
    result, observation, control = build_error_views(
        code, message, tool_call_id, tool=tool, session_id="s", bounds=bounds
    )
    assert isinstance(result, ErrorResult) and result.error.code is code
    assert (result.tool_call_id == tool_call_id) == is_valid_tool_call_id(tool_call_id)
    assert result.tool_call_id == observation.tool_call_id == control.tool_call_id
    assert len(encode_view(observation)) <= bounds.observation_max_bytes
    assert control.tool == tool[:64] and control.status is LifecycleStatus.ERROR
    assert control.evidence_status is observation.evidence_status is EvidenceStatus.ERROR
