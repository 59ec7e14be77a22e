"""AWS load balancers' access logs, read by `apache_access` = `nginx_access` (`accesslog`):
an Application Load Balancer's (`https 2026-12-05T14:00:00.123456Z app/shop/50dc6c495c0c9188
203.0.113.9:2817 10.0.1.7:8080 0.000 30.001 0.000 504 - 34 366 "POST https://... HTTP/1.1"
"curl/8.4.0" ECDHE-... TLSv1.2 arn:...:targetgroup/orders/... "Root=1-..." ...`, the
documented fields in their order, later ones optional as older balancers end sooner) and a
Classic Load Balancer's (the same from its time to its TLS protocol, no type first).

The level is the balancer's status's (5xx ERROR, 4xx WARN); the target's status is a field of
its own (`-` when the target sent none: the balancer's 502 or 504 is then its own answer).
Before, no line of either was a record in any format: every call an `EXECUTION` error."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Final

from contracts.results import JsonScalar
from workers.sources.logs.multiline import Pending
from workers.sources.logs.records import Entry

__all__ = ["ALB_FIELDS", "S3_FIELDS", "alb_head", "s3_head"]

_Q: Final = r'"((?:[^"\\]|\\.)*)"'  # a quoted value (the agent's quotes escaped)
_ALB: Final = re.compile(
    r"(?:(?P<type>https?|h2|grpcs?|wss?) )?"
    r"(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z) (?P<elb>\S+)"
    r" (?P<client>\S+) (?P<target>\S+) (?P<request_t>-1|\d+(?:\.\d+)?)"
    r" (?P<target_t>-1|\d+(?:\.\d+)?) (?P<response_t>-1|\d+(?:\.\d+)?)"
    r" (?P<status>\d{3}|-) (?P<target_status>\d{3}|-) (?P<received>\d+|-) (?P<sent>\d+|-)"
    r' "(?P<request>(?:[^"\\]|\\.)*)"'
    r'(?: "(?P<agent>(?:[^"\\]|\\.)*)" (?P<cipher>\S+) (?P<tls>\S+)'
    r'(?: (?P<group>\S+) "(?P<trace>[^"]*)"'
    r'(?: "(?P<domain>[^"]*)" "(?P<cert>[^"]*)"(?: (?P<priority>\S+) (?P<created>\S+)'
    r' "(?P<actions>[^"]*)" "(?P<redirect>[^"]*)" "(?P<error>[^"]*)")?)?)?)?'
    r"(?P<after>.*)",
    re.S,
)
# The groups kept as fields under these names, when not `-`
_NAMES: Final = {
    "type": "scheme", "elb": "load_balancer", "agent": "user_agent", "cipher": "ssl_cipher",
    "tls": "ssl_protocol", "group": "target_group", "trace": "trace_id", "domain": "server_name",
    "actions": "actions", "redirect": "redirect_url", "error": "error_reason",
    "target_status": "target_status",
}  # fmt: skip
ALB_FIELDS: Final = (
    *_NAMES.values(), "upstream_host", "client_port", "duration_ms", "upstream_time_ms",
    "bytes_received",
)  # fmt: skip
_REQUEST: Final = re.compile(r"(\S+) (\S+)(?: (\S+))?")


def request_fields(request: str, status: str, fields: dict[str, JsonScalar]) -> int | None:
    """An access line's request (`method`, `uri`, `protocol`) and `http_status` into `fields`
    (what each access-log reader writes alike); the status code, or None."""
    if parts := _REQUEST.fullmatch(request):
        fields["method"], fields["uri"] = parts.group(1), parts.group(2)
        if parts.group(3):
            fields["protocol"] = parts.group(3)
    code = int(status) if status.isdigit() else None
    if code is not None:
        fields["http_status"] = code
    return code


def alb_head(text: str, level_of: Callable[[int | None], str]) -> Pending | None:
    """A line of an ALB's or a Classic ELB's access log, or None (`level_of`: the access
    formats' status to level)."""
    found = _ALB.match(text)
    if found is None:
        return None
    try:
        stamp = datetime.fromisoformat(found.group("time")[:26].rstrip("Z") + "+00:00")
    except ValueError:
        return None
    epoch = int(stamp.timestamp() * 1000)

    def build(at: int) -> Entry:
        request, status, sent = found.group("request", "status", "sent")
        fields: dict[str, JsonScalar] = {}
        client, _, port = found.group("client").rpartition(":")
        fields["client"] = client or found.group("client")
        if port.isdigit():
            fields["client_port"] = int(port)
        if (target := found.group("target")) != "-":
            fields["upstream_host"] = target
        code = request_fields(request, status, fields)
        if fields.get("protocol") == "-":  # a request the balancer could not read
            del fields["protocol"]
        for name, key in (("received", "bytes_received"), ("sent", "bytes")):
            if (value := found.group(name)).isdigit() and len(value) < 19:
                fields[key] = int(value)
        times = [float(t) for t in found.group("request_t", "target_t", "response_t")]
        if times[1] >= 0:
            fields["upstream_time_ms"] = round(times[1] * 1000, 3)
        if min(times) >= 0:  # -1: the target never answered (a timeout, a reset)
            fields["duration_ms"] = round(sum(times) * 1000, 3)
        for group, name in _NAMES.items():
            if (value := found.group(group)) not in (None, "", "-"):
                fields[name] = int(value) if name == "target_status" else value
        if extra := (found.group("after") or "").strip():
            fields["extra"] = extra  # later fields (classification, conn_trace_id), as written
        return Entry(at, level_of(code), "", f"{request} {status} {sent}", fields)

    return (lambda: epoch), build


# Amazon S3's server access log: `bucket_owner bucket [time] remote_ip requester request_id
# operation key "request_uri" http_status error_code bytes_sent object_size total_time
# turn_around_time "referer" "user_agent" version_id host_id signature_version cipher_suite
# auth_type host_header tls_version ...` (later fields optional, as older lines end sooner)
_S3: Final = re.compile(
    r"(?P<owner>[0-9a-f]{64}|-) (?P<bucket>[a-z0-9][a-z0-9.-]{1,62}) \[(?P<time>[^\]]{26})\]"
    r" (?P<client>\S+) (?P<requester>\S+) (?P<request_id>\S+) (?P<operation>[A-Z0-9_.]+)"
    r' (?P<key>\S+) "(?P<request>(?:[^"\\]|\\.)*)" (?P<status>\d{3}|-) (?P<error>\S+)'
    r" (?P<sent>\d+|-) (?P<size>\d+|-) (?P<total>\d+|-) (?P<turnaround>\d+|-)"
    r' "(?P<referer>(?:[^"\\]|\\.)*)" "(?P<agent>(?:[^"\\]|\\.)*)"'
    r"(?: (?P<version>\S+) (?P<host_id>\S+)(?: (?P<signature>\S+) (?P<cipher>\S+)"
    r" (?P<auth>\S+) (?P<host>\S+)(?: (?P<tls>\S+))?)?)?(?P<after>.*)",
    re.S,
)
_S3_NAMES: Final = {
    "bucket": "bucket", "client": "client", "requester": "requester",
    "request_id": "request_id", "operation": "operation", "key": "key", "error": "error_code",
    "referer": "referer", "agent": "user_agent", "version": "version_id",
    "host_id": "host_id", "signature": "signature_version", "cipher": "ssl_cipher",
    "auth": "auth_type", "host": "host", "tls": "ssl_protocol",
}  # fmt: skip
S3_FIELDS: Final = (*_S3_NAMES.values(), "object_size", "turnaround_ms")


def s3_head(text: str, level_of: Callable[[int | None], str]) -> Pending | None:
    """A line of Amazon S3's server access log, or None: its level the status's, its message
    the request line, status and error code (`GET /shop-assets/x.png HTTP/1.1 403
    AccessDenied`), `total_time` `duration_ms`, `turn_around_time` `turnaround_ms`."""
    found = _S3.match(text)
    if found is None:
        return None
    try:
        epoch = int(datetime.strptime(found.group("time"), "%d/%b/%Y:%H:%M:%S %z").timestamp())
    except ValueError:
        return None

    def build(at: int) -> Entry:
        request, status, sent = found.group("request", "status", "sent")
        fields: dict[str, JsonScalar] = {}
        code = request_fields(request, status, fields)
        for group, name in (("sent", "bytes"), ("size", "object_size"), ("total", "duration_ms"),
                            ("turnaround", "turnaround_ms")):  # fmt: skip
            if (value := found.group(group)).isdigit() and len(value) < 19:
                fields[name] = int(value)
        for group, name in _S3_NAMES.items():
            if (value := found.group(group)) not in (None, "", "-"):
                fields[name] = value
        if extra := (found.group("after") or "").strip():
            fields["extra"] = extra
        error = found.group("error")
        message = f"{request} {status} {error if error != '-' else sent}"
        return Entry(at, level_of(code), "", message, fields)

    return (lambda: epoch * 1000), build
