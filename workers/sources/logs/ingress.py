"""The Kubernetes NGINX Ingress controller's access log (its default `log-format-upstream`),
read by `apache_access` = `nginx_access`: the combined format, then `$request_length
$request_time [$proxy_upstream_name] [$proxy_alternative_upstream_name] $upstream_addr
$upstream_response_length $upstream_response_time $upstream_status $req_id`:

`10.0.0.3 - - [04/Dec/2026:11:50:00 +0000] "GET /api/charge HTTP/1.1" 502 150 "-" "curl/8.4.0"
83 0.002 [default-orders-80] [] 10.1.0.23:8080 0 0.002 502 7f1e0c0e2a1b3c4d5e6f708192a3b4c5`

The request's length is `bytes_received`, its time `duration_ms` (`duration_ms:>1000`), the
upstream (`namespace-service-port`) `upstream_cluster`, a canary's `alternative_upstream`,
the upstream's address `upstream_host`, its response's length `upstream_bytes`, time
`upstream_time_ms` and status `target_status` (`target_status:502` beside an `http_status`
of 502: the pod's answer, not the controller's), the request id `request_id`. A request
retried on another upstream lists each try (`10.1.0.24:8080, 10.1.0.25:8080`, `502, 200`):
the addresses are kept as written, the numbers are the last try's. Before, all
of it was the text `extra`: `duration_ms` and `request_id` of no ingress record."""

from __future__ import annotations

import re
from typing import Final

from contracts.results import JsonScalar

__all__ = ["INGRESS_FIELDS", "read_ingress"]

INGRESS_FIELDS: Final = ("upstream_cluster", "alternative_upstream", "upstream_bytes", "request_id")


def _listed(one: str) -> str:
    return rf"(?:{one})(?:, (?:{one}))*"


_INGRESS: Final = re.compile(
    r"(?P<length>\d{1,18}) (?P<time>\d{1,9}(?:\.\d{1,6})?) \[(?P<name>[^\]\s]*)\]"
    r" \[(?P<alternative>[^\]\s]*)\] (?P<addr>" + _listed(r"[^\s,]+") + r")"
    r" (?P<bytes>" + _listed(r"\d{1,18}|-") + r") (?P<utime>" + _listed(r"\d{1,9}(?:\.\d{1,6})?|-")
    + r") (?P<status>" + _listed(r"\d{3}|-") + r") (?P<id>[0-9a-f]{32})"
)  # fmt: skip


def _last(listed: str, scale: float = 0.0) -> int | float | None:
    """The last try's number of a list (`0.001, 0.050`: 50.0 with `scale` 1000), or None."""
    last = listed.rpartition(", ")[2]
    if last == "-":
        return None
    return round(float(last) * scale, 3) if scale else int(last)


def read_ingress(extra: str, fields: dict[str, JsonScalar]) -> bool:
    """Whether `extra` (what follows the user agent) is the Ingress controller's; its values
    then go into `fields`."""
    if "] [" not in extra or (found := _INGRESS.fullmatch(extra)) is None:
        return False  # (most lines: no regular expression tried)
    fields["bytes_received"] = int(found.group("length"))
    fields["duration_ms"] = round(float(found.group("time")) * 1000, 3)
    for name, ours in (("name", "upstream_cluster"), ("alternative", "alternative_upstream")):
        if found.group(name):
            fields[ours] = found.group(name)
    if found.group("addr") != "-":
        fields["upstream_host"] = found.group("addr")
    if (upstream_bytes := _last(found.group("bytes"))) is not None:
        fields["upstream_bytes"] = upstream_bytes
    if (upstream_time := _last(found.group("utime"), 1000.0)) is not None:
        fields["upstream_time_ms"] = upstream_time
    if (status := _last(found.group("status"))) is not None:
        fields["target_status"] = status
    fields["request_id"] = found.group("id")
    return True
