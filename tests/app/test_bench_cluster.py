"""`aci-evidence bench pipeline --cluster` at a tiny size: both shard counts run every call and
report the capacity model's inputs."""

from __future__ import annotations

import pytest

from app.bench_cluster import bench_cluster

pytestmark = pytest.mark.slow


async def test_the_cluster_bench_reports_one_and_three_shards() -> None:
    figures = await bench_cluster(total=512, workers=1)
    for shards in (1, 3):
        row = figures[f"shards_{shards}"]
        assert row["invocations"] == 512 and row["per_s"] > 0
        assert len(row["redis_cpu_us_per_inv_by_shard"]) == shards
        assert row["redis_cpu_us_per_inv"] > 0 and row["bytes_per_inv"] > 0
        assert "evalsha" in row["redis_command_us_per_inv"]
    assert figures["speedup_3_over_1"] > 0
