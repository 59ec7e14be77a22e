"""Real log backends in the contract: the source kinds, and a count that is a lower bound."""

from __future__ import annotations

import msgspec
from contract_samples import logs_upstream

from contracts import (
    DEFAULT_BOUNDS,
    InvocationMeta,
    LifecycleStatus,
    SourceKind,
    control_view,
    encode_result,
    observe,
    project_logs,
)


def test_source_kinds_are_the_three_backends() -> None:
    assert [k.value for k in SourceKind] == ["MOCK", "FILE", "CLICKHOUSE"]


def test_an_exact_count_leaves_the_wire_unchanged() -> None:
    result = project_logs("c1", logs_upstream(), DEFAULT_BOUNDS)
    assert b"match_count_lower_bound" not in encode_result(result)
    meta = InvocationMeta(tool="query_logs", session_id="s", status=LifecycleStatus.READY)
    assert b"lower_bound" not in msgspec.json.encode(control_view(result, meta))


def test_a_lower_bound_is_truncated_and_marked_in_the_control_view_only() -> None:
    upstream = msgspec.structs.replace(
        logs_upstream(), source_kind=SourceKind.FILE, match_count_lower_bound=True
    )
    result = project_logs("c1", upstream, DEFAULT_BOUNDS)
    assert result.truncated and result.match_count_lower_bound is True
    assert result.source_kind == "FILE"
    meta = InvocationMeta(tool="query_logs", session_id="s", status=LifecycleStatus.READY)
    control = control_view(result, meta)
    assert control.match_count_lower_bound is True and control.source_kind == "FILE"
    observation = msgspec.json.encode(observe(result, DEFAULT_BOUNDS))
    assert b"lower_bound" not in observation and b"match_count" not in observation
    assert b'"source_kind":"FILE"' in observation
