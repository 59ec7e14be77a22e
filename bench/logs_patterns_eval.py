"""Grouping accuracy of the log template miner on the loghub 2k samples, beside Drain's figure.

Grouping accuracy (Zhu et al., "Tools and Benchmarks for Automated Log Parsing", ICSE-SEIP
2019): a line is correct when the lines of its predicted group are exactly the lines of its
ground-truth template; accuracy = correct lines / all lines. The message of a line is the
structured CSV's `Content` column (the header fields are a format's business).

The data (logpai/loghub, research use only) is never part of this repository: give a scratch
copy holding `<System>/<System>_2k.log_structured.csv` with `--loghub DIR` or `ACI_LOGHUB_DIR`;
without it the evaluation says so and exits 0.

Systems: the development set (tune on these) is the default; `--set acceptance` evaluates the
held-out systems (not for tuning), `--set all` both, each with its own average.

`--oslo DIR` evaluates a labelled oslo.log set instead (or as well): `DIR/dev.csv` (tune on it)
and `DIR/holdout.csv` (report only), each with loghub's `Content` and `EventId` columns, the
label being the logging statement that wrote the line (built in a scratch folder from public
logs, never committed; its README states the rule); beside the miner, logpai's Drain with its
OpenStack benchmark settings (drain3's Drain, depth 5, similarity 0.5, logparser's masks).

Run: `.venv/bin/python bench/logs_patterns_eval.py [--loghub DIR] [--set dev|acceptance|all]
[--oslo DIR] [--baseline]` from the repository root. `--baseline` adds the regex mask that FILE and
CLICKHOUSE used before (`contracts.logs.mask_template`, one pattern per masked text) and the
MOCK miner as it was (drain3 0.5/4 over a narrower mask); `--cost N` times mining N records.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from workers.sources.logs.templates import mask, mine

DEVELOPMENT = ("Android", "BGL", "HealthApp", "HPC", "Mac", "Proxifier", "Thunderbird", "Windows")
ACCEPTANCE = ("Linux", "OpenSSH", "Apache", "HDFS", "Zookeeper", "Hadoop", "Spark", "OpenStack")
# Drain's grouping accuracy on loghub 2k, logpai/logparser logparser/Drain/README.md.
DRAIN_PUBLISHED = {
    "HDFS": 0.9975, "Hadoop": 0.9475, "Spark": 0.92, "Zookeeper": 0.9665, "BGL": 0.9625,
    "HPC": 0.887, "Thunderbird": 0.955, "Windows": 0.997, "Linux": 0.69, "Android": 0.911,
    "HealthApp": 0.78, "Apache": 1.0, "Proxifier": 0.5265, "OpenSSH": 0.7875,
    "OpenStack": 0.7325, "Mac": 0.7865,
}  # fmt: skip

Parser = Callable[[Sequence[str]], list[str]]


def templates_now(messages: Sequence[str]) -> list[str]:
    """The project's miner, as every backend runs it: mask, mine in first-seen order."""
    keys = [mask(m) for m in messages]
    found = mine(keys)
    return [found[k] for k in keys]


def templates_regex_before(messages: Sequence[str]) -> list[str]:
    """FILE and CLICKHOUSE before: one pattern per regex-masked text."""
    from contracts.logs import mask_template

    return [mask_template(m) for m in messages]


# The MOCK miner's mask before this miner (workers/sources/logs/mocklog/index.py, commit 22a6a6b).
_OLD_NUMBER = r"(?<!\w)(?<!\d\.)[-+]?\d+(?:\.\d+)?(?:ms|s|Mi|Gi|M|G|MB|GB|%)?(?!\w)(?!\.\d)"
_OLD_MOCK_MASKS = (
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<UUID>"),  # noqa: E501
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<IP>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b"), "<HEX>"),
    (re.compile(_OLD_NUMBER), "<NUM>"),
)  # fmt: skip


def templates_mock_before(messages: Sequence[str]) -> list[str]:
    """MOCK before: drain3's TemplateMiner (sim 0.5, depth 4) over the MOCK mask of then."""
    from drain3 import TemplateMiner
    from drain3.template_miner_config import TemplateMinerConfig

    config = TemplateMinerConfig()
    config.drain_sim_th, config.drain_depth = 0.5, 4
    miner = TemplateMiner(config=config)
    masked = []
    for message in messages:
        for pattern, placeholder in _OLD_MOCK_MASKS:
            message = pattern.sub(placeholder, message)
        masked.append(message)
    cluster_of: dict[str, int] = {}
    for line in masked:
        if line not in cluster_of:
            cluster_of[line] = int(miner.add_log_message(line)["cluster_id"])
    final = {c: miner.drain.id_to_cluster[c].get_template() for c in set(cluster_of.values())}
    return [final[cluster_of[line]] for line in masked]


# logpai/logparser's Drain benchmark settings for OpenStack (logparser/Drain/benchmark.py).
_LOGPAI_OPENSTACK_MASKS = tuple(map(re.compile, (r"((\d+\.){3}\d+,?)+", r"/.+?\s", r"\d+")))


def templates_drain_openstack(messages: Sequence[str]) -> list[str]:
    """logpai's Drain as its benchmark runs OpenStack (masks to `<*>`, depth 5, similarity
    0.5), on drain3's implementation of Drain."""
    from drain3.drain import Drain

    drain = Drain(depth=5, sim_th=0.5, max_children=100)
    masked = []
    for message in messages:
        for pattern in _LOGPAI_OPENSTACK_MASKS:
            message = pattern.sub("<*>", message)
        masked.append(message)
    cluster_of = {line: drain.add_log_message(line)[0].cluster_id for line in masked}
    return [str(cluster_of[line]) for line in masked]


def grouping_accuracy(truth: Sequence[str], predicted: Sequence[str]) -> float:
    """Share of lines whose predicted group holds exactly the lines of their true group."""
    truth_size = Counter(truth)
    groups: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(predicted):
        groups[p].append(i)
    correct = 0
    for members in groups.values():
        ids = {truth[i] for i in members}
        if len(ids) == 1 and truth_size[next(iter(ids))] == len(members):
            correct += len(members)
    return correct / len(truth) if truth else 0.0


def load(folder: Path, system: str) -> tuple[list[str], list[str]]:
    """Contents and true event ids of one system's structured 2k sample."""
    path = folder / system / f"{system}_2k.log_structured.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [r["Content"] for r in rows], [r["EventId"] for r in rows]


def load_labelled(path: Path, column: str = "Content") -> tuple[list[str], list[str]]:
    """Messages (`column`) and true event ids of a labelled CSV (loghub's structured shape)."""
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [r[column] for r in rows], [r["EventId"] for r in rows]


def evaluate_oslo(folder: Path, parsers: dict[str, Parser]) -> None:
    """One row per split of the labelled oslo.log set: lines, templates, each parser; then
    again on the `Message` column when the set has it (the `[req-...]` context left in, as a
    `regex` or `plain` format reads the line)."""
    names = list(parsers)
    print(f"{'split':<22} {'lines':>6} {'templates':>9} " + " ".join(f"{n:>14}" for n in names))
    for column, label in (("Content", ""), ("Message", ", with context")):
        for split in ("dev", "holdout"):
            path = folder / f"{split}.csv"
            if not path.is_file():
                print(f"{split:<22} missing: {path.name}")
                continue
            with path.open(newline="", encoding="utf-8") as handle:
                if column not in (csv.DictReader(handle).fieldnames or ()):
                    continue
            contents, truth = load_labelled(path, column)
            cells = [f"{grouping_accuracy(truth, p(contents)):>14.4f}" for p in parsers.values()]
            print(f"{split + label:<22} {len(truth):>6} {len(set(truth)):>9} " + " ".join(cells))


def evaluate(folder: Path, systems: Sequence[str], parsers: dict[str, Parser]) -> None:
    """Print one row per system and the average of each column."""
    names = list(parsers)
    print(f"{'system':<12} {'Drain (published)':>17} " + " ".join(f"{n:>13}" for n in names))
    sums = dict.fromkeys(names, 0.0)
    for system in systems:
        contents, truth = load(folder, system)
        cells = []
        for name, parser in parsers.items():
            acc = grouping_accuracy(truth, parser(contents))
            sums[name] += acc
            cells.append(f"{acc:>13.4f}")
        print(f"{system:<12} {DRAIN_PUBLISHED[system]:>17.4f} " + " ".join(cells))
    drain_avg = sum(DRAIN_PUBLISHED[s] for s in systems) / len(systems)
    print(
        f"{'average':<12} {drain_avg:>17.4f} "
        + " ".join(f"{sums[n] / len(systems):>13.4f}" for n in names)
    )


def cost(folder: Path, systems: Sequence[str], records: int) -> None:
    """Seconds to mine `records` messages as a backend does per call: each record masked and
    counted per masked text, then (now) one Drain mining of the distinct masked texts. The
    messages cycle through the samples' 16,000 lines (6,908 distinct texts): "miner,
    uncached" masks every record (the cost without repetition), "miner" masks through the
    cache of recent short texts FILE and CLICKHOUSE use (`records`; emptied first, it holds
    them all after one cycle)."""
    from contracts.logs import mask_template
    from workers.sources.logs import records as backend_records

    pool: list[str] = []
    for system in systems:
        pool.extend(load(folder, system)[0])
    messages = [pool[i % len(pool)] for i in range(records)]
    backend_records._cached_template.cache_clear()
    runs: tuple[tuple[str, Callable[[str], str], bool], ...] = (
        ("regex before", mask_template, False),
        ("miner, uncached", mask, True),
        ("miner", backend_records._template, True),
    )
    for name, masker, mines in runs:
        started = time.perf_counter()
        counts: Counter[str] = Counter()
        for message in messages:
            counts[masker(message)] += 1
        masked = time.perf_counter() - started
        templates = len(set(mine(counts).values())) if mines else len(counts)
        took = time.perf_counter() - started
        print(
            f"cost {name}: {records:,} records in {took:.2f} s ({records / took:,.0f}/s; "
            f"masking {masked:.2f} s, mining {took - masked:.2f} s), {len(counts):,} masked "
            f"texts, {templates:,} patterns"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; 0 also when the data is absent (the evaluation is then skipped)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loghub", default=os.environ.get("ACI_LOGHUB_DIR", ""))
    parser.add_argument("--set", choices=("dev", "acceptance", "all"), default="dev")
    parser.add_argument("--baseline", action="store_true")
    parser.add_argument("--cost", type=int, default=0, metavar="N")
    parser.add_argument("--oslo", default="", metavar="DIR")
    args = parser.parse_args(argv)
    if args.oslo:
        print("labelled oslo.log set (one template per logging statement)")
        evaluate_oslo(
            Path(args.oslo), {"miner": templates_now, "Drain (logpai)": templates_drain_openstack}
        )
        if not args.loghub:
            return 0
    folder = Path(args.loghub) if args.loghub else None
    # The set asked for decides which files must be there: a copy of the development systems
    # alone (the acceptance ones held out) is enough for `--set dev`.
    wanted = {"dev": DEVELOPMENT, "acceptance": ACCEPTANCE, "all": DEVELOPMENT + ACCEPTANCE}
    if folder is None or not all(
        (folder / s / f"{s}_2k.log_structured.csv").is_file() for s in wanted[args.set]
    ):
        print(
            "skipped: no loghub copy (give --loghub DIR or ACI_LOGHUB_DIR: a folder holding "
            "<System>/<System>_2k.log_structured.csv from logpai/loghub)"
        )
        return 0
    parsers: dict[str, Parser] = {"miner": templates_now}
    if args.baseline:
        parsers |= {"regex before": templates_regex_before, "mock before": templates_mock_before}
    if args.set in ("dev", "all"):
        print("development systems (tuned on)")
        evaluate(folder, DEVELOPMENT, parsers)
    if args.set in ("acceptance", "all"):
        print("acceptance systems (held out, not tuned on)")
        evaluate(folder, ACCEPTANCE, parsers)
    if args.cost:
        cost(folder, DEVELOPMENT, args.cost)
    return 0


if __name__ == "__main__":
    sys.exit(main())
