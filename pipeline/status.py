"""`aci-evidence status`: stream lengths and memory, group lag, pending entries, consumers,
and invocations per lifecycle state / evidence status over the recent lifecycle stream."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from pipeline.keys import GROUP, Keys
from pipeline.redis_io import Redis, RedisProtocolError, call_redis
from pipeline.settings import Settings

__all__ = ["collect_status", "render_status", "run_status"]


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


async def collect_status(redis: Redis, settings: Settings, window_s: int = 300) -> dict[str, Any]:
    """A JSON-ready snapshot of the pipeline."""
    keys = Keys(settings.prefix)
    streams: dict[str, Any] = {}
    for name in (keys.invocations, keys.lifecycle, keys.dead):
        length = await call_redis(redis.xlen(name))
        memory = await call_redis(redis.memory_usage(name)) if length else 0
        streams[name] = {"length": length, "memory_bytes": memory or 0}
    report: dict[str, Any] = {"streams": streams, "group": None, "consumers": [], "pending": []}
    try:
        groups = await call_redis(redis.xinfo_groups(keys.invocations))
    except RedisProtocolError:
        groups = []
    for group in groups:
        if _text(group["name"]) != GROUP:
            continue
        report["group"] = {
            "name": GROUP,
            "pending": group["pending"],
            "lag": group.get("lag"),
            "last_delivered_id": _text(group["last-delivered-id"]),
        }
        consumers = await call_redis(redis.xinfo_consumers(keys.invocations, GROUP))
        stale_ms = int(settings.visibility_timeout_s * 1000)
        report["consumers"] = [
            {
                "name": _text(c["name"]),
                "pending": c["pending"],
                "idle_ms": c["idle"],
                "live": c["idle"] < stale_ms,
            }
            for c in consumers
        ]
        pending = await call_redis(
            redis.xpending_range(keys.invocations, GROUP, min="-", max="+", count=20)
        )
        report["pending"] = [
            {
                "id": _text(p["message_id"]),
                "consumer": _text(p["consumer"]),
                "idle_ms": p["time_since_delivered"],
                "deliveries": p["times_delivered"],
            }
            for p in pending
        ]
    since = int((time.time() - window_s) * 1000)
    recent = await call_redis(
        redis.xrange(keys.lifecycle, min=f"{since}-0", max="+", count=100_000)
    )
    lifecycle: Counter[str] = Counter()
    evidence: Counter[str] = Counter()
    for _eid, fields in recent:
        if fields.get(b"status") != b"PROJECTING":
            lifecycle[_text(fields.get(b"status", b"?"))] += 1
            evidence[_text(fields.get(b"evidence", b"?"))] += 1
        else:
            lifecycle["SUBMITTED"] += 1
    report["last_minutes"] = {
        "window_s": window_s,
        "lifecycle": dict(lifecycle),
        "evidence_status": dict(evidence),
    }
    return report


def render_status(report: dict[str, Any]) -> None:
    """Print the snapshot as rich tables."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title="streams")
    for column in ("stream", "length", "memory bytes"):
        table.add_column(column)
    for name, info in report["streams"].items():
        table.add_row(name, str(info["length"]), str(info["memory_bytes"]))
    console.print(table)
    if report["group"]:
        console.print(f"group {report['group']}")
    consumers = Table(title="consumers")
    for column in ("consumer", "pending", "idle ms", "live"):
        consumers.add_column(column)
    for c in report["consumers"]:
        consumers.add_row(c["name"], str(c["pending"]), str(c["idle_ms"]), str(c["live"]))
    console.print(consumers)
    console.print(f"last minutes: {report['last_minutes']}")


async def run_status(args: Any, settings: Settings, url: str) -> int:
    """`aci-evidence status [--json] [--watch]`."""
    import json

    from pipeline.redis_io import open_redis

    async with open_redis(url) as redis:
        report = await collect_status(redis, settings)
    if args.json:
        print(json.dumps(report))
    else:
        render_status(report)
    return 0
