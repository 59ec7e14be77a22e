"""The CI-sized chaos subset: every scenario of `python -m chaos` at `--scale ci` (a few
hundred invocations each, private Redis and MariaDB servers, a local Redis Cluster for the
`cluster_*` rows); the books must balance."""

from __future__ import annotations

import pytest

from chaos.report import format_table
from chaos.scenario import Report, run_spec
from chaos.scenarios import SCALES, SPECS
from workers.sources.mysql.shop import DEMO_READER, ensure_demo_shop

pytestmark = [pytest.mark.slow, pytest.mark.mariadb]


# Rows that only measure what a setting loses (ACI_WAIT_REPLICAS=0) run in `make chaos`.
CHECKED = [s for s in SPECS if not s.measures_loss]


@pytest.mark.parametrize("spec", CHECKED, ids=[s.name for s in CHECKED])
async def test_books_balance_under_fault(spec: object) -> None:
    shop_url = await ensure_demo_shop()
    report: Report = await run_spec(spec, SCALES["ci"], shop_url, [DEMO_READER[1], "3306"])  # type: ignore[arg-type]
    summary = format_table([report]) + "\n" + "\n".join(report.notes)
    assert report.finals == report.invocations, summary
    assert (report.lost, report.duplicates, report.leaked, report.minted) == (0, 0, 0, 0), summary
    assert (report.masked, report.wrong, report.pending_left) == (0, 0, 0), summary
    assert report.faults > 0 or spec.name == "baseline", summary  # type: ignore[attr-defined]
    assert not any("not started after" in note for note in report.notes), summary
    if spec.name == "hostile_upstream":  # type: ignore[attr-defined]
        assert report.worker_crashes == 0, summary
