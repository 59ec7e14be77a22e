"""Benchmark of the MOCK `query_logs` source: world build time, then the median time to answer a
query over a 60-minute window of the busiest scenario (goal <= 20 ms), and over 1440 minutes.

Run: `.venv/bin/python bench/logs_bench.py` from the repository root.
"""

from __future__ import annotations

import statistics
import time

from contracts import DEFAULT_BOUNDS, QueryLogsRequest, Topic, project_logs
from workers.sources.logs.mocklog import SCENARIOS, index_of
from workers.sources.logs.source import (
    MockLogSettings,
    MockLogSource,
    check_fields,
    parse_log_query,
)

QUERIES = (
    (Topic.APPLICATION, ""),
    (Topic.APPLICATION, "timeout"),
    (Topic.APPLICATION, "level:ERROR"),
    (Topic.APPLICATION, '"connection not available" -level:INFO'),
    (Topic.APPLICATION, "http_status:>=500 service:order-service"),
    (Topic.APPLICATION, "GET -health"),
    (Topic.SYSTEM_EVENTS, ""),
    (Topic.SYSTEM_EVENTS, "reason:OOMKilled"),
    (Topic.DATABASE_SLOW_QUERY, "duration_ms:>2000"),
)
ROUNDS = 30


def _answer(source: MockLogSource, request: QueryLogsRequest) -> float:
    started = time.perf_counter()
    query = parse_log_query(request.query)
    check_fields(query, request.topic)
    project_logs("bench", source.search(request, query), DEFAULT_BOUNDS)
    return (time.perf_counter() - started) * 1000


def _median(source: MockLogSource, lookback: int) -> tuple[float, float]:
    times = [
        _answer(source, QueryLogsRequest(topic=topic, query=q, lookback_minutes=lookback))
        for _ in range(ROUNDS)
        for topic, q in QUERIES
    ]
    return statistics.median(times), max(times)


def main() -> None:
    """Print build times, window sizes and median query times."""
    sizes: dict[str, int] = {}
    for name in SCENARIOS:
        started = time.perf_counter()
        index = index_of(name)
        built = time.perf_counter() - started
        now = index.world.now_ms
        sizes[name] = sum(len(t.window(now - 3_600_000, now)) for t in index.topics.values())
        total = sum(len(t.records) for t in index.topics.values())
        print(f"build {name}: {built:.2f} s, {total} records in 24 h, {sizes[name]} in 60 min")
    busiest = max(sizes, key=lambda n: sizes[n])
    source = MockLogSource(MockLogSettings(scenario=busiest))
    for lookback in (60, 1440):
        median, worst = _median(source, lookback)
        print(
            f"query {busiest} over {lookback} min: median {median:.2f} ms, max {worst:.2f} ms "
            f"({ROUNDS * len(QUERIES)} queries, parse + match + mine lookup + project)"
        )


if __name__ == "__main__":
    main()
