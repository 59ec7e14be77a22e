"""`aci-evidence status`: the queue's status report (`pipeline.status.collect_status`) as
rich tables, or as JSON. `--json` prints one object (one per refresh with `--watch`); `--watch`
refreshes a live view every second until Ctrl-C or SIGTERM (exit code 130: the user stopped it).

Every value is printed through `app.terminal` (control bytes and bidi overrides as visible
escapes, never markup): names and counts come from streams others write. A consumer's state
is its heartbeat's (`pipeline.heartbeat`), not XINFO's idle time.
"""

from __future__ import annotations

import json
import signal
import sys
from typing import Any

import anyio

from app.errors import EXIT_ABORTED, EXIT_OK
from app.terminal import safe_cell
from pipeline.redis_io import Redis, open_redis
from pipeline.settings import Settings
from pipeline.status import collect_status

__all__ = ["attention", "render_status", "run_status", "status_renderable"]


def _table(title: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> Any:
    from rich.table import Table

    table = Table(title=safe_cell(title), title_justify="left")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(safe_cell("-" if v is None else v) for v in row))
    return table


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def attention(report: dict[str, Any]) -> list[str]:
    """What needs a look, in plain words, from the report alone (first in the tables): work
    that no live worker reads, entries held by dead consumers, entries delivered again."""
    said: list[str] = []
    group = report.get("group") or {}
    live = sum(1 for c in report["consumers"] if c["live"])
    parts = report.get("partitions", [])
    requests = sum(p.get("requests", 0) for p in parts)
    ages = [p.get(k) for p in parts for k in ("requests_oldest_waiting_ms", "oldest_unread_age_ms")]
    oldest = max((a for a in ages if a is not None), default=None)
    waiting: list[str] = []
    if requests:
        # A client sends again a request not admitted in time: the stream counts those too.
        waiting.append(_count(requests, "request", "requests") + " (resends included) to admit")
    if group.get("lag"):
        waiting.append(_count(group["lag"], "invocation waits", "invocations wait") + " to be read")
    elif group.get("oldest_unread_age_ms") is not None:
        waiting.append("invocations wait to be read")
    elif not group and (queued := sum(p.get("length") or 0 for p in parts)):
        # No worker ever started: invocations a trusted client admitted itself
        # (`pipeline.admit_here`) wait in a stream that has no group yet.
        waiting.append(_count(queued, "invocation waits", "invocations wait") + " to be read")
    if not live and waiting:
        since = f" (the oldest for {oldest / 1000:.1f} s)" if oldest is not None else ""
        said.append(
            f"no live worker: {' and '.join(waiting)}{since}; start `aci-evidence worker` "
            "with this ACI_REDIS_URL and ACI_PREFIX"
        )
    held = [c for c in report["consumers"] if c.get("state") == "dead" and c["pending"]]
    if held:
        n = sum(c["pending"] for c in held)
        names = ", ".join(sorted(c["name"] for c in held)[:3]) + (", ..." if len(held) > 3 else "")
        it = "it" if n == 1 else "them"
        said.append(
            f"{_count(n, 'pending entry is', 'pending entries are')} held by dead consumers "
            f"({names}): a live worker takes {it} over once idle past ACI_VISIBILITY_TIMEOUT_S"
            + ("" if live else "; none runs now")
        )
    running = [c for c in report["consumers"] if c["live"] and c.get("config")]
    kinds = {c["config"] for c in running}
    if len(kinds) > 1:
        said.append(
            f"{len(running)} live workers run {len(kinds)} different configurations (sources, "
            "log topics, runbook folder, data sources): one call may be answered differently "
            "by each; restart those left behind on the current configuration (the consumers' "
            "config column)"
        )
    if group.get("max_deliveries", 0) > 1:
        said.append(
            f"pending entries were delivered up to {group['max_deliveries']} times (taken over "
            "after a crash or a refused finish): past ACI_MAX_ATTEMPTS they end ERROR/GAVE_UP"
        )
    return said


def status_renderable(report: dict[str, Any]) -> Any:
    """The snapshot as a group of rich tables (for printing or a live view); what needs a look
    first (`attention`), when anything does."""
    from rich.console import Group

    said = attention(report)
    parts: list[Any] = []
    if said:
        parts.append(_table("attention", ("what needs a look",), [(line,) for line in said]))
    parts += [
        _table(
            f"streams (sessions: {report['sessions']})",
            ("stream", "length", "memory bytes", "oldest waiting ms"),
            [
                (n, i["length"], i["memory_bytes"], i.get("oldest_waiting_ms"))
                for n, i in report["streams"].items()
            ],
        )
    ]
    group = report["group"]
    if group:
        # One row per figure: eight columns of names like oldest_pending_idle_ms do not fit
        # 80 columns, and rich cut them to `oldest_pe…`.
        keys = ("pending", "lag", "entries_read", "consumers_live", "consumers_dead",
                "consumers_stopped", "oldest_unread_age_ms", "oldest_pending_idle_ms",
                "max_deliveries")  # fmt: skip
        rows = [(k, group.get(k)) for k in keys]
        parts.append(_table(f"group {group['name']}", ("figure", "value"), rows))
    parts.append(
        _table(
            "consumers",
            ("consumer", "pending", "idle ms", "heartbeat ms ago", "state", "config"),
            [
                (
                    c["name"],
                    c["pending"],
                    c["idle_ms"],
                    c.get("heartbeat_age_ms"),
                    c.get("state") or ("live" if c["live"] else "dead"),
                    (c.get("config") or "-")[:8],
                )
                for c in report["consumers"]
            ],
        )
    )
    if report["pending"]:
        parts.append(
            _table(
                "pending entries (oldest first)",
                ("entry", "consumer", "idle ms", "deliveries"),
                [
                    (p["id"], p["consumer"], p["idle_ms"], p["deliveries"])
                    for p in report["pending"]
                ],
            )
        )
    recent = report["last_minutes"]
    counts = [("lifecycle", k, v) for k, v in sorted(recent["lifecycle"].items())]
    counts += [("evidence", k, v) for k, v in sorted(recent["evidence_status"].items())]
    parts.append(_table(f"last {recent['window_s']} s", ("axis", "status", "count"), counts))
    return Group(*parts)


def render_status(report: dict[str, Any]) -> None:
    """Print the snapshot as rich tables."""
    from rich.console import Console

    Console().print(status_renderable(report))


async def _watch(
    redis: Redis, settings: Settings, *, as_json: bool, interval: float, limit: int | None
) -> bool:
    # Bounded by Ctrl-C / SIGTERM, or by `limit` refreshes (tests). True: a signal stopped it.
    stop = anyio.Event()

    async def on_signal() -> None:
        # SIGTERM; Ctrl-C cancels the whole command (`app.interrupt`): exit 130 as well.
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            async for _ in signals:
                stop.set()
                return

    async with anyio.create_task_group() as tg:
        tg.start_soon(on_signal)
        live: Any = None
        if not as_json:
            from rich.live import Live

            live = Live(refresh_per_second=1, transient=False)
            live.start()
        try:
            shown = 0
            while not stop.is_set() and (limit is None or shown < limit):
                report = await collect_status(redis, settings)
                if live is not None:
                    live.update(status_renderable(report), refresh=True)
                else:
                    sys.stdout.write(json.dumps(report) + "\n")
                    sys.stdout.flush()
                shown += 1
                with anyio.move_on_after(interval):
                    await stop.wait()
        finally:
            if live is not None:
                live.stop()
            tg.cancel_scope.cancel()
    return stop.is_set()


async def run_status(
    settings: Settings,
    url: str,
    *,
    as_json: bool = False,
    watch: bool = False,
    interval: float = 1.0,
    iterations: int | None = None,
) -> int:
    """`aci-evidence status [--json] [--watch]`: one report, or one per `interval` seconds
    until Ctrl-C / SIGTERM (exit 130) or `iterations` of them (exit 0)."""
    async with open_redis(url, cluster=settings.redis_cluster) as redis:
        if watch:
            stopped = await _watch(
                redis, settings, as_json=as_json, interval=interval, limit=iterations
            )
            return EXIT_ABORTED if stopped else EXIT_OK
        report = await collect_status(redis, settings)
    if as_json:
        print(json.dumps(report))
    else:
        render_status(report)
    return EXIT_OK
