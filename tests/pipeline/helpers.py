"""Helpers for pipeline tests: an in-process worker and a check of the books."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from functools import partial
from typing import Any

import anyio

from pipeline.keys import Keys
from pipeline.lane import Lane
from pipeline.record import lifecycle_entry, view_entry
from pipeline.settings import Settings
from workers.runtime import run_worker
from workers.runtime.admission import admit_round
from workers.runtime.state import WorkerState
from workers.sources import Source


async def admit(redis: Any, settings: Settings) -> int:
    """One admission round over every partition, as a worker's admission loop runs it: the
    requests submitted so far become calls and invocations. Returns how many it handled."""
    state = WorkerState(redis, settings, {}, concurrency=1, consumer="test-admission")
    lane = Lane(redis)
    try:
        return await admit_round(state, lane, state.parts)
    finally:
        await lane.aclose()


@contextlib.asynccontextmanager
async def running_worker(
    redis: Any, settings: Settings, sources: Mapping[str, Source], concurrency: int = 8
) -> AsyncIterator[anyio.Event]:
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            partial(run_worker, redis, settings, sources, concurrency=concurrency, stop=stop)
        )
        yield stop
        stop.set()


async def books(redis: Any, prefix: str, session: str, partitions: int = 1) -> dict[str, Any]:
    """Per tool call id: lifecycle finals, model views, control views, and the state."""
    keys = Keys(prefix, partitions)
    model = Counter(
        view_entry(f).tool_call_id for _e, f in await redis.xrange(keys.model(session), "-", "+")
    )
    control = Counter(
        view_entry(f).tool_call_id for _e, f in await redis.xrange(keys.control(session), "-", "+")
    )
    finals: Counter[str] = Counter()
    submitted: Counter[str] = Counter()
    for _e, f in await redis.xrange(keys.for_session(session).lifecycle, "-", "+"):
        entry = lifecycle_entry(f)
        if entry.session != session:
            continue
        (submitted if entry.submitted else finals)[entry.tool_call_id or ""] += 1
    return {"model": model, "control": control, "finals": finals, "submitted": submitted}


def assert_exactly_once(book: dict[str, Any], ids: list[str]) -> None:
    for name in ("model", "control", "finals", "submitted"):
        counts = book[name]
        wrong = {i: counts.get(i, 0) for i in ids if counts.get(i, 0) != 1}
        assert not wrong, f"{name}: expected exactly one per id, got {wrong}"
        assert set(counts) == set(ids), f"{name}: unexpected ids {set(counts) - set(ids)}"


def loads(raw: Any) -> Any:
    return json.loads(bytes(raw))
