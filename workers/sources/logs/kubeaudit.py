"""The Kubernetes API server's audit log (`--audit-log-path`: JSON lines of `audit.k8s.io`
Events), read by `jsonl`: its time is `requestReceivedTimestamp` (jsonl knows no such key, so
before no line was a record), its `level` the audit policy's detail (`Metadata`, `Request`,
`RequestResponse`) kept as the field `audit_level`, never a severity; the record's level comes
from the response's status as an access log's does (5xx ERROR, 4xx WARN, else INFO; none before
a response), its message is the request line `verb requestURI code` (docs/logs.md, "jsonl")."""

from __future__ import annotations

from typing import Any

from workers.sources.logs.accesslog import status_level

__all__ = ["read_kube_audit"]


def read_kube_audit(flat: dict[str, Any]) -> None:
    """Rewrite a flattened audit Event in place into the keys jsonl reads; any other record
    is left as it is."""
    version = flat.get("apiVersion")
    if (
        flat.get("kind") != "Event"
        or not isinstance(version, str)
        or not version.startswith("audit.k8s.io/")
        or "requestReceivedTimestamp" not in flat
    ):
        return
    flat["timestamp"] = flat.pop("requestReceivedTimestamp")
    if "level" in flat:
        flat["audit_level"] = flat.pop("level")
    code = flat.get("responseStatus.code")
    status = code if isinstance(code, int) and not isinstance(code, bool) else None
    if level := status_level(status):
        flat["level"] = level
    words = [flat.get("verb"), flat.get("requestURI"), status]
    flat.setdefault("message", " ".join(str(w) for w in words if w is not None))
