"""Incident time, the pure parts: as-of values, the window, and how both show in a scope."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts import (
    AS_OF_SKEW_MS,
    AsOfError,
    LogScope,
    RecordTimes,
    Topic,
    as_of_problem,
    control_view,
    fingerprint_scope,
    format_utc_ms,
    has_zone,
    parse_as_of,
    pin_scope,
    project_logs,
    window_bounds,
    with_window,
)
from contracts.bounds import DEFAULT_BOUNDS
from contracts.logs import LogsUpstream
from contracts.results import encode_result
from contracts.status import LifecycleStatus
from contracts.views import InvocationMeta

T0 = 1_773_453_600_000  # 2026-03-14T02:00:00Z


@pytest.mark.parametrize(
    "text",
    ["2026-03-14T10:00:00+08:00", "2026-03-14T02:00:00Z", "2026-03-14T02:00:00.000+00:00",
     " 2026-03-14T02:00:00z "],
)  # fmt: skip
def test_an_iso_time_with_a_zone_is_its_epoch_ms(text: str) -> None:
    assert parse_as_of(text) == T0


def test_an_aware_datetime_is_taken() -> None:
    assert parse_as_of(datetime(2026, 3, 14, 10, tzinfo=timezone(timedelta(hours=8)))) == T0


def test_a_time_without_a_zone_is_utc_and_says_so() -> None:
    assert parse_as_of("2026-03-14T02:00:00") == T0 == parse_as_of(datetime(2026, 3, 14, 2))
    assert not has_zone("2026-03-14T02:00:00") and not has_zone(datetime(2026, 3, 14))
    assert has_zone("2026-03-14T02:00:00Z") and has_zone("2026-03-14T10:00:00+08:00")
    assert has_zone("yesterday")  # not a time: parse_as_of refuses it


@pytest.mark.parametrize(
    ("value", "says"),
    [("yesterday", "not an ISO 8601"), ("", "not an ISO 8601"),
     ("1969-12-31T23:59:59Z", "between 1970"), (12345, "ISO 8601 time or a datetime")],
)  # fmt: skip
def test_a_bad_as_of_is_a_typed_error_saying_why(value: object, says: str) -> None:
    with pytest.raises(AsOfError, match=says):
        parse_as_of(value)  # type: ignore[arg-type]
    assert issubclass(AsOfError, ValueError)


def test_a_future_as_of_beyond_the_skew_is_refused_not_clamped() -> None:
    assert as_of_problem(T0 + AS_OF_SKEW_MS, T0) == ""
    assert "in the future" in as_of_problem(T0 + AS_OF_SKEW_MS + 1, T0)
    assert as_of_problem(T0, None) == ""
    assert "1970" in as_of_problem(-1, T0)


def test_the_window_counts_back_from_its_end() -> None:
    assert window_bounds(60, T0) == (T0 - 3_600_000, T0)
    assert format_utc_ms(T0) == "2026-03-14T02:00:00.000Z"


def test_a_pinned_as_of_is_part_of_the_fingerprint_and_the_window_is_not() -> None:
    scope = {"tool": "query_logs", "topic": "APPLICATION", "query": "x", "lookback_minutes": 60}
    assert pin_scope(scope, None) is scope
    pinned = pin_scope(scope, T0)
    assert pinned["as_of"] == "2026-03-14T02:00:00.000Z" and "as_of" not in scope
    assert fingerprint_scope(pinned) != fingerprint_scope(scope)
    shown = with_window(pinned, "a", "b")
    assert (shown["start_time"], shown["end_time"]) == ("a", "b")


@given(st.integers(min_value=0, max_value=253_402_300_799_999))
def test_every_ms_in_range_reads_back_through_its_iso_text(epoch_ms: int) -> None:
    assert parse_as_of(format_utc_ms(epoch_ms)) == epoch_ms


def test_record_times_reach_the_control_view_only() -> None:
    scope = LogScope(topic=Topic.APPLICATION, query="x", lookback_minutes=60,
                     start_time="2026-03-14T01:00:00.000Z", end_time="2026-03-14T02:00:00.000Z")  # fmt: skip
    times = RecordTimes(nearest_before="2026-03-11T01:00:00.000Z", future_records=3,
                        latest=format_utc_ms(T0 + 8 * 3_600_000))  # fmt: skip
    upstream = LogsUpstream(source_kind="FILE", scope=scope, match_count=0, record_times=times)
    result = project_logs("c1", upstream, DEFAULT_BOUNDS)
    assert result.evidence_status == "NO_EVIDENCE" and result.record_times == times
    meta = InvocationMeta(tool="query_logs", session_id="s", status=LifecycleStatus.READY)
    control = msgspec.to_builtins(control_view(result, meta))
    assert control["record_times"] == {
        "nearest_before": "2026-03-11T01:00:00.000Z", "future_records": 3,
        "latest": "2026-03-14T10:00:00.000Z",
    }  # fmt: skip
    plain = project_logs("c1", msgspec.structs.replace(upstream, record_times=msgspec.UNSET),
                         DEFAULT_BOUNDS)  # fmt: skip
    assert b"record_times" not in encode_result(plain)  # omitted when there is nothing to say
    assert datetime.fromisoformat("2026-03-14T02:00:00Z").astimezone(UTC).hour == 2
