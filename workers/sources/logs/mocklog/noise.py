"""Shared benign noise every scenario carries, over the whole 24 hours before "now".

Health checks every 30 s, a recurring harmless WARN about a deprecated configuration key (before
and after onset, so it is not causal), routine access-log traffic, a nightly reporting batch in
the slow-query log, and a cron job's events. None of it involves an incident.
"""

from __future__ import annotations

from typing import Final

from workers.sources.logs.mocklog.world import Builder

__all__ = ["HISTORY_MINUTES", "Traffic", "add_noise"]

HISTORY_MINUTES: Final = 1450  # a little more than the longest lookback (1440 min)

DEPRECATED_KEY: Final = (
    "Property 'spring.datasource.tomcat.max-active' is deprecated and will be removed; "
    "use 'spring.datasource.hikari.maximum-pool-size' instead"
)


class Traffic:
    """Routine request traffic of one service: endpoints with typical latency."""

    def __init__(self, service: str, every_s: float, endpoints: tuple[tuple[str, str, int], ...]):
        self.service = service
        self.every_s = every_s
        self.endpoints = endpoints  # (method, uri with {id}, typical ms)


def add_noise(
    b: Builder,
    *,
    main: str,
    traffic: tuple[Traffic, ...],
    thin_from: float | None = None,
    health_down_from: float | None = None,
) -> None:
    """Add the shared noise; `thin_from` thins the main service's success traffic to 30 %."""
    _health_checks(b, main, health_down_from)
    _deprecated_config(b, main)
    for t in traffic:
        _access_log(b, t, thin_from if t.service == main else None)
    _nightly_batch(b)
    _cron_events(b)


def _health_checks(b: Builder, service: str, down_from: float | None) -> None:
    for step in range(int(HISTORY_MINUTES * 2) + 21):
        at = -HISTORY_MINUTES + step / 2 + 0.13
        if down_from is not None and at >= down_from:
            b.app(
                at,
                "WARN",
                service,
                "Health check DOWN: db (HikariPool-1) connection not available",
                logger="o.s.b.actuate.health.HealthEndpoint",
                uri="/actuator/health",
                http_status=503,
                cost_ms=b.rng.randint(1000, 1010),
            )
            continue
        b.app(
            at,
            "INFO",
            service,
            "Health check UP: db, diskSpace, ping",
            logger="o.s.b.actuate.health.HealthEndpoint",
            uri="/actuator/health",
            http_status=200,
            cost_ms=b.rng.randint(2, 9),
        )


def _deprecated_config(b: Builder, service: str) -> None:
    at = -HISTORY_MINUTES + b.rng.uniform(0, 5)
    while at < 10:
        b.app(
            at,
            "WARN",
            service,
            DEPRECATED_KEY,
            logger="o.s.b.c.properties.migrator.PropertiesMigrationListener",
        )
        at += b.rng.uniform(8, 12)


def _access_log(b: Builder, t: Traffic, thin_from: float | None) -> None:
    at = -HISTORY_MINUTES + b.rng.uniform(0, t.every_s) / 60
    while at < 10:
        method, uri, typical = b.rng.choice(t.endpoints)
        if thin_from is None or at < thin_from or b.rng.random() < 0.3:
            path = uri.replace("{id}", str(b.rng.randint(100_000, 999_999)))
            cost = max(1, int(b.rng.gauss(typical, typical / 4)))
            status = 201 if method == "POST" else 200
            b.app(
                at,
                "INFO",
                t.service,
                f"{method} {path} {status} {cost} ms",
                logger="access",
                uri=path,
                http_status=status,
                cost_ms=cost,
            )
        at += b.rng.expovariate(1 / t.every_s) / 60


_BATCH: Final = (
    (
        "SELECT DATE(created_at) AS d, COUNT(*), SUM(total_amount) FROM orders "
        "WHERE created_at >= ? AND created_at < ? GROUP BY DATE(created_at)",
        "orders",
        "idx_orders_created_at",
        31,
    ),
    (
        "SELECT sku, SUM(quantity) FROM order_items WHERE created_at >= ? GROUP BY sku "
        "ORDER BY SUM(quantity) DESC LIMIT ?",
        "order_items",
        "idx_items_created_at",
        100,
    ),
    (
        "INSERT INTO daily_sales (d, tenant_id, orders, revenue) SELECT DATE(created_at), "
        "tenant_id, COUNT(*), SUM(total_amount) FROM orders WHERE created_at >= ? "
        "GROUP BY DATE(created_at), tenant_id",
        "daily_sales",
        "idx_orders_created_at",
        0,
    ),
)


def _nightly_batch(b: Builder) -> None:
    # The reporting batch runs 02:00-02:40 local time, the day of T0 or the day before.
    t0_hour = (b.t0_ms // 3_600_000 + 8) % 24
    start = -((t0_hour - 2) % 24) * 60 + b.rng.uniform(0, 3)
    if start < -HISTORY_MINUTES + 5:
        start += 1440
    for i in range(12):
        sql, table, index, sent = _BATCH[i % len(_BATCH)]
        examined = b.rng.randint(380_000, 1_900_000)
        b.slow_query(
            start + i * 3.2,
            sql_template=sql,
            table=table,
            duration_ms=b.rng.randint(1100, 3600),
            lock_time_ms=round(b.rng.uniform(0.05, 0.4), 2),
            rows_examined=examined,
            rows_sent=sent or b.rng.randint(40, 60),
            index_used=index,
            db_user="report_batch",
            client_host="10.42.8.31",
        )


def _cron_events(b: Builder) -> None:
    at = -HISTORY_MINUTES + 7.0
    while at < 10:
        job = f"cache-warmer-{(b.t0_ms // 60_000 + int(at)) % 100_000_000:08d}"
        b.event(
            at,
            "Normal",
            service="cache-warmer",
            kind="CronJob",
            obj="cronjob/cache-warmer",
            reason="SuccessfulCreate",
            message=f"Created job {job}",
        )
        b.event(
            at + 0.7,
            "Normal",
            service="cache-warmer",
            kind="Job",
            obj=f"job/{job}",
            reason="Completed",
            message="Job completed",
        )
        at += 15
