"""The two figures of `aci-evidence bench pipeline` that its ratio is made of — the raw stream
round trip and the instant source through one worker process — in one short run, for
alternating comparisons of two trees on a noisy host:

    .venv/bin/python bench/ratio_probe.py [--total 20000]
    (cd OLD_TREE && PYTHONPATH=$PWD /path/to/.venv/bin/python /path/to/bench/ratio_probe.py)

It uses only `app.bench`'s own functions, so it measures what the bench measures, and prints
one JSON object: raw/s, instant 1-worker/s, their ratio, and the host's steal (%).
"""

from __future__ import annotations

import argparse
import json
import uuid

import anyio

from app.bench import _bench_workers, _cpu_ticks, _redis_url, bench_pipeline, bench_raw, steal_pct
from pipeline.client import EvidenceClient
from pipeline.redis_io import open_redis
from pipeline.settings import Settings


async def run(total: int) -> dict[str, float | None]:
    async with _redis_url() as url, open_redis(url, max_connections=256) as redis:
        before = _cpu_ticks()
        raw = await bench_raw(redis, total)
        settings = Settings(redis_url=url, prefix=f"probe{uuid.uuid4().hex[:6]}")
        with _bench_workers(url, settings.prefix, 1, True):
            async with EvidenceClient(redis, settings) as client:
                await anyio.sleep(1.0)  # the worker starts
                instant = await bench_pipeline(client, total, "lookup_knowledge")
    return {
        "raw_per_s": round(raw),
        "instant_1w_per_s": round(instant),
        "ratio_to_raw": round(instant / raw, 3),
        "steal_pct": steal_pct(before, _cpu_ticks()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=20_000)
    print(json.dumps(anyio.run(run, parser.parse_args().total)))


if __name__ == "__main__":
    main()
