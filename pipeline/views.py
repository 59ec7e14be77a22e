"""Reading a session's published views back: its Model Observation or Harness Control View
stream, from the start, optionally following new entries (`aci-evidence views`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal

from pipeline.record import view_data
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
) -> AsyncIterator[list[bytes]]:
    """The session's views of one kind, as the JSON each entry carries, in batches in stream
    order; ends at the end of the stream unless `follow`, which waits for more until cancelled."""
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
                batch.append(view_data(fields))
        if batch or follow:
            yield batch
        if not follow and not reply:
            return
