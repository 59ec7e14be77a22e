"""Speed of the embedded knowledge index: lookup latency and indexing throughput.

Prints the median and p95 time of `KnowledgeIndexSource.fetch` over the shipped runbooks (the
queries of tests/workers/knowledge_eval.json, repeated; index already built, thread hop
included) and the time to index 1,000 generated Markdown documents (English and Chinese).

    .venv/bin/python bench/knowledge_bench.py [--rounds 20] [--documents 1000]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge.index import (
    DEFAULT_KNOWLEDGE_DIR,
    KnowledgeIndexSource,
    KnowledgeSettings,
    build_index,
)

EVAL_FILE = Path(__file__).resolve().parents[1] / "tests" / "workers" / "knowledge_eval.json"
_WORDS = (
    "connection pool timeout latency index query replica node pod memory heap cpu disk "
    "rollback deployment breaker downstream retry backoff throttling eviction scheduler "
    "lock transaction binlog cache gateway payment order export tenant probe readiness"
).split()
_ZH = "数据库 连接池 超时 慢查询 索引 内存 容器 重启 节点 回滚 熔断 下游 磁盘 告警 日志".split()


def _generate(folder: Path, count: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    for i in range(count):
        zh = i % 5 == 0
        words = _ZH if zh else _WORDS
        sep = "" if zh else " "
        lines = [f"# Runbook {i} {rng.choice(words)}", "", sep.join(rng.choices(words, k=30))]
        for s in range(3):
            lines += ["", f"## Section {s} {rng.choice(words)}", ""]
            lines += [sep.join(rng.choices(words, k=60)) for _ in range(3)]
        (folder / f"doc-{i:04d}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


async def lookup_times(cache: str, rounds: int) -> list[float]:
    """Milliseconds per fetch over the shipped corpus (after a warm-up that builds the index)."""
    data = json.loads(EVAL_FILE.read_text(encoding="utf-8"))
    queries = [c["query"] for c in data["labelled"]] + list(data["off_topic"])
    source = KnowledgeIndexSource(
        KnowledgeSettings(folder=str(DEFAULT_KNOWLEDGE_DIR), cache_dir=cache)
    )
    times: list[float] = []
    try:
        for query in queries:
            await source.fetch(LookupKnowledgeRequest(query=query))
        for _ in range(rounds):
            for query in queries:
                started = time.perf_counter()
                await source.fetch(LookupKnowledgeRequest(query=query))
                times.append((time.perf_counter() - started) * 1000)
    finally:
        await source.aclose()
    return times


def main() -> None:
    """Print the benchmark lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--documents", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        times = anyio.run(lookup_times, str(Path(tmp) / "cache"), args.rounds)
        p95 = statistics.quantiles(times, n=20)[-1]
        print(
            f"lookup over shipped runbooks: n={len(times)} "
            f"median={statistics.median(times):.2f} ms p95={p95:.2f} ms"
        )
        folder = Path(tmp) / "generated"
        folder.mkdir()
        _generate(folder, args.documents)
        started = time.perf_counter()
        chunks = build_index(folder, Path(tmp) / "generated.sqlite3")
        elapsed = time.perf_counter() - started
        print(f"index {args.documents} generated documents ({chunks} chunks): {elapsed:.2f} s")


if __name__ == "__main__":
    main()
