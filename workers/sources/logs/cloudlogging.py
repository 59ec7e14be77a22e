"""Google Cloud Logging's `LogEntry` as JSON lines (a Log Router sink to Cloud Storage, a
`gcloud logging read --format=json` turned into lines, Logs Explorer's download as JSON
lines), read by `jsonl` (docs/logs.md, "jsonl"): the payload's own keys are the record's, the
message is `textPayload`, the payload's `message`, an audit log's status or a request's line,
and the entry's envelope (`severity`, `trace`, `resource.labels`, `httpRequest`) the fields
an agent asks about: `level`, `trace_id`, `service`, `namespace`, `pod`, `http_status`.

Before, such a line kept every key under its envelope's prefix: no message (every template
empty), `severity: DEFAULT` a level of its own, `trace_id:<id>` and `service:orders`
answered NO_EVIDENCE over the very records."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any, Final

__all__ = ["CLOUD_LOGGING_FIELDS", "is_cloud_logging", "read_cloud_logging"]

# `httpRequest` (the `HttpRequest` message) as the access formats' fields
_HTTP_NAMES: Final = {
    "httpRequest.requestMethod": "method", "httpRequest.requestUrl": "uri",
    "httpRequest.status": "http_status", "httpRequest.remoteIp": "client",
    "httpRequest.userAgent": "user_agent", "httpRequest.referer": "referer",
    "httpRequest.protocol": "protocol", "httpRequest.responseSize": "bytes",
    "httpRequest.requestSize": "bytes_received", "httpRequest.serverIp": "server_ip",
}  # fmt: skip
# The names the monitored resource gives (GKE, Cloud Run, Cloud Functions, App Engine, GCE)
_RESOURCE_NAMES: Final = {
    "resource.labels.namespace_name": "namespace", "resource.labels.pod_name": "pod",
    "resource.labels.container_name": "container", "resource.labels.cluster_name": "cluster",
    "resource.labels.location": "location", "resource.labels.revision_name": "revision",
    "resource.labels.instance_id": "instance_id", "resource.labels.project_id": "project_id",
}  # fmt: skip
# The service, most specific first: what Cloud Run, Functions, App Engine and GKE call it
_SERVICE_KEYS: Final = (
    "resource.labels.service_name", "resource.labels.function_name",
    "resource.labels.module_id", "labels.k8s-pod/app", "labels.k8s-pod/app_kubernetes_io/name",
    "resource.labels.container_name",
)  # fmt: skip
# The fields it gives beyond the access fields (`ENVOY_FIELDS`) and the topic's own
CLOUD_LOGGING_FIELDS: Final = (
    *dict.fromkeys(_RESOURCE_NAMES.values()), "log_name", "insert_id", "span_id", "principal",
    "referer", "server_ip",
)  # fmt: skip
_TRACE: Final = re.compile(r"projects/[^/]+/traces/([0-9A-Za-z]+)")
_SECONDS: Final = re.compile(r"(\d{1,9}(?:\.\d{1,9})?)s")  # a Duration in JSON: `30.001s`
_PAYLOAD: Final = "jsonPayload."


def is_cloud_logging(flat: dict[str, Any]) -> bool:
    """Whether a flattened line is a `LogEntry` (its `logName`, beside its `insertId` or its
    `severity`; an app's record with a `logName` of its own has neither)."""
    return isinstance(flat.get("logName"), str) and ("insertId" in flat or "severity" in flat)


def read_cloud_logging(flat: dict[str, Any], own: Collection[str]) -> None:
    """Rewrite, in place, a flattened `LogEntry` into the keys jsonl reads: the payload's keys
    without their `jsonPayload.` prefix (but `own`, the entry's time and level keys, which the
    envelope's `timestamp` and `severity` keep), `textPayload` the `message`."""
    for key in [k for k in flat if k.startswith(_PAYLOAD)]:
        name = key[len(_PAYLOAD) :]
        if name not in flat and name not in own:
            flat[name] = flat.pop(key)
    if isinstance(text := flat.pop("textPayload", None), str):
        flat.setdefault("message", text.removesuffix("\n"))
    if flat.get("severity") == "DEFAULT":
        del flat["severity"]  # "no assigned severity level": no level, not a level `DEFAULT`
    flat.pop("receiveTimestamp", None)  # when Logging received it: not when it happened
    # as written (`.../logs/run.googleapis.com%2Fstderr`), so the prefilter finds it in the line
    flat["log_name"] = flat.pop("logName")
    if "insertId" in flat:
        flat["insert_id"] = flat.pop("insertId")
    trace = flat.pop("trace", None)
    if isinstance(trace, str) and "trace_id" not in flat:
        found = _TRACE.fullmatch(trace)
        flat["trace_id"] = found.group(1) if found else trace
    if "spanId" in flat and "span_id" not in flat:
        flat["span_id"] = flat.pop("spanId")
    flat.pop("traceSampled", None)
    _read_request(flat)
    _read_audit(flat)
    for theirs, ours in _RESOURCE_NAMES.items():
        if theirs in flat and ours not in flat:
            flat[ours] = flat.pop(theirs)
    if "service" not in flat:
        service = next((flat[k] for k in _SERVICE_KEYS if isinstance(flat.get(k), str)), None)
        service = service or flat.get("container")
        if isinstance(service, str) and service:
            flat["service"] = service


def _read_request(flat: dict[str, Any]) -> None:
    """`httpRequest` as the access fields, its line the message when the entry has none."""
    for theirs, ours in _HTTP_NAMES.items():
        if theirs in flat and ours not in flat:
            value = flat.pop(theirs)
            if ours in ("bytes", "bytes_received") and isinstance(value, str) and value.isdigit():
                value = int(value)  # an int64 in JSON is a string
            flat[ours] = value
    latency = flat.pop("httpRequest.latency", None)
    if isinstance(latency, str) and (seconds := _SECONDS.fullmatch(latency)):
        flat.setdefault("duration_ms", round(float(seconds.group(1)) * 1000, 3))
    if "message" not in flat and "msg" not in flat and "http_status" in flat:
        words = (flat.get(k) for k in ("method", "uri", "protocol", "http_status"))
        flat["message"] = " ".join(str(w) for w in words if w not in (None, ""))


def _read_audit(flat: dict[str, Any]) -> None:
    """A Cloud Audit Log's `protoPayload` (`AuditLog`): its method, resource and status as the
    message (`google.iam.admin.v1.CreateServiceAccountKey projects/p/... PERMISSION_DENIED`),
    its caller in `principal`."""
    method = flat.get("protoPayload.methodName")
    if not isinstance(method, str):
        return
    principal = flat.pop("protoPayload.authenticationInfo.principalEmail", None)
    if isinstance(principal, str):
        flat.setdefault("principal", principal)
    if "message" in flat or "msg" in flat:
        return
    words = [method, flat.get("protoPayload.resourceName"), flat.get("protoPayload.status.message")]
    flat["message"] = " ".join(str(w) for w in words if w)
