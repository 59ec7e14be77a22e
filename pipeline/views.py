"""Reading a session's published views back: its Model Observation or Harness Control View
stream, from the start, optionally following new entries (`aci-evidence views`).

Only workers write view streams, one entry per finished call; each entry carries the scope key
its call was finished with, so a reader that knows what it submitted (`expect`: tool call id →
scope key, e.g. from `EvidenceClient.scope_keys`) reads only its own calls' views.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Literal

from pipeline.record import view_entry
from pipeline.redis_io import Redis, call_redis
from pipeline.settings import Settings

__all__ = ["read_views"]

_BATCH = 1000
_FOLLOW_BLOCK_MS = 1000


async def read_views(
    redis: Redis,
    settings: Settings,
    session_id: str,
    view: Literal["model", "control"],
    *,
    follow: bool = False,
    expect: Mapping[str, str] | None = None,
) -> AsyncIterator[list[bytes]]:
    """The session's views of one kind, as the JSON each entry carries, in batches in stream
    order; ends at the end of the stream unless `follow`, which waits for more until cancelled.
    With `expect`, only the views of those tool call ids finished with those scope keys."""
    keys = settings.keys()
    stream = keys.model(session_id) if view == "model" else keys.control(session_id)
    cursor: bytes | str = "0-0"
    while True:
        reply = await call_redis(
            redis.xread({stream: cursor}, count=_BATCH, block=_FOLLOW_BLOCK_MS if follow else None)
        )
        batch: list[bytes] = []
        for _name, entries in reply or []:
            for entry_id, fields in entries:
                cursor = entry_id
                entry = view_entry(fields)
                if expect is not None:
                    asked = expect.get(entry.tool_call_id)
                    if asked is None or entry.scope_key.decode("utf-8", "replace") != asked:
                        continue
                batch.append(entry.data or b"")
        if batch or follow:
            yield batch
        if not follow and not reply:
            return
