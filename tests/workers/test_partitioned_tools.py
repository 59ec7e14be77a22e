"""Replay, export/import, the test books and the demo with `ACI_PARTITIONS=4` on the shared
Redis: every module that reads per-partition names loops over the partitions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.client import EvidenceClient
from pipeline.settings import Settings
from tests.conftest import REDIS_URL
from tests.pipeline.helpers import assert_exactly_once, books, running_worker
from tests.pipeline.partitioned import delete_prefix
from tests.workers.test_replay import calls, replay
from workers.replay import Selection, export_session, import_lines, load_file, load_redis
from workers.sources.instant import InstantSource

pytestmark = pytest.mark.redis
ROOT = Path(__file__).resolve().parents[2]
SESSIONS = ("rec-1", "rec-2", "rec-3", "rec-4")


def partitioned(prefix: str) -> Settings:
    return Settings(prefix=prefix, redis_url=REDIS_URL, partitions=4, visibility_timeout_s=2.0,
                    deadline_s=1.0)  # fmt: skip


async def test_replay_export_and_import_over_four_partitions(
    redis: Any, prefix: str, capsys: Any, tmp_path: Path
) -> None:
    settings = partitioned(prefix)
    keys = settings.keys()
    assert len({keys.partition_of(s) for s in SESSIONS}) > 1
    ids = [c.tool_call_id for c in calls()]
    sources = dict.fromkeys(("lookup_knowledge", "query_logs", "query_mysql"), InstantSource())
    try:
        async with (
            running_worker(redis, settings, sources),
            EvidenceClient(redis, settings) as client,
        ):
            for session in SESSIONS:
                assert all(r is not None for r in await client.call_many(session, calls(), 10))
        for session in SESSIONS:
            assert_exactly_once(await books(redis, prefix, session, partitions=4), ids)
        # Every session, found through the sessions index of every partition.
        everything = await load_redis(redis, settings, Selection())
        assert {(r.session, r.tool_call_id) for r in everything} == {
            (s, i) for s in SESSIONS for i in ids
        }
        code, lines = await replay(capsys, settings)
        assert (code, lines[-1]["identical"]) == (0, 24)
        path = str(tmp_path / "export.jsonl")
        assert await export_session(redis, settings, "rec-2", path) == 6
        assert all(len(r.lifecycle) == 2 for r in load_file(path))
        counts = await import_lines(redis, settings, load_file(path), "moved-1")
        assert counts["imported"] == 6
        assert await redis.xlen(keys.model("moved-1")) == 6
        assert keys.for_session("moved-1").index != keys.for_session("rec-2").index
        code, lines = await replay(capsys, settings, "--session", "moved-1")
        assert (code, lines[-1]["identical"]) == (0, 6)
    finally:
        await delete_prefix(redis, prefix)


@pytest.mark.slow
def test_the_demo_runs_over_four_partitions_on_a_shared_redis(tmp_path: Path) -> None:
    import redis as redis_sync

    client = redis_sync.Redis.from_url(REDIS_URL)
    before = set(client.scan_iter(match="{demo*", count=1000))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    env.update(TMPDIR=str(tmp_path), ACI_REDIS_URL=REDIS_URL, ACI_PARTITIONS="4")
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "demo", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=110, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    transcript = json.loads(done.stdout.strip().splitlines()[-1])
    finals = [t for t in transcript["timeline"] if t["status"] != "PROJECTING"]
    assert sorted(t["id"] for t in finals) == sorted(c["id"] for c in transcript["calls"])
    # The demo removed its keys from the shared Redis, in every partition.
    try:
        left = set(client.scan_iter(match="{demo*", count=1000)) - before
        assert not {k for k in left if k.split(b"}")[0].count(b":")}, sorted(left)[:5]
    finally:
        client.close()
