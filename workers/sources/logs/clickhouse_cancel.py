"""Stopping a cancelled ClickHouse call in the engine (issue 32), for `clickhouse.py`.

A cancelled call (its cancel admitted, or its deadline passed) stops its statement in the
engine, not only the wait for it: every statement of a call carries a random `log_comment`
(`aci-…`), and the cancel sends `KILL QUERY WHERE Settings['log_comment'] = …` from a second
client (for chDB a second handle on the same engine: the first handle's lock is held by the
running statement). `log_comment` rather than clickhouse-connect's `query_id`: the chdb
backend drops `query_id` as a transport setting; `log_comment` reaches chDB and an HTTP server
alike. The worker's slot is freed at once (the thread is abandoned); the kill is shielded and
bounded, and a statement not started when the cancel came never starts.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio.to_thread

from contracts.status import ErrorCode
from workers.sources.base import SourceError

__all__ = ["kill", "run_stoppable", "unless_stopped"]

log = logging.getLogger("aci.sources.clickhouse")
T = TypeVar("T")


async def run_stoppable(search: Callable[..., T], stop: Callable[[str], bool], bound_s: float) -> T:
    """`search(mark=…, stopped=…)` in a thread; cancelled, the thread is abandoned at once,
    `stopped` set, and `stop(mark)` run shielded for `bound_s` at most."""
    mark, stopped = f"aci-{secrets.token_hex(12)}", threading.Event()
    try:
        run = partial(search, mark=mark, stopped=stopped)
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        stopped.set()  # a statement not started yet never starts
        with anyio.CancelScope(shield=True), anyio.move_on_after(bound_s):
            await anyio.to_thread.run_sync(stop, mark, abandon_on_cancel=True)
        raise


def unless_stopped(stopped: threading.Event | None) -> None:
    """Before each statement: a cancelled call's thread ends here."""
    if stopped is not None and stopped.is_set():
        raise SourceError(ErrorCode.EXECUTION, "the call was cancelled")


def kill(stopper: Callable[[], Any], mark: str) -> bool:
    """Blocking: kill the statements carrying `log_comment` `mark` from the client
    `stopper()` gives; whether the kill was sent (False without one or on any failure: the
    statement then ends at its `max_execution_time`)."""
    try:
        client = stopper()
        if client is None:
            return False
        client.query(
            "KILL QUERY WHERE Settings['log_comment'] = {mark:String} ASYNC",
            parameters={"mark": mark},
        )
    except Exception as exc:
        log.warning(
            "query_logs: a cancelled ClickHouse statement was not killed (%s)",
            type(exc).__name__,
        )
        return False
    return True
