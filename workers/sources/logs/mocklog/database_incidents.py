"""Timelines of the two database-side incidents: a leaking connection pool and a slow-query storm.

Offsets are minutes from T0 (the first alert). Each timeline writes its causal chain across the
three topics and leaves its discriminating negatives quiet on purpose (see docs/logs.md).
"""

from __future__ import annotations

from typing import Final

from workers.sources.logs.mocklog.noise import Traffic, add_noise
from workers.sources.logs.mocklog.world import Builder

__all__ = ["db_pool_exhaustion", "slow_query_storm"]

_REFUND_FRAME: Final = (
    "java.lang.Exception: Apparent connection leak detected\n"
    "\tat com.shop.order.refund.RefundService.compensateFailedRefund(RefundService.java:214)\n"
    "\tat com.shop.order.refund.RefundService.handleRefundError(RefundService.java:171)"
)
_POOL_TIMEOUT: Final = (
    "java.sql.SQLTransientConnectionException: HikariPool-1 - Connection is not available, "
    "request timed out after 30000ms."
)


def db_pool_exhaustion(b: Builder) -> None:
    """INC-A: release 2.3.1 of order-service leaks a connection on a refund error path."""
    b.add_service("order-service", ("worker-02", "worker-03", "worker-05"))
    b.add_service("api-gateway", ("worker-01", "worker-04"))
    b.add_service("payment-service", ("worker-04", "worker-06"))
    add_noise(
        b,
        main="order-service",
        thin_from=-5.0,
        health_down_from=-6.0,
        traffic=(
            Traffic(
                "order-service",
                6.0,
                (
                    ("POST", "/api/v1/orders", 85),
                    ("GET", "/api/v1/orders/{id}", 14),
                    ("POST", "/api/v1/orders/{id}/refund", 120),
                ),
            ),
            Traffic("payment-service", 12.0, (("POST", "/api/v1/payments", 60),)),
        ),
    )
    _release_events(b)
    _leaks(b)
    _pool_exhaustion(b)
    b.slow_query(
        -45.0,
        sql_template=(
            "SELECT DATE(created_at) AS d, COUNT(*), SUM(total_amount) FROM orders "
            "WHERE created_at >= ? GROUP BY DATE(created_at)"
        ),
        table="orders",
        duration_ms=1312,
        lock_time_ms=0.12,
        rows_examined=412_310,
        rows_sent=31,
        index_used="idx_orders_created_at",
        db_user="report_ro",
        client_host="10.42.7.19",
    )


def _release_events(b: Builder) -> None:
    old_rs, new_rs = "order-service-5c7d8e9f1", "order-service-6b8f7c9d4"
    b.event(
        -40.0,
        "Normal",
        service="order-service",
        kind="Deployment",
        obj="deployment/order-service",
        reason="ScalingReplicaSet",
        message=f"Scaled up replica set {new_rs} to 3 "
        "(image registry.shop.local/shop/order-service:2.3.1)",
    )
    for i, pod in enumerate(b.pods["order-service"]):
        at = -38.0 + i * 0.8
        obj = f"pod/{pod.name}"
        for step, (reason, message) in enumerate(
            (
                ("Scheduled", f"Successfully assigned shop/{pod.name} to {pod.host}"),
                (
                    "Pulled",
                    'Container image "registry.shop.local/shop/order-service:2.3.1" '
                    "already present on machine",
                ),
                ("Created", "Created container order-service"),
                ("Started", "Started container order-service"),
            )
        ):
            b.event(
                at + step * 0.15,
                "Normal",
                service="order-service",
                kind="Pod",
                obj=obj,
                reason=reason,
                message=message,
                host=pod.host,
            )
    b.event(
        -35.5,
        "Normal",
        service="order-service",
        kind="Deployment",
        obj="deployment/order-service",
        reason="ScalingReplicaSet",
        message=f"Scaled down replica set {old_rs} to 0",
    )
    count = 0
    for step in range(33):  # readiness failures from T-6m, rising counts
        pod = b.pods["order-service"][step % 3]
        count += 3
        b.event(
            -6.0 + step * 0.5,
            "Warning",
            service="order-service",
            kind="Pod",
            obj=f"pod/{pod.name}",
            reason="Unhealthy",
            host=pod.host,
            count=count // 3,
            message="Readiness probe failed: HTTP probe failed with statuscode: 503",
        )


def _leaks(b: Builder) -> None:
    at = -32.0
    while at < 10:
        order_id = b.rng.randint(7_000_000, 7_999_999)
        b.app(
            at,
            "WARN",
            "order-service",
            f"Refund failed for order {order_id}: PSP returned DECLINED (code R-17); "
            "running compensation",
            logger="c.s.order.refund.RefundService",
            uri=f"/api/v1/orders/{order_id}/refund",
            http_status=502,
            cost_ms=b.rng.randint(300, 900),
        )
        if at + 1.0 >= -25.0:
            b.app(
                at + 1.0 + b.rng.uniform(0, 0.1),
                "WARN",
                "order-service",
                f"Connection leak detection triggered for org.mariadb.jdbc.Connection@{b.hex(8)} "
                f"on thread http-nio-8080-exec-{b.rng.randint(1, 200)} "
                "(connection held > 60 s), stack trace follows",
                logger="com.zaxxer.hikari.pool.ProxyLeakTask",
                exception=_REFUND_FRAME,
            )
        at += b.rng.uniform(0.8, 1.2)


def _pool_exhaustion(b: Builder) -> None:
    for step in range(19):  # pool usage from T-8m, every 60 s
        active = min(50, 48 + step)
        waiting = 7 + step * 6 + b.rng.randint(0, 3)
        b.app(
            -8.0 + step,
            "WARN",
            "order-service",
            f"HikariPool-1 - Pool stats (total=50, active={active}, idle=0, waiting={waiting})",
            logger="com.zaxxer.hikari.pool.HikariPool",
        )
    at = -5.0
    while at < 10:
        trace = b.trace_id()
        cost = 30_000 + b.rng.randint(1, 40)
        uri = "/api/v1/orders"
        b.app(
            at,
            "ERROR",
            "order-service",
            "Connection acquisition timeout: connection not available, timed out after "
            f"30000 ms (HikariPool-1 active=50, idle=0, waiting={b.rng.randint(20, 60)})",
            logger="c.s.order.api.OrderController",
            trace_id=trace,
            exception=_POOL_TIMEOUT,
            uri=uri,
            http_status=503,
            cost_ms=cost,
        )
        b.app(
            at + 0.0002,
            "WARN",
            "api-gateway",
            f"upstream timeout: POST {uri} -> order-service returned 503 after {cost + 6} ms",
            logger="gateway.access",
            trace_id=trace,
            uri=uri,
            http_status=503,
            cost_ms=cost + 6,
        )
        at += b.rng.uniform(0.05, 0.15)


_STORM_SQL: Final = (
    "SELECT id, order_no, status, total_amount, created_at FROM orders WHERE user_id = ? "
    "AND status IN (?, ?, ?) ORDER BY created_at DESC LIMIT ?"
)
_UPDATE_SQL: Final = "UPDATE orders SET status = ?, updated_at = ? WHERE id = ?"


def slow_query_storm(b: Builder) -> None:
    """INC-B: a migration dropped the composite index on orders(user_id, status)."""
    b.add_service("user-service", ("worker-03", "worker-05"))
    b.add_service("order-service", ("worker-02", "worker-06"))
    b.add_service("payment-service", ("worker-04", "worker-06"))
    add_noise(
        b,
        main="user-service",
        traffic=(
            Traffic(
                "user-service",
                6.0,
                (("GET", "/api/v1/users/{id}", 12), ("GET", "/api/v1/users/orders", 40)),
            ),
            Traffic("order-service", 10.0, (("POST", "/api/v1/orders", 85),)),
            Traffic("payment-service", 14.0, (("POST", "/api/v1/payments", 60),)),
        ),
    )
    job = "db-migrate-20260314-3"
    b.event(
        -24.0,
        "Normal",
        service="db-migrate",
        kind="Job",
        obj=f"job/{job}",
        reason="SuccessfulCreate",
        message=f"Created pod: {job}-{b.pod_suffix()}",
    )
    b.event(
        -22.0,
        "Normal",
        service="db-migrate",
        kind="Job",
        obj=f"job/{job}",
        reason="Completed",
        message="Job completed: migration V42__orders_cleanup applied "
        "(DROP INDEX idx_orders_user_status ON orders)",
    )
    _storm(b)
    _slow_requests(b)


def _storm(b: Builder) -> None:
    pods = b.pods["user-service"]
    at = -20.0
    while at < 10:
        progress = (at + 20) / 30
        b.slow_query(
            at,
            sql_template=_STORM_SQL,
            table="orders",
            duration_ms=int(2800 + 2400 * progress + b.rng.randint(-150, 150)),
            lock_time_ms=round(b.rng.uniform(0.1, 0.6), 2),
            rows_examined=b.rng.randint(1_180_000, 1_230_000),
            rows_sent=b.rng.randint(0, 20),
            index_used="none",
            db_user="app_user",
            client_host=b.rng.choice(pods).ip,
        )
        at += b.rng.uniform(0.28, 0.39)
    for step in range(7):
        b.slow_query(
            -8.0 + step * 2.4 + b.rng.uniform(0, 0.5),
            sql_template=_UPDATE_SQL,
            table="orders",
            duration_ms=b.rng.randint(2250, 2600),
            lock_time_ms=float(b.rng.randint(1900, 2300)),
            rows_examined=1,
            rows_sent=0,
            index_used="PRIMARY",
            db_user="app_order",
            client_host=b.rng.choice(b.pods["order-service"]).ip,
        )


def _slow_requests(b: Builder) -> None:
    at = -18.0
    while at < 10:
        user = b.rng.randint(10_000, 99_999)
        if at < -5.0 or b.rng.random() < 0.4:
            cost = b.rng.randint(3600, 4800)
            b.app(
                at,
                "WARN",
                "user-service",
                f"slow request GET /api/v1/users/orders took {cost} ms "
                f"(db {cost - b.rng.randint(60, 180)} ms, cache miss user-orders:u-{user})",
                logger="c.s.user.web.SlowRequestFilter",
                uri="/api/v1/users/orders",
                http_status=200,
                cost_ms=cost,
            )
        else:
            b.app(
                at,
                "ERROR",
                "user-service",
                "GET /api/v1/users/orders failed: query timed out after 5000 ms "
                "(QueryTimeoutException)",
                logger="c.s.user.api.UserOrdersController",
                exception="org.springframework.dao.QueryTimeoutException: "
                "PreparedStatementCallback; SQL [" + _STORM_SQL + "]; Statement cancelled "
                "due to timeout or client request",
                uri="/api/v1/users/orders",
                http_status=500,
                cost_ms=5000 + b.rng.randint(3, 25),
            )
        at += b.rng.uniform(0.2, 0.45)
