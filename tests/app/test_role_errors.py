"""A command refused by Redis ACLs names the Redis user it needs (issue 35, item 6): `replay
--into` and `import` need an administrator, `status` and `replay` the auditor, where before
each said only "the Redis user may not do this"."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from app.errors import role_needed
from pipeline.client import EvidenceClient, ToolCall
from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from tests.pipeline.acl_server import AclServer, acl_server
from tests.pipeline.helpers import running_worker
from workers.sources.instant import InstantSource

pytestmark = pytest.mark.redis
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclServer]:
    """An ACL'd Redis holding one finished call (session s1) and its export file."""
    with acl_server(["aci"]) as running:
        settings = Settings(prefix="aci", redis_url=running.url("admin"))

        async def seed() -> None:
            async with (
                open_redis(running.url("admin")) as redis,
                running_worker(redis, settings, {"lookup_knowledge": InstantSource()}),
                EvidenceClient(redis, settings) as client,
            ):
                call = ToolCall(
                    tool="lookup_knowledge", tool_call_id="c1", arguments={"query": "q"}
                )
                assert await client.call("s1", call, timeout=30) is not None

        anyio.run(seed)
        file = tmp_path_factory.mktemp("export") / "s1.jsonl"
        done = _run(running.url("admin"), "export", "--session", "s1", "--file", str(file))
        assert done.returncode == 0, done.stderr
        running.export = file  # type: ignore[attr-defined]
        yield running


def _run(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ACI_REDIS_URL": url, "ACI_PREFIX": "aci", "ACI_LOG_LEVEL": "WARNING"}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("role", "args", "needed"),
    [
        ("submitter", ("status",), "`status` needs the auditor's URL"),
        ("submitter", ("replay", "--session", "s1"), "`replay` needs the auditor's URL"),
        ("auditor", ("replay", "--session", "s1", "--into", "s2"), "`replay --into` needs an administrator's URL"),
        ("submitter", ("import", "--file", "{file}", "--session", "s3"), "`import` needs an administrator's URL"),
        ("auditor", ("import", "--file", "{file}", "--session", "s4"), "`import` needs an administrator's URL"),
    ],
)  # fmt: skip
def test_a_refusal_names_the_role_needed(
    server: AclServer, tmp_path: Path, role: str, args: tuple[str, ...], needed: str
) -> None:
    export = server.export  # type: ignore[attr-defined]
    done = _run(server.url(role), *(a.format(file=export) for a in args))
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1, done.stderr
    assert "NOPERM" in last and needed in last, last


def test_role_needed_words() -> None:
    assert role_needed("replay", into=True) == role_needed("import").replace(
        "`import`", "`replay --into`"
    )
    assert role_needed("tools") is None


async def test_the_embedded_redis_gives_an_administrator_url() -> None:
    # The demo printed no administrator URL, so `replay --into` could not be tried on it.
    from pipeline.embedded import embedded_redis_users
    from pipeline.redis_io import call_redis

    with anyio.fail_after(30):
        async with embedded_redis_users("aci") as urls, open_redis(urls.admin) as admin:
            assert urls.admin.startswith("unix://default:") and urls.admin not in repr(urls)
            assert await call_redis(admin.set("{aci}:res:s:c", "x")) is True
