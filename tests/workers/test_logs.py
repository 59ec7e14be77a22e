"""The MOCK `query_logs` source: query language, evidence, negatives, bounds, determinism."""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import workers.sources.logs.source
from contracts import (
    DEFAULT_BOUNDS,
    ErrorCode,
    EvidenceStatus,
    LifecycleStatus,
    LogsResult,
    LogsUpstream,
    QueryLogsRequest,
    Topic,
    project_logs,
)
from pipeline.lifecycle import final_status
from workers.sources import SourceError
from workers.sources.logs.mocklog import scenario_info
from workers.sources.logs.source import (
    SCENARIOS,
    Clause,
    MockLogSettings,
    MockLogSource,
    ParsedQuery,
    check_fields,
    parse_log_query,
)

APP, DB, SYS = Topic.APPLICATION, Topic.DATABASE_SLOW_QUERY, Topic.SYSTEM_EVENTS
_ENC = msgspec.json.Encoder()


async def ask(
    scenario: str, topic: Topic, query: str, lookback: int | None = None
) -> tuple[LogsUpstream, LogsResult]:
    source = MockLogSource(MockLogSettings(scenario=scenario))
    upstream = await source.fetch(
        QueryLogsRequest(topic=topic, query=query, lookback_minutes=lookback)
    )
    return upstream, project_logs("call-1", upstream, DEFAULT_BOUNDS)


def text_of(result: LogsResult) -> str:
    parts = [p.template for p in result.patterns] + [e.message for e in result.events]
    parts += [str(v) for e in result.events for v in e.fields.values()]
    return "\n".join(parts)


# --- the query language -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "clauses"),
    [
        ("", ()),
        ("   ", ()),
        ("Timeout", (Clause(value="timeout"),)),
        ('"Connection not available"', (Clause(value="connection not available"),)),
        ("-health", (Clause(value="health", negated=True),)),
        ("level:ERROR", (Clause(field="level", value="error"),)),
        ("Service:order-service", (Clause(field="service", value="order-service"),)),
        ("http_status:503", (Clause(field="http_status", value="503", number=503.0),)),
        ("cost_ms:>=3000", (Clause(field="cost_ms", op="ge", number=3000.0),)),
        ("-reason:Started", (Clause(field="reason", value="started", negated=True),)),
        ('uri:"/api/v1/orders"', (Clause(field="uri", value="/api/v1/orders"),)),
        ("exception:*", (Clause(field="exception", op="exists"),)),
        ("timeout AND * pool*", (Clause(value="timeout"), Clause(value="pool"))),
        ("http://risk-service", (Clause(value="http://risk-service"),)),
        ("10:00", (Clause(value="10:00"),)),
    ],
)
def test_parse_valid(text: str, clauses: tuple[Clause, ...]) -> None:
    assert parse_log_query(text) == ParsedQuery(clauses=clauses)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('"unbalanced phrase', "unbalanced quote"),
        ('level:"ERROR', "unbalanced quote"),
        ("level:", "has no value"),
        ('level:""', "has no value"),
        ("timeout -", "lone '-'"),
        ("-", "lone '-'"),
        ('""', "empty quoted phrase"),
        ('"a"b', "after the closing quote"),
        ('abc"def"', "must start a phrase"),
        ('level:a"b"', "must start a phrase"),
        ("timeout OR refused", "OR is not supported"),
        ("NOT health", "NOT is not supported"),
        ("cost_ms:>abc", "needs a number"),
        ("-*", "exclude every record"),
    ],
)
def test_parse_invalid_is_schema_error(text: str, says: str) -> None:
    with pytest.raises(SourceError) as caught:
        parse_log_query(text)
    assert caught.value.code is ErrorCode.SCHEMA
    assert says in caught.value.message


@pytest.mark.parametrize(
    ("topic", "text", "says"),
    [
        (APP, "reason:OOMKilled", "unknown field 'reason' for topic APPLICATION"),
        (SYS, "duration_ms:>5", "unknown field 'duration_ms'"),
        (APP, "http_status:5xx", "takes a number"),
        (APP, "pod:>3", "is text"),
    ],
)
async def test_fields_checked_against_topic(topic: Topic, text: str, says: str) -> None:
    with pytest.raises(SourceError) as caught:
        check_fields(parse_log_query(text), topic)
    assert caught.value.code is ErrorCode.SCHEMA and says in caught.value.message
    with pytest.raises(SourceError):  # and fetch refuses it the same way, before any search
        await ask("db-pool-exhaustion", topic, text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from('ab:-"* \tORNT>=<5'), max_size=24))
def test_any_text_parses_or_is_a_schema_error(text: str) -> None:
    try:
        parse_log_query(text)
    except SourceError as exc:
        assert exc.code is ErrorCode.SCHEMA and exc.message.startswith("query: ")


_WORDS = (
    "timeout",
    "order",
    "pool",
    "health",
    "refund",
    "503",
    "warn",
    '"timed out"',
    "level:WARN",
    "service:api-gateway",
    "http_status:503",
    "cost_ms:>1000",
    "uri:/api/v1/orders",
)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(_WORDS), st.sampled_from(_WORDS))
async def test_term_and_its_exclusion_partition_the_window(first: str, second: str) -> None:
    _, everything = await ask("db-pool-exhaustion", APP, "")
    with_it, _ = await ask("db-pool-exhaustion", APP, f"{first} {second}")
    without, _ = await ask("db-pool-exhaustion", APP, f"{first} -{second}")
    only_first, _ = await ask("db-pool-exhaustion", APP, first)
    assert with_it.match_count + without.match_count == only_first.match_count
    assert only_first.match_count <= everything.match_count


# --- per scenario: the queries an engineer runs find the cause ----------------------------------

FINDS = [
    ("db-pool-exhaustion", APP, "timeout", "ERROR", "Connection acquisition timeout"),
    ("db-pool-exhaustion", APP, "RefundService", "WARN", "RefundService.compensateFailedRefund"),
    ("db-pool-exhaustion", APP, '"pool stats"', "WARN", "waiting="),
    ("db-pool-exhaustion", APP, "level:ERROR service:order-service", "ERROR", "503"),
    ("db-pool-exhaustion", SYS, "2.3.1", "INFO", "Scaled up replica set"),
    ("db-pool-exhaustion", SYS, "reason:Unhealthy", "WARN", "Readiness probe failed"),
    ("db-pool-exhaustion", DB, "", "WARN", "GROUP BY DATE(created_at)"),
    ("slow-query-storm", DB, "index_used:none table:orders", "WARN", "WHERE user_id = ?"),
    ("slow-query-storm", DB, "lock_time_ms:>1000", "WARN", "UPDATE orders SET status"),
    ("slow-query-storm", SYS, "index", "INFO", "DROP INDEX idx_orders_user_status"),
    ("slow-query-storm", APP, "level:ERROR", "ERROR", "QueryTimeoutException"),
    ("slow-query-storm", APP, '"slow request" cost_ms:>=3600', "WARN", "cache miss"),
    ("oom-kill-restarts", SYS, "reason:OOMKilled", "WARN", "exit code 137, memory limit 4Gi"),
    ("oom-kill-restarts", SYS, "CrashLoopBackOff", "WARN", "Back-off restarting"),
    ("oom-kill-restarts", APP, "OutOfMemoryError", "ERROR", "Java heap space"),
    ("oom-kill-restarts", APP, '"tenant t-1042"', "INFO", "scope=all-orders"),
    ("oom-kill-restarts", APP, "logger:gc", "WARN", "old gen"),
    ("oom-kill-restarts", DB, "rows_sent:>1000000", "WARN", "WHERE o.tenant_id = ?"),
    ("downstream-timeout", SYS, "worker-07", "WARN", "Evicted"),
    ("downstream-timeout", SYS, "reason:FailedScheduling", "WARN", "Insufficient cpu"),
    ("downstream-timeout", APP, "risk-service timed out", "ERROR", "SocketTimeoutException"),
    ("downstream-timeout", APP, '"circuit" OPEN', "WARN", "manual review"),
    ("downstream-timeout", APP, "service:risk-service saturated", "WARN", "rejected"),
]


@pytest.mark.parametrize(("scenario", "topic", "query", "level", "shows"), FINDS)
async def test_engineer_queries_find_the_cause(
    scenario: str, topic: Topic, query: str, level: str, shows: str
) -> None:
    upstream, result = await ask(scenario, topic, query)
    assert result.evidence_status is EvidenceStatus.EVIDENCE_FOUND
    assert final_status(result) is LifecycleStatus.READY
    assert result.patterns[0].level == level  # the most telling pattern comes first
    assert shows in text_of(result)
    assert upstream.match_count == sum(p.count for p in upstream.patterns)
    assert result.returned_count == len(result.events) <= DEFAULT_BOUNDS.logs_max_events


NEGATIVES = [
    ("db-pool-exhaustion", SYS, "reason:OOMKilled"),
    ("db-pool-exhaustion", SYS, "BackOff"),
    ("db-pool-exhaustion", DB, "duration_ms:>2000"),
    ("db-pool-exhaustion", APP, "OutOfMemoryError"),
    ("slow-query-storm", SYS, "service:payment-service"),
    ("slow-query-storm", SYS, "reason:BackOff"),
    ("slow-query-storm", APP, "service:user-service restart"),
    ("oom-kill-restarts", APP, '"connection not available"'),
    ("oom-kill-restarts", DB, "lock_time_ms:>1000"),
    ("oom-kill-restarts", SYS, "FailedScheduling"),
    ("downstream-timeout", DB, ""),
    ("downstream-timeout", SYS, "OOMKilled"),
    ("downstream-timeout", APP, "service:risk-service level:ERROR"),
]


@pytest.mark.parametrize(("scenario", "topic", "query"), NEGATIVES)
async def test_discriminating_negatives_are_no_evidence(
    scenario: str, topic: Topic, query: str
) -> None:
    upstream, result = await ask(scenario, topic, query)
    assert upstream.match_count == 0 and upstream.records == [] and upstream.patterns == []
    assert result.evidence_status is EvidenceStatus.NO_EVIDENCE
    assert final_status(result) is LifecycleStatus.READY
    assert result.scope.query == query


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_benign_noise_spans_onset(scenario: str) -> None:
    t0 = scenario_info(scenario).t0
    upstream, result = await ask(scenario, APP, "deprecated level:WARN")
    (pattern,) = upstream.patterns
    assert datetime.fromisoformat(pattern.first_seen) < t0 - timedelta(minutes=30)
    assert datetime.fromisoformat(pattern.last_seen) > t0
    assert result.patterns[0].template == pattern.template
    health, _ = await ask(scenario, APP, '"health check"', lookback=30)
    assert health.match_count == 60  # every 30 s


async def test_one_trace_spans_gateway_payment_and_risk() -> None:
    upstream, _ = await ask("downstream-timeout", APP, "level:ERROR SocketTimeoutException")
    trace = upstream.records[0].fields["trace_id"]
    traced, _ = await ask("downstream-timeout", APP, f"trace_id:{trace}")
    services = [r.service for r in traced.records]
    assert services == ["payment-service", "api-gateway", "risk-service"]
    cost = [int(str(r.fields["cost_ms"])) for r in traced.records]
    assert cost[0] < 3100 <= cost[2]


# --- scope, bounds, determinism -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("lookback", "start"), [(None, "09:10:00"), (15, "09:55:00"), (1440, "10:10:00")]
)
async def test_scope_is_the_absolute_window(lookback: int | None, start: str) -> None:
    upstream, result = await ask("db-pool-exhaustion", APP, "Timeout", lookback)
    scope = result.scope
    assert scope.query == "Timeout" and scope.topic is APP
    assert scope.lookback_minutes == (lookback or 60)
    assert scope.end_time == "2026-03-14T10:10:00.000+08:00"  # T0 + 10 min
    end, begin = datetime.fromisoformat(scope.end_time), datetime.fromisoformat(scope.start_time)
    assert begin.strftime("%H:%M:%S") == start and (end - begin).total_seconds() == 60 * (
        lookback or 60
    )
    assert all(scope.start_time <= r.timestamp <= scope.end_time for r in upstream.records)


async def test_bounds_hold_at_high_volume() -> None:
    upstream, result = await ask("slow-query-storm", APP, "", 1440)
    assert upstream.match_count > 20_000
    assert len(upstream.records) <= 300
    assert result.match_count == upstream.match_count
    assert result.returned_count == len(result.events) <= DEFAULT_BOUNDS.logs_max_events
    assert len(result.patterns) <= DEFAULT_BOUNDS.logs_max_patterns
    assert result.truncated
    assert all(len(e.message) <= DEFAULT_BOUNDS.logs_message_chars for e in result.events)
    assert [e.timestamp for e in result.events] == sorted(e.timestamp for e in result.events)
    templates = {p.template for p in upstream.patterns}
    assert all(r.template in templates for r in upstream.records)


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_identical_calls_identical_bytes(scenario: str) -> None:
    first_up, first = await ask(scenario, APP, "-level:INFO")
    again_up, again = await ask(scenario, APP, "-level:INFO")
    assert _ENC.encode(first_up) == _ENC.encode(again_up)
    assert _ENC.encode(first) == _ENC.encode(again)


def test_from_env() -> None:
    source = MockLogSource.from_env({})
    assert source.settings.scenario == "db-pool-exhaustion"
    assert source.settings.default_lookback == 60
    tuned = MockLogSource.from_env(
        {"ACI_MOCK_SCENARIO": "oom-kill-restarts", "ACI_LOGS_DEFAULT_LOOKBACK": "30"}
    )
    assert (tuned.settings.scenario, tuned.settings.default_lookback) == ("oom-kill-restarts", 30)
    with pytest.raises(ValueError, match="slow-query-storm"):
        MockLogSource.from_env({"ACI_MOCK_SCENARIO": "nope"})
    for bad in ("0", "1441", "ten"):
        with pytest.raises(ValueError, match="ACI_LOGS_DEFAULT_LOOKBACK"):
            MockLogSource.from_env({"ACI_LOGS_DEFAULT_LOOKBACK": bad})


async def test_default_lookback_from_env_sets_scope() -> None:
    source = MockLogSource.from_env({"ACI_LOGS_DEFAULT_LOOKBACK": "30"})
    upstream = await source.fetch(QueryLogsRequest(topic=SYS, query=""))
    assert upstream.scope.lookback_minutes == 30
    assert upstream.scope.start_time == "2026-03-14T09:40:00.000+08:00"
    await source.aclose()


def test_exports() -> None:
    assert SCENARIOS == (
        "db-pool-exhaustion",
        "slow-query-storm",
        "oom-kill-restarts",
        "downstream-timeout",
    )
    for name in workers.sources.logs.source.__all__:
        assert hasattr(workers.sources.logs.source, name)
