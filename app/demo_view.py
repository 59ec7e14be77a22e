"""How the demo shows itself: rich panels and tables, or a JSON transcript.

Made for an 80-column terminal: the two views of a call sit side by side only on a wide one,
and are stacked otherwise; table cells fold rather than end in `…`. A long view is cut at a
line of its JSON with a visible marker (never mid-string). The demo ends with "what you saw":
the incident, what each call found, the deliberate ERROR and the `duplicate_of` the harness got.
Every value is printed escaped (`app.terminal`).
"""

from __future__ import annotations

import json
from typing import Any, Final

from rich import box
from rich.columns import Columns
from rich.console import Console
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from app.terminal import safe_cell, safe_json, safe_text

__all__ = ["CUT_CHARS", "DemoView", "bounded_json", "what_you_saw"]

_STYLE = {"EVIDENCE_FOUND": "green", "NO_EVIDENCE": "yellow", "ERROR": "red"}
CUT_CHARS: Final = 2500
_SIDE_BY_SIDE: Final = 140  # columns needed to show both views of a call beside each other


def bounded_json(value: Any, limit: int = CUT_CHARS) -> str:
    """Indented JSON of `value`, escaped; past `limit` characters cut at a line end, with a
    last line saying how much was left out."""
    text = safe_json(json.dumps(value, indent=1, ensure_ascii=False))
    if len(text) <= limit:
        return text
    head = text[:limit]
    end = head.rfind("\n")
    head = head[:end] if end > 0 else head
    return f"{head}\n… [cut: {len(text) - len(head)} more characters; `demo --json` has all]"


def _found(control: dict[str, Any], tool: str) -> str:
    count = control.get("returned_count", 0)
    if tool == "query_logs":
        found = f"{control.get('match_count', count)} matching log records, {count} shown"
        kind = control.get("source_kind", "MOCK")
        return found if kind == "MOCK" else f"{found} ({kind} backend)"
    if tool == "query_mysql":
        return f"{count} row(s)"
    return f"{count} runbook excerpt(s)"


def what_you_saw(incident: str, transcript: list[dict[str, Any]]) -> list[str]:
    """The closing summary, one line per point: the incident, what each call found, each
    ERROR and each `duplicate_of`."""
    lines = [f"the incident: {incident}"]
    for r in transcript:
        model, control = r.get("model") or {}, r.get("control") or {}
        status = model.get("evidence_status", "PENDING")
        where = f"{r['id']} ({r['tool']})"
        if status == "EVIDENCE_FOUND":
            lines.append(f"{where}: evidence: {_found(control, r['tool'])}")
        elif status == "NO_EVIDENCE":
            lines.append(f"{where}: no evidence in its recorded scope (an answer, not a failure)")
        elif status == "ERROR":
            error = model.get("error") or {}
            lines.append(
                f"{where}: the deliberate ERROR, {error.get('code')}: {error.get('message')} "
                "(a failure is never shown as NO_EVIDENCE)"
            )
        else:
            lines.append(f"{where}: no result in time (pending)")
        if control.get("duplicate_of"):
            lines.append(
                f"{r['id']}: duplicate_of {control['duplicate_of']}: the same normalised scope "
                "asked again; the harness sees it in the control view, the model does not"
            )
    return lines


class DemoView:
    """Prints the demo as it runs (rich), or collects it for one JSON transcript."""

    def __init__(self, as_json: bool, console: Console | None = None) -> None:
        self.as_json = as_json
        self.console = console or Console(stderr=as_json)
        self.notes: list[str] = []
        self.files: dict[str, str] = {}  # title -> text: files the demo wrote, shown whole

    def note(self, text: str) -> None:
        self.notes.append(text)
        if not self.as_json:
            self.console.print(Text("• " + safe_text(text), style="dim"))

    def file(self, title: str, text: str) -> None:
        """Show a file the demo wrote (e.g. its ACI_LOGS_CONFIG, a template to start from)."""
        self.files[title] = text
        if not self.as_json:
            body = Syntax(safe_text(text), "toml", word_wrap=True)
            self.console.print(Panel(body, title=safe_text(title), title_align="left"))

    def call(self, round_no: int, record: dict[str, Any]) -> None:
        if self.as_json:
            return
        status = record.get("model", {}).get("evidence_status", "PENDING")
        title = Text.assemble(
            f"round {round_no} · {safe_text(record['tool'])} · {safe_text(record['id'])} · ",
            (status, _STYLE.get(status, "white")),
        )
        views = [
            Panel(
                Syntax(bounded_json(record.get(key)), "json", word_wrap=True),
                title=name,
                title_align="left",
            )
            for key, name in (
                ("model", "model observation (what the model reads)"),
                ("control", "harness control view"),
            )
        ]
        if self.console.width >= _SIDE_BY_SIDE:
            views[0].width, views[1].width = 78, 60
            self.console.print(Panel(Columns(views), title=title))
        else:
            self.console.rule(title)
            for panel in views:
                self.console.print(panel)

    def _timeline(self, timeline: list[dict[str, Any]]) -> Table:
        table = Table(title="lifecycle timeline (the lifecycle stream)", box=box.SIMPLE_HEAD)
        for column in ("ms", "tool call id", "tool", "lifecycle", "evidence status"):
            table.add_column(column, overflow="fold")
        first = int(timeline[0]["at"]) if timeline else 0
        for row in timeline:
            table.add_row(
                str(int(row["at"]) - first),
                safe_cell(row["id"]),
                safe_cell(row["tool"]),
                safe_cell(row["status"]),
                safe_cell(row.get("evidence", "")),
            )
        return table

    def _summary(self, scenario: str, transcript: list[dict[str, Any]]) -> Table:
        # No tool column (the timeline above has it): six columns fit in 80 without folding.
        table = Table(
            title=f"scripted diagnosis · {scenario}",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            collapse_padding=True,
        )
        rows = []
        for r in transcript:
            model, control = r.get("model", {}), r.get("control", {})
            status = model.get("evidence_status", "PENDING")
            count = control.get("error_code", control.get("returned_count", ""))
            rows.append(
                [
                    safe_cell(r["id"]),
                    safe_cell(r.get("lifecycle", "")),
                    Text(status, style=_STYLE.get(status, "white")),
                    safe_cell(count),
                    safe_cell(control.get("duplicate_of", "")),
                    Text(f"{r['latency_ms']:.0f}"),
                ]
            )
        headers = (
            "tool call id", "lifecycle", "evidence status", "returned / error code",
            "duplicate_of", "ms",
        )  # fmt: skip
        for i, column in enumerate(headers):
            # As wide as its widest value (up to 16): values stay whole, headers wrap.
            widest = max((len(row[i].plain) for row in rows), default=0)
            table.add_column(column, overflow="fold", min_width=min(16, max(4, widest)))
        for row in rows:
            table.add_row(*row)
        return table

    def finish(
        self,
        scenario: str,
        transcript: list[dict[str, Any]],
        timeline: list[dict[str, Any]],
        incident: str = "",
    ) -> None:
        summary = what_you_saw(incident or scenario, transcript)
        if self.as_json:
            print(
                json.dumps(
                    {
                        "scenario": scenario,
                        "notes": self.notes,
                        "files": self.files,
                        "calls": transcript,
                        "timeline": timeline,
                        "what_you_saw": summary,
                    },
                    ensure_ascii=False,
                )
            )
            return
        self.console.print(self._timeline(timeline))
        self.console.print(self._summary(scenario, transcript))
        text = Text("\n").join(Text("• " + safe_text(line)) for line in summary)
        self.console.print(Panel(text, title="what you saw", title_align="left"))

    def keep_running(
        self, *, submitter: str, auditor: str, display: str, prefix: str, admin: str = ""
    ) -> None:
        """Where the running demo can be reached. The URLs carry passwords: printed only to a
        terminal, never logged, never into a pipe or a file."""
        out = Console(stderr=True) if self.as_json else self.console
        out.print(Text(f"• workers and Redis keep running (prefix {prefix}); Ctrl-C stops them"))
        if not out.is_terminal:
            out.print(
                Text(f"• redis at {display}; its URLs with passwords are shown on a terminal only")
            )
            return
        for role, url, use in (
            ("auditor", auditor, "status, views, replay, export"),
            ("submitter", submitter, "call, submit"),
            *((("administrator", admin, "replay --into, import, reindex"),) if admin else ()),
        ):
            out.print(Text(f"• {role} ({use}):"))
            out.print(Text(f"export ACI_REDIS_URL='{url}' ACI_PREFIX={prefix}"), soft_wrap=True)
