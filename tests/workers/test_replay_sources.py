"""Replay knows what it ran against (issue 35): each Control View records its source's
configuration fingerprint (`source`), and `replay --reexecute` warns and exits 4 when today's
sources differ from the recording's, naming which part."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from pipeline.client import EvidenceClient, ToolCall
from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from tests.conftest import REDIS_URL
from tests.console.seed import drop_prefix
from tests.pipeline.helpers import running_worker
from workers.sources.logs import logs_source_from_env

pytestmark = pytest.mark.redis
ROOT = Path(__file__).resolve().parents[2]


def _record(prefix: str, scenario: str) -> dict[str, object]:
    settings = Settings(prefix=prefix, redis_url=REDIS_URL)
    found: list[dict[str, object]] = []

    async def run() -> None:
        logs: Any = logs_source_from_env({"ACI_MOCK_SCENARIO": scenario})
        call = ToolCall(
            tool="query_logs", tool_call_id="l1", arguments={"topic": "APPLICATION", "query": "x"}
        )
        async with (
            open_redis(REDIS_URL) as redis,
            running_worker(redis, settings, {"query_logs": logs}),
            EvidenceClient(redis, settings) as client,
        ):
            result = await client.call("s1", call, timeout=60)
            assert result is not None
            found.append(json.loads(result.as_json())["control"])

    anyio.run(run)
    return found[0]


def _reexecute(prefix: str, scenario: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    env.update(
        ACI_REDIS_URL=REDIS_URL, ACI_PREFIX=prefix, ACI_MOCK_SCENARIO=scenario,
        ACI_RAG_URL="http://127.0.0.1:9/search",  # no runbook index to build for this test
    )  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "replay", "--session", "s1", "--reexecute"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_reexecute_against_other_sources_warns_and_exits_4() -> None:
    prefix = f"r{uuid.uuid4().hex[:12]}"
    try:
        control = _record(prefix, "db-pool-exhaustion")
        assert control["source"] == {"logs": "MOCK db-pool-exhaustion"}
        same = _reexecute(prefix, "db-pool-exhaustion")
        assert same.returncode in (0, 1), same.stderr
        assert "sources differ" not in same.stderr
        other = _reexecute(prefix, "slow-query-storm")
        assert other.returncode == 4, other.stderr
        last = other.stderr.strip().splitlines()[-1]
        assert "the sources differ from the recording's" in last
        assert (
            "query_logs logs: recorded MOCK db-pool-exhaustion, now MOCK slow-query-storm" in last
        )
    finally:
        drop_prefix(REDIS_URL, prefix)


def test_identities_never_hold_a_secret_and_name_what_changed() -> None:
    from contracts import QueryMysqlRequest
    from workers.sources.identity import identity_changes, source_identity
    from workers.sources.mysql.config import parse_url
    from workers.sources.mysql.source import MysqlSource

    url = "mysql://reader:s3cret-pw@db.internal:3306/shop_physical"
    mysql = MysqlSource({"shop": parse_url(url), "pkgs": parse_url(url)})
    found = source_identity(mysql, QueryMysqlRequest(data_source="shop", sql="SELECT 1"))
    assert found == {"data_sources": "pkgs,shop"}
    assert not any(s in repr(found) for s in ("s3cret", "db.internal", "shop_physical", "reader"))
    assert source_identity(object(), None) is None
    assert identity_changes(None, {"logs": "MOCK a"}) == []  # recorded before identities
    assert identity_changes({"logs": "MOCK a"}, {"logs": "MOCK a"}) == []
    assert identity_changes({"runbooks": "1", "index": "2"}, {"runbooks": "1", "index": "3"}) == [
        "index: recorded 2, now 3"
    ]
