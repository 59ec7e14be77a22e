"""Two live workers that run different configurations answer one call differently (a topic
added on one restarted worker, the other still on the old file): `status` says so.

Found by the day-two drill: after a topic was added to ACI_LOGS_CONFIG and one of two workers
restarted, every other SYSTEM_EVENTS call answered ERROR "not configured" and the rest
EVIDENCE_FOUND, alternating by worker, while `status` showed two live workers and nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from app.status import attention
from pipeline.settings import Settings
from pipeline.status import collect_status
from tests.conftest import REDIS_URL
from workers.runtime import run_worker
from workers.sources import open_sources

pytestmark = pytest.mark.redis

TOPIC = '[topics.{name}]\nbackend = "file"\nformat = "jsonl"\npaths = ["{root}/{file}*"]\n'


def _config(tmp_path: Path, name: str, topics: list[str]) -> dict[str, str]:
    (tmp_path / "app.log").write_text("")
    text = f'roots = ["{tmp_path}"]\n' + "".join(
        TOPIC.format(name=t, root=tmp_path, file="app.log") for t in topics
    )
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return {"ACI_LOGS_CONFIG": str(path)}


async def _report_with(
    redis: Any, settings: Settings, envs: list[dict[str, str]]
) -> dict[str, Any]:
    stop = anyio.Event()
    report: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:
        for n, env in enumerate(envs):
            sources = await tg_sources(env)
            tg.start_soon(
                lambda s=sources, n=n: run_worker(
                    redis, settings, s, consumer=f"w{n}", stop=stop, concurrency=2
                )
            )
        await anyio.sleep(0.6)
        report = await collect_status(redis, settings)
        stop.set()
    return report


async def tg_sources(env: dict[str, str]) -> dict[str, Any]:
    async with open_sources(env, only=("query_logs",)) as sources:
        return dict(sources)


def _settings(prefix: str) -> Settings:
    return Settings(prefix=prefix, redis_url=REDIS_URL, visibility_timeout_s=2.0, deadline_s=1.0)


async def test_status_says_when_live_workers_run_different_configurations(
    redis: Any, prefix: str, tmp_path: Path
) -> None:
    old = _config(tmp_path, "old", ["APPLICATION"])
    new = _config(tmp_path, "new", ["APPLICATION", "SYSTEM_EVENTS"])
    report = await _report_with(redis, _settings(prefix), [old, new])
    configs = {c["name"]: c.get("config") for c in report["consumers"] if c["live"]}
    assert set(configs) == {"w0", "w1"} and configs["w0"] and configs["w1"], configs
    assert configs["w0"] != configs["w1"]
    said = " ".join(attention(report))
    assert "2 live workers run 2 different configurations" in said, said


async def test_status_is_quiet_when_live_workers_share_a_configuration(
    redis: Any, prefix: str, tmp_path: Path
) -> None:
    same = _config(tmp_path, "same", ["APPLICATION"])
    report = await _report_with(redis, _settings(prefix), [same, dict(same)])
    configs = {c["name"]: c.get("config") for c in report["consumers"] if c["live"]}
    assert len(configs) == 2 and len(set(configs.values())) == 1, configs
    assert all(configs.values()), configs
    assert not any("configuration" in line for line in attention(report))
