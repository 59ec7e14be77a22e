"""Text log formats: each line a record's head or a continuation of the record before it.

Named formats (docs/logs.md has an example line of each):
- `log4j`: Java's log4j / log4j2 / logback / Spring Boot layouts: a leading time (`stamps`),
  a level word, then the thread (`[main]`) and logger before ` - ` or `: `; multi-line stack
  traces are joined to their record (`exception` = the first exception class named); other
  text before the level kept in `prefix`;
- `apache_error`, `nginx_error`: the servers' error logs (2.2 and 2.4 for Apache);
- `apache_access` = `nginx_access`: the common and combined access log formats (`accesslog`);
  level from the status (5xx ERROR, 4xx WARN, else INFO);
- `envoy`: Envoy's default access log, Istio's too (`accesslog`): the response flags a field,
  level from the status (without one, from the flags);
- `klog`: Kubernetes components (`I0515 10:15:30.123456   12345 file.go:123] msg`);
- `oslo`: OpenStack's oslo.log default format;
- `postgresql`, `redis`: the database servers' own logs (`dbformats`);
- `w3c`: the W3C extended log format of IIS and CloudFront (`w3c`, a row a line);
- `postgresql_csv`: PostgreSQL's csvlog (`csvlog`, a CSV row over one or more lines);
- `plain`: any text whose lines start with a time (every `stamps` shape), an optional level
  (java.util.logging's two-line default too: `multiline`);
- `regex`: the operator's Python regex with named groups `time`, `level`, `message`,
  `service`; every other named group is a field; `time_format` a strptime format.

Records span lines (`multiline.HeadParser`): an indented line, `Caused by:`, `... 3 more`, a
`Traceback` or an exception class continues the record before it; any other line that is no
head is counted (the FILE source still matches it as text: nothing is dropped silently).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import tzinfo
from typing import Final

from contracts.results import JsonScalar
from workers.sources.logs.accesslog import ENVOY_FIELDS, access_head, envoy_head
from workers.sources.logs.awslogs import ALB_FIELDS, S3_FIELDS
from workers.sources.logs.awstail import TAIL_FIELDS, tail_head
from workers.sources.logs.daemonlogs import daemon_head
from workers.sources.logs.dbformats import postgresql_head, redis_head
from workers.sources.logs.formats import LineParser, parse_time, text_entry
from workers.sources.logs.ingress import INGRESS_FIELDS
from workers.sources.logs.jvmlogs import JVM_FIELDS, jvm_head
from workers.sources.logs.lambdalogs import LAMBDA_FIELDS, lambda_head
from workers.sources.logs.log4j import LEVEL_WORD, Head, log4j_head
from workers.sources.logs.multiline import Continued, HeadParser, Pending
from workers.sources.logs.records import Entry
from workers.sources.logs.stamps import STAMP, matched_ms, stamp_ms, strptime_ms

__all__ = ["TEXT_FORMAT_FIELDS", "HeadParser", "make_text_parser"]

# Fields each text format adds (so a query may name them).
TEXT_FORMAT_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "log4j": ("thread", "logger", "exception", "pid", "prefix"),
    "apache_error": ("module", "pid", "thread", "client", "exception"),
    "nginx_error": ("pid", "thread", "connection", "client", "exception"),
    "apache_access": ("client", "user", "method", "uri", "protocol", "http_status", "bytes",
                      "referer", "user_agent", "extra", "vhost", "ident",
                      # Squid's native format
                      "duration_ms", "cache_result", "hierarchy", "upstream", "content_type",
                      *ALB_FIELDS, *S3_FIELDS,  # AWS load balancers', S3's
                      *INGRESS_FIELDS),  # the Kubernetes NGINX Ingress controller's
    "klog": ("pid", "source", "exception"),
    "oslo": ("pid", "logger", "request_id", "context", "exception"),
    "postgresql": ("pid", "user", "database", "duration_ms", "sql_state", "application_name",
                   "connection_from", "session_line_num", "prefix"),
    "redis": ("pid", "role"),
    "plain": ("pid", "process", "logger", "exception", "source", "thread", "message_id",
              "job_id", "request_id", *JVM_FIELDS, *LAMBDA_FIELDS,
              *TAIL_FIELDS),
    "regex": ("exception",),
}  # fmt: skip
TEXT_FORMAT_FIELDS["nginx_access"] = TEXT_FORMAT_FIELDS["apache_access"]
TEXT_FORMAT_FIELDS["envoy"] = ENVOY_FIELDS

_PLAIN: Final = re.compile(  # MariaDB: `2024-01-15 10:15:30 0 [Note] ...` (a thread id first)
    r"(?:\[(?P<pid>\d{1,10})\] )?"  # nats-server: `[2986] 2026/12/04 19:33:23.069006 [INF] ...`
    # then a thread id (MariaDB) or `[pid]` (gunicorn), the level, its process (Celery's
    # `[2026-12-04 20:15:28,123: INFO/MainProcess]`)
    # `time:LEVEL:` too (Python's `%(asctime)s:%(levelname)s:...`): the colon is the space
    r"\[?"
    + STAMP
    + r"\]?:?(?:(?:\s+|(?<=\d:)(?=[A-Za-z]+:))(?:(?P<thread>\d+)\s+|\[(?P<pid_after>\d{1,10})\]\s+"
    r"|-\s+(?P<logger>[\w.$-]{1,120})\s+-\s+"  # Python's `%(asctime)s - %(name)s - `
    r"|(?P<channel>[\w-]{1,60})\.(?=[A-Z]+: ))?[\[<(]?"  # Monolog's `%channel%.%level_name%: `
    r"(?P<level>"
    + LEVEL_WORD
    + r"|(?<=\[)System(?=\]))\b(?:/(?P<process>[\w.:-]{1,80}))?[\]>)]?:?(?:\s+-(?=\s))?"
    # RabbitMQ 3.9+: the Erlang process after the level, `[error] <0.705.0> `
    r"(?: <(?P<erlang>\d{1,10}\.\d{1,10}\.\d{1,10})>(?: |$))?)?"
    r"\s*(?P<message>.*)",
    re.S,
)
# HashiCorp's agents (Nomad; Consul before 1.7) indent each line of their output by four spaces:
# `    2026-12-04T11:50:02.000Z [WARN]  client.driver_mgr: ...` (`2026/12/04 11:50:02 [WARN] ...`)
_INDENTED_HCLOG: Final = re.compile(
    r"    \d{4}([-/])\d\d\1\d\d[T ]\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)? "
    r"\[(?:TRACE|DEBUG|INFO|WARN|ERROR|ERR) ?\]"
)
# MongoDB before 4.4: `<time> <severity> <COMPONENT> [<context>] <message>` (`D1`-`D5` debug)
_MONGODB: Final = re.compile(
    STAMP + r" (?P<level>[FEWI]|D[1-5]?) (?P<component>[A-Z][A-Z_]*|-) +"
    r"\[(?P<context>[^\]\n]{1,200})\] (?P<message>.*)",
    re.S,
)
_APACHE_ERROR: Final = re.compile(
    r"\[" + STAMP + r"\] \[(?:(?P<module>[^:\]\s]+):)?(?P<level>\w+)\]"
    r"(?: \[pid (?P<pid>\d+)(?::tid (?P<thread>\d+))?\])?"
    r"(?: \[client (?P<client>[^\]]+)\])? ?(?P<message>.*)",
    re.S,
)
_NGINX_ERROR: Final = re.compile(
    STAMP + r" \[(?P<level>\w+)\] (?P<pid>\d+)#(?P<thread>\d+): "
    r"(?:\*(?P<connection>\d+) )?(?P<message>.*)",
    re.S,
)
_NGINX_CLIENT: Final = re.compile(r", client: ([^,\s]+)")
_KLOG: Final = re.compile(
    r"(?P<level>[IWEF])(?P<mmdd>\d\d\d\d) (?P<clock>\d\d:\d\d:\d\d\.\d{1,9})\s+(?P<pid>\d+) "
    r"(?P<source>[^ \]]+)\] ?(?P<message>.*)",
    re.S,
)
_OSLO: Final = re.compile(  # after a file name when files were concatenated (`grep -H`, loghub)
    r"(?:\S+\.log\S* )?(?P<iso>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) (?P<pid>\d+) "
    r"(?P<level>[A-Z]+) (?P<logger>\S+)"
    r"(?: \[(?P<context>[^\]]*)\])? ?(?P<message>.*)",
    re.S,
)


def _mongodb(found: re.Match[str], zone: tzinfo, now_ms: int) -> Pending:
    def build(epoch: int) -> Entry:
        raw = found.group("level")
        fields: dict[str, JsonScalar] = {"level_name": raw, "thread": found.group("context")}
        if found.group("component") != "-":
            fields["logger"] = found.group("component")
        return text_entry(epoch, raw[0], found.group("message"), fields)

    return lambda: matched_ms(found, zone, now_ms), build


# An epoch-seconds stamp after a record stamped another way is a time only from this much
# before that record's to this much after now: `1234567890: o-1042` amid ISO lines is an id
# and a colon, not 2009-02-13; a broker's epoch lines days after a wrapper's ISO banner are
# records (a log goes forward). (After an epoch-stamped record, or first in its file, it is a
# time: a quiet broker's lines may lie days apart, and the file's mtime says nothing of its
# first line.)
_EPOCH_NEAR_MS: Final = 86_400_000
_MICROSECONDS: Final = re.compile(r":\d\d[.,]\d{6}")  # a stamp's seconds to the microsecond


def _plain(zone: tzinfo, now_ms: int, time_format: str) -> Head:
    last: list[Pending | None] = [None]  # the latest head, unless its stamp was epoch seconds
    # RabbitMQ writes each line of one event (its banner, an error report) with the event's
    # stamp, level and Erlang pid: a line whose prefix up to its pid is the one before's
    # continues that record, its indentation kept. Only a stamp to the microsecond (3.9+):
    # 3.8 stamps to the millisecond, an event a line, and a process that logs a burst of
    # errors in one millisecond wrote that many records (they were joined into one).
    event: list[str] = [""]
    daemon = daemon_head(zone, now_ms)  # Ruby's Logger, PHP, PHP-FPM, BIND, CUPS

    def head(text: str) -> Pending | Continued | None:
        if text.startswith("    ") and _INDENTED_HCLOG.match(text):
            text = text[4:]  # Nomad's and Consul's agent: every line indented, no continuation
        if (tailed := tail_head(text, zone, now_ms)) is not None:  # `aws logs tail`'s
            last[0] = tailed
            return tailed
        if (known := daemon(text)) is not None:
            last[0] = known if not isinstance(known, Continued) else last[0]
            return known
        if mongodb := _MONGODB.match(text):
            last[0] = _mongodb(mongodb, zone, now_ms)
            return last[0]
        if jvm := jvm_head(text, zone, now_ms) or lambda_head(text, zone, now_ms):
            last[0] = jvm  # the JVM's -Xlog (its GC log), AWS Lambda's runtimes
            return jvm
        found = _PLAIN.match(text)
        if found is None:
            return None
        epoch = found.group("epoch")
        if epoch is not None and last[0] is not None:
            before, at = last[0][0](), int(epoch[:10]) * 1000
            if before is not None and not before - _EPOCH_NEAR_MS <= at <= now_ms + _EPOCH_NEAR_MS:
                return None  # a number that starts the line: no head

        def when() -> int | None:
            return matched_ms(found, zone, now_ms)

        def build(epoch: int) -> Entry:
            fields: dict[str, JsonScalar] = {}
            if pid := found.group("pid") or found.group("pid_after") or found.group("erlang"):
                fields["pid"] = pid
            if thread := found.group("thread"):  # MariaDB's thread id (before: dropped)
                fields["thread"] = thread
            if process := found.group("process"):
                fields["process"] = process.rstrip(":")  # Icinga's `warning/Facility: `
            if logger := found.group("logger") or found.group("channel"):
                fields["logger"] = logger
            return text_entry(epoch, found.group("level"), found.group("message"), fields)

        last[0] = None if epoch is not None else (when, build)
        if found.group("erlang") is None:
            event[0] = ""
            return when, build
        prefix, event[0] = event[0], text[: found.end("erlang") + 1]
        if prefix == event[0] and _MICROSECONDS.search(text, 0, found.start("level")):
            return Continued(text[len(prefix) + 1 :], (when, build))
        return when, build

    if not time_format:
        return head
    return _regex(r"(?P<time>\S+(?: \S+)?) ?(?P<message>.*)", time_format, zone, now_ms)


def _apache_error(zone: tzinfo, now_ms: int) -> Head:
    def head(text: str) -> Pending | None:
        found = _APACHE_ERROR.match(text)
        if found is None:
            return None

        def when() -> int | None:
            return matched_ms(found, zone, now_ms)

        def build(epoch: int) -> Entry:
            fields: dict[str, JsonScalar] = {  # `[pid 31677:tid 31712]`: the tid was dropped
                k: v
                for k in ("module", "pid", "thread", "client")
                if (v := found.group(k)) is not None
            }
            return text_entry(epoch, found.group("level"), found.group("message"), fields)

        return when, build

    return head


def _nginx_error(zone: tzinfo, now_ms: int) -> Head:
    def head(text: str) -> Pending | Continued | None:
        found = _NGINX_ERROR.match(text)
        if found is None:  # nginx stamps every entry: what a backend sent goes on unstamped
            return Continued(text, None)

        def when() -> int | None:
            return matched_ms(found, zone, now_ms)

        def build(epoch: int) -> Entry:
            message = found.group("message")
            fields: dict[str, JsonScalar] = {"pid": found.group("pid")}
            fields["thread"] = found.group("thread")  # `pid#tid` (before: the tid dropped)
            if found.group("connection"):
                fields["connection"] = found.group("connection")
            if client := _NGINX_CLIENT.search(message):
                fields["client"] = client.group(1)
            return text_entry(epoch, found.group("level"), message, fields)

        return when, build

    return head


def _klog(zone: tzinfo, now_ms: int) -> Head:
    def head(text: str) -> Pending | None:
        found = _KLOG.match(text)
        if found is None:
            return None
        mmdd = found.group("mmdd")

        def when() -> int | None:
            return strptime_ms(
                f"{mmdd[:2]}-{mmdd[2:]} {found.group('clock')[:15]}",
                "%m-%d %H:%M:%S.%f",
                zone,
                now_ms,
            )

        def build(epoch: int) -> Entry:
            fields: dict[str, JsonScalar] = {
                "pid": found.group("pid"),
                "source": found.group("source"),
            }
            return text_entry(epoch, found.group("level"), found.group("message"), fields)

        return when, build

    return head


def _oslo(zone: tzinfo, now_ms: int) -> Head:
    def head(text: str) -> Pending | None:
        found = _OSLO.match(text)
        if found is None:
            return None

        def when() -> int | None:
            return stamp_ms("iso", found.group("iso"), zone, now_ms)

        def build(epoch: int) -> Entry:
            fields: dict[str, JsonScalar] = {
                "pid": found.group("pid"),
                "logger": found.group("logger"),
            }
            context = found.group("context") or ""
            for token in context.split()[:2]:  # [global_id request_id user project ...]
                if token.startswith("req-"):
                    fields["request_id"] = token
                    break
            if context.strip("- "):  # as written: the user and project ids were dropped
                fields["context"] = context
            return text_entry(epoch, found.group("level"), found.group("message"), fields)

        return when, build

    return head


def _regex(pattern: str, time_format: str, zone: tzinfo, now_ms: int) -> Head:
    compiled = re.compile(pattern)
    own = ("time", "level", "message", "service")
    others = [n for n in compiled.groupindex if n not in own]

    def head(text: str) -> Pending | None:
        found = compiled.search(text)
        if found is None or found.group("time") is None:
            return None
        stamp = found.group("time")

        def when() -> int | None:
            return (
                strptime_ms(stamp, time_format, zone, now_ms)
                if time_format
                else parse_time(stamp, zone)
            )

        def build(epoch: int) -> Entry:
            groups = found.groupdict()
            level, message, service = (
                groups.get("level"),
                groups.get("message"),
                groups.get("service"),
            )
            fields: dict[str, JsonScalar] = {n: groups[n] for n in others if groups[n] is not None}
            found_entry = text_entry(epoch, level, message if message is not None else text, fields)
            found_entry.service = service or ""
            return found_entry

        return when, build

    return head


def make_text_parser(
    fmt: str, zone: tzinfo, service: str, now_ms: int, pattern: str = "", time_format: str = "",
    fields: Mapping[str, str] | None = None,
) -> LineParser:  # fmt: skip
    """A fresh parser of one file in a text format (`TEXT_FORMAT_FIELDS` names them; `w3c` and
    `postgresql_csv` are read a row at a time, by a module of their own)."""
    if fmt == "w3c":
        from workers.sources.logs.w3c import W3c

        return W3c(fields or {}, service, now_ms)
    if fmt == "postgresql_csv":
        from workers.sources.logs.csvlog import CsvLog

        return CsvLog(zone, service, now_ms)
    heads: dict[str, Callable[[], Head]] = {
        "log4j": lambda: log4j_head(zone, now_ms),
        "apache_error": lambda: _apache_error(zone, now_ms),
        "nginx_error": lambda: _nginx_error(zone, now_ms),
        "apache_access": lambda: access_head(zone, now_ms),
        "nginx_access": lambda: access_head(zone, now_ms),
        "envoy": lambda: envoy_head(zone, now_ms),
        "klog": lambda: _klog(zone, now_ms),
        "oslo": lambda: _oslo(zone, now_ms),
        "postgresql": lambda: postgresql_head(zone, now_ms),
        "redis": lambda: redis_head(zone, now_ms),
        "plain": lambda: _plain(zone, now_ms, time_format),
        "regex": lambda: _regex(pattern, time_format, zone, now_ms),
    }
    parser = HeadParser(heads[fmt](), service)
    if fmt == "nginx_error":
        parser.joined = _nginx_client
    return parser


def _nginx_client(entry: Entry) -> None:
    """The client an nginx error entry names on a line after its first (a FastCGI backend's
    stderr before it): nginx's own `, client: ` is the last one."""
    if "client" not in entry.fields and (clients := _NGINX_CLIENT.findall(entry.message)):
        entry.fields["client"] = clients[-1]
