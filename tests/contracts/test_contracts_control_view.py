"""The Control View built from the fields that are set (`contracts.views.control_view`) is the
view the plain construction with every field gave (kept here as the reference)."""

from __future__ import annotations

from typing import Any

import msgspec
from contract_samples import logs_upstream, mysql_upstream, rag_upstream
from hypothesis import given
from hypothesis import strategies as st
from msgspec import UNSET, UnsetType

from contracts import (
    DEFAULT_BOUNDS,
    CanonicalResult,
    ErrorCode,
    LifecycleStatus,
    LookupKnowledgeRequest,
    RelevanceLevel,
    Timings,
    error_result,
    project,
)
from contracts.requests import QueryLogsRequest, QueryMysqlRequest
from contracts.results import ErrorResult, LogsResult, MysqlResult, RagResult, RecordTimes
from contracts.views import ControlView, InvocationMeta, control_view, observe


def _reference(
    result: CanonicalResult, meta: InvocationMeta, observation: Any = None
) -> ControlView:
    # `control_view` as it was: every field passed, UNSET where not set.
    returned: Any = UNSET
    match_count: Any = UNSET
    lower_bound: Any = UNSET
    unparsed: tuple[Any, Any, Any, Any] = (UNSET, UNSET, UNSET, UNSET)
    relevance: Any = UNSET
    source_kind: Any = UNSET
    error_code: Any = UNSET
    truncated: Any = UNSET
    warnings: Any = UNSET
    match result:
        case ErrorResult():
            error_code = result.error.code
        case RagResult():
            returned, relevance = result.returned_count, result.relevance_level
            truncated = result.truncated
        case LogsResult():
            returned, match_count = result.returned_count, result.match_count
            source_kind, truncated = result.source_kind, result.truncated
            lower_bound = result.match_count_lower_bound
            unparsed = (
                result.unparsed_lines, result.unread_files, result.broken_files,
                result.skipped_files,
            )  # fmt: skip
        case MysqlResult():
            returned, truncated = result.returned_count, result.truncated
            warnings = result.warnings
    if observation is not None and getattr(observation, "truncated", False):
        truncated = True
    rag = isinstance(result, RagResult)
    return ControlView(
        tool=meta.tool, tool_call_id=result.tool_call_id, session_id=meta.session_id,
        status=meta.status, evidence_status=result.evidence_status, scope=meta.scope,
        scope_fingerprint=meta.scope_fingerprint, duplicate_of=meta.duplicate_of,
        returned_count=returned, match_count=match_count, match_count_lower_bound=lower_bound,
        unparsed_lines=unparsed[0], unread_files=unparsed[1], broken_files=unparsed[2],
        skipped_files=unparsed[3],
        relevance_level=relevance,
        truncated=truncated, source_kind=source_kind, error_code=error_code,
        attempts=meta.attempts, timings=meta.timings,
        indexed_chunks=meta.indexed_chunks if rag else UNSET,
        record_times=result.record_times if isinstance(result, LogsResult) else UNSET,
        source=meta.source, warnings=warnings,
        index_rebuilding=meta.index_rebuilding if rag else UNSET,
        skipped_runbooks=meta.skipped_runbooks if rag else UNSET,
    )  # fmt: skip


def _results() -> list[CanonicalResult]:
    rag = LookupKnowledgeRequest(query="pool")
    logs = QueryLogsRequest(topic="APPLICATION", query="timeout")  # type: ignore[arg-type]
    mysql = QueryMysqlRequest(data_source="orders", sql="select 1")
    found: list[CanonicalResult] = [
        project("lookup_knowledge", rag, "c1", rag_upstream(), DEFAULT_BOUNDS),
        project("lookup_knowledge", rag, "c1", rag_upstream("nope"), DEFAULT_BOUNDS),
        project("lookup_knowledge", rag, "c1", {"hits": []}, DEFAULT_BOUNDS),
        project("query_logs", logs, "c2", logs_upstream(), DEFAULT_BOUNDS),
        project("query_logs", logs, "c2", logs_upstream(matches=False), DEFAULT_BOUNDS),
        project("query_mysql", mysql, "c3", mysql_upstream(), DEFAULT_BOUNDS),
        error_result(ErrorCode.TIMEOUT, "slow", "c4"),
        error_result(ErrorCode.INVALID_TOOL_CALL_ID, "no id"),
    ]
    first = found[3]
    assert isinstance(first, LogsResult)
    found.append(
        msgspec.structs.replace(
            first, match_count_lower_bound=True, unparsed_lines=3, unread_files=1, broken_files=1,
            skipped_files=1, record_times=RecordTimes(future_records=2),
        )
    )  # fmt: skip
    mysql_result = found[5]
    assert isinstance(mysql_result, MysqlResult)
    found.append(msgspec.structs.replace(mysql_result, warnings=["1365: Division by 0"]))
    return found


def _or_unset(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.just(UNSET) | values


_METAS = st.builds(
    InvocationMeta,
    tool=st.sampled_from(["lookup_knowledge", "query_logs"]),
    session_id=st.just("s1"),
    status=st.sampled_from(list(LifecycleStatus)),
    scope=_or_unset(st.just({"tool": "lookup_knowledge", "query": "pool"})),
    scope_fingerprint=_or_unset(st.just("ab" * 16)),
    duplicate_of=_or_unset(st.just("c0")),
    attempts=st.integers(1, 3),
    timings=st.just(Timings(queue_ms=1.5)),
    indexed_chunks=_or_unset(st.integers(0, 9)),
    source=_or_unset(st.just({"runbooks": "x"})),
    index_rebuilding=_or_unset(st.just(True)),
    skipped_runbooks=_or_unset(st.just(["big.md"])),
)
_RESULTS = _results()


@given(st.sampled_from(_RESULTS), _METAS, st.booleans())
def test_the_view_is_the_one_every_field_gave(
    result: CanonicalResult, meta: InvocationMeta, with_observation: bool
) -> None:
    observation = observe(result, DEFAULT_BOUNDS) if with_observation else None
    built = control_view(result, meta, observation)
    assert built == _reference(result, meta, observation)
    assert msgspec.json.encode(built) == msgspec.json.encode(_reference(result, meta, observation))


def test_a_cut_observation_marks_the_view_truncated() -> None:
    meta = InvocationMeta(tool="lookup_knowledge", session_id="s1", status=LifecycleStatus.READY)
    result = _RESULTS[0]
    assert isinstance(result, RagResult) and result.relevance_level is RelevanceLevel.HIGH
    cut = msgspec.structs.replace(observe(result, DEFAULT_BOUNDS), truncated=True)
    assert control_view(result, meta, cut).truncated is True
    assert control_view(result, meta).truncated is False
    unset: UnsetType = UNSET
    assert control_view(_RESULTS[6], meta, cut).truncated is True
    assert _reference(_RESULTS[6], meta).truncated is unset
