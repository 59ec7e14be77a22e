"""Stream data printed to a terminal (issue 23): OSC/CSI/C0/C1 control bytes and bidi overrides
are shown as visible escapes, never sent raw; rich never reads a value as markup."""

from __future__ import annotations

import io
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from app.status import status_renderable
from app.terminal import safe_json, safe_text

HOSTILE = "evil\x1b]0;owned\x07\x1b[2J\x9b31m\u202eterces\u2066[red]x[/red]\r\n"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\u2066", "\r")


def _report(name: str) -> dict[str, Any]:
    return {
        "sessions": 1,
        "streams": {name: {"length": 1, "memory_bytes": 10}},
        "group": {
            "name": "workers",
            "pending": 1,
            "lag": 0,
            "consumers_live": 1,
            "consumers_dead": 0,
            "oldest_pending_idle_ms": 5,
        },
        "consumers": [
            {"name": name, "pending": 1, "idle_ms": 5, "heartbeat_age_ms": 3, "live": True}
        ],
        "pending": [{"id": name, "consumer": name, "idle_ms": 5, "deliveries": 1}],
        "last_minutes": {"window_s": 300, "lifecycle": {name: 1}, "evidence_status": {name: 2}},
    }


def _printed(renderable: Any, width: int = 200) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, force_terminal=False).print(renderable)
    return out.getvalue()


def test_status_tables_escape_every_control_and_bidi_character() -> None:
    text = _printed(status_renderable(_report(HOSTILE)))
    assert not any(raw in text for raw in RAW)
    assert "\\x1b]0;owned\\x07" in text and "\\u202e" in text and "\\x9b" in text
    assert "[red]x[/red]" in text  # shown as written, not applied as markup


def test_the_group_table_shows_what_docs_operations_lists() -> None:
    # Entries read and the highest delivery count were in --json only.
    report = _report("s")
    report["group"] |= {"entries_read": 41, "max_deliveries": 3}
    assert (_figure(report, "entries_read"), _figure(report, "max_deliveries")) == ("41", "3")


def _figure(report: dict[str, Any], name: str, width: int = 200) -> str:
    """The value the group table shows for one figure (a row of figure | value)."""
    lines = _printed(status_renderable(report), width).splitlines()
    start = lines.index(next(line for line in lines if line.startswith("group workers")))
    rows = [[c.strip() for c in line.split("│")] for line in lines[start:]]
    return next(row[2] for row in rows if len(row) > 2 and row[1] == name)


def test_the_group_table_fits_an_80_column_terminal() -> None:
    # On-call drill: at 80 columns (a pipe, a small terminal) the group's figures were cut to
    # `entries_r…`, `consumers…`, `oldest_pe…`: which one was the backlog?
    report = _report("s")
    report["group"] |= {"entries_read": 41, "max_deliveries": 3, "consumers_stopped": 2}
    for name in ("pending", "lag", "entries_read", "consumers_live", "consumers_dead",
                 "consumers_stopped", "oldest_pending_idle_ms", "max_deliveries"):  # fmt: skip
        assert _figure(report, name, width=80) != "", name
    assert "…" not in _printed(status_renderable(report), 80)


def test_the_replay_reporter_escapes_what_it_prints(capsys: Any) -> None:
    from app.replay import Reporter
    from workers.replay_diff import Verdict

    reporter = Reporter(as_json=False, mode="reproject")
    reporter.add(Verdict(outcome="failed", session="s", tool_call_id=HOSTILE, tool="t",
                         reason=HOSTILE))  # fmt: skip
    out = capsys.readouterr().out
    assert not any(raw in out for raw in RAW[:-1])
    assert "\\x1b" in out


@given(st.text())
def test_safe_text_leaves_no_control_character(text: str) -> None:
    shown = safe_text(text)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in shown)
    assert "\u202e" not in shown and "\u2066" not in shown


@given(
    st.recursive(st.text() | st.integers(), lambda c: st.lists(c) | st.dictionaries(st.text(), c))
)
def test_safe_json_is_the_same_json_value(value: Any) -> None:
    for indent in (None, 1):
        line = json.dumps(value, ensure_ascii=False, indent=indent)
        shown = safe_json(line)
        assert json.loads(shown) == value
        assert "\u202e" not in shown and "\x1b" not in shown and "\x9b" not in shown
