"""Logs projector: scope, patterns over all matches, a bounded timeline, MOCK provenance."""

from __future__ import annotations

import msgspec
import pytest
from contract_samples import logs_upstream

from contracts import (
    DEFAULT_BOUNDS,
    Bounds,
    EvidenceStatus,
    LogRecord,
    LogsUpstream,
    UpstreamPattern,
    project,
    project_logs,
)
from contracts.logs import level_rank, mask_template


def test_mock_logs_keep_scope_patterns_timeline_and_distinct_counts() -> None:
    upstream = logs_upstream()
    result = project_logs("call_1", upstream, DEFAULT_BOUNDS)
    assert result.evidence_status is EvidenceStatus.EVIDENCE_FOUND
    assert result.source_kind == "MOCK"
    assert result.scope == upstream.scope
    assert result.match_count == 37
    assert result.returned_count == len(result.events) == 6
    assert result.match_count != result.returned_count
    assert result.truncated  # 37 matches, 6 shown
    timestamps = [e.timestamp for e in result.events]
    assert timestamps == sorted(timestamps)
    templates = [p.template for p in result.patterns]
    assert "HikariPool-<NUM> - Connection is not available, timed out <NUM>" in templates
    hikari = next(p for p in result.patterns if p.template.startswith("HikariPool"))
    assert (hikari.count, hikari.level) == (2, "ERROR")
    assert hikari.first_seen < hikari.last_seen
    # errors rank first
    assert result.patterns[0].level == "ERROR"


def test_no_match_in_scope_is_no_evidence() -> None:
    result = project_logs("call_1", logs_upstream(matches=False), DEFAULT_BOUNDS)
    assert result.evidence_status is EvidenceStatus.NO_EVIDENCE
    assert (result.match_count, result.returned_count, result.truncated) == (0, 0, False)
    assert result.patterns == [] and result.events == []


def test_all_records_returned_is_not_truncated() -> None:
    base = logs_upstream()
    upstream = msgspec.structs.replace(base, match_count=len(base.records))
    result = project_logs("call_1", upstream, DEFAULT_BOUNDS)
    assert not result.truncated
    assert result.returned_count == result.match_count == 6


def test_match_count_is_never_below_the_records_returned() -> None:
    upstream = msgspec.structs.replace(logs_upstream(), match_count=0)
    assert project_logs("c", upstream, DEFAULT_BOUNDS).match_count == 6


def test_upstream_patterns_are_used_severe_first_then_largest_and_new_alternately() -> None:
    scope = logs_upstream().scope
    steady = UpstreamPattern(
        template="steady", count=900, level="WARN",
        first_seen="2024-05-01T09:30:01+00:00", last_seen="2024-05-01T09:59:00+00:00",
    )  # fmt: skip
    onset = UpstreamPattern(
        template="onset", count=3, level="WARN",
        first_seen="2024-05-01T09:50:00+00:00", last_seen="2024-05-01T09:59:00+00:00",
    )  # fmt: skip
    fatal = UpstreamPattern(
        template="fatal", count=1, level="fatal", first_seen="bad", last_seen="bad"
    )
    upstream = LogsUpstream(
        source_kind="MOCK", scope=scope, match_count=904, patterns=[steady, onset, fatal]
    )
    result = project_logs("c", upstream, DEFAULT_BOUNDS)
    # The fatal one first; then, of one level, the largest group and the new one alternately
    # (before: new before steady, rare before large, so a dominant group could be hidden).
    assert [p.template for p in result.patterns] == ["fatal", "steady", "onset"]
    assert result.evidence_status is EvidenceStatus.EVIDENCE_FOUND
    assert result.events == [] and result.truncated


def test_patterns_events_and_strings_are_bounded() -> None:
    bounds = Bounds(
        logs_max_patterns=2, logs_max_events=3, logs_message_chars=10, logs_template_chars=8,
        logs_field_chars=5,
    )  # fmt: skip
    records = [
        LogRecord(
            timestamp=f"2024-05-01T09:{m:02d}:00",
            level="ERROR" if m % 2 else "INFO",
            service="service-name",
            message=f"kind{m % 4} happened here at step {m}",
            fields={"k": "long value", "n": m, "none": None},
        )
        for m in range(12)
    ]
    upstream = LogsUpstream(
        source_kind="MOCK", scope=logs_upstream().scope, match_count=12, records=records
    )
    result = project_logs("c", upstream, bounds)
    assert len(result.patterns) == 2 and len(result.events) == 3
    assert all(len(p.template) <= 8 for p in result.patterns)
    for event in result.events:
        assert len(event.message) <= 10 and len(event.service) <= 5
        assert event.fields["k"] == "long "
    assert result.truncated and result.returned_count == 3


def test_record_template_given_by_source_wins() -> None:
    record = LogRecord(timestamp="t", level="INFO", service="s", message="m 1", template="T")
    upstream = LogsUpstream(
        source_kind="MOCK", scope=logs_upstream().scope, match_count=1, records=[record]
    )
    result = project_logs("c", upstream, DEFAULT_BOUNDS)
    assert [p.template for p in result.patterns] == ["T"]
    assert not result.truncated


@pytest.mark.parametrize(
    ("message", "template"),
    [
        ("user 42 took 350ms", "user <NUM> took <NUM>"),
        ("id 123e4567-e89b-12d3-a456-426614174000 gone", "id <UUID> gone"),
        ("peer 10.0.0.1:5432 refused", "peer <IP> refused"),
        ("blob deadbeef0123456789 bad", "blob <HEX> bad"),
        ("HikariPool-1 stalled", "HikariPool-<NUM> stalled"),
    ],
)
def test_mask_template(message: str, template: str) -> None:
    assert mask_template(message) == template


def test_level_rank_orders_severity() -> None:
    assert level_rank("fatal") > level_rank("Error") > level_rank("WARN") > level_rank("info")
    assert level_rank("debug") > level_rank("trace?") == 0


def test_project_accepts_recorded_json_builtins() -> None:
    recorded = msgspec.to_builtins(logs_upstream())
    request = None  # the logs projector does not need the request
    result = project("query_logs", request, "call_1", recorded, DEFAULT_BOUNDS)  # type: ignore[arg-type]
    assert result == project_logs("call_1", logs_upstream(), DEFAULT_BOUNDS)


def test_timeline_fills_with_the_most_severe_remaining_records() -> None:
    records = [
        LogRecord(timestamp=f"2024-05-01T09:0{m}:00", level=level, service="s", message="same")
        for m, level in enumerate(["INFO", "INFO", "ERROR", "WARN", "INFO"])
    ]
    upstream = LogsUpstream(
        source_kind="MOCK", scope=logs_upstream().scope, match_count=5, records=records
    )
    result = project_logs("c", upstream, Bounds(logs_max_events=3))
    # first and last of the one pattern, then the most severe of the rest
    assert [e.timestamp[-5:-3] for e in result.events] == ["00", "02", "04"]
    assert [e.level for e in result.events] == ["INFO", "ERROR", "INFO"]
    assert result.truncated


def test_a_dominant_group_among_many_rare_ones_reaches_the_model_with_its_count() -> None:
    # The brute-force case: 368 identical failures and 150 rare variants, none with a level
    # (syslog). Before, the 8 shown were rare ones of count 1 and the 368 were not seen.
    scope = logs_upstream().scope
    at = "2024-05-01T09:{:02d}:00+00:00"
    brute = LogRecord(
        timestamp=at.format(10),
        level="",
        service="sshd",
        message="Failed password for root from 183.62.140.253 port 4242 ssh2",
        template="Failed password for root from <IP> port <NUM> ssh2",
    )
    rare = [
        LogRecord(
            timestamp=at.format(11 + i % 40),
            level="",
            service="sshd",
            message=f"variant {i} of a failed password",
            template=f"variant {i}",
        )
        for i in range(150)
    ]
    patterns = [
        UpstreamPattern(
            template=brute.template,
            count=368,
            level="",
            first_seen=at.format(10),
            last_seen=at.format(58),
        ),
        *(
            UpstreamPattern(
                template=f"variant {i}",
                count=1,
                level="",
                first_seen=r.timestamp,
                last_seen=r.timestamp,
            )
            for i, r in enumerate(rare)
        ),
    ]
    upstream = LogsUpstream(
        source_kind="FILE", scope=scope, match_count=518, patterns=patterns, records=[brute, *rare]
    )
    result = project_logs("c", upstream, DEFAULT_BOUNDS)
    assert (result.patterns[0].template, result.patterns[0].count) == (brute.template, 368)
    assert len(result.patterns) == DEFAULT_BOUNDS.logs_max_patterns and result.truncated
    assert brute.message in [e.message for e in result.events]
    assert sum(1 for e in result.events if e.message.startswith("variant")) >= 4
