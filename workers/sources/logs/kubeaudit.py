"""The Kubernetes API server's audit log (`--audit-log-path`: JSON lines of `audit.k8s.io`
Events), read by `jsonl`: its time is `requestReceivedTimestamp` (jsonl knows no such key, so
before no line was a record), its `level` the audit policy's detail (`Metadata`, `Request`,
`RequestResponse`) kept as the field `audit_level`, never a severity; the record's level comes
from the response's status as an access log's does (5xx ERROR, 4xx WARN, else INFO; none before
a response), its message is the request line `verb requestURI code` (docs/logs.md, "jsonl").
A Secret's request or response object (a create, a patch, a get, a list at `Request` or
`RequestResponse`) shows its kind, type and metadata but annotations only: its `data` and
`stringData` (and kubectl's last-applied-configuration annotation, a copy) hold secrets under
names of the owner's choosing, which no secret's name rule knows. `kubectl exec`'s command is
logged as its URI's `command=` words: masked as a command line logged as a list is
(`['mysql', '-p***']`), the URI written again only when they held a secret."""

from __future__ import annotations

import ast
from typing import Any, Final
from urllib.parse import parse_qsl, quote

from workers.sources.logs.accesslog import status_level
from workers.sources.logs.masking import MASK, without_log_secrets
from workers.sources.logs.secret_objects import SHOWN as _SHOWN

__all__ = ["read_kube_audit"]

_OBJECTS: Final = ("requestObject", "responseObject")


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
    uri = flat.get("requestURI")
    if isinstance(uri, str) and "command=" in uri:
        flat["requestURI"] = _exec_uri(uri)
    words = [flat.get("verb"), flat.get("requestURI"), status]
    if flat.get("objectRef.resource") == "secrets" or any(
        flat.get(f"{name}.kind") in ("Secret", "SecretList") for name in _OBJECTS
    ):
        _mask_secret_objects(flat)
    flat.setdefault("message", " ".join(str(w) for w in words if w is not None))


def _mask_secret_objects(flat: dict[str, Any]) -> None:
    """A Secret's request and response objects' values masked but its kind and metadata."""
    for key, value in flat.items():
        name, _, rest = key.partition(".")
        if name in _OBJECTS and value is not None and value != "":
            if rest not in _SHOWN and (
                not rest.startswith("metadata.") or rest.startswith("metadata.annotations")
            ):  # kubectl apply's last-applied-configuration annotation holds the whole Secret
                flat[key] = MASK


def _exec_uri(uri: str) -> str:
    """An exec or attach URI, its `command=` words masked as a command line's list."""
    path, _, query = uri.partition("?")
    pairs = parse_qsl(query, keep_blank_values=True)
    words = [value for name, value in pairs if name == "command"]
    listed = repr(words)
    if not words or (shown := without_log_secrets(listed)) == listed:
        return uri
    try:
        masked = ast.literal_eval(shown)
    except (ValueError, SyntaxError):  # masking cut a quote: every word but the program's
        masked = None
    if not isinstance(masked, list) or len(masked) != len(words):
        masked = [words[0], *(MASK for _ in words[1:])]
    told = iter(masked)
    return (
        path
        + "?"
        + "&".join(
            f"{quote(name)}={quote(str(next(told)) if name == 'command' else value, safe='*/:')}"
            for name, value in pairs
        )
    )
