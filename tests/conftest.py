"""Shared fixtures: the real Redis on 127.0.0.1:6379 with a unique key prefix per test; the
test scale (`scaled`)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

REDIS_URL = "redis://127.0.0.1:6379/0"
# `make test` runs the tests marked `scaled` at CI size; `make chaos` runs them again with
# ACI_TEST_SCALE=full at the size of the fault they reproduce (the guide: heavy fault runs
# belong in `make chaos`, at CI size in tests).
FULL_SCALE = os.environ.get("ACI_TEST_SCALE", "ci") == "full"


def scaled(ci: int, full: int) -> int:
    """`ci` in `make test`, `full` under ACI_TEST_SCALE=full (`make chaos`)."""
    return full if FULL_SCALE else ci


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def redis(prefix: str) -> AsyncIterator[Any]:
    from pipeline.redis_io import open_redis

    async with open_redis(REDIS_URL) as client:
        yield client
        # Remove only this test's keys (never FLUSHALL the shared server).
        keys = [k async for k in client.scan_iter(match=f"{{{prefix}}}:*", count=1000)]
        if keys:
            await client.delete(*keys)
