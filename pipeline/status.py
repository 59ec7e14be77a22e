"""The queue's status as one JSON-safe report: stream lengths and memory, group lag, pending
entries (idle time and delivery count), live and dead consumers, and invocations per lifecycle
state / evidence status over the recent lifecycle stream (`aci-evidence status` renders it:
`app/status.py`).

A consumer is *live* while its heartbeat (`pipeline.heartbeat`) is younger than the heartbeat
TTL; *dead* when its beat is older (it stopped without a clean stop: killed, frozen, cut off)
or when it holds pending entries without any beat; *stopped* when it has neither a beat nor
pending entries (a clean stop removes the beat, and XINFO keeps the name of every consumer
that ever read: nothing to do). XINFO's `idle` is shown beside it but decides nothing, since
it resets only on a delivery (a healthy worker on a quiet queue looks idle). A worker that
beats but has not read yet is listed too. A dead consumer's pending entries are taken over by
the live ones once idle past the visibility timeout.

With `ACI_PARTITIONS` > 1 every figure is collected per partition (each has its own streams,
consumer group and lifecycle stream) and aggregated: stream lengths are listed per stream,
counts and pending entries are summed, a consumer's pending entries are summed over the
partitions it reads (its idle time is the least), and `partitions` lists each partition's
pending, lag and length, so a starved or lagging partition shows.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Final

from pipeline.heartbeat import beats, configs, heartbeat_ttl_s
from pipeline.keys import GROUP, Keys, Partition
from pipeline.record import lifecycle_entry
from pipeline.redis_io import Redis, RedisProtocolError, call_redis
from pipeline.settings import Settings

__all__ = ["collect_status"]

_PENDING_SHOWN: Final = 20
_RECENT_MAX: Final = 100_000


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def _or_unknown(value: str | None) -> str:
    return "?" if value is None else value


async def _streams(redis: Redis, keys: Keys | Partition) -> dict[str, Any]:
    streams: dict[str, Any] = {}
    for name in (keys.requests, keys.invocations, keys.lifecycle, keys.dead):
        length = await call_redis(redis.xlen(name))
        memory = await call_redis(redis.memory_usage(name)) if length else 0
        streams[name] = {"length": length, "memory_bytes": memory or 0}
    streams[keys.requests]["oldest_waiting_ms"] = await _age_after(redis, keys.requests, "-")
    return streams


async def _age_after(redis: Redis, stream: str, after: str) -> int | None:
    """How long ago the first entry of `stream` after `after` ("-": the first of all) was
    added, by its id's time; None when there is none. One XRANGE of one entry: the backlog's
    age without counting it (XINFO's lag is None once entries were deleted)."""
    first = await call_redis(redis.xrange(stream, min=after, max="+", count=1))
    if not first:
        return None
    added_ms = int(_text(first[0][0]).split("-", 1)[0])
    return max(0, int(time.time() * 1000) - added_ms)


def _consumers(
    listed: list[dict[str, Any]],
    beat_ms: dict[str, int],
    now_ms: int,
    ttl_ms: int,
    config: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The group's consumers and every worker that beats, each live by its heartbeat, with
    the digest of the configuration it beat last (`config`, None for a worker of a version
    that beat none)."""
    out: dict[str, dict[str, Any]] = {}
    for c in listed:
        name = _text(c["name"])
        out[name] = {"name": name, "pending": c["pending"], "idle_ms": c["idle"]}
    for name in beat_ms:
        out.setdefault(name, {"name": name, "pending": 0, "idle_ms": None})
    for name, c in out.items():
        at = beat_ms.get(name)
        c["heartbeat_age_ms"] = None if at is None else max(0, now_ms - at)
        c["live"] = at is not None and now_ms - at < ttl_ms
        c["state"] = _state(c)
        c["config"] = (config or {}).get(name)
    return list(out.values())


def _state(c: dict[str, Any]) -> str:
    if c["live"]:
        return "live"
    return "dead" if c["heartbeat_age_ms"] is not None or c["pending"] else "stopped"


def _counts(consumers: list[dict[str, Any]]) -> dict[str, int]:
    states = Counter(c["state"] for c in consumers)
    return {f"consumers_{s}": states[s] for s in ("live", "dead", "stopped")}


async def _group(redis: Redis, keys: Keys | Partition, settings: Settings) -> dict[str, Any]:
    report: dict[str, Any] = {"group": None, "consumers": [], "pending": []}
    part = keys if isinstance(keys, Partition) else keys.parts[0]
    beat_ms = await beats(redis, part)
    config = await configs(redis, part)
    now_ms = int(time.time() * 1000)
    ttl_ms = int(heartbeat_ttl_s(settings) * 1000)
    report["consumers"] = _consumers([], beat_ms, now_ms, ttl_ms, config)
    try:
        groups = await call_redis(redis.xinfo_groups(keys.invocations))
    except RedisProtocolError:  # no stream yet
        return report
    info = next((g for g in groups if _text(g["name"]) == GROUP), None)
    if info is None:
        return report
    listed = await call_redis(redis.xinfo_consumers(keys.invocations, GROUP))
    report["consumers"] = _consumers(listed, beat_ms, now_ms, ttl_ms, config)
    pending = await call_redis(
        redis.xpending_range(keys.invocations, GROUP, min="-", max="+", count=_PENDING_SHOWN)
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
    report["group"] = {
        "name": GROUP,
        "pending": info["pending"],
        "lag": info.get("lag"),
        "entries_read": info.get("entries-read"),
        "last_delivered_id": _text(info["last-delivered-id"]),
        **_counts(report["consumers"]),
        "oldest_pending_idle_ms": max((p["idle_ms"] for p in report["pending"]), default=0),
        "max_deliveries": max((p["deliveries"] for p in report["pending"]), default=0),
    }
    # Not read by any worker yet: the entries after the group's last delivered one.
    last = report["group"]["last_delivered_id"]
    report["group"]["oldest_unread_age_ms"] = await _age_after(redis, keys.invocations, f"({last}")
    return report


async def _recent(redis: Redis, keys: Keys | Partition, window_s: int) -> dict[str, Any]:
    since = int((time.time() - window_s) * 1000)
    recent = await call_redis(
        redis.xrange(keys.lifecycle, min=f"{since}-0", max="+", count=_RECENT_MAX)
    )
    lifecycle: Counter[str] = Counter()
    evidence: Counter[str] = Counter()
    tools: Counter[str] = Counter()
    for _eid, fields in recent:
        entry = lifecycle_entry(fields)
        if not entry.submitted:
            lifecycle[_or_unknown(entry.status)] += 1
            evidence[_or_unknown(entry.evidence)] += 1
            tools[_or_unknown(entry.tool)] += 1
        else:
            lifecycle["PROJECTING"] += 1  # accepted: the same name the stream and views use
    return {
        "window_s": window_s,
        "lifecycle": dict(lifecycle),
        "evidence_status": dict(evidence),
        "finished_by_tool": dict(tools),
        "capped": len(recent) >= _RECENT_MAX,
    }


async def collect_status(redis: Redis, settings: Settings, window_s: int = 300) -> dict[str, Any]:
    """A JSON-ready snapshot of the pipeline (aggregated over its partitions)."""
    keys = settings.keys()
    report: dict[str, Any] = {"at_ms": int(time.time() * 1000), "prefix": settings.prefix}
    report["streams"] = {}
    report["sessions"] = 0
    groups: list[dict[str, Any]] = []
    recents: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for part in keys.parts:
        streams = await _streams(redis, part)
        report["streams"].update(streams)
        report["sessions"] += await call_redis(redis.zcard(part.sessions))
        group = await _group(redis, part, settings)
        groups.append(group)
        recents.append(await _recent(redis, part, window_s))
        info = group["group"] or {}
        # No group yet: every entry waits (no worker ever started on this partition).
        unread = (
            info["oldest_unread_age_ms"] if info else await _age_after(redis, part.invocations, "-")
        )
        streams[part.invocations]["oldest_waiting_ms"] = unread
        rows.append(
            {
                "index": part.index,
                "tag": part.tag,
                "length": streams[part.invocations]["length"],
                # Requests not admitted yet (no worker reads the partition, or admission lags).
                "requests": streams[part.requests]["length"],
                "pending": info.get("pending", 0),
                "lag": info.get("lag"),
                "oldest_unread_age_ms": unread,
                "requests_oldest_waiting_ms": streams[part.requests]["oldest_waiting_ms"],
            }
        )
    report.update(_merge_groups(groups))
    report["last_minutes"] = _merge_recent(recents)
    report["partitions"] = rows
    return report


def _merge_groups(groups: list[dict[str, Any]]) -> dict[str, Any]:
    if len(groups) == 1:
        return groups[0]
    consumers: dict[str, dict[str, Any]] = {}
    for group in groups:
        for c in group["consumers"]:
            seen = consumers.setdefault(c["name"], {**c, "pending": 0})
            seen["pending"] += c["pending"]
            seen["idle_ms"] = _least(seen["idle_ms"], c["idle_ms"])
            seen["heartbeat_age_ms"] = _least(seen["heartbeat_age_ms"], c["heartbeat_age_ms"])
            seen["live"] = seen["live"] or c["live"]
            seen["config"] = seen.get("config") or c.get("config")
    for c in consumers.values():
        c["state"] = _state(c)
    pending = sorted(
        (p for group in groups for p in group["pending"]), key=lambda p: -p["idle_ms"]
    )[:_PENDING_SHOWN]
    infos = [group["group"] for group in groups if group["group"]]
    merged: dict[str, Any] | None = None
    if infos:
        lags = [i["lag"] for i in infos]
        merged = {
            "name": GROUP,
            "pending": sum(i["pending"] for i in infos),
            "lag": None if None in lags else sum(lags),
            "entries_read": sum(i["entries_read"] or 0 for i in infos),
            "last_delivered_id": max(i["last_delivered_id"] for i in infos),
            **_counts(list(consumers.values())),
            "oldest_pending_idle_ms": max(i["oldest_pending_idle_ms"] for i in infos),
            "max_deliveries": max(i["max_deliveries"] for i in infos),
            "oldest_unread_age_ms": max(
                (i["oldest_unread_age_ms"] for i in infos if i["oldest_unread_age_ms"] is not None),
                default=None,
            ),
        }
    return {"group": merged, "consumers": list(consumers.values()), "pending": pending}


def _least(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _merge_recent(recents: list[dict[str, Any]]) -> dict[str, Any]:
    if len(recents) == 1:
        return recents[0]
    out: dict[str, Any] = {"window_s": recents[0]["window_s"]}
    for field in ("lifecycle", "evidence_status", "finished_by_tool"):
        total: Counter[str] = Counter()
        for recent in recents:
            total.update(recent[field])
        out[field] = dict(total)
    out["capped"] = any(r["capped"] for r in recents)
    return out
