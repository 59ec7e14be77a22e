"""Log line formats → `Entry`: JSON lines and logfmt here; CRI, syslog and text elsewhere.

Each format is a parser fed one decoded line at a time (`feed` returns the entries the line
completes; `flush` the last one). A line that does not parse is counted, never guessed into a
record. Times: ISO 8601 / RFC 3339 with any fraction, epoch numbers (unit by magnitude, or
the topic's `time_unit`), syslog's yearless dates; a time without a zone is read in the
topic's zone. Levels are normalised to TRACE, DEBUG, INFO, WARN, ERROR, FATAL (numeric
levels of bunyan/pino, OpenTelemetry `SeverityNumber`, logback `level_value`, syslog PRI).

JSON lines: the record's keys are flattened (`log.level`), the time, level, message and
service are taken from the topic's `fields` map or the first known key present (structlog
`timestamp`/`event`, logstash-logback `@timestamp`/`message`, zap `ts`/`msg`, bunyan and pino
`time`/`msg`/`name`, ECS `@timestamp`/`log.level`, OTel `Timestamp`/`SeverityText`/`Body`),
and the rest become fields with `.` written `_` (`http.status_code` → `http_status_code`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from datetime import datetime, tzinfo
from typing import Any, Final, Protocol, TypeGuard

import msgspec

from contracts.results import JsonScalar
from workers.sources.logs.accesslog import (
    read_caddy_access,
    read_envoy_json,
    read_traefik_access,
)
from workers.sources.logs.cloudflare import read_cloudflare
from workers.sources.logs.cloudlogging import is_cloud_logging, read_cloud_logging
from workers.sources.logs.kubeaudit import read_kube_audit
from workers.sources.logs.lambdajson import read_lambda_json
from workers.sources.logs.levels import (
    LEVEL_WORDS,
    SYSLOG_NAMES,
    canonical_level,
    implied_level,
    keep_level_name,
)
from workers.sources.logs.multiline import EXCEPTION
from workers.sources.logs.records import Entry, as_number
from workers.sources.logs.stamps import MAX_EPOCH_MS, MIN_EPOCH_MS

__all__ = [
    "LineParser", "field_name", "level_of", "logfmt_pairs", "make_parser", "parse_time",
]  # fmt: skip

# The last of each: journald's export (`journalctl -o json`): µs, syslog severity 0..7; and
# MongoDB's (4.4+) `{"t":{"$date":...},"s":"W",...}`, whose `s` is read only beside that `t`.
TIME_KEYS: Final = (
    "timestamp", "@timestamp", "time", "ts", "Timestamp", "t", "date", "__REALTIME_TIMESTAMP",
    "t.$date", "datetime", "instant.epochSecond", "@t",
)  # fmt: skip
LEVEL_KEYS: Final = (  # `@level`: HashiCorp's hclog JSON (Vault, Consul, Nomad)
    "level", "log.level", "severity", "SeverityText", "levelname", "lvl", "PRIORITY", "@l",
    "@level",
)  # fmt: skip
MESSAGE_KEYS: Final = (
    "message", "msg", "event", "Body", "@message", "log", "MESSAGE", "@m", "@mt",
)  # fmt: skip
# A record with any of them is an app's own, not Istio's JSON access log (which has none):
# read as Istio's, an app's request record lost its time, level and message to the request's.
_OWN_KEYS: Final = frozenset((*TIME_KEYS, *LEVEL_KEYS, *MESSAGE_KEYS))
# A record's exception under its producer's key: ECS's (its loggers', Elasticsearch 8's),
# pino's and bunyan's serialised `err`, python-json-logger's traceback
_EXCEPTION_KEYS: Final = ("error.type", "err.type", "err.name", "exc_info")
_ENVELOPE_KEYS: Final = frozenset((*TIME_KEYS, *LEVEL_KEYS))  # a LogEntry's, not its payload's
SERVICE_KEYS: Final = (
    "service", "service.name", "ServiceName", "app", "application", "name", "SYSLOG_IDENTIFIER",
    "_SYSTEMD_UNIT",
)  # fmt: skip
# Fields kept per record when parsing (a request body logged as an object has thousands): the
# rest are dropped and `fields_dropped` says how many.
MAX_FIELDS: Final = 64
_JOURNAL_ADDRESS: Final = ("__CURSOR", "__MONOTONIC_TIMESTAMP", "__SEQNUM", "__SEQNUM_ID")
_PRIORITIES: Final = ("0", "1", "2", "3", "4", "5", "6", "7")
_NEXTCLOUD: Final = ("DEBUG", "INFO", "WARN", "ERROR", "FATAL")  # nextcloud.log's 0..4
_FRACTION: Final = re.compile(r"(\.\d{1,6})\d*")
_DECODER: Final = msgspec.json.Decoder()


def level_of(value: object, key: str = "level") -> str:
    """A level word or number normalised (unknown words kept upper-cased)."""
    number = as_number(value) if not isinstance(value, str) else None
    if number is None:
        text = str(value).strip().upper()
        return LEVEL_WORDS.get(text) or canonical_level(text) or text
    n = int(number)
    if key == "SeverityNumber" or key.endswith("severity_number"):  # OpenTelemetry 1..24
        return ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")[min(max(n - 1, 0) // 4, 5)]
    if n >= 1000:  # logback level_value: 5000 TRACE .. 40000 ERROR
        return {5000: "TRACE", 10000: "DEBUG", 20000: "INFO", 30000: "WARN"}.get(n, "ERROR")
    if n >= 100:  # Monolog: 100 DEBUG, 200 INFO, 250 NOTICE, 300 WARNING, 400 ERROR, 500+
        return ("DEBUG", "INFO", "WARN", "ERROR", "FATAL")[min(n // 100 - 1, 4)]
    # bunyan / pino: 10 trace, 20 debug, 30 info, 40 warn, 50 error, 60 fatal
    return ("TRACE", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")[min(max(n // 10, 0), 6)]


def text_entry(
    epoch: int, raw_level: str | None, message: str, fields: dict[str, JsonScalar]
) -> Entry:
    """A text format's record: its level normalised, the word it was written with kept."""
    level = level_of(raw_level) if raw_level else ""
    if raw_level:
        keep_level_name(fields, raw_level, level)
    return Entry(epoch, level, "", message, fields)


def _epoch_ms(number: float, unit: str) -> int | None:
    if unit == "auto":
        size = abs(number)
        unit = "s" if size < 1e11 else "ms" if size < 1e14 else "us" if size < 1e17 else "ns"
    scale = {"s": 1000.0, "ms": 1.0, "us": 1e-3, "ns": 1e-6}[unit]
    ms = number * scale  # finite in, but 1e306 s is no finite ms
    return int(ms) if MIN_EPOCH_MS <= ms <= MAX_EPOCH_MS else None


def parse_time(value: object, zone: tzinfo, unit: str = "auto") -> int | None:
    """Epoch milliseconds of a record's time, or None when it is not a time (also a number
    outside the years 1..9999 in the unit given: `ts=1e306` is a bad line, not a crash)."""
    number = as_number(value)
    if number is not None:
        return _epoch_ms(number, unit)
    if not isinstance(value, str) or not 8 <= len(value) <= 64:
        return None
    text = _FRACTION.sub(r"\1", value.strip().replace(",", ".", 1), count=1)
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    try:
        ms = int(moment.timestamp() * 1000)
    except (OverflowError, ValueError, OSError):  # year 1 or 9999 moved out of range by a zone
        return None
    return ms if MIN_EPOCH_MS <= ms <= MAX_EPOCH_MS else None


class LineParser(Protocol):
    """Fed decoded lines; returns the entries each completes. `failed` counts bad lines."""

    failed: int

    def feed(self, line: str) -> list[Entry]: ...

    def flush(self) -> list[Entry]: ...


_MAX_DEPTH: Final = 16  # deeper objects stay one JSON text (no recursion on hostile nesting)


def _flatten(obj: Mapping[str, Any], prefix: str, out: dict[str, Any], depth: int = 0) -> None:
    for key, value in obj.items():
        if len(out) > 4 * MAX_FIELDS:  # the record's own keys first; thousands more not kept
            out["fields_dropped"] = out.get("fields_dropped", 0) + 1
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict) and depth < _MAX_DEPTH:
            _flatten(value, name + ".", out, depth + 1)
        elif key == "stacktrace" and isinstance(value, list) and _all_text(value):
            out[name] = "\n".join(value)  # Elasticsearch 7's stack, a line an item
        elif isinstance(value, list | dict):
            out[name] = msgspec.json.encode(value).decode()
        else:
            out[name] = value


def _all_text(items: list[Any]) -> TypeGuard[list[str]]:
    return all(isinstance(item, str) for item in items)


_NOT_NAME: Final = re.compile(r"[^A-Za-z0-9_]")


@functools.lru_cache(maxsize=4096)
def _cached_name(key: str) -> str:
    return _NOT_NAME.sub("_", key)


def field_name(key: str) -> str:
    """A record's key as a field name (`log.level` -> `log_level`)."""
    # Only short keys are cached: the cache outlives the call (hostile 1 MiB keys would not).
    return _cached_name(key) if len(key) <= 128 else _NOT_NAME.sub("_", key)


_BYTES: Final = msgspec.json.Decoder(list[int])


def _journal_text(value: str) -> str:
    """A journald field exported as an array of its bytes (`journalctl -o json` does so for a
    value holding an escape, a coloured line, or invalid UTF-8) as its text."""
    try:
        return bytes(_BYTES.decode(value)).decode("utf-8", "replace")
    except (msgspec.DecodeError, ValueError):  # another list, or a number past 255
        return value


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# A record's trace id under its producer's key, as a field name: OpenTelemetry's log record as
# JSON (`TraceId`; OTLP/JSON `traceId`), zap's and Jaeger's `traceID`, Serilog's CLEF `@tr`,
# Datadog's `dd.trace_id`: the field `trace_id` (as CLICKHOUSE reads the OTel `TraceId` column).
_TRACE_KEYS: Final = ("TraceId", "traceId", "traceID", "_tr", "dd_trace_id")


def _stack(flat: dict[str, Any]) -> str:
    """Elasticsearch 7's `stacktrace` (its lines), logstash-logback-encoder's `stack_trace`."""
    stack = flat.get("stacktrace", flat.get("stack_trace"))
    return stack if isinstance(stack, str) else ""


class _Mapped:
    """Shared by jsonl and logfmt: a flat key → value map to an entry."""

    def __init__(self, fields: Mapping[str, str], zone: tzinfo, service: str, unit: str) -> None:
        self.fields, self.zone, self.service, self.unit = dict(fields), zone, service, unit
        self.failed = 0
        # a container runtime's time for a record that has no time key (`cri`, `docker`)
        self.runtime_epoch: int | None = None

    def _pick(self, flat: dict[str, Any], ours: str, keys: tuple[str, ...]) -> tuple[str, Any]:
        mapped = self.fields.get(ours)
        candidates = (mapped,) if mapped else keys
        for key in candidates:
            if key in flat:
                return key, flat.pop(key)
        return "", None

    @staticmethod
    def _capped(flat: dict[str, Any], fields: dict[str, JsonScalar]) -> None:
        dropped = flat.pop("fields_dropped", 0)
        for key, value in flat.items():
            if len(fields) >= MAX_FIELDS:
                dropped += 1
                continue
            fields.setdefault(field_name(key), value)
        if dropped:
            fields["fields_dropped"] = dropped

    def entry(self, flat: dict[str, Any]) -> Entry | None:
        if "time" not in self.fields and "kind" in flat:
            read_kube_audit(flat)  # the Kubernetes audit log's Events
        elif "time" not in self.fields and "response_code" in flat and _OWN_KEYS.isdisjoint(flat):
            read_envoy_json(flat)  # Istio's JSON access log (an app's record keeps its own)
        elif "time" not in self.fields and "request.uri" in flat:
            read_caddy_access(flat)  # Caddy's JSON access log
        elif "time" not in self.fields and "DownstreamStatus" in flat:
            read_traefik_access(flat)  # Traefik's JSON access log
        elif "time" not in self.fields and "EdgeResponseStatus" in flat:
            read_cloudflare(flat)  # Cloudflare Logpush's HTTP requests
        elif "requestId" in flat or "record.requestId" in flat:
            read_lambda_json(flat)  # AWS Lambda's JSON log format
        elif "time" not in self.fields and is_cloud_logging(flat):
            read_cloud_logging(flat, _ENVELOPE_KEYS)  # Google Cloud Logging's LogEntry
        time_key, when = self._pick(flat, "time", TIME_KEYS)
        if time_key == "instant.epochSecond" and _is_int(when):  # log4j2's JsonLayout
            nanos = flat.pop("instant.nanoOfSecond", 0)
            when = when + nanos / 1e9 if _is_int(nanos) else when
        epoch = parse_time(when, self.zone, self.unit) if when is not None else self.runtime_epoch
        if epoch is None:
            return None
        if time_key == "__REALTIME_TIMESTAMP":
            for key in _JOURNAL_ADDRESS:  # where the entry sits in the journal, not what it says
                flat.pop(key, None)
            for key, value in flat.items():
                if isinstance(value, str) and value.startswith("["):
                    flat[key] = _journal_text(value)
        level_key, level = self._pick(flat, "level", LEVEL_KEYS)
        if level is None and time_key == "t.$date" and isinstance(flat.get("s"), str):
            level_key, level = "s", flat.pop("s")  # MongoDB: F E W I, D1..D5
            level = "DEBUG" if level[:1] == "D" and level[1:].isdigit() else level
        if level_key == "PRIORITY" and level in _PRIORITIES:
            level = SYSLOG_NAMES[_PRIORITIES.index(level)]  # "3" is err: ERROR
        elif _is_int(level) and isinstance(flat.get("level_name"), str):
            level_key, level = "level_name", flat.pop("level_name")  # Monolog: 400, "ERROR"
        elif _is_int(level) and 0 <= level <= 4 and "reqId" in flat:
            level = _NEXTCLOUD[level]  # Nextcloud's and ownCloud's 0..4 (bunyan's start at 10)
        if level is None and (implied := implied_level(flat, time_key)):  # CLEF's, Kibana's
            level_key, level = implied
        if time_key == "@t" and "@x" in flat:  # CLEF's exception, its type and stack
            flat.setdefault("exception", flat.pop("@x"))
        if "exception" not in flat:  # ECS's `error.type`, pino's, bunyan's, python-json-logger's
            thrown = next((k for k in _EXCEPTION_KEYS if isinstance(flat.get(k), str)), None)
            if thrown is not None:
                flat["exception"] = flat.pop(thrown)
            elif named := EXCEPTION.match(_stack(flat)):  # its first line's class
                flat["exception"] = named.group(1)
        if time_key == "t.$date" and "attr.durationMillis" in flat:  # MongoDB's slow operation
            flat.setdefault("duration_ms", flat["attr.durationMillis"])
        if level is None:
            for key in ("SeverityNumber", "level_value"):
                if key in flat:
                    level_key, level = key, flat.pop(key)
                    break
        else:
            flat.pop("level_value", None)
            flat.pop("SeverityNumber", None)
        _, message = self._pick(flat, "message", MESSAGE_KEYS)
        if when is None and level is None and message is None:
            return None  # timeless, levelless, no message: JSON data a program printed
        _, service = self._pick(flat, "service", SERVICE_KEYS)
        fields: dict[str, JsonScalar] = {}
        for ours, theirs in self.fields.items():
            if theirs in flat and ours not in ("time", "level", "message", "service"):
                fields[ours] = flat.pop(theirs)
        if len(flat) + len(fields) <= MAX_FIELDS:
            for key, value in flat.items():
                fields.setdefault(field_name(key), value)
        else:
            self._capped(flat, fields)
        if "trace_id" not in fields:  # an app's own wins
            for key in _TRACE_KEYS:
                if key in fields:
                    fields["trace_id"] = fields.pop(key)
                    break
        normal = level_of(level, level_key) if level is not None else ""
        if isinstance(level, str) and level != normal:
            keep_level_name(fields, level, normal)
        return Entry(
            epoch,
            normal,
            str(service) if service is not None else self.service,
            str(message) if message is not None else "",
            fields,
        )


class JsonLines(_Mapped):
    def feed(self, line: str) -> list[Entry]:
        try:
            obj = _DECODER.decode(line)
        except (msgspec.DecodeError, RecursionError):  # nested past msgspec's depth: not a record
            obj = None
        if not isinstance(obj, dict):
            self.failed += 1 if line.strip() else 0
            return []
        if any(isinstance(v, dict | list) for v in obj.values()):
            flat: dict[str, Any] = {}
            _flatten(obj, "", flat)
        else:
            flat = obj  # already flat (and ours: freshly decoded)
        found = self.entry(flat)
        self.failed += found is None
        return [found] if found is not None else []

    def flush(self) -> list[Entry]:
        return []


# A key starts a token (after a space or at the start): without that anchor a long run of
# non-space without `=` is re-scanned from every position, quadratic (a 20 kB line took 2.5 s).
_LOGFMT: Final = re.compile(r'(?<!\S)([^\s=]++)=("(?:[^"\\]|\\.)*+"|\S*)')


def logfmt_pairs(line: str) -> dict[str, Any]:
    """A logfmt line's keys and values (a quoted value unquoted), in their order."""
    flat: dict[str, Any] = {}
    for key, value in _LOGFMT.findall(line):
        flat[key] = re.sub(r"\\(.)", r"\1", value[1:-1]) if value.startswith('"') else value
    return flat


class Logfmt(_Mapped):
    def feed(self, line: str) -> list[Entry]:
        flat = logfmt_pairs(line)
        found = self.entry(flat) if flat else None
        self.failed += found is None and bool(line.strip())
        return [found] if found is not None else []

    def flush(self) -> list[Entry]:
        return []


def make_parser(
    fmt: str,
    fields: Mapping[str, str],
    zone: tzinfo,
    service: str,
    unit: str,
    now_ms: int,
    real_path: str = "",
    pattern: str = "",
    time_format: str = "",
) -> LineParser:
    """A fresh parser for one file of the given format (`real_path` only for CRI's names)."""
    if fmt == "jsonl":
        return JsonLines(fields, zone, service, unit)
    if fmt == "logfmt":
        return Logfmt(fields, zone, service, unit)
    if fmt == "cri":
        from workers.sources.logs.cri import Cri, kubelet_fields

        return Cri(JsonLines(fields, zone, "", unit), zone, service, kubelet_fields(real_path))
    if fmt == "docker":
        from workers.sources.logs.cri import DockerJson, docker_fields

        inner = JsonLines(fields, zone, "", unit)
        return DockerJson(inner, zone, service, docker_fields(real_path))
    if fmt == "syslog":
        from workers.sources.logs.syslogformat import Syslog, SyslogRecords

        return SyslogRecords(Syslog(zone, service, now_ms))
    if fmt == "mysql_slow":
        from workers.sources.logs.slowlog import SlowLog

        return SlowLog(zone, service)
    from workers.sources.logs.textformats import make_text_parser

    return make_text_parser(fmt, zone, service, now_ms, pattern, time_format, fields)
