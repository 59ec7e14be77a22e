"""The generated mock world: realistic fields, volume, masking, and determinism across processes."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from datetime import datetime

import msgspec
import pytest

import workers.sources.logs.mocklog
from contracts import Topic
from workers.sources.logs.mocklog import (
    NUMERIC_FIELDS,
    SCENARIOS,
    TOPIC_FIELDS,
    index_of,
    mine_templates,
    scenario_info,
    world_of,
)
from workers.sources.logs.mocklog.index import mask

_DIGEST_SCRIPT = """
import hashlib, msgspec
from workers.sources.logs.mocklog import index_of
ix = index_of("db-pool-exhaustion")
h = hashlib.sha256()
for topic, t in sorted(ix.topics.items()):
    h.update(msgspec.json.encode(t.records)); h.update("\\n".join(t.keys).encode())
print(h.hexdigest())
"""


def _digest() -> str:
    h = hashlib.sha256()
    for _, t in sorted(index_of("db-pool-exhaustion").topics.items()):
        h.update(msgspec.json.encode(t.records))
        h.update("\n".join(t.keys).encode())
    return h.hexdigest()


def test_world_is_identical_in_another_process() -> None:
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", _DIGEST_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.strip() == _digest()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_records_have_the_topic_fields(scenario: str) -> None:
    world = world_of(scenario)
    info = scenario_info(scenario)
    assert world.now_ms - world.t0_ms == 10 * 60_000
    assert datetime.fromtimestamp(world.t0_ms / 1000, tz=info.t0.tzinfo) == info.t0
    for topic, records in world.records.items():
        allowed = set(TOPIC_FIELDS[topic])
        assert records, topic
        assert [r.epoch_ms for r in records] == sorted(r.epoch_ms for r in records)
        for record in records:
            assert record.timestamp.endswith("+08:00") and len(record.timestamp) == 29
            assert record.level in ("INFO", "WARN", "ERROR")
            assert set(record.fields) <= allowed
            for name, value in record.fields.items():
                assert isinstance(value, int | float) == (name in NUMERIC_FIELDS), name
    app = world.records[Topic.APPLICATION]
    assert {"host", "pod", "trace_id", "logger"} <= set(app[0].fields)
    window = [r for r in app if r.epoch_ms >= world.now_ms - 3_600_000]
    assert 500 <= len(window) <= 5000  # hundreds to thousands per 60-minute window


def test_slow_query_fields() -> None:
    storm = [
        r
        for r in world_of("slow-query-storm").records[Topic.DATABASE_SLOW_QUERY]
        if r.fields["index_used"] == "none"
    ]
    assert len(storm) > 60
    digests = {r.fields["sql_digest"] for r in storm}
    assert len(digests) == 1 and len(str(next(iter(digests)))) == 16
    assert all(2500 <= int(str(r.fields["duration_ms"])) <= 5500 for r in storm)
    assert all(float(str(r.fields["lock_time_ms"])) < 1 for r in storm)
    assert all("?" in str(r.fields["sql_template"]) for r in storm)


def test_masks_keep_versions_and_hide_ids() -> None:
    assert mask("image order-service:2.3.1 ready") == "image order-service:2.3.1 ready"
    assert mask("timed out after 30000ms.") == "timed out after <NUM>."
    assert mask("conn@5a1c3e2f from 10.42.3.7:8080") == "conn@<HEX> from <IP>:<NUM>"
    assert mask("trace 4bf92f3577b34da6a3ce929d0e0e4736") == "trace <HEX>"


def test_mining_groups_variants_and_is_deterministic() -> None:
    lines = [f"GET /api/v1/orders/{n} 200 {n % 97} ms" for n in range(1000, 1050)]
    lines += ["Pool stats (active=48, idle=0)", "Pool stats (active=50, idle=0)"]
    templates = mine_templates(lines)
    assert len(set(templates)) == 2
    assert templates == mine_templates(lines)
    assert "<NUM>" in templates[0]


def test_unknown_scenario_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="db-pool-exhaustion, slow-query-storm"):
        world_of("nope")


def test_exports() -> None:
    for name in workers.sources.logs.mocklog.__all__:
        assert hasattr(workers.sources.logs.mocklog, name)
