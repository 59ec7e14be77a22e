"""HAProxy's own lines inside syslog (`syslogformat`): its HTTP and TCP logs and its server
states, read as HAProxy writes them (docs/logs.md, "syslog").

HAProxy logs every request at one syslog severity (`info` by default), and rsyslog's file
layout drops the PRI that carries even that: a file of 503s and a backend gone had no level.
A traffic line's level comes from its HTTP status (the access formats' rule: 5xx ERROR, 4xx
WARN) or, without one (`option tcplog`, a client gone: `-1`), from the first letter of its
termination state, which says who ended the session and why (`S`/`s` the server, a refusal or
its timeout; `C`/`c` the client; `P`, `R`, `I`, `D` HAProxy itself); a session the server
ended is an ERROR whatever its status (`SD--`, `sD--` after a 200: the server died or stopped
sending mid-body, the client got it cut short). A server's state lines get the severity
HAProxy sends them at: `Server be/srv is DOWN` alert, `backend be has no server available!`
emerg, `Server be/srv is UP` notice (then mapped as a PRI's severity). The message stays as
written; fields: `client`, `frontend`, `backend`, `server`, `http_status`,
`bytes`, `duration_ms` (Ta, or Tt for TCP), `upstream_time_ms` (Tr), `termination_state`,
`retries`, and from the request line `method`, `uri`, `protocol`.
"""

from __future__ import annotations

import re
from typing import Final

from contracts.results import JsonScalar
from workers.sources.logs.accesslog import status_level
from workers.sources.logs.levels import SYSLOG_NAMES, keep_level_name
from workers.sources.logs.records import Entry

__all__ = ["HAPROXY_FIELDS", "read_haproxy"]

HAPROXY_FIELDS: Final = (
    "client", "frontend", "backend", "server", "http_status", "bytes", "duration_ms",
    "upstream_time_ms", "termination_state", "retries", "method", "uri", "protocol",
)  # fmt: skip

_SESSION: Final = (
    r"(?P<client>\S+):\d+ \[[^\]\s]+\] (?P<frontend>[^\s~]+)~? "  # IPv6: its last colon
    r"(?P<backend>[^\s/]+)/(?P<server>\S+) "
)
_COUNTERS: Final = r" \d+/\d+/\d+/\d+/\+?(?P<retries>\d+) \d+/\d+"
# `option httplog`: TR/Tw/Tc/Tr/Ta (Tq first in 1.x), status, bytes, the cookies, the
# termination state (4 letters), the counters, captured headers, the request (cut at its
# length limit: no closing quote)
_HTTP: Final = re.compile(
    _SESSION + r"-?\d+/-?\d+/-?\d+/(?P<tr>-?\d+)/\+?(?P<total>\d+) (?P<status>-1|\d{3}) "
    r"\+?(?P<bytes>\d+) \S+ \S+ (?P<state>\S{4})"
    + _COUNTERS
    + r'(?: \{[^}]*\}){0,2} "(?P<request>[^"]*)"?'
)
# `option tcplog`: Tw/Tc/Tt, bytes, the termination state (2 letters), the counters
_TCP: Final = re.compile(
    _SESSION + r"-?\d+/-?\d+/\+?(?P<total>\d+) \+?(?P<bytes>\d+) (?P<state>\S{2})" + _COUNTERS
)
_REQUEST: Final = re.compile(r"(\S+) (\S+)(?: (\S+))?")
# who ended the session (the termination state's first letter): the server or HAProxy itself
# an ERROR, the client or an operator a WARN, HAProxy's own answer (`L`) or none INFO
_ENDED: Final = {"S": "ERROR", "s": "ERROR", "P": "ERROR", "R": "ERROR", "I": "ERROR",
                 "D": "ERROR", "C": "WARN", "c": "WARN", "K": "WARN", "U": "WARN"}  # fmt: skip
_LEVELS: Final = ("FATAL", "FATAL", "FATAL", "ERROR", "WARN", "INFO", "INFO", "DEBUG")
# server states, with the syslog severity HAProxy sends each at
_STATES: Final = (
    (re.compile(r"(?:Backup )?Server \S+ is DOWN\b"), 1),  # alert
    (re.compile(r"(?:backend|proxy) \S+ has no server available!"), 0),  # emerg
    (re.compile(r"(?:Backup )?Server \S+ is UP\b"), 5),  # notice
)


def read_haproxy(entry: Entry) -> None:
    """Give a record of program `haproxy` its fields and level, when its message is one of
    HAProxy's traffic or server-state lines (anything else is left as it is)."""
    message = entry.message
    found = _HTTP.match(message) or _TCP.match(message)
    if found is None:
        if not entry.level:
            for pattern, severity in _STATES:
                if pattern.match(message):
                    entry.level = _LEVELS[severity]
                    keep_level_name(entry.fields, SYSLOG_NAMES[severity], entry.level)
                    break
        return
    fields: dict[str, JsonScalar] = {
        "client": found.group("client"), "frontend": found.group("frontend"),
        "backend": found.group("backend"), "server": found.group("server"),
    }  # fmt: skip
    groups = found.groupdict()
    status = int(groups["status"]) if groups.get("status") else None
    if status is not None:
        fields["http_status"] = status
    fields["bytes"] = _number(found.group("bytes"))
    fields["duration_ms"] = _number(found.group("total"))
    if (took := groups.get("tr")) is not None and not took.startswith("-"):
        fields["upstream_time_ms"] = _number(took)
    state = found.group("state")
    fields["termination_state"] = state
    fields["retries"] = _number(found.group("retries"))
    request = groups.get("request")
    if request and (parts := _REQUEST.fullmatch(request)):
        fields["method"], fields["uri"] = parts.group(1), parts.group(2)
        if parts.group(3):
            fields["protocol"] = parts.group(3)
    entry.fields.update(fields)
    level = status_level(status) if status is not None and status >= 100 else ""
    ended = _ENDED.get(state[0], "INFO")
    if not level or (state[0] in "Ss" and _rank(ended) > _rank(level)):  # a body cut short
        level = ended
    if _rank(level) > _rank(entry.level):  # a PRI's `info` (every request's) says less
        entry.level = level


def _number(text: str) -> int:
    return int(text[:18])  # at most 18 digits: HAProxy's counters, never a hostile 10^5000


_RANKS: Final = {"TRACE": 1, "DEBUG": 1, "INFO": 2, "WARN": 3, "ERROR": 4, "FATAL": 5}


def _rank(level: str) -> int:
    return _RANKS.get(level, 0)
