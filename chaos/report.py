"""Running the scenarios in turn and printing the table (or JSON)."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence

import anyio
import msgspec

from chaos.scenario import Report, Scale, run_spec
from chaos.scenarios import SCALES, SPECS
from workers.sources.mysql.shop import DEMO_READER, ensure_demo_shop

__all__ = ["format_table", "main", "run_all"]

_COLUMNS = (
    ("scenario", 16), ("invocations", 11), ("faults", 6), ("fault kind", 19), ("final", 9),
    ("dup", 3), ("lost", 4), ("leaked", 6), ("masked", 6), ("crashes", 7), ("p99 ms", 7),
    ("backlog", 7), ("s", 5),
)  # fmt: skip


def format_table(reports: Sequence[Report]) -> str:
    """The chaos table: one row per scenario."""
    head = " ".join(name.ljust(width) for name, width in _COLUMNS)
    lines = [head, "-" * len(head)]
    for r in reports:
        cells = (
            r.scenario, r.invocations, r.faults, r.fault_kind, f"{r.finals}/{r.invocations}",
            r.duplicates, r.lost, r.leaked, r.masked + r.wrong, r.worker_crashes,
            r.submit_p99_ms, r.max_backlog, r.seconds,
        )  # fmt: skip
        lines.append(" ".join(str(c).ljust(w) for c, (_n, w) in zip(cells, _COLUMNS, strict=True)))
    verdict = "PASS" if all(r.ok for r in reports) else "FAIL"
    lines.append(f"{verdict}: zero lost, zero duplicated, zero leaked is required")
    return "\n".join(lines)


async def run_all(scale: Scale, only: Sequence[str] = (), progress: bool = False) -> list[Report]:
    """Run the selected scenarios (all when `only` is empty) one after another."""
    shop_url = await ensure_demo_shop()
    needles = [DEMO_READER[1], "3306"]  # as an address port: host:3306
    reports = []
    for spec in SPECS:
        if only and spec.name not in only:
            continue
        started = time.monotonic()
        report = await run_spec(spec, scale, shop_url, needles)
        reports.append(report)
        if progress:
            took = time.monotonic() - started
            print(f"# {spec.name}: {'ok' if report.ok else 'FAIL'} in {took:.1f}s", file=sys.stderr)
    return reports


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m chaos`."""
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--scale", choices=sorted(SCALES), default="full")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", nargs="*", default=[], choices=[s.name for s in SPECS])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    started = time.monotonic()
    reports = anyio.run(run_all, SCALES[args.scale], args.only, True)
    if args.json:
        payload = {
            "scale": args.scale,
            "seconds": round(time.monotonic() - started, 1),
            "ok": all(r.ok for r in reports),
            "scenarios": reports,
        }
        sys.stdout.write(msgspec.json.encode(payload).decode() + "\n")
    else:
        print(format_table(reports))
        print(f"total {time.monotonic() - started:.1f}s (scale {args.scale})")
    return 0 if all(r.ok for r in reports) else 1
