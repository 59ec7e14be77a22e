"""Cloudflare's HTTP request logs as Logpush writes them (the `http_requests` dataset, JSON
lines to R2, S3, GCS or a SIEM), read by `jsonl`: `{"ClientIP":"203.0.113.9",
"ClientRequestMethod":"POST","ClientRequestURI":"/api/charge","EdgeStartTimestamp":
"2026-12-04T11:50:00Z","EdgeEndTimestamp":"2026-12-04T11:50:01Z","EdgeResponseStatus":502,
"OriginResponseStatus":502,"RayID":"7f1e0c0e2a1b3c4d",...}`.

The time is `EdgeStartTimestamp` (RFC 3339, or Unix seconds, or nanoseconds: Logpush's
`timestamp_format`), the level the edge's status's (5xx ERROR, 4xx WARN, else INFO), the
message the request line and status (`POST /api/charge HTTP/2 502`), and the access fields:
`EdgeResponseStatus` `http_status`, `OriginResponseStatus` `target_status` (the origin's
answer: none, or 0, when the edge answered alone: a WAF block, a cached page),
`ClientRequestMethod` `method`, `ClientRequestURI` `uri`, `ClientRequestProtocol`
`protocol`, `ClientIP` `client`, `ClientRequestHost` `authority`, `ClientRequestUserAgent`
`user_agent`, `ClientRequestReferer` `referer`, `ClientRequestBytes` `bytes_received`,
`EdgeResponseBytes` `bytes`, `OriginIP` `upstream_host`, `RayID` `request_id`,
`OriginResponseDurationMs` `upstream_time_ms`, and the edge's time (its end less its start)
`duration_ms`. Before, no key jsonl reads as a time: every call an `EXECUTION` error."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from workers.sources.logs.accesslog import status_level

__all__ = ["CLOUDFLARE_FIELDS", "read_cloudflare"]

_NAMES: Final = {
    "EdgeResponseStatus": "http_status", "OriginResponseStatus": "target_status",
    "ClientRequestMethod": "method", "ClientRequestURI": "uri",
    "ClientRequestProtocol": "protocol", "ClientIP": "client", "ClientRequestHost": "authority",
    "ClientRequestUserAgent": "user_agent", "ClientRequestReferer": "referer",
    "ClientRequestBytes": "bytes_received", "EdgeResponseBytes": "bytes",
    "OriginIP": "upstream_host", "RayID": "request_id",
    "OriginResponseDurationMs": "upstream_time_ms",
}  # fmt: skip
CLOUDFLARE_FIELDS: Final = ("target_status", "referer")  # (the others: Envoy's too)


def _seconds(value: object) -> float | None:
    """A Logpush timestamp in seconds (RFC 3339, Unix seconds or nanoseconds), or None."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value / 1e9 if value > 1e14 else float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def read_cloudflare(flat: dict[str, Any]) -> None:
    """Rename, in place, a flattened Logpush HTTP request into the access fields, its time,
    level and message (`_NAMES`). Any other record is left as it is."""
    status = flat.get("EdgeResponseStatus")
    if not isinstance(status, int) or isinstance(status, bool) or "EdgeStartTimestamp" not in flat:
        return
    start, end = _seconds(flat.get("EdgeStartTimestamp")), _seconds(flat.get("EdgeEndTimestamp"))
    if start is not None and end is not None and 0 <= end - start < 86_400:
        flat.setdefault("duration_ms", round((end - start) * 1000, 3))
    flat.setdefault("timestamp", flat.pop("EdgeStartTimestamp"))
    for theirs, ours in _NAMES.items():
        if theirs in flat and ours not in flat:
            flat[ours] = flat.pop(theirs)
    if flat.get("target_status") == 0:
        del flat["target_status"]  # no origin asked
    flat.setdefault("level", status_level(status))
    words = (flat.get(k) for k in ("method", "uri", "protocol"))
    flat.setdefault("message", " ".join([*(str(w) for w in words if w), str(status)]))
