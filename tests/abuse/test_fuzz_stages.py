"""Property-based fuzzing of decode -> project -> views with arbitrary JSON and upstream shapes.

No input may crash the stages, produce a Model Observation over the byte budget, put a key
outside the contract's field sets into either view, or fail without a typed error code.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts import (
    Bounds,
    ErrorCode,
    ErrorResult,
    InvocationMeta,
    LifecycleStatus,
    control_view,
    decode_invocation,
    encode_view,
    observe,
    project,
)

TOOLS = ("lookup_knowledge", "query_logs", "query_mysql")
BOUNDS = Bounds(observation_max_bytes=2048, rag_max_evidence=3, logs_max_events=5)
FIELDS = {
    "rag": {"tool_call_id", "evidence_status", "query", "evidence", "relevance_level", "truncated"},
    "logs": {"tool_call_id", "evidence_status", "source_kind", "scope", "patterns", "events",
             "truncated"},
    "mysql": {"tool_call_id", "evidence_status", "columns", "rows", "truncated"},
    "error": {"tool_call_id", "evidence_status", "error"},
}  # fmt: skip
EVIDENCE_KEYS = {"document_id", "source", "title", "breadcrumb", "excerpt"}
SCOPE_KEYS = {"topic", "query", "lookback_minutes", "start_time", "end_time"}
PATTERN_KEYS = {"template", "count", "level", "first_seen", "last_seen"}
EVENT_KEYS = {"timestamp", "level", "service", "message", "fields"}
CONTROL_KEYS = {
    "tool", "tool_call_id", "session_id", "status", "evidence_status", "scope",
    "scope_fingerprint", "duplicate_of", "returned_count", "match_count", "relevance_level",
    "truncated", "source_kind", "error_code", "attempts", "timings", "match_count_lower_bound",
    "indexed_chunks", "index_rebuilding", "skipped_runbooks",
}  # fmt: skip
CODES = {c.value for c in ErrorCode}

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=6)
    ),
    max_leaves=30,
)
words = st.text(min_size=0, max_size=3000)
hit = st.fixed_dictionaries(
    {},
    optional={
        "documentId": json_values, "source": words, "title": words, "breadcrumb": json_values,
        "content": words, "text": json_values, "snippet": words, "score": json_values,
        "relevanceLevel": st.sampled_from(["high", "MEDIUM", "low", "bogus", ""]) | json_values,
    },
)  # fmt: skip
rag_upstream = (
    json_values
    | st.fixed_dictionaries(
        {"contextPack": st.fixed_dictionaries({"hits": st.lists(hit | json_values, max_size=12)})},
        optional={"retrievalTrace": json_values, "relevance_level": json_values},
    )
    | st.fixed_dictionaries({"results": st.lists(hit, max_size=12)})
)
scope = st.fixed_dictionaries(
    {"topic": st.sampled_from(["APPLICATION", "SYSTEM_EVENTS", "nope"]), "query": words,
     "lookback_minutes": st.integers(-5, 5000) | json_values, "start_time": words,
     "end_time": words},
)  # fmt: skip
record = st.fixed_dictionaries(
    {"timestamp": words, "level": words, "service": words, "message": words},
    optional={
        "fields": st.dictionaries(st.text(max_size=20), scalars, max_size=8),
        "template": words,
    },
)
pattern = st.fixed_dictionaries(
    {"template": words, "count": st.integers() | json_values, "level": words,
     "first_seen": words, "last_seen": words},
)  # fmt: skip
logs_upstream = json_values | st.fixed_dictionaries(
    {"source_kind": words | json_values, "scope": scope | json_values,
     "match_count": st.integers() | json_values},
    optional={"patterns": st.lists(pattern, max_size=12) | json_values,
              "records": st.lists(record | json_values, max_size=40)},
)  # fmt: skip
mysql_upstream = json_values | st.fixed_dictionaries(
    {"columns": st.lists(words, max_size=50) | json_values,
     "rows": st.lists(st.lists(json_values, max_size=50), max_size=80) | json_values},
    optional={"stopped_early": json_values},
)  # fmt: skip
REQUESTS = {
    "lookup_knowledge": {"query": "pool exhausted"},
    "query_logs": {"topic": "APPLICATION", "query": "timeout"},
    "query_mysql": {"data_source": "shop", "sql": "SELECT 1"},
}
UPSTREAMS = {
    "lookup_knowledge": rag_upstream,
    "query_logs": logs_upstream,
    "query_mysql": mysql_upstream,
}


def kind_of(view: dict[str, Any]) -> str:
    if "error" in view:
        return "error"
    if "evidence" in view:
        return "rag"
    if "events" in view:
        return "logs"
    return "mysql"


def check_views(result: Any, tool: str) -> None:
    """Budget, field sets and typed errors of both views of one canonical result."""
    observation = observe(result, BOUNDS)
    data = encode_view(observation)
    assert len(data) <= BOUNDS.observation_max_bytes
    view = json.loads(data)
    assert set(view) <= FIELDS[kind_of(view)]
    for item in view.get("evidence", []):
        assert set(item) <= EVIDENCE_KEYS
    for item in view.get("patterns", []):
        assert set(item) <= PATTERN_KEYS
    for item in view.get("events", []):
        assert set(item) <= EVENT_KEYS
    if "scope" in view:
        assert set(view["scope"]) <= SCOPE_KEYS
    if "error" in view:
        assert set(view["error"]) == {"code", "message"}
        assert view["error"]["code"] in CODES and view["evidence_status"] == "ERROR"
    if view.get("evidence_status") == "NO_EVIDENCE":
        assert not view.get("evidence") and not view.get("events") and not view.get("rows")
    status = LifecycleStatus.ERROR if isinstance(result, ErrorResult) else LifecycleStatus.READY
    meta = InvocationMeta(tool=tool, session_id="fuzz", status=status)
    control = json.loads(encode_view(control_view(result, meta, observation)))
    assert set(control) <= CONTROL_KEYS
    assert not {"evidence", "events", "rows", "patterns"} & set(control)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tool=st.sampled_from(TOOLS) | st.text(max_size=20),
    arguments=json_values | st.text() | st.binary(),
)
def test_decode_arbitrary_arguments_is_typed(tool: str, arguments: Any) -> None:
    decoded = decode_invocation(tool, "call_fuzz", arguments)
    if isinstance(decoded, ErrorResult):
        assert decoded.tool_call_id == "call_fuzz"
        assert decoded.error.code in (ErrorCode.SCHEMA, ErrorCode.UNKNOWN_TOOL)
        assert len(decoded.error.message) < 2000
        check_views(decoded, str(tool))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), tool=st.sampled_from(TOOLS))
def test_project_arbitrary_upstream_is_bounded_and_typed(data: st.DataObject, tool: str) -> None:
    upstream = data.draw(UPSTREAMS[tool])
    request = decode_invocation(tool, "call_fuzz", REQUESTS[tool])
    assert not isinstance(request, ErrorResult)
    result = project(tool, request, "call_fuzz", upstream, BOUNDS)
    assert result.tool_call_id == "call_fuzz"
    if isinstance(result, ErrorResult):
        assert result.error.code == ErrorCode.PROJECTION
    check_views(result, tool)


@settings(max_examples=100, deadline=None)
@given(text=st.text(min_size=1, max_size=200))
def test_arguments_through_json_text_and_object_agree(text: str) -> None:
    args = {"query": text}
    as_text = decode_invocation("lookup_knowledge", "c1", json.dumps(args))
    as_object = decode_invocation("lookup_knowledge", "c1", args)
    assert msgspec.json.encode(as_text) == msgspec.json.encode(as_object)
