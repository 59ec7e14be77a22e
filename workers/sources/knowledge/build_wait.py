"""Waiting for the shared index build: its outcome as a typed error, and how long a lookup may
wait for a first build before it says the index is still being built.

The build runs in a thread of its own (`index.KnowledgeIndexSource`); a call waits for it
here without a thread of its own, so the call's deadline cancels only the wait.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from concurrent.futures import Future

import anyio

from contracts.status import ErrorCode
from workers.sources.base import SourceError

__all__ = ["EmptyIndex", "deadline_s", "unavailable", "wait_for"]


class EmptyIndex(Exception):
    """The folder holds no indexable runbook."""


def deadline_s(env: Mapping[str, str]) -> float:
    """The call deadline a worker or `call --local` runs lookups under (ACI_DEADLINE_S); its
    default when the value is not one (the pipeline's settings refuse it themselves)."""
    from pipeline.settings import Settings, SettingsError

    try:
        return Settings.from_env({"ACI_DEADLINE_S": env.get("ACI_DEADLINE_S", "")}).deadline_s
    except SettingsError:
        return Settings.from_env({}).deadline_s


def unavailable() -> SourceError:
    """The error of an index that cannot be read or built (retryable)."""
    return SourceError(
        ErrorCode.UNAVAILABLE, "the knowledge index could not be read", retryable=True
    )


async def wait_for(refresh: Future[None], answers_meanwhile: Callable[[], bool]) -> None:
    """Wait for the shared build without a thread of our own: cancelled at the caller's
    deadline, which leaves the build running for the calls after it. Returns at once, without
    its outcome, once `answers_meanwhile()` (an open index answers while a rebuild runs)."""
    delay = 0.001
    while not refresh.done():
        if answers_meanwhile():
            return
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.05)
    error = refresh.exception()
    if isinstance(error, EmptyIndex):
        raise SourceError(
            ErrorCode.UNAVAILABLE, "the knowledge folder holds no runbook", retryable=True
        ) from error
    if isinstance(error, (OSError, sqlite3.DatabaseError, UnicodeError, ValueError)):
        raise unavailable() from error
    if error is not None:
        raise error
