"""The docs say what the code does (issue 24): the chaos suite's scenarios as listed and
counted in docs/reliability.md."""

from __future__ import annotations

import re
from pathlib import Path

from chaos.scenarios import SPECS

ROOT = Path(__file__).resolve().parents[1]


def test_reliability_md_counts_and_lists_every_chaos_scenario() -> None:
    text = (ROOT / "docs" / "reliability.md").read_text()
    counted = re.search(r"full scale: (\d+) scenarios", text)
    assert counted is not None and int(counted.group(1)) == len(SPECS)
    table = text.split("## Scenarios", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| (\w+) \|", table, re.M)) - {"scenario"}
    assert listed == {spec.name for spec in SPECS}
