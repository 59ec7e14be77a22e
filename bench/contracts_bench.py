"""Per-invocation cost of the contract layer, beside plain `json` + dataclasses.

One invocation = decode + validate the arguments, normalise + fingerprint the scope, project
the upstream answer, build the model observation (within its byte budget) and the control
view, and encode result, observation and control view to JSON. The baseline does the same
work with `json` and dataclasses (hand-written validation; the pure-Python selection helpers
of the projectors are shared, so the comparison is about the struct and JSON layer).

Run: .venv/bin/python bench/contracts_bench.py [runs]
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "contracts"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contract_samples import (
    LOGS_ARGS,
    MYSQL_ARGS,
    RAG_ARGS,
    logs_upstream,
    mysql_upstream,
    rag_upstream,
)

from contracts import (
    DEFAULT_BOUNDS,
    InvocationMeta,
    LifecycleStatus,
    control_view,
    decode_invocation,
    encode_result,
    encode_view,
    fingerprint_scope,
    normalise_scope,
    observe,
    project,
    to_json_cell,
)
from contracts.fingerprint import normalise_sql
from contracts.logs import _patterns_from_records, _select_events, _shown, pattern_priority
from contracts.rag import _describe, _excerpt_text, _hits_and_level, _places
from contracts.requests import is_valid_tool_call_id
from contracts.text import cut

__all__ = ["main"]

B = DEFAULT_BOUNDS


# --- the contract layer ---------------------------------------------------------------------


def contracts_invocation(tool: str, call_id: str, args: str, upstream: object) -> bytes:
    """The whole per-invocation work with the contract layer."""
    request = decode_invocation(tool, call_id, args)
    scope = normalise_scope(tool, request)  # type: ignore[arg-type]
    result = project(tool, request, call_id, upstream, B)  # type: ignore[arg-type]
    observation = observe(result, B)
    meta = InvocationMeta(
        tool=tool, session_id="s-1", status=LifecycleStatus.READY, scope=scope,
        scope_fingerprint=fingerprint_scope(scope),
    )  # fmt: skip
    view = control_view(result, meta, observation)
    return encode_result(result) + encode_view(observation) + encode_view(view)


# --- the baseline: json + dataclasses ------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class BEvidence:
    document_id: str
    source: str
    title: str
    breadcrumb: str
    excerpt: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class BRag:
    evidence_status: str
    tool_call_id: str
    query: str
    evidence: list[BEvidence]
    returned_count: int
    relevance_level: str | None
    truncated: bool


@dataclasses.dataclass(frozen=True, kw_only=True)
class BLogs:
    evidence_status: str
    tool_call_id: str
    source_kind: str
    scope: dict[str, Any]
    match_count: int
    returned_count: int
    patterns: list[dict[str, Any]]
    events: list[dict[str, Any]]
    truncated: bool


@dataclasses.dataclass(frozen=True, kw_only=True)
class BMysql:
    evidence_status: str
    tool_call_id: str
    columns: list[str]
    rows: list[list[Any]]
    returned_count: int
    truncated: bool


_FIELDS = {
    "lookup_knowledge": {"query": str},
    "query_logs": {"topic": str, "query": str, "lookback_minutes": (int, type(None))},
    "query_mysql": {"data_source": str, "sql": str, "params": (list, type(None))},
}
_OBS = {
    BRag: ("tool_call_id", "evidence_status", "query", "evidence", "relevance_level", "truncated"),
    BLogs: ("tool_call_id", "evidence_status", "source_kind", "scope", "patterns", "events",
            "truncated"),
    BMysql: ("tool_call_id", "evidence_status", "columns", "rows", "truncated"),
}  # fmt: skip


def _b_decode(tool: str, call_id: str, args: str) -> dict[str, Any]:
    if not is_valid_tool_call_id(call_id):
        raise ValueError("id")
    data = json.loads(args)
    fields = _FIELDS[tool]
    if not isinstance(data, dict) or set(data) - set(fields):
        raise ValueError("$")
    for name, kind in fields.items():
        if name in data and not isinstance(data[name], kind):
            raise ValueError(f"$.{name}")
    return data


def _b_rag(call_id: str, request: dict[str, Any], upstream: object) -> BRag:
    evidence: list[BEvidence] = []
    truncated = False
    hits, level = _hits_and_level(upstream)
    for hit in hits or []:
        text = _excerpt_text(hit) if isinstance(hit, dict) else ""
        if not text:
            continue
        if len(evidence) == B.rag_max_evidence:
            truncated = True
            break
        excerpt, c = cut(text, B.rag_excerpt_chars)
        truncated = truncated or c
        document_id, source, title, breadcrumb = (cut(t, 200)[0] for t in _describe(_places(hit)))
        evidence.append(
            BEvidence(
                document_id=document_id,
                source=source,
                title=title,
                breadcrumb=breadcrumb,
                excerpt=excerpt,
            )
        )
    return BRag(
        evidence_status="EVIDENCE_FOUND" if evidence else "NO_EVIDENCE", tool_call_id=call_id,
        query=request["query"], evidence=evidence, returned_count=len(evidence),
        relevance_level=level.value if level and evidence else None, truncated=truncated,
    )  # fmt: skip


def _b_logs(call_id: str, upstream: Any) -> BLogs:
    ranked = pattern_priority(_patterns_from_records(upstream.records), upstream.scope)
    patterns = [
        {"template": cut(p.template, B.logs_template_chars)[0], "count": p.count,
         "level": p.level, "first_seen": p.first_seen, "last_seen": p.last_seen}
        for p in _shown(ranked, B.logs_max_patterns)
    ]  # fmt: skip
    order = {p.template: i for i, p in enumerate(ranked)}
    selected, _ = _select_events(upstream.records, order, B.logs_max_events)
    events = [
        {"timestamp": r.timestamp, "level": r.level, "service": r.service,
         "message": cut(r.message, B.logs_message_chars)[0], "fields": dict(r.fields)}
        for r in selected
    ]  # fmt: skip
    s = upstream.scope
    scope = {"topic": s.topic.value, "query": s.query, "lookback_minutes": s.lookback_minutes,
             "start_time": s.start_time, "end_time": s.end_time}  # fmt: skip
    return BLogs(
        evidence_status="EVIDENCE_FOUND", tool_call_id=call_id, source_kind=upstream.source_kind,
        scope=scope, match_count=upstream.match_count, returned_count=len(events),
        patterns=patterns, events=events, truncated=len(events) < upstream.match_count,
    )  # fmt: skip


def _b_mysql(call_id: str, upstream: Any) -> BMysql:
    rows = []
    truncated = False
    for raw in upstream.rows[: B.mysql_max_rows]:
        row = []
        for cell in raw:
            value = to_json_cell(cell)
            if isinstance(value, str):
                value, c = cut(value, B.mysql_cell_chars)
                truncated = truncated or c
            row.append(value)
        rows.append(row)
    return BMysql(
        evidence_status="EVIDENCE_FOUND" if rows else "NO_EVIDENCE", tool_call_id=call_id,
        columns=list(upstream.columns), rows=rows, returned_count=len(rows), truncated=truncated,
    )  # fmt: skip


def _b_observe(result: Any) -> dict[str, Any]:
    full = dataclasses.asdict(result)
    obs = {k: full[k] for k in _OBS[type(result)] if full.get(k) is not None}
    if len(json.dumps(obs, separators=(",", ":")).encode()) > B.observation_max_bytes:
        obs["truncated"] = True  # (the typical results fit; cutting is not exercised)
    return obs


def baseline_invocation(tool: str, call_id: str, args: str, upstream: Any) -> bytes:
    """The same work with the standard library's json and dataclasses."""
    request = _b_decode(tool, call_id, args)
    scope = {"tool": tool, **{k: " ".join(str(v).split()).casefold() for k, v in request.items()}}
    fingerprint = hashlib.sha256(
        json.dumps(scope, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()[:32]
    if tool == "lookup_knowledge":
        result: Any = _b_rag(call_id, request, upstream)
    elif tool == "query_logs":
        result = _b_logs(call_id, upstream)
    else:
        result = _b_mysql(call_id, upstream)
    full = dataclasses.asdict(result)
    obs = _b_observe(result)
    control = {
        "tool": tool, "tool_call_id": call_id, "session_id": "s-1", "status": "READY",
        "evidence_status": result.evidence_status, "scope": scope,
        "scope_fingerprint": fingerprint, "returned_count": result.returned_count,
        "truncated": result.truncated, "attempts": 1, "timings": {},
    }  # fmt: skip
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str).encode
    return (dumps(full) + dumps(obs) + dumps(control)).encode()


# --- timing ---------------------------------------------------------------------------------


def median_us(fn: Callable[[], object], runs: int) -> float:
    """Median wall time of one call in µs (time.perf_counter_ns), after a warm-up."""
    for _ in range(min(200, runs)):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


def main() -> None:
    """Print µs per invocation for each tool, the baseline, and their ratio."""
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    cases = [
        ("lookup_knowledge", "RAG", RAG_ARGS, rag_upstream()),
        ("query_logs", "logs", LOGS_ARGS, logs_upstream()),
        ("query_mysql", "MySQL", MYSQL_ARGS, mysql_upstream()),
    ]
    print(f"median of {runs} runs, µs per invocation (decode+validate+project+views+encode)")
    print(f"{'tool':<22}{'contracts':>11}{'baseline':>11}{'ratio':>8}")
    for tool, label, args, upstream in cases:
        work = (tool, "call_1", args, upstream)
        ours = median_us(lambda w=work: contracts_invocation(*w), runs)  # type: ignore[misc]
        base = median_us(lambda w=work: baseline_invocation(*w), runs)  # type: ignore[misc]
        note = "  (incl. sqlglot SQL normalisation)" if tool == "query_mysql" else ""
        print(f"{label:<22}{ours:>11.1f}{base:>11.1f}{base / ours:>7.1f}x{note}")
        if tool == "lookup_knowledge":
            rag_us, rag_ratio = ours, base / ours
    sql = json.loads(MYSQL_ARGS)["sql"]
    sqlglot_us = median_us(lambda: normalise_sql(sql), max(200, runs // 10))
    print(f"{'  of which normalise_sql':<22}{sqlglot_us:>11.1f}")
    print(f"RAG goal <= 25 µs and >= 5x: {'met' if rag_us <= 25 and rag_ratio >= 5 else 'MISSED'}")


if __name__ == "__main__":
    main()
