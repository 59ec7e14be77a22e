"""AWS Lambda's JSON log format (`LoggingConfig.LogFormat: JSON`), read by `jsonl`: the
runtime's records (`{"timestamp":...,"level":"ERROR","message":"charge failed","requestId":
"8f5a1b2c-..."}`: `requestId` is `request_id`, as the text format's) and the platform's events
(`{"time":...,"type":"platform.report","record":{"requestId":"8f5a1b2c-...","metrics":
{"durationMs":1402.11,"billedDurationMs":1403,"memorySizeMB":128,"maxMemoryUsedMB":127},
"status":"timeout"}}`): `request_id` their request's id, the metrics the fields the text
REPORT's are (`duration_ms`, `billed_duration_ms`, `init_duration_ms`,
`restore_duration_ms`, `memory_size_mb`, `max_memory_used_mb`), `status` and `error_type`,
the message the event's type and status (`platform.report timeout`), the level INFO, ERROR
for a status of `timeout`, `error` or `failure`, WARN when Max Memory Used is the Memory
Size. Before, a platform event was a record of no level and no message (one empty template for
them all), and `request_id:<id>` found none of an invocation's records."""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = ["read_lambda_json"]

_UUID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_METRICS: Final = {
    "record.metrics.durationMs": "duration_ms",
    "record.metrics.billedDurationMs": "billed_duration_ms",
    "record.metrics.initDurationMs": "init_duration_ms",
    "record.metrics.restoreDurationMs": "restore_duration_ms",
    "record.metrics.memorySizeMB": "memory_size_mb",
    "record.metrics.maxMemoryUsedMB": "max_memory_used_mb",
    "record.status": "status",
    "record.errorType": "error_type",
}


def read_lambda_json(flat: dict[str, Any]) -> None:
    """Rename, in place, a flattened record of Lambda's JSON log format (`requestId` as
    `request_id`; a platform event's fields, level and message). Any other record is left as
    it is."""
    kind = flat.get("type")
    if not isinstance(kind, str) or not kind.startswith("platform."):
        request = flat.get("requestId")
        if isinstance(request, str) and _UUID.fullmatch(request) and "request_id" not in flat:
            flat["request_id"] = flat.pop("requestId")
        return
    if isinstance(flat.get("record.requestId"), str):
        flat.setdefault("request_id", flat.pop("record.requestId"))
    for theirs, ours in _METRICS.items():
        if theirs in flat and ours not in flat:
            flat[ours] = flat.pop(theirs)
    status = flat.get("status")
    level = "INFO"
    if isinstance(status, str) and status.lower() in ("timeout", "error", "failure"):
        level = "ERROR"
    elif "memory_size_mb" in flat and flat.get("max_memory_used_mb") == flat["memory_size_mb"]:
        level = "WARN"  # every MB used: the function ran out of memory (or was about to)
    flat.setdefault("level", level)
    flat.setdefault("message", f"{kind} {status}" if isinstance(status, str) else kind)
