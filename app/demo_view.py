"""How the demo shows itself: rich panels and tables, or a JSON transcript."""

from __future__ import annotations

import json
from typing import Any

from rich.columns import Columns
from rich.console import Console
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

__all__ = ["DemoView"]

_STYLE = {"EVIDENCE_FOUND": "green", "NO_EVIDENCE": "yellow", "ERROR": "red"}


class DemoView:
    """Prints the demo as it runs (rich), or collects it for one JSON transcript."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.console = Console(stderr=as_json)
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)
        if not self.as_json:
            self.console.print(f"[dim]• {text}[/dim]")

    def call(self, round_no: int, record: dict[str, Any]) -> None:
        if self.as_json:
            return
        status = record.get("model", {}).get("evidence_status", "PENDING")
        title = (
            f"round {round_no} · {record['tool']} · {record['id']} · "
            f"[{_STYLE.get(status, 'white')}]{status}[/]"
        )
        model = Syntax(
            json.dumps(record.get("model"), indent=1, ensure_ascii=False)[:2500],
            "json",
            word_wrap=True,
        )
        control = Syntax(
            json.dumps(record.get("control"), indent=1, ensure_ascii=False)[:2500],
            "json",
            word_wrap=True,
        )
        self.console.print(
            Panel(
                Columns(
                    [
                        Panel(model, title="model observation (what the model reads)", width=78),
                        Panel(control, title="harness control view", width=60),
                    ]
                ),
                title=title,
            )
        )

    def finish(
        self, scenario: str, transcript: list[dict[str, Any]], timeline: list[dict[str, Any]]
    ) -> None:
        if self.as_json:
            print(
                json.dumps(
                    {
                        "scenario": scenario,
                        "notes": self.notes,
                        "calls": transcript,
                        "timeline": timeline,
                    },
                    ensure_ascii=False,
                )
            )
            return
        lifecycle = Table(title="lifecycle timeline (lifecycle stream)")
        for column in ("at (ms)", "tool call id", "tool", "status", "evidence"):
            lifecycle.add_column(column)
        first = int(timeline[0]["at"]) if timeline else 0
        for row in timeline:
            lifecycle.add_row(
                str(int(row["at"]) - first),
                row["id"],
                row["tool"],
                row["status"],
                row.get("evidence", ""),
            )
        self.console.print(lifecycle)
        table = Table(title=f"scripted diagnosis · {scenario}")
        for column in ("tool", "tool call id", "status", "evidence", "duplicate_of", "latency ms"):
            table.add_column(column)
        for r in transcript:
            model, control = r.get("model", {}), r.get("control", {})
            status = model.get("evidence_status", "PENDING")
            count = control.get("returned_count", control.get("error_code", ""))
            table.add_row(
                r["tool"],
                r["id"],
                f"[{_STYLE.get(status, 'white')}]{status}[/]",
                str(count),
                control.get("duplicate_of", ""),
                f"{r['latency_ms']:.1f}",
            )
        self.console.print(table)
