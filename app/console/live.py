"""Live updates over SSE: the lifecycle streams tailed with XREAD (never XREADGROUP), each
event's `id` the stream entry id it carries, so a browser that reconnects with `Last-Event-ID`
(or asks `?after=`) resumes where it stopped; nothing is kept in memory but the cursor.

With several partitions an event id is one cursor per partition, comma-separated, in
partition order (a session's page follows its one partition: a plain entry id).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any, Final

import anyio

from app.console.render import visible
from pipeline.inspect import digits, latest_lifecycle_ids, lifecycle_after
from pipeline.redis_io import Redis
from pipeline.settings import Settings

__all__ = ["lifecycle_events", "parse_cursors"]

_ENTRY_ID: Final = re.compile(r"\d{1,20}-\d{1,20}")
_BATCH: Final = 100
_POLL_S: Final = 0.3  # several partitions are polled (no one XREAD can block on them all)


def _shown(text: str | None) -> str | None:
    return None if text is None else visible(text)


def parse_cursors(text: str | None, count: int) -> list[str] | None:
    """The cursors of an event id (`Last-Event-ID`), or None when it is not one of ours."""
    if not text:
        return None
    parts = text.strip().split(",")
    if len(parts) != count or not all(_ENTRY_ID.fullmatch(p) for p in parts):
        return None
    return parts


async def lifecycle_events(
    redis: Redis,
    settings: Settings,
    *,
    session: str | None = None,
    last_event_id: str | None = None,
    follow: bool = True,
    block_ms: int = 1000,
) -> AsyncIterator[dict[str, Any]]:
    """SSE events (`id`, `event`, `data`) of lifecycle entries after `last_event_id` (or from
    now): every session's, or only `session`'s. Ends when nothing is left unless `follow`."""
    keys = settings.keys()
    parts = [keys.for_session(session)] if session is not None else list(keys.parts)
    cursors = parse_cursors(last_event_id, len(parts))
    if cursors is None:
        latest = await latest_lifecycle_ids(redis, keys)
        cursors = [latest[p.index] for p in parts]
    while True:
        entries = await lifecycle_after(
            redis, parts, cursors, count=_BATCH, block_ms=block_ms if follow else None
        )
        for index, entry_id, entry in entries:
            cursors[index] = entry_id
            if session is not None and entry.session != session:
                continue
            # Shown by the page's live feed: spelled out as every page spells text out
            # (a tool name a submitter chose may hold U+202E, which would reverse the line).
            data = {
                "session": _shown(entry.session),
                "tool_call_id": _shown(entry.tool_call_id),
                "tool": _shown(entry.tool),
                "status": _shown(entry.status),
                "evidence_status": _shown(entry.evidence),
                "at": digits(entry.at),
            }
            yield {"id": ",".join(cursors), "event": "lifecycle", "data": json.dumps(data)}
        if not entries:
            if not follow:
                return
            if len(parts) > 1:
                await anyio.sleep(_POLL_S)
