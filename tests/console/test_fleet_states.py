"""The fleet page's worker badge follows the consumer's state (live, stopped, dead), as its
counts do: a worker stopped by SIGTERM is not shown as dead (issue 35, item 1)."""

from __future__ import annotations

from typing import Any

from app.console.render import environment


def _report(*states: str) -> dict[str, Any]:
    consumers = [
        {"name": f"w{i}", "live": s == "live", "state": s, "pending": 0, "idle_ms": 5}
        for i, s in enumerate(states)
    ]
    return {
        "prefix": "aci",
        "sessions": 0,
        "at_ms": 1,
        "group": {
            "pending": 0, "lag": 0, "consumers_live": 1, "consumers_dead": 1,
            "consumers_stopped": 1, "oldest_pending_idle_ms": None, "max_deliveries": 0,
            "entries_read": 0,
        },
        "consumers": consumers,
        "partitions": [],
        "streams": {},
        "pending": [],
        "last_minutes": {"window_s": 600, "lifecycle": {}, "evidence_status": {}, "capped": False},
    }  # fmt: skip


def test_a_stopped_worker_is_not_a_dead_badge() -> None:
    html = (
        environment()
        .get_template("_fleet.html")
        .render(report=_report("live", "stopped", "dead"), partitions=1, letters=[])
    )
    table = html.split('data-testid="workers"')[1].split("</table>")[0]
    rows = table.split("<tr>")[2:]
    assert ">live<" in rows[0]
    assert ">stopped<" in rows[1] and ">dead<" not in rows[1]
    assert ">dead<" in rows[2]
    assert "live / stopped / dead consumers" in html
