"""The shape of the mock log world: record fields per topic, the mock clock, and a seeded builder.

A scenario's timeline is written against offsets in minutes from T0 (the moment its first alert
fires). Every random choice comes from one `random.Random` seeded with the scenario name, so a
world is a pure function of its scenario: no wall clock, no process state.
"""

from __future__ import annotations

import hashlib
import random
from datetime import datetime, timedelta, timezone
from typing import Final, Literal

import msgspec

from contracts.results import JsonScalar
from contracts.status import Topic

__all__ = [
    "NUMERIC_FIELDS",
    "TOPIC_FIELDS",
    "ZONE",
    "Builder",
    "MockRecord",
    "Pod",
    "World",
    "format_time",
]

ZONE: Final = timezone(timedelta(hours=8))
NAMESPACE: Final = "shop"

# Searchable fields per topic; `level`, `service` and `message` are common to all three.
TOPIC_FIELDS: Final[dict[Topic, tuple[str, ...]]] = {
    Topic.APPLICATION: (
        "level",
        "service",
        "message",
        "host",
        "pod",
        "trace_id",
        "logger",
        "exception",
        "uri",
        "http_status",
        "cost_ms",
    ),
    Topic.DATABASE_SLOW_QUERY: (
        "level",
        "service",
        "message",
        "db_instance",
        "schema",
        "db_user",
        "client_host",
        "duration_ms",
        "lock_time_ms",
        "rows_examined",
        "rows_sent",
        "sql_digest",
        "sql_template",
        "table",
        "index_used",
    ),
    Topic.SYSTEM_EVENTS: (
        "level",
        "service",
        "message",
        "namespace",
        "kind",
        "object",
        "reason",
        "host",
        "count",
        "exit_code",
        "restart_count",
    ),
}
NUMERIC_FIELDS: Final = frozenset(
    {
        "http_status",
        "cost_ms",
        "duration_ms",
        "lock_time_ms",
        "rows_examined",
        "rows_sent",
        "count",
        "exit_code",
        "restart_count",
    }
)


def format_time(epoch_ms: int) -> str:
    """ISO 8601 with milliseconds in the mock's zone (+08:00)."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=ZONE)
    return moment.isoformat(timespec="milliseconds")


class MockRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One generated record; `fields` holds the topic fields that are present."""

    epoch_ms: int
    timestamp: str
    level: str
    service: str
    message: str
    fields: dict[str, JsonScalar]


class World(msgspec.Struct, frozen=True, kw_only=True):
    """The immutable records of one scenario, sorted by time within each topic."""

    scenario: str
    t0_ms: int
    now_ms: int
    records: dict[Topic, tuple[MockRecord, ...]]


class Pod(msgspec.Struct, frozen=True, kw_only=True):
    """A pod of a service: its name, its node and its IP."""

    name: str
    host: str
    ip: str


class Builder:
    """Collects the records of one scenario; all randomness comes from its seeded RNG."""

    def __init__(self, scenario: str, t0: datetime, *, now_minutes: float = 10.0) -> None:
        self.scenario = scenario
        self.t0_ms = int(t0.timestamp() * 1000)
        self.now_ms = self.t0_ms + int(now_minutes * 60_000)
        self.rng = random.Random(f"aci-mocklog:{scenario}")
        self.pods: dict[str, tuple[Pod, ...]] = {}
        self._out: dict[Topic, list[MockRecord]] = {topic: [] for topic in Topic}

    def add_service(self, name: str, nodes: tuple[str, ...]) -> tuple[Pod, ...]:
        """Register a service with one pod per listed node."""
        rs = self.hex(9)
        pods = tuple(
            Pod(name=f"{name}-{rs}-{self.pod_suffix()}", host=node, ip=self.pod_ip())
            for node in nodes
        )
        self.pods[name] = pods
        return pods

    def hex(self, digits: int) -> str:
        """Random lowercase hex of `digits` characters."""
        return f"{self.rng.getrandbits(digits * 4):0{digits}x}"

    def pod_suffix(self) -> str:
        """A pod-name suffix like `x2k4p`."""
        return "".join(self.rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))

    def pod_ip(self) -> str:
        """A cluster pod IP."""
        return f"10.42.{self.rng.randint(1, 9)}.{self.rng.randint(2, 250)}"

    def trace_id(self) -> str:
        """A fresh 32-hex trace id."""
        return self.hex(32)

    def ms(self, minutes: float) -> int:
        """Epoch milliseconds of an offset in minutes from T0."""
        return self.t0_ms + round(minutes * 60_000)

    def _add(
        self,
        topic: Topic,
        epoch_ms: int,
        level: str,
        service: str,
        message: str,
        fields: dict[str, JsonScalar],
    ) -> None:
        if epoch_ms > self.now_ms:
            return  # the mock's clock stops at "now"
        present: dict[str, JsonScalar] = {k: v for k, v in fields.items() if v is not None}
        self._out[topic].append(
            MockRecord(
                epoch_ms=epoch_ms,
                timestamp=format_time(epoch_ms),
                level=level,
                service=service,
                message=message,
                fields=present,
            )
        )

    def app(
        self,
        minutes: float,
        level: str,
        service: str,
        message: str,
        *,
        logger: str,
        pod: Pod | None = None,
        trace_id: str | None = None,
        exception: str | None = None,
        uri: str | None = None,
        http_status: int | None = None,
        cost_ms: int | None = None,
    ) -> None:
        """An APPLICATION record from a pod of `service` (a random pod unless given)."""
        where = pod or self.rng.choice(self.pods[service])
        fields: dict[str, JsonScalar] = {
            "host": where.host,
            "pod": where.name,
            "trace_id": trace_id or self.trace_id(),
            "logger": logger,
            "exception": exception,
            "uri": uri,
            "http_status": http_status,
            "cost_ms": cost_ms,
        }
        self._add(Topic.APPLICATION, self.ms(minutes), level, service, message, fields)

    def slow_query(
        self,
        minutes: float,
        *,
        sql_template: str,
        table: str,
        duration_ms: int,
        lock_time_ms: float,
        rows_examined: int,
        rows_sent: int,
        index_used: str,
        db_user: str,
        client_host: str,
        db_instance: str = "mysql-orders-01",
    ) -> None:
        """A DATABASE_SLOW_QUERY record (always WARN: only slow statements are logged)."""
        digest = hashlib.sha256(sql_template.encode()).hexdigest()[:16]
        message = (
            f"Query_time: {duration_ms / 1000:.3f}s Lock_time: {lock_time_ms / 1000:.3f}s "
            f"Rows_sent: {rows_sent} Rows_examined: {rows_examined} {sql_template}"
        )
        fields: dict[str, JsonScalar] = {
            "db_instance": db_instance,
            "schema": NAMESPACE,
            "db_user": db_user,
            "client_host": client_host,
            "duration_ms": duration_ms,
            "lock_time_ms": lock_time_ms,
            "rows_examined": rows_examined,
            "rows_sent": rows_sent,
            "sql_digest": digest,
            "sql_template": sql_template,
            "table": table,
            "index_used": index_used,
        }
        self._add(Topic.DATABASE_SLOW_QUERY, self.ms(minutes), "WARN", db_instance, message, fields)

    def event(
        self,
        minutes: float,
        kind_type: Literal["Normal", "Warning"],
        *,
        service: str,
        kind: str,
        obj: str,
        reason: str,
        message: str,
        host: str | None = None,
        count: int = 1,
        exit_code: int | None = None,
        restart_count: int | None = None,
    ) -> None:
        """A SYSTEM_EVENTS record (Kubernetes event; Normal -> INFO, Warning -> WARN)."""
        level = "INFO" if kind_type == "Normal" else "WARN"
        fields: dict[str, JsonScalar] = {
            "namespace": NAMESPACE,
            "kind": kind,
            "object": obj,
            "reason": reason,
            "host": host,
            "count": count,
            "exit_code": exit_code,
            "restart_count": restart_count,
        }
        self._add(Topic.SYSTEM_EVENTS, self.ms(minutes), level, service, message, fields)

    def build(self) -> World:
        """Freeze the collected records, sorted by time (stable for equal times)."""
        records = {
            topic: tuple(sorted(found, key=lambda r: r.epoch_ms))
            for topic, found in self._out.items()
        }
        return World(scenario=self.scenario, t0_ms=self.t0_ms, now_ms=self.now_ms, records=records)
