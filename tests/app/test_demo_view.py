"""How the demo shows itself (issue 24): a visible cut marker at a line end, the right column
headers, 80 columns, a closing "what you saw", and where a kept-running demo is reached."""

from __future__ import annotations

import io
import json
from typing import Any

from rich.console import Console

from app.demo_view import CUT_CHARS, DemoView, bounded_json, what_you_saw


def _calls() -> list[dict[str, Any]]:
    found = {
        "evidence_status": "EVIDENCE_FOUND",
        "tool_call_id": "call_1_kb",
        "evidence": [{"excerpt": "x" * 300, "source": f"doc-{i}.md"} for i in range(30)],
    }
    return [
        {"tool": "lookup_knowledge", "id": "call_1_kb", "lifecycle": "READY", "latency_ms": 12.3,
         "model": found, "control": {"returned_count": 30, "scope_fingerprint": "f"}},
        {"tool": "query_logs", "id": "call_3_oom", "lifecycle": "READY", "latency_ms": 9.0,
         "model": {"evidence_status": "NO_EVIDENCE"},
         "control": {"returned_count": 0, "match_count": 0}},
        {"tool": "lookup_knowledge", "id": "call_6_kb_again", "lifecycle": "READY",
         "latency_ms": 9989.2, "model": found,
         "control": {"returned_count": 30, "duplicate_of": "call_1_kb"}},
        {"tool": "query_mysql", "id": "call_9_billing", "lifecycle": "ERROR", "latency_ms": 24.0,
         "model": {"evidence_status": "ERROR",
                   "error": {"code": "AUTHORIZATION", "message": "unknown data source"}},
         "control": {"error_code": "AUTHORIZATION"}},
    ]  # fmt: skip


def _shown(width: int, play: Any) -> str:
    out = io.StringIO()
    view = DemoView(as_json=False, console=Console(file=out, width=width, color_system=None))
    play(view)
    return out.getvalue()


def test_a_long_view_is_cut_at_a_line_end_with_a_marker() -> None:
    text = bounded_json(_calls()[0]["model"])
    assert len(text) < CUT_CHARS + 100
    head, marker = text.rsplit("\n", 1)
    assert marker.startswith("… [cut: ") and "more characters" in marker
    assert all(line.count('"') % 2 == 0 for line in head.splitlines())  # no line ends mid-string
    assert bounded_json({"a": 1}) == json.dumps({"a": 1}, indent=1)


def test_the_demo_fits_80_columns_with_whole_values_and_right_headers() -> None:
    calls = _calls()
    timeline = [{"at": 1, "id": c["id"], "tool": c["tool"], "status": "PROJECTING"} for c in calls]

    def play(view: DemoView) -> None:
        for c in calls:
            view.call(1, c)
        view.finish("db-pool-exhaustion", calls, timeline, incident="db-pool-exhaustion: a leak")

    text = _shown(80, play)
    assert max(len(line) for line in text.splitlines()) <= 80
    flat = " ".join(text.split())
    for whole in ("EVIDENCE_FOUND", "AUTHORIZATION", "call_6_kb_again", "NO_EVIDENCE"):
        assert whole in text, whole
    assert "EVIDENCE_…" not in text and "…" not in text.replace("… [cut:", "")
    assert "lifecycle" in flat and "evidence status" in flat and "error code" in flat
    assert "what you saw" in text


def test_what_you_saw_names_the_incident_the_evidence_the_error_and_duplicate_of() -> None:
    lines = what_you_saw("db-pool-exhaustion: a leak", _calls())
    text = "\n".join(lines)
    assert lines[0] == "the incident: db-pool-exhaustion: a leak"
    assert "call_1_kb (lookup_knowledge): evidence: 30 runbook excerpt(s)" in text
    assert "call_3_oom (query_logs): no evidence in its recorded scope" in text
    assert "call_9_billing (query_mysql): the deliberate ERROR, AUTHORIZATION" in text
    assert "call_6_kb_again: duplicate_of call_1_kb" in text


def test_keep_running_prints_ready_export_lines_on_a_terminal_only() -> None:
    urls = {
        "submitter": "unix://submitter:pw1@/tmp/r.sock",
        "auditor": "unix://auditor:pw2@/tmp/r.sock",
        "admin": "unix://default:pw3@/tmp/r.sock",  # replay --into can be tried (issue 35, 6)
    }

    def shown(terminal: bool) -> str:
        out = io.StringIO()
        console = Console(file=out, width=80, force_terminal=terminal, color_system=None)
        DemoView(as_json=False, console=console).keep_running(
            **urls, display="unix:///tmp/r.sock", prefix="demo1"
        )
        return out.getvalue()

    on_terminal = shown(True)
    assert f"export ACI_REDIS_URL='{urls['auditor']}' ACI_PREFIX=demo1" in on_terminal
    assert f"export ACI_REDIS_URL='{urls['submitter']}' ACI_PREFIX=demo1" in on_terminal
    assert f"export ACI_REDIS_URL='{urls['admin']}' ACI_PREFIX=demo1" in on_terminal
    assert "administrator (replay --into, import, reindex)" in on_terminal
    piped = shown(False)
    assert (
        "pw1" not in piped
        and "pw2" not in piped
        and "pw3" not in piped
        and "unix:///tmp/r.sock" in piped
    )
