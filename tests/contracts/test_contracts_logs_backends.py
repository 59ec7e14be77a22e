"""Real log backends in the contract: the source kinds, and a count that is a lower bound."""

from __future__ import annotations

import msgspec
from contract_samples import logs_upstream

from contracts import (
    DEFAULT_BOUNDS,
    InvocationMeta,
    LifecycleStatus,
    LogRecord,
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


def test_unparsed_lines_unread_files_and_notes_reach_the_views() -> None:
    notes = ["3 lines read are not in their log format", "x" * 1000, "c", "d", "e"]
    upstream = msgspec.structs.replace(
        logs_upstream(), source_kind=SourceKind.FILE, unparsed_lines=3, unread_files=1,
        broken_files=2, skipped_files=1, notes=notes,
    )  # fmt: skip
    result = project_logs("c1", upstream, DEFAULT_BOUNDS)
    assert result.unparsed_lines == 3 and result.unread_files == 1 and result.truncated
    assert result.broken_files == 2 and result.skipped_files == 1
    assert isinstance(result.notes, list) and len(result.notes) == 4
    assert (
        result.notes[0] == notes[0] and len(result.notes[1]) <= 2 * DEFAULT_BOUNDS.logs_field_chars
    )
    meta = InvocationMeta(tool="query_logs", session_id="s", status=LifecycleStatus.READY)
    control = control_view(result, meta)
    assert control.unparsed_lines == 3 and control.unread_files == 1
    assert control.broken_files == 2 and control.skipped_files == 1
    observation = observe(result, DEFAULT_BOUNDS)
    assert getattr(observation, "notes", None) == result.notes
    # none: the wire is unchanged
    plain = project_logs("c1", logs_upstream(), DEFAULT_BOUNDS)
    assert b"unparsed" not in encode_result(plain) and b"notes" not in encode_result(plain)
    assert b"broken" not in encode_result(plain) and b"skipped" not in encode_result(plain)


def test_events_keep_a_bounded_field_count_and_the_result_a_byte_bound() -> None:
    base = logs_upstream()
    wide = {f"f{i}": "v" * 100 for i in range(200)}
    records = [msgspec.structs.replace(r, fields=wide) for r in base.records]
    upstream = msgspec.structs.replace(base, records=records)
    result = project_logs("c1", upstream, DEFAULT_BOUNDS)
    assert result.truncated and result.events
    assert all(len(e.fields) == DEFAULT_BOUNDS.logs_max_fields for e in result.events)
    small = msgspec.structs.replace(DEFAULT_BOUNDS, logs_max_bytes=4000)
    tight = project_logs("c1", upstream, small)
    assert tight.truncated and len(tight.events) < len(result.events)
    body = msgspec.json.encode([tight.patterns, tight.events])
    assert len(body) <= 4000


def test_the_byte_bound_drops_routine_events_before_the_severest() -> None:
    # ECS-like JSON records: 19 routine INFO lines with a dozen fields each, and the one
    # FATAL record, whose exception and stack fields make it the largest. Over the byte bound,
    # the largest event left first: the FATAL exemplar went and the INFO ones stayed, so the
    # model was shown no event of the severest pattern (22.9 KiB kept, none of it the crash).
    base = logs_upstream()
    routine = {f"attr_{i}": f"value {i} of a routine request " + "x" * 40 for i in range(14)}
    records = [
        LogRecord(
            timestamp=f"2024-05-01T09:{30 + m:02d}:00+00:00", level="INFO", service="order-svc",
            message=f"GET /api/orders/{m} 200", fields=routine,
        )
        for m in range(19)
    ]  # fmt: skip
    crash = {f"error_stack_{i}": f"at com.shop.Orders.charge(Orders.java:{i}) " + "y" * 80
             for i in range(24)}  # fmt: skip
    records.append(
        LogRecord(
            timestamp="2024-05-01T09:59:00+00:00", level="FATAL", service="order-svc",
            message="OutOfMemoryError: Java heap space", fields=crash,
        )
    )  # fmt: skip
    upstream = msgspec.structs.replace(base, records=records, match_count=20)
    result = project_logs("c1", upstream, DEFAULT_BOUNDS)
    body = msgspec.json.encode([result.patterns, result.events])
    assert result.truncated and len(body) <= DEFAULT_BOUNDS.logs_max_bytes
    assert len(result.events) < 20
    assert any(e.level == "FATAL" for e in result.events), [e.level for e in result.events]


def test_the_observation_budget_drops_routine_events_before_the_severest() -> None:
    # The canonical result fits its bound (22 KiB of 24), the Model Observation's budget is
    # smaller (16 KiB): it dropped trailing events, and the timeline ends with the newest,
    # the crash. Before, the model was shown 14 INFO events and not the FATAL one.
    base = logs_upstream()
    routine = {f"attr_{i}": f"value {i} of a routine request " + "x" * 40 for i in range(12)}
    records = [
        LogRecord(
            timestamp=f"2024-05-01T09:{30 + m:02d}:00+00:00", level="INFO", service="order-svc",
            message=f"GET /api/orders/{m} 200", fields=routine,
        )
        for m in range(19)
    ]  # fmt: skip
    records.append(
        LogRecord(
            timestamp="2024-05-01T09:59:00+00:00", level="FATAL", service="order-svc",
            message="OutOfMemoryError: Java heap space",
            fields={f"frame_{i}": f"at com.shop.Orders.charge(Orders.java:{i})" for i in range(6)},
        )
    )  # fmt: skip
    upstream = msgspec.structs.replace(base, records=records, match_count=20)
    result = project_logs("c1", upstream, DEFAULT_BOUNDS)
    assert [e.level for e in result.events][-1] == "FATAL"
    observation = observe(result, DEFAULT_BOUNDS)
    assert len(msgspec.json.encode(observation)) <= DEFAULT_BOUNDS.observation_max_bytes
    events = getattr(observation, "events", [])
    assert observation.truncated and len(events) < 20
    assert [e.level for e in events][-1] == "FATAL", [e.level for e in events]
    assert [e.timestamp for e in events] == sorted(e.timestamp for e in events)
