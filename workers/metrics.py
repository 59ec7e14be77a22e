"""Prometheus metrics of one worker (`aci-evidence worker --metrics-port N`).

Each worker owns a `CollectorRegistry` (never the process-global one), so several workers can
run in one process (tests) without their numbers mixing.

| metric | labels | counts |
|---|---|---|
| `aci_invocations_total` | tool, lifecycle, evidence_status | invocations this worker finished |
| `aci_stage_seconds` | stage = queue_wait, execute, project, finish | latency histograms |
| `aci_takeovers_total` | | idle entries taken over from another consumer |
| `aci_give_ups_total` | tool | invocations finished as ERROR/GAVE_UP |
| `aci_timeouts_total` | tool | invocations whose source missed its deadline |
| `aci_source_errors_total` | tool, code | source failures (EXECUTION, UNAVAILABLE, ...) |
| `aci_dead_letters_total` | | entries that were not invocations (dead-lettered) |
| `aci_heartbeats_total` | | heartbeats this worker wrote (`pipeline.heartbeat`) |
| `aci_heartbeat_timestamp_seconds` | | when this worker last beat (epoch seconds) |
| `aci_live_workers` | | workers live by heartbeat in its partitions (as `status` counts) |

Only invocations whose finish this worker actually applied are counted (a racing second
finisher counts nothing), so a workload of N invocations counts exactly N across the fleet.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import start_http_server

from contracts import ErrorCode
from workers.stage import Outcome

__all__ = ["SOURCE_ERROR_CODES", "WorkerMetrics", "serve_metrics"]

# Error codes raised by a source (the execute stage); TIMEOUT and GAVE_UP are counted apart.
SOURCE_ERROR_CODES: Final = frozenset(
    {
        ErrorCode.EXECUTION,
        ErrorCode.UNAVAILABLE,
        ErrorCode.AUTHORIZATION,
        ErrorCode.FORBIDDEN_QUERY,
    }
)
_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class WorkerMetrics:
    """The metrics of one worker, in their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.invocations = Counter(
            "aci_invocations",
            "Invocations finished by this worker.",
            ["tool", "lifecycle", "evidence_status"],
            registry=r,
        )
        self.stage_seconds = Histogram(
            "aci_stage_seconds",
            "Latency of each stage of an invocation.",
            ["stage"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.takeovers = Counter("aci_takeovers", "Idle entries taken over.", registry=r)
        self.give_ups = Counter("aci_give_ups", "Invocations given up.", ["tool"], registry=r)
        self.timeouts = Counter("aci_timeouts", "Source deadlines missed.", ["tool"], registry=r)
        self.source_errors = Counter(
            "aci_source_errors", "Source failures by code.", ["tool", "code"], registry=r
        )
        self.dead_letters = Counter("aci_dead_letters", "Entries dead-lettered.", registry=r)
        self.heartbeats = Counter("aci_heartbeats", "Heartbeats written.", registry=r)
        self.heartbeat_at = Gauge(
            "aci_heartbeat_timestamp_seconds", "When this worker last beat.", registry=r
        )
        self.live_workers = Gauge(
            "aci_live_workers", "Workers live by heartbeat in this worker's partitions.", registry=r
        )

    def beat(self, live_workers: int) -> None:
        """Count one heartbeat and the live workers it saw."""
        self.heartbeats.inc()
        self.heartbeat_at.set(time.time())
        self.live_workers.set(live_workers)

    def finished(self, tool: str, outcome: Outcome, finish_s: float) -> None:
        """Count one invocation whose finish this worker applied."""
        control = outcome.control
        self.invocations.labels(
            tool=tool,
            lifecycle=control.status.value,
            evidence_status=outcome.result.evidence_status.value,
        ).inc()
        timings = control.timings
        self.stage_seconds.labels(stage="queue_wait").observe(timings.queue_ms / 1000)
        self.stage_seconds.labels(stage="execute").observe(timings.execute_ms / 1000)
        self.stage_seconds.labels(stage="project").observe(timings.project_ms / 1000)
        self.stage_seconds.labels(stage="finish").observe(finish_s)
        code = control.error_code
        if code == ErrorCode.TIMEOUT:
            self.timeouts.labels(tool=tool).inc()
        elif code == ErrorCode.GAVE_UP:
            self.give_ups.labels(tool=tool).inc()
        elif code in SOURCE_ERROR_CODES:
            self.source_errors.labels(tool=tool, code=str(code)).inc()

    def value(self, name: str, **labels: str) -> float:
        """One sample's current value (0 when absent): for tests and `status`."""
        found = self.registry.get_sample_value(name, labels)
        return 0.0 if found is None else found

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


@contextlib.contextmanager
def serve_metrics(metrics: WorkerMetrics, port: int, addr: str = "127.0.0.1") -> Iterator[int]:
    """Serve `/metrics` on `addr:port` (0: a free port; loopback unless the operator widens
    it with `--metrics-host` / `ACI_METRICS_HOST`) in a daemon thread; yields the bound port."""
    server, thread = start_http_server(port, addr=addr, registry=metrics.registry)
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        if isinstance(thread, threading.Thread):
            thread.join(5)
