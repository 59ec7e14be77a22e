"""What a source answered from: its configuration fingerprint, recorded in each call's Harness
Control View (`source`), so a replay knows what it ran against and `replay --reexecute` can say
when today's configuration differs (and which part).

Per tool, a few `name -> value` pairs, never a secret, URL, host or password (a path only as a
digest):

- lookup_knowledge, embedded index: `runbooks` (a digest of the folder's path) and `index`
  (the index's fingerprint of its files); over HTTP: `knowledge` = `RAG over HTTP`.
- query_logs: `logs`, the asked topic's backend and a digest of its configuration
  (`FILE 3f2a…`), or `MOCK <scenario>`.
- query_mysql: `data_sources`, the configured names (`pkgs,shop`).

Use `source_identity(source, request)` after the source answered (the embedded index knows its
fingerprint once built); `identity_changes(recorded, current)` names what differs.
`configuration_digest(sources)` is one digest of a worker's whole configuration (every log
topic, the runbook folder's path, the data source names; not the runbooks' index, which a
folder's edit changes): two workers with the same digest answer a call from the same
configuration (its heartbeat carries it, and `status` compares the live workers').
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import msgspec

__all__ = ["configuration_digest", "identity_changes", "source_identity"]

_DIGEST_CHARS = 16


def _digest(value: Any) -> str:
    data = value if isinstance(value, bytes) else msgspec.json.encode(value, order="sorted")
    return hashlib.sha256(data).hexdigest()[:_DIGEST_CHARS]


def _logs(source: Any, request: Any) -> str | None:
    backends = getattr(source, "backends", None)
    topic = getattr(request, "topic", None)
    if isinstance(backends, Mapping):  # the router: the asked topic's backend
        backend = backends.get(topic)
        if backend is None:
            return "not configured"
        source = backend
    kind = type(source).__name__
    if kind == "MockLogSource":
        return f"MOCK {getattr(getattr(source, 'settings', None), 'scenario', '')}".strip()
    entry = getattr(source, "entry", None)
    if kind == "FileLogSource" and entry is not None:
        return f"FILE {_digest(msgspec.to_builtins(entry))}"
    if kind == "ClickhouseLogSource":
        topics = getattr(source, "topics", None) or getattr(source, "_topics", None)
        entry = topics.get(topic) if isinstance(topics, Mapping) else None
        return f"CLICKHOUSE {_digest(msgspec.to_builtins(entry)) if entry else ''}".strip()
    return kind


def source_identity(source: Any, request: Any) -> dict[str, str] | None:
    """The configuration fingerprint of `source` for `request` (see the module table), or None
    for a source this module does not know (a test double, a fault wrapper's inner unknown)."""
    inner = getattr(source, "inner", None)  # a wrapper (chaos faults, tracing): its source
    if inner is not None and not hasattr(source, "data_sources"):
        source = inner
    kind = type(source).__name__
    if kind == "KnowledgeIndexSource":
        folder = getattr(source, "_folder", None)
        index = getattr(source, "_fingerprint", "") or "not built"
        return {"runbooks": _digest(str(folder).encode()), "index": str(index)[:_DIGEST_CHARS]}
    if kind == "HttpRagSource":
        return {"knowledge": "RAG over HTTP"}
    if kind == "MysqlSource":
        return {"data_sources": ",".join(sorted(getattr(source, "data_sources", ())))}
    if hasattr(source, "backends") or kind.endswith("LogSource"):
        found = _logs(source, request)
        return {"logs": found} if found else None
    return None


def identity_changes(
    recorded: Mapping[str, str] | None, current: Mapping[str, str] | None
) -> list[str]:
    """`name: recorded X, now Y` for each pair that differs (none when either is unknown: a
    recording made before sources were identified says nothing)."""
    if not recorded or current is None:
        return []
    names = sorted(set(recorded) | set(current))
    return [
        f"{n}: recorded {recorded.get(n, 'nothing')}, now {current.get(n, 'nothing')}"
        for n in names
        if recorded.get(n) != current.get(n)
    ]


class _Asked:
    """A request naming a topic, as `_logs` reads one."""

    def __init__(self, topic: Any) -> None:
        self.topic = topic


def _configuration(source: Any) -> Any:
    """What decides one source's answers, as JSON-ready values (no secret: names, digests)."""
    inner = getattr(source, "inner", None)
    if inner is not None and not hasattr(source, "data_sources"):
        source = inner
    backends = getattr(source, "backends", None)
    if isinstance(backends, Mapping):  # the logs router: each topic's backend and file
        topics = {str(getattr(t, "value", t)): _logs(source, _Asked(t)) for t in backends}
        shared = {_shared(b) for b in backends.values()} - {""}
        return {"topics": topics, "settings": sorted(shared)}
    found = source_identity(source, None)
    if found is not None:
        return {k: v for k, v in found.items() if k != "index"}  # edits change the index
    return type(source).__name__


def _shared(backend: Any) -> str:
    # A FILE backend's whole ACI_LOGS_CONFIG (roots, scan bounds, zone): beyond its topic.
    config = getattr(backend, "config", None)
    try:
        return _digest(msgspec.to_builtins(config)) if config is not None else ""
    except (TypeError, msgspec.EncodeError):
        return type(config).__name__


def configuration_digest(sources: Mapping[str, Any]) -> str:
    """One digest of what decides a worker's answers (see the module docstring)."""
    return _digest({tool: _configuration(s) for tool, s in sorted(sources.items())})
