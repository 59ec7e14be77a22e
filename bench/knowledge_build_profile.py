"""Where the first build of a large runbook folder spends its CPU: a cProfile of `build_index`
over a generated folder of Markdown runbooks shaped like gitlab-com/runbooks (per-service
folders, a `[[_TOC_]]` marker, 3-12 sections of paragraphs, shell blocks, lists and tables;
about 9 KB a file), the bundled model loaded first (outside the profile).

    .venv/bin/python bench/knowledge_build_profile.py [--files 414] [--top 30] [--keep DIR]

Prints the chunk count, the build's CPU and wall seconds, and the profile's top entries by
cumulative time (profiling slows pure-Python code most: the tokenizer's share is smaller
without it). The generated text is random words of an operations vocabulary, written here.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workers.sources.knowledge.encoder import UseEncoder
from workers.sources.knowledge.store import build_index

_WORDS = (
    "replica primary lag disk full pod node kubelet etcd latency error rate timeout connection"
    " pool exhausted queue backlog consumer partition broker certificate expired deploy rollback"
    " canary traffic ingress nginx redis memory eviction cpu throttling gc pause postgres vacuum"
    " bloat index scan slow query lock wait deadlock sidekiq job retry gitaly storage praefect"
    " shard registry blob upload cdn cache hit ratio alert page oncall escalate dashboard grafana"
    " prometheus metric threshold mitigation diagnosis impact check verify run restart drain"
    " cordon scale replicas increase decrease limit quota budget backup restore"
).split()
_COMMANDS = (
    "kubectl get pods -n gitlab -o wide",
    "kubectl logs deploy/web --tail=200",
    "sudo gitlab-ctl status",
    "psql -c 'select * from pg_stat_activity'",
    "curl -s localhost:9090/metrics | grep http_requests_total",
    "df -h /var/opt",
)
_SERVICES = ("gitaly", "patroni", "redis", "ci-runners", "registry", "web", "sidekiq", "cdn")


def generate(folder: Path, files: int, seed: int = 7) -> None:
    """`files` runbooks under `folder`, the same for the same seed."""
    rng = random.Random(seed)

    def sentence(n: int = 0) -> str:
        text = " ".join(rng.choice(_WORDS) for _ in range(n or rng.randint(8, 24)))
        return text[0].upper() + text[1:] + "."

    def block() -> str:
        kind = rng.choice(("para", "para", "para", "code", "list", "table"))
        if kind == "code":
            lines = [rng.choice(_COMMANDS) for _ in range(rng.randint(2, 8))]
            return "```shell\n" + "\n".join(lines) + "\n```"
        if kind == "list":
            return "\n".join(f"- {sentence(rng.randint(5, 14))}" for _ in range(rng.randint(3, 9)))
        if kind == "table":
            rows = ["| metric | threshold | action |", "|---|---|---|"]
            for _ in range(rng.randint(3, 8)):
                name = f"{rng.choice(_WORDS)}_{rng.choice(_WORDS)}"
                rows.append(f"| {name} | {rng.randint(1, 99)}% | {sentence(6)} |")
            return "\n".join(rows)
        return " ".join(sentence() for _ in range(rng.randint(2, 6)))

    for i in range(files):
        where = folder / rng.choice(_SERVICES)
        where.mkdir(parents=True, exist_ok=True)
        parts = [f"# {rng.choice(_WORDS).title()} {rng.choice(_WORDS)} runbook {i}", "[[_TOC_]]"]
        parts.append(block())
        for _ in range(rng.randint(3, 12)):
            parts.append(f"## {sentence(rng.randint(2, 5))[:-1]}")
            parts += [block() for _ in range(rng.randint(1, 4))]
        (where / f"runbook-{i}.md").write_text("\n\n".join(parts) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=414)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--keep", type=Path, help="generate into this folder and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or Path(scratch) / "runbooks"
        generate(folder, args.files)
        encoder = UseEncoder(cache_dir=Path(scratch) / "model")
        encoder.encode(["load the model", "before the profile"])
        profile = cProfile.Profile()
        cpu, wall = time.process_time(), time.perf_counter()
        profile.enable()
        chunks = build_index(folder, Path(scratch) / "index.sqlite3", encoder)
        profile.disable()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(f"{args.files} files, {chunks} chunks: build {cpu:.1f} s CPU, {wall:.1f} s wall")
    pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
