"""Deterministic rows of the demo `shop` database (seeded PRNG, fixed dates).

The data corroborates the mock incident scenarios of 2026-03-14 (+08:00, stored as local time):
- INC-A: release 2.3.1 (deployed 09:20) fails refunds with "connection not available";
- INC-B: migration V20260314_1 dropped idx_orders_user_status at 12:38;
- INC-C: tenant t-1042 owns far more orders than any other tenant (the "export all" job).
"""

from __future__ import annotations

import datetime as dt
import json
import random
from typing import Any, Final

__all__ = ["generate"]

_SEED: Final = 20260314
_BASE: Final = dt.datetime(2026, 3, 1)
_TENANTS: Final = ("t-1001", "t-1007", "t-1019", "t-1042", "t-1088")
_STATUSES: Final = (
    "PAID",
    "PAID",
    "PAID",
    "SHIPPED",
    "SHIPPED",
    "DELIVERED",
    "PENDING",
    "CANCELLED",
    "REFUNDED",
)
_MIGRATIONS: Final = (
    ("V20260102_1", "create orders", "CREATE TABLE orders (...)", "2026-01-02 10:00:00"),
    (
        "V20260102_2",
        "add idx_orders_user_status",
        "CREATE INDEX idx_orders_user_status ON orders (user_id, status)",
        "2026-01-02 10:00:05",
    ),
    ("V20260210_1", "add refunds", "CREATE TABLE refunds (...)", "2026-02-10 09:30:00"),
    ("V20260301_1", "add order_events", "CREATE TABLE order_events (...)", "2026-03-01 11:00:00"),
    (
        "V20260314_1",
        "cleanup redundant indexes on orders",
        "DROP INDEX idx_orders_user_status ON orders",
        "2026-03-14 12:38:12",
    ),
)


def _ts(rng: random.Random, days: float = 14.0) -> dt.datetime:
    return _BASE + dt.timedelta(seconds=rng.uniform(0, days * 86400))


def _customers(rng: random.Random) -> list[tuple[Any, ...]]:
    rows = []
    for cid in range(1, 601):
        tenant = "t-1042" if cid % 3 == 0 else _TENANTS[cid % len(_TENANTS)]
        limit = None if cid % 7 == 0 else f"{rng.randrange(500, 20000)}.00"
        rows.append(
            (
                cid,
                tenant,
                f"user{cid}@example.com",
                f"Customer {cid:04d}",
                rng.choice(("CN", "SG", "US", "DE", "JP")),
                limit,
                _ts(rng, 10),
            )
        )
    return rows


def _orders(rng: random.Random, customers: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    rows = []
    for oid in range(100001, 104001):
        cust = customers[rng.randrange(len(customers))]
        if oid % 2 == 0:  # half of all orders belong to the big tenant
            cust = customers[(rng.randrange(200) * 3 + 2) % len(customers)]
        created = _ts(rng)
        total = f"{rng.randrange(500, 250000) / 100:.2f}"
        rows.append(
            (
                oid,
                cust[1],
                cust[0],
                rng.choice(_STATUSES),
                total,
                "CNY",
                created,
                created + dt.timedelta(minutes=rng.randrange(1, 600)),
            )
        )
    return rows


def _items(rng: random.Random, orders: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    rows, iid = [], 1
    for order in orders:
        for _ in range(rng.randrange(1, 4)):
            rows.append(
                (
                    iid,
                    order[0],
                    f"SKU-{rng.randrange(1, 400):05d}",
                    rng.randrange(1, 5),
                    f"{rng.randrange(100, 50000) / 100:.2f}",
                )
            )
            iid += 1
    return rows


def _payments(rng: random.Random, orders: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    rows = []
    for pid, order in enumerate(orders, start=500001):
        if order[3] == "PENDING":
            continue
        status = "REFUNDED" if order[3] == "REFUNDED" else "CAPTURED"
        risk = None if pid % 11 == 0 else round(rng.random(), 4)
        settle = dt.timedelta(seconds=rng.randrange(0, 86400))
        rows.append(
            (
                pid,
                order[0],
                rng.choice(("alipay", "wechat", "card")),
                status,
                order[4],
                risk,
                settle,
                order[6] + dt.timedelta(seconds=rng.randrange(5, 120)),
            )
        )
    return rows


def _refunds(rng: random.Random, payments: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    rows, rid = [], 700001
    deploy = dt.datetime(2026, 3, 14, 9, 20)
    for pay in payments[:160]:
        at = dt.datetime(2026, 3, 14, 7, 0) + dt.timedelta(minutes=rid % 160 * 1.2)
        failing = at >= deploy and rid % 4 != 0
        version = "2.3.1" if at >= deploy else "2.3.0"
        error = "connection not available, request timed out after 30000ms" if failing else None
        rows.append(
            (rid, pay[0], pay[1], pay[4], "ERROR" if failing else "SUCCEEDED", error, version, at)
        )
        rid += 1
    return rows


def _events(rng: random.Random, orders: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    rows = []
    for eid, order in enumerate(orders[:400], start=900001):
        payload = {
            "order_id": order[0],
            "tenant": order[1],
            "status": order[3],
            "amount": order[4],
            "tags": ["web", "promo"] if eid % 5 == 0 else ["web"],
            "note": None if eid % 3 else "gift wrap",
        }
        blob = None if eid % 4 == 0 else bytes(rng.randrange(256) for _ in range(24))
        rows.append((eid, order[0], "status_changed", json.dumps(payload), blob, order[7]))
    return rows


def generate() -> dict[str, list[tuple[Any, ...]]]:
    """All demo rows by table name, identical on every call."""
    rng = random.Random(_SEED)
    customers = _customers(rng)
    orders = _orders(rng, customers)
    payments = _payments(rng, orders)
    migrations = [
        (v, d, s, "db-migrate", dt.datetime.fromisoformat(t)) for v, d, s, t in _MIGRATIONS
    ]
    return {
        "schema_migrations": migrations,
        "customers": customers,
        "orders": orders,
        "order_items": _items(rng, orders),
        "payments": payments,
        "refunds": _refunds(rng, payments),
        "order_events": _events(rng, orders),
    }
