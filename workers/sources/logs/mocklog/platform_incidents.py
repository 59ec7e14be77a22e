"""Timelines of the two platform-side incidents: OOM kills from an export job, and a downstream
timeout after a node drain evicted pods of a dependency.

Offsets are minutes from T0 (the first alert).
"""

from __future__ import annotations

from typing import Final

from workers.sources.logs.mocklog.noise import Traffic, add_noise
from workers.sources.logs.mocklog.world import Builder, Pod

__all__ = ["downstream_timeout", "oom_kill_restarts"]

_OOM_TRACE: Final = (
    "java.lang.OutOfMemoryError: Java heap space\n"
    "\tat org.apache.poi.xssf.usermodel.XSSFRow.createCell(XSSFRow.java:212)\n"
    "\tat com.shop.report.export.WorkbookBuilder.appendRows(WorkbookBuilder.java:88)\n"
    "\tat com.shop.report.export.ExportJobRunner.run(ExportJobRunner.java:141)"
)
_EXPORT_SQL: Final = (
    "SELECT o.*, i.* FROM orders o JOIN order_items i ON i.order_id = o.id "
    "WHERE o.tenant_id = ? ORDER BY o.created_at"
)
_JOB: Final = "exp-20260314-1446"


def oom_kill_restarts(b: Builder) -> None:
    """INC-C: an "export all" job loads a whole tenant's orders into report-service's heap."""
    b.add_service("report-service", ("worker-04", "worker-06"))
    b.add_service("api-gateway", ("worker-01", "worker-02"))
    b.add_service("order-service", ("worker-02", "worker-03"))
    add_noise(
        b,
        main="report-service",
        traffic=(
            Traffic(
                "report-service",
                9.0,
                (("GET", "/api/v1/reports/{id}", 45), ("GET", "/api/v1/reports/daily", 120)),
            ),
            Traffic(
                "order-service",
                6.0,
                (("POST", "/api/v1/orders", 85), ("GET", "/api/v1/orders/{id}", 14)),
            ),
        ),
    )
    pod = b.pods["report-service"][0]
    for attempt, start in enumerate((-14.0, 2.0, 6.3), start=1):
        _export_attempt(b, pod, attempt, start)
    for restart, at in enumerate((-2.0, 5.0, 9.0), start=1):
        _oom_events(b, pod, restart, at)
    for at in (1.0, 6.0):
        b.app(
            at,
            "INFO",
            "report-service",
            f"Started ReportApplication in {b.rng.uniform(11.8, 12.9):.1f} seconds "
            f"(process running for {b.rng.uniform(13.0, 14.0):.1f})",
            logger="c.s.report.ReportApplication",
            pod=pod,
        )
    at = -2.0
    while at < 10:  # the gateway sees 503s while the pod is down
        if -2.0 <= at < 1.0 or 5.0 <= at < 6.0 or at >= 9.0:
            b.app(
                at,
                "WARN",
                "api-gateway",
                "upstream unavailable: GET /api/v1/reports/daily -> report-service 503 "
                "(no healthy upstream)",
                logger="gateway.access",
                uri="/api/v1/reports/daily",
                http_status=503,
                cost_ms=b.rng.randint(1, 4),
            )
        at += b.rng.uniform(0.1, 0.3)


def _export_attempt(b: Builder, pod: Pod, attempt: int, start: float) -> None:
    rows = 3_104_522
    b.app(
        start,
        "INFO",
        "report-service",
        f"export started: job {_JOB} attempt {attempt} tenant t-1042 scope=all-orders "
        f"estimated_rows={rows}",
        logger="c.s.report.export.ExportJobRunner",
        pod=pod,
    )
    b.slow_query(
        start + 0.3,
        sql_template=_EXPORT_SQL,
        table="orders",
        duration_ms=b.rng.randint(17_600, 18_900),
        lock_time_ms=0.31,
        rows_examined=3_260_118,
        rows_sent=rows,
        index_used="idx_orders_tenant",
        db_user="report_ro",
        client_host=pod.ip,
    )
    first = attempt == 1
    oom_at = start + (11.0 if first else 3.0 if attempt == 2 else 2.7)
    gc_start, gc_end = start + (2.0 if first else 1.0), oom_at - (1.0 if first else 0.3)
    steps = 12 if first else 4
    for i in range(steps):
        at = gc_start + i * (gc_end - gc_start) / (steps - 1)
        old = 88 + round(9 * i / (steps - 1))
        pause = 0.8 + 1.1 * i / (steps - 1) + b.rng.uniform(0, 0.05)
        b.app(
            at,
            "WARN",
            "report-service",
            f"Pause Full (G1 Compaction Pause) old gen {old}% of 3686M after collection, "
            f"pause {pause:.2f} s",
            logger="gc",
            pod=pod,
        )
    b.app(
        oom_at,
        "ERROR",
        "report-service",
        f"export {_JOB} failed: OutOfMemoryError: Java heap space while building workbook "
        f"(rows buffered {b.rng.randint(2_700_000, 2_900_000)})",
        logger="c.s.report.export.ExportJobRunner",
        pod=pod,
        exception=_OOM_TRACE,
    )
    if attempt < 3:
        b.app(
            oom_at + 0.2 + (1.3 if attempt == 1 else 0.5),
            "INFO",
            "report-service",
            f"export re-queued: job {_JOB} attempt {attempt + 1}",
            logger="c.s.report.export.ExportQueue",
            pod=b.pods["report-service"][1],
        )


def _oom_events(b: Builder, pod: Pod, restart: int, at: float) -> None:
    obj = f"pod/{pod.name}"
    b.event(
        at,
        "Warning",
        service="report-service",
        kind="Pod",
        obj=obj,
        reason="OOMKilled",
        message="Container report-service was OOMKilled (exit code 137, memory limit 4Gi)",
        host=pod.host,
        exit_code=137,
        restart_count=restart,
    )
    if restart < 3:
        b.event(
            at + 2.0 if restart == 1 else at + 0.2,
            "Normal",
            service="report-service",
            kind="Pod",
            obj=obj,
            reason="Started",
            message="Started container report-service",
            host=pod.host,
            restart_count=restart,
        )
        return
    for step in range(1, 5):
        b.event(
            at + step * 0.25,
            "Warning",
            service="report-service",
            kind="Pod",
            obj=obj,
            reason="BackOff",
            host=pod.host,
            count=step,
            restart_count=restart,
            message="Back-off restarting failed container report-service (CrashLoopBackOff)",
        )


def downstream_timeout(b: Builder) -> None:
    """INC-D: a drain of worker-07 evicted 2 of 6 risk-service pods; replacements stay Pending."""
    b.add_service("payment-service", ("worker-02", "worker-04", "worker-05"))
    b.add_service("risk-service", ("worker-01", "worker-03", "worker-05", "worker-06"))
    b.add_service("api-gateway", ("worker-01", "worker-04"))
    add_noise(
        b,
        main="payment-service",
        thin_from=-10.0,
        traffic=(
            Traffic(
                "payment-service",
                6.0,
                (("POST", "/api/v1/payments", 140), ("GET", "/api/v1/payments/{id}", 12)),
            ),
            Traffic("risk-service", 8.0, (("POST", "/api/v1/risk/evaluate", 90),)),
        ),
    )
    _drain_events(b)
    _timeouts(b)
    at = -12.0
    while at < 10:
        rejected = int(5 + 60 * max(0.0, (at + 12) / 22) + b.rng.randint(0, 9))
        b.app(
            at,
            "WARN",
            "risk-service",
            f"worker pool saturated: active 200/200, queue 500/500, rejected {rejected} "
            "tasks in last 20 s",
            logger="c.s.risk.exec.BoundedExecutor",
        )
        at += 1 / 3


def _drain_events(b: Builder) -> None:
    node = "worker-07"
    b.event(
        -15.0,
        "Normal",
        service="node",
        kind="Node",
        obj=f"node/{node}",
        reason="NodeNotSchedulable",
        host=node,
        message=f"Node {node} status is now: NodeNotSchedulable (cordoned for drain)",
    )
    pending = []
    for i in range(2):
        gone = f"risk-service-6d5f8c7b9-{b.pod_suffix()}"
        new = f"risk-service-6d5f8c7b9-{b.pod_suffix()}"
        pending.append(new)
        b.event(
            -14.0 + i * 0.1,
            "Warning",
            service="risk-service",
            kind="Pod",
            obj=f"pod/{gone}",
            reason="Evicted",
            host=node,
            message=f"Evicted: pod drained from node {node} (eviction API)",
        )
        b.event(
            -13.9 + i * 0.1,
            "Normal",
            service="risk-service",
            kind="ReplicaSet",
            obj="replicaset/risk-service-6d5f8c7b9",
            reason="SuccessfulCreate",
            message=f"Created pod: {new}",
        )
    for step in range(24):
        for i, new in enumerate(pending):
            b.event(
                -13.0 + step + i * 0.05,
                "Warning",
                service="risk-service",
                kind="Pod",
                obj=f"pod/{new}",
                reason="FailedScheduling",
                count=step + 1,
                message="0/6 nodes are available: 1 node(s) were unschedulable, "
                "5 Insufficient cpu. preemption: 0/6 nodes are available: "
                "6 No preemption victims found for incoming pod.",
            )


def _timeouts(b: Builder) -> None:
    _traced_timeout(b, -9.5)
    at = -10.0
    while at < 10:
        if at < -6.0 or b.rng.random() < 0.25:  # after the breaker opens, only probes time out
            _traced_timeout(b, at)
        else:
            b.app(
                at,
                "WARN",
                "payment-service",
                f"risk check skipped (circuit riskClient OPEN): payment "
                f"p-{b.rng.randint(10_000_000, 99_999_999)} queued for manual review",
                logger="c.s.payment.risk.RiskGateway",
                uri="/api/v1/payments",
                http_status=202,
                cost_ms=b.rng.randint(20, 60),
            )
        at += b.rng.uniform(0.08, 0.16)
    b.app(
        -6.0,
        "WARN",
        "payment-service",
        "CircuitBreaker 'riskClient' changed state from CLOSED to OPEN "
        "(failure rate 62.5% > threshold 50%); payments routed to manual review",
        logger="i.g.r.c.i.CircuitBreakerStateMachine",
    )


def _traced_timeout(b: Builder, at: float) -> None:
    trace = b.trace_id()
    b.app(
        at + 0.0502,
        "ERROR",
        "payment-service",
        "call to risk-service timed out after 3000 ms: POST http://risk-service/api/v1/risk/"
        "evaluate (SocketTimeoutException)",
        logger="c.s.payment.risk.RiskClient",
        trace_id=trace,
        exception="java.net.SocketTimeoutException: Read timed out",
        uri="/api/v1/payments",
        http_status=504,
        cost_ms=3000 + b.rng.randint(2, 15),
    )
    b.app(
        at + 0.0503,
        "WARN",
        "api-gateway",
        "POST /api/v1/payments -> payment-service 504 Gateway Timeout",
        logger="gateway.access",
        trace_id=trace,
        uri="/api/v1/payments",
        http_status=504,
        cost_ms=3000 + b.rng.randint(16, 30),
    )
    b.app(
        at + 0.0567,
        "INFO",
        "risk-service",
        f"POST /api/v1/risk/evaluate 200 in {3400 + b.rng.randint(-40, 60)} ms "
        f"(queued {3100 + b.rng.randint(0, 90)} ms)",
        logger="access",
        trace_id=trace,
        uri="/api/v1/risk/evaluate",
        http_status=200,
        cost_ms=3400,
    )
