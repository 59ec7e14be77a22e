"""Web servers' and proxies' access logs (`apache_access` = `nginx_access`, `envoy`;
`textformats` names them all).

The common and combined formats, what a custom `LogFormat`/`log_format` adds before the
referer or after the user agent (`extra`), a virtual host first (Apache's `vhost_combined`,
nginx's `$host`: `vhost`) and a proxy chain where the client goes (`client` the chain, as
Filebeat's `remote_ip_list`); level from the status (5xx ERROR, 4xx WARN, else INFO).

AWS load balancers' and S3's (`awslogs`: ALB, Classic ELB, S3 server access logs). Squid's
native format (`access_log ... squid`, epoch seconds first): the same fields and
`duration_ms`, `cache_result` (`TCP_MISS`), `hierarchy` (`HIER_DIRECT`), `upstream`,
`content_type`.

Envoy's default format (every Istio sidecar's, with Istio's additions: `envoy_head`): the
response flags are a field (`UH`, `UF,URX`: why a proxy answered as it did), and a line with
no HTTP status (a TCP proxy's, or no response sent) takes its level from them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import tzinfo
from functools import partial
from typing import Any, Final

from contracts.results import JsonScalar
from workers.sources.logs.awslogs import alb_head, request_fields, s3_head
from workers.sources.logs.ingress import read_ingress
from workers.sources.logs.multiline import Pending
from workers.sources.logs.records import Entry
from workers.sources.logs.stamps import STAMP, matched_ms

__all__ = [
    "ENVOY_FIELDS", "access_head", "envoy_entry", "envoy_head", "read_caddy_access",
    "read_envoy_json", "read_traefik_access", "status_level",
]  # fmt: skip

Head = Callable[[str], Pending | None]

_ACCESS: Final = re.compile(
    # the virtual host first (Apache's `vhost_combined` `%v:%p`, nginx's `$host`), and the
    # client a proxy chain (`$proxy_add_x_forwarded_for`, or `"$http_x_forwarded_for"` quoted
    # before `$remote_addr`): before, such lines were lines not in the format
    r'(?:(?P<vhost>[^\s",]+) )?(?P<client>"[^"]*" [^\s",]+'
    r'|(?:[^\s",]+(?:, [^\s",]+)+ )?[^\s",]+(?:, [^\s",]+)*)'
    r" (?P<ident>\S+) (?P<user>\S+) \[" + STAMP + r'\] "(?P<request>(?:[^"\\]|\\.)*)"'
    r" (?P<status>\d{3}|-) (?P<bytes>\d+|-)"
    # what a custom LogFormat adds: before the referer (Apache's `%D`, lighttpd's byte
    # counts) and after the user agent (nginx's `"$http_x_forwarded_for" $request_time`)
    r'(?P<between>(?: [^\s"]+){0,16})'
    r'(?: "(?P<referer>(?:[^"\\]|\\.)*)" "(?P<agent>(?:[^"\\]|\\.)*)")?'
    r"(?P<after>.*)",
    re.S,
)
# Squid's native format (`access_log ... squid`): `%ts.%03tu %6tr %>a %Ss/%03>Hs %<st %rm %ru
# %[un %Sh/%<a %mt`, epoch seconds first, the elapsed milliseconds, the cache's result code
_SQUID: Final = re.compile(
    r"(?P<seconds>[12]\d{9})\.(?P<millis>\d{3}) +(?P<elapsed>-?\d{1,12}) (?P<client>\S+)"
    r" (?P<result>[A-Z][A-Z_]*)/(?P<status>\d{3}) (?P<bytes>\d{1,18}) (?P<method>\S+) (?P<uri>\S+)"
    r" (?P<user>\S+) (?P<hierarchy>[A-Z][A-Z_]*)/(?P<upstream>\S+)(?: (?P<type>\S+))?(?P<after>.*)",
    re.S,
)
_CHAIN_GAP: Final = re.compile(r"(?<!,) ")
_REQUEST: Final = re.compile(r"(\S+) (\S+)(?: (\S+))?")


def status_level(code: int | None) -> str:
    """An access's level from its HTTP status: 5xx ERROR, 4xx WARN, else INFO ('' without)."""
    if code is None:
        return ""
    return "ERROR" if code >= 500 else "WARN" if code >= 400 else "INFO"


def access_head(zone: tzinfo, now_ms: int) -> Head:
    """The head of an access log line (common, combined, what a custom format adds)."""

    def head(text: str) -> Pending | None:
        found = _ACCESS.match(text)
        if found is None:
            return _squid(text) or alb_head(text, status_level) or s3_head(text, status_level)

        def when() -> int | None:
            return matched_ms(found, zone, now_ms)

        def build(epoch: int) -> Entry:
            request, status, size = found.group("request", "status", "bytes")
            client = found.group("client")
            if client.startswith('"'):  # `"a, b" c`: one chain, as Filebeat's remote_ip_list
                chain, _, last = client[1:].rpartition('" ')
                client = f"{chain}, {last}" if chain.strip() else last
            else:  # `a, b c` (`$http_x_forwarded_for $remote_addr`)
                client = _CHAIN_GAP.sub(", ", client)
            fields: dict[str, JsonScalar] = {"client": client}
            if vhost := found.group("vhost"):
                fields["vhost"] = vhost
            if found.group("user") != "-":
                fields["user"] = found.group("user")
            if found.group("ident") != "-":  # `%l`, RFC 1413's (before: dropped)
                fields["ident"] = found.group("ident")
            code = request_fields(request, status, fields)
            if size.isdigit() and len(size) < 19:
                fields["bytes"] = int(size)
            referer, agent = found.group("referer", "agent")
            if referer not in (None, "-"):
                fields["referer"] = referer
            if agent not in (None, "-"):
                fields["user_agent"] = agent
            extra = f"{found.group('between')}{found.group('after')}".strip()
            if extra and not read_ingress(extra, fields):  # the Ingress controller's: fields
                fields["extra"] = extra  # kept as written: searchable, never dropped
            return Entry(epoch, status_level(code), "", f"{request} {status} {size}", fields)

        return when, build

    return head


def _squid(text: str) -> Pending | None:
    """A line of Squid's native access log (`_SQUID`), or None."""
    found = _SQUID.match(text)
    if found is None:
        return None

    def build(epoch: int) -> Entry:
        method, uri, status, size = found.group("method", "uri", "status", "bytes")
        code = int(status) or None  # `000`: no reply (the client went away)
        fields: dict[str, JsonScalar] = {"client": found.group("client"), "method": method}
        fields["uri"] = uri
        if code is not None:
            fields["http_status"] = code
        fields["bytes"], fields["duration_ms"] = int(size), int(found.group("elapsed"))
        fields["cache_result"], fields["hierarchy"] = found.group("result", "hierarchy")
        named = ("user", "upstream", "content_type", "extra")
        values = (*found.group("user", "upstream", "type"), found.group("after").strip())
        fields |= {n: v for n, v in zip(named, values, strict=True) if v and v != "-"}
        return Entry(epoch, status_level(code), "", f"{method} {uri} {status} {size}", fields)

    epoch = int(found.group("seconds")) * 1000 + int(found.group("millis"))
    return (lambda: epoch), build


# Envoy's default format string (its documentation, "Default Format String"):
#   [%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%"
#   %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION%
#   %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%"
#   "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"
# Istio's default adds %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS%
# "%UPSTREAM_TRANSPORT_FAILURE_REASON%" after the flags, and %UPSTREAM_CLUSTER%
# %UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS%
# %REQUESTED_SERVER_NAME% %ROUTE_NAME% after the host. Envoy writes a header as it came
# (a quote in it unescaped): such a line is not in the format, matched as text.
# a quoted value, possessive: its end cannot be found by giving back (a quote never closed
# held a backtracking state per character, 20k of them 5x the time of 10k)
_IN_QUOTES: Final = r'(?:[^"\\]++|\\.)*+'
_ENVOY: Final = re.compile(
    r"\[" + STAMP + r'\] "(?P<request>' + _IN_QUOTES + r')" (?P<status>\d{1,3}) '
    r'(?P<flags>[A-Z,]+|-)(?: (?P<details>[^\s"]+) (?P<termination>[^\s"]+) '
    r'"(?P<failure>' + _IN_QUOTES + ')")?'
    r" (?P<received>\d+|-) (?P<sent>\d+|-) (?P<duration>\d+|-) (?P<upstream_time>\d+|-)"
    + "".join(f' "(?P<q{n}>{_IN_QUOTES})"' for n in range(5))
    + r"(?P<after>(?: [^\s\"]+){0,16}) *\n?",
    re.S,
)
_ENVOY_NUMBERS: Final = (
    ("bytes_received", "received"), ("bytes", "sent"), ("duration_ms", "duration"),
    ("upstream_time_ms", "upstream_time"),
)  # fmt: skip
_ENVOY_QUOTED: Final = ("client", "user_agent", "request_id", "authority", "upstream_host")
_ISTIO_AFTER: Final = (
    "upstream_cluster", "upstream_local", "downstream_local", "downstream_remote",
    "server_name", "route_name",
)  # fmt: skip
ENVOY_FIELDS: Final = (
    "method", "uri", "protocol", "http_status", "response_flags", "response_code_details",
    "termination_details", "upstream_failure_reason", "bytes_received", "bytes",
    "duration_ms", "upstream_time_ms", *_ENVOY_QUOTED, *_ISTIO_AFTER, "extra",
)  # fmt: skip
# Response flags of a failure to reach or hear from the upstream (no healthy host, a
# connection failure or reset, an overflow, no route or cluster, a timeout, retries spent, a
# DNS failure): a line without an HTTP status and one of them is an ERROR, any other flag WARN.
_UPSTREAM_FAILED: Final = frozenset(
    {"UH", "UF", "UO", "NR", "NC", "URX", "UT", "UC", "UR", "LR", "UMSDR", "DF", "OM"}
)


# ... of them, those that also fail a response already started (a status sent downstream,
# then the upstream's connection terminated or its stream reset: `200 UC`, a body cut short);
# no route or cluster is the proxy's own answer, whose status says what it is (a 404)
_FAILED_MIDWAY: Final = _UPSTREAM_FAILED - {"NR", "NC"}


def _envoy_level(code: int, flags: str) -> str:
    if code >= 100:
        level = status_level(code)
        if level != "ERROR" and flags != "-" and _FAILED_MIDWAY.intersection(flags.split(",")):
            return "ERROR"
        return level
    if flags == "-":
        return "INFO"
    return "ERROR" if _UPSTREAM_FAILED.intersection(flags.split(",")) else "WARN"


def envoy_head(zone: tzinfo, now_ms: int) -> Head:
    """The head of a line of Envoy's default access log (Istio's too)."""

    def head(text: str) -> Pending | None:
        found = _ENVOY.fullmatch(text)
        if found is None:
            return None

        def when() -> int | None:
            return matched_ms(found, zone, now_ms)

        return when, partial(_envoy_entry, found)

    return head


def envoy_entry(text: str, epoch: int) -> Entry | None:
    """A line of Envoy's access log as a record dated `epoch` (a container runtime's line:
    the time it was written), or None."""
    found = _ENVOY.fullmatch(text)
    return None if found is None else _envoy_entry(found, epoch)


def _envoy_entry(found: re.Match[str], epoch: int) -> Entry:
    request, status, flags = found.group("request", "status", "flags")
    fields: dict[str, JsonScalar] = {}
    if (parts := _REQUEST.fullmatch(request)) and parts.group(1) != "-":
        fields["method"], fields["uri"] = parts.group(1), parts.group(2)
        if parts.group(3) and parts.group(3) != "-":
            fields["protocol"] = parts.group(3)
    code = int(status)
    fields["http_status"] = code
    message = [request, status]
    if flags != "-":
        fields["response_flags"] = flags
        message.append(flags)
    details = found.group("details")
    if details is not None:  # Istio's
        if details != "-":
            fields["response_code_details"] = details
            message.append(details)
        if found.group("termination") != "-":
            fields["termination_details"] = found.group("termination")
        if found.group("failure") not in ("", "-"):
            fields["upstream_failure_reason"] = found.group("failure")
    for name, group in _ENVOY_NUMBERS:
        value = found.group(group)
        if value.isdigit() and len(value) < 19:
            fields[name] = int(value)
    quoted = found.group("q0", "q1", "q2", "q3", "q4")
    fields.update((n, v) for n, v in zip(_ENVOY_QUOTED, quoted, strict=True) if v != "-")
    after = found.group("after").split()
    if details is not None and len(after) == len(_ISTIO_AFTER):
        fields.update((n, v) for n, v in zip(_ISTIO_AFTER, after, strict=True) if v != "-")
    elif after:
        fields["extra"] = " ".join(after)  # kept as written: searchable
    return Entry(epoch, _envoy_level(code, flags), "", " ".join(message), fields)


# Istio's JSON access log (`accessLogEncoding: JSON`): its default keys, under the names the
# text layout's fields have (the others as they are)
_ENVOY_JSON_NAMES: Final = {
    "path": "uri", "response_code": "http_status", "bytes_sent": "bytes",
    "duration": "duration_ms", "upstream_service_time": "upstream_time_ms",
    "x_forwarded_for": "client", "connection_termination_details": "termination_details",
    "upstream_transport_failure_reason": "upstream_failure_reason",
    "upstream_local_address": "upstream_local", "downstream_local_address": "downstream_local",
    "downstream_remote_address": "downstream_remote", "requested_server_name": "server_name",
}  # fmt: skip


def read_envoy_json(flat: dict[str, Any]) -> None:
    """Rewrite a flattened line of Istio's JSON access log in place into the keys jsonl reads
    (`timestamp`, `level`, `message`) and the fields the `envoy` format gives; any other
    record is left as it is."""
    code = flat.get("response_code")
    if isinstance(code, str) and code.isdigit() and len(code) <= 3:
        code = flat["response_code"] = int(code)  # a format of strings (`"%RESPONSE_CODE%"`)
    if (
        not isinstance(code, int) or isinstance(code, bool) or "start_time" not in flat
        or "timestamp" in flat or ("response_flags" not in flat and "path" not in flat)
    ):  # fmt: skip
        return
    flat["timestamp"] = flat.pop("start_time")
    for key in [k for k, v in flat.items() if v is None or v == "-"]:
        del flat[key]  # Envoy's `-`, JSON's null: no value
    for theirs, ours in _ENVOY_JSON_NAMES.items():
        if theirs in flat:
            flat[ours] = flat.pop(theirs)
    for name in ("duration_ms", "upstream_time_ms", "bytes", "bytes_received"):
        value = flat.get(name)
        if isinstance(value, str) and value.isdigit() and len(value) < 19:
            flat[name] = int(value)  # as a string: the upstream's time, or every value
    flags = flat.get("response_flags", "-")
    flags = flags if isinstance(flags, str) else str(flags)
    request = " ".join(str(flat.get(k, "-")) for k in ("method", "uri", "protocol"))
    words = [request, str(code), flags, flat.get("response_code_details", "-")]
    flat.setdefault("level", _envoy_level(code, flags))
    flat.setdefault("message", " ".join(str(w) for w in words if w != "-"))


# Caddy's JSON access log (`log` in a site block): `{"logger":"http.log.access.log0","msg":
# "handled request","request":{"remote_ip":...,"method":...,"uri":...},"status":502,...}`;
# its level is already the status's (5xx error, 4xx warn)
_CADDY_NAMES: Final = {
    "request.method": "method", "request.uri": "uri", "request.proto": "protocol",
    "request.remote_ip": "client", "status": "http_status", "size": "bytes",
}  # fmt: skip


def read_caddy_access(flat: dict[str, Any]) -> None:
    """Rename, in place, a flattened line of Caddy's access log into the access fields
    (`http_status`, `uri`, `method`, `protocol`, `client`, `bytes`); values as written, so
    the prefilter finds them in the line. Any other record is left as it is."""
    logger, status = flat.get("logger"), flat.get("status")
    if (
        not isinstance(logger, str) or not logger.startswith("http.log.access")
        or not isinstance(status, int) or isinstance(status, bool) or "request.uri" not in flat
    ):  # fmt: skip
        return
    for theirs, ours in _CADDY_NAMES.items():
        if theirs in flat and ours not in flat:
            flat[ours] = flat.pop(theirs)


# Traefik's JSON access log (`accessLog.format: json`): `{"DownstreamStatus":502,
# "RequestMethod":"POST","RequestPath":"/api/charge",...,"level":"info","msg":"","time":...}`;
# Traefik writes every access line at `info`: its level is the status's
_TRAEFIK_NAMES: Final = {
    "RequestMethod": "method", "RequestPath": "uri", "RequestProtocol": "protocol",
    "DownstreamStatus": "http_status", "ClientHost": "client", "DownstreamContentSize": "bytes",
    "RequestContentSize": "bytes_received", "RequestHost": "authority",
    "RouterName": "route_name", "ServiceURL": "upstream_host", "ServiceName": "service",
}  # fmt: skip


def read_traefik_access(flat: dict[str, Any]) -> None:
    """Rename, in place, a flattened line of Traefik's JSON access log into the access fields,
    its level the status's, its message the request line and status, `Duration` and
    `OriginDuration` (nanoseconds) `duration_ms` and `upstream_time_ms`. Any other record is
    left as it is."""
    status = flat.get("DownstreamStatus")
    if not isinstance(status, int) or isinstance(status, bool) or "RequestMethod" not in flat:
        return
    for theirs, ours in _TRAEFIK_NAMES.items():
        if theirs in flat and ours not in flat:
            flat[ours] = flat.pop(theirs)
    for theirs, ours in (("Duration", "duration_ms"), ("OriginDuration", "upstream_time_ms")):
        if isinstance(nanos := flat.get(theirs), int) and ours not in flat:
            flat[ours] = round(nanos / 1e6, 3)
            del flat[theirs]
    flat["level"] = status_level(status)
    if not flat.get("msg") and not flat.get("message"):
        flat.pop("msg", None)
        words = (flat.get(k) for k in ("method", "uri", "protocol"))
        flat["message"] = " ".join([*(str(w) for w in words if w), str(status)])
