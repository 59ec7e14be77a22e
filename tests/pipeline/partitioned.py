"""Helpers for partitioned pipelines: books over every partition, and cleanup."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pipeline.keys import Keys


async def partitioned_books(redis: Any, keys: Keys, sessions: list[str]) -> dict[str, Counter[str]]:
    """Per `session/id`: lifecycle submits and finals, model and control views."""
    book: dict[str, Counter[str]] = {
        n: Counter() for n in ("submitted", "finals", "model", "control")
    }
    wanted = set(sessions)
    for part in keys.parts:
        for _e, f in await redis.xrange(part.lifecycle, "-", "+"):
            session = f[b"session"].decode()
            if session not in wanted:
                continue
            assert keys.partition_of(session) == part.index, "an entry in a foreign partition"
            name = "submitted" if f[b"status"] == b"PROJECTING" else "finals"
            book[name][f"{session}/{f[b'id'].decode()}"] += 1
    for session in sessions:
        for view in ("model", "control"):
            stream = keys.model(session) if view == "model" else keys.control(session)
            for _e, f in await redis.xrange(stream, "-", "+"):
                book[view][f"{session}/{f[b'id'].decode()}"] += 1
    return book


def assert_once(book: dict[str, Counter[str]], expected: set[str]) -> None:
    for name, counts in book.items():
        wrong = {k: v for k, v in counts.items() if v != 1}
        assert not wrong, f"{name}: more than once: {list(wrong.items())[:5]}"
        assert set(counts) == expected, f"{name}: {len(expected - set(counts))} missing"


async def delete_prefix(redis: Any, prefix: str) -> None:
    """Remove every key of a partitioned prefix (`{prefix:i.s}:...`) from a single Redis."""
    found = [k async for k in redis.scan_iter(match=f"{{{prefix}:*", count=1000)]
    if found:
        await redis.delete(*found)
