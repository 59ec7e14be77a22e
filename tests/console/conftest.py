"""Fixtures of the console's tests: one recorded deployment per module on the shared Redis
(its own key prefix), and a Starlette TestClient over the console app."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import anyio
import pytest
from starlette.testclient import TestClient

from app.console import ConsoleConfig, create_app
from pipeline.settings import Settings
from tests.conftest import REDIS_URL
from tests.console.seed import drop_prefix, large_settings, seed_all, seed_large


@pytest.fixture(scope="module")
def recorded() -> Iterator[Settings]:
    """A deployment with the main, hostile and large sessions recorded."""
    prefix = f"c{uuid.uuid4().hex[:12]}"
    settings = large_settings(prefix, REDIS_URL)

    async def seed() -> None:
        await seed_all(REDIS_URL, settings)
        await seed_large(REDIS_URL, settings)

    try:
        anyio.run(seed)
        yield settings
    finally:
        drop_prefix(REDIS_URL, prefix)


@pytest.fixture
def client(recorded: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(recorded, REDIS_URL)) as test_client:
        yield test_client


def make_client(settings: Settings, **kw: object) -> TestClient:
    """A TestClient over a console configured with `kw` (ConsoleConfig fields)."""
    return TestClient(create_app(settings, REDIS_URL, config=ConsoleConfig(**kw)))  # type: ignore[arg-type]
