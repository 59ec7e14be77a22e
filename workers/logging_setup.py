"""Structured logs and W3C trace context for the worker.

- `configure_logging(level, json_lines=...)`: plain text, or one JSON object per line
  (`--log-json`). Every record carries the invocation context set with `invocation_context`
  (session, tool, tool_call_id, stream entry id, trace id), so lines logged anywhere inside
  an invocation's task are attributable. Messages never carry evidence bodies at INFO, and
  credentials in URLs (`scheme://user:password@host`) and values under a password's name
  (`password=...`, `PGPASSWORD=...`, `"password": "..."`) are masked in every line
  (`workers.masking.without_passwords`, the rules the log records served as evidence use too).
- `parse_traceparent` validates a `traceparent` header value (W3C Trace Context level 1).
- `span(name, traceparent)`: an OpenTelemetry span parented on the invocation's traceparent
  when `opentelemetry` is importable; a no-op otherwise (no hard dependency), and also when
  there is neither a traceparent nor an installed tracer provider (nothing would be kept).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import IO, Any, Final

from workers.masking import without_passwords

__all__ = [
    "CONTEXT_FIELDS",
    "JsonFormatter",
    "TraceParent",
    "configure_logging",
    "invocation_context",
    "parse_traceparent",
    "quiet_third_party",
    "records_spans",
    "span",
]

CONTEXT_FIELDS: Final = ("session", "tool", "tool_call_id", "entry_id", "trace_id")
_CONTEXT: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "aci_log_context", default=None
)
_TRACEPARENT_RE: Final = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


class TraceParent:
    """A parsed W3C `traceparent`: trace id, parent span id and flags."""

    __slots__ = ("flags", "span_id", "text", "trace_id")

    def __init__(self, text: str, trace_id: str, span_id: str, flags: str) -> None:
        self.text = text
        self.trace_id = trace_id
        self.span_id = span_id
        self.flags = flags


def parse_traceparent(value: object) -> TraceParent | None:
    """A valid `traceparent` value, or None (absent or malformed: tracing is best effort)."""
    if not isinstance(value, str):
        return None
    match = _TRACEPARENT_RE.match(value.strip().lower())
    if match is None:
        return None
    version, trace_id, span_id, flags = match.groups()
    if version == "ff" or set(trace_id) == {"0"} or set(span_id) == {"0"}:
        return None
    return TraceParent(match.group(0), trace_id, span_id, flags)


class invocation_context:
    """Attach invocation fields to every log line emitted in this context (task-local).

    A plain class, not a generator: it is entered once or twice per invocation."""

    __slots__ = ("fields", "token")

    def __init__(self, **fields: str | None) -> None:
        self.fields = fields

    def __enter__(self) -> None:
        outer = _CONTEXT.get()
        inner = {key: value for key, value in self.fields.items() if value}
        self.token = _CONTEXT.set({**outer, **inner} if outer else inner)

    def __exit__(self, *exc: object) -> None:
        _CONTEXT.reset(self.token)


class _ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in (_CONTEXT.get() or {}).items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


# Third-party messages (redis-py, asyncio, httpx) may name the server they failed to reach.
# An address starts a word (or at `[`): tried from every letter of a long word, it read the
# rest of the word from each (quadratic: 50 000 letters took 10 s); the same matches.
_ADDRESS_RE: Final = re.compile(
    r"(?:\[|(?<![A-Za-z0-9_.:-]))[A-Za-z0-9_.:-]*[A-Za-z0-9\]]:\d{2,5}\b"
)
# urllib3 (clickhouse-connect's HTTP) names it as keywords: `HTTPConnection(host='ch', port=8123)`.
_KEYWORD_ADDRESS_RE: Final = re.compile(r"\b(host|port)=('[^']*'|\"[^\"]*\"|\d+)")
# ... and the request's query string (`/?query_id=…&param_p0=<agent text>&database=…`).
_QUERY_STRING_RE: Final = re.compile(r"(?<=[\w/])\?[^\s'\"]+")


# Line breaks and other control characters (also Unicode's line separators), which text from
# stream entries may carry: escaped, so one record is one line and cannot fake another.
_CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escape(text: str) -> str:
    return _CONTROL_RE.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


_CONTEXT_MAX: Final = 200  # characters of one context value (entry text can be long)
_PLAIN_RE: Final = re.compile(r"[^\s=\"\[\]]*")


def _context_value(value: object) -> str:
    """A context value for the text format: escaped, cut, and quoted unless it is one plain
    word, so a value holding ` session=victim` cannot pose as another field."""
    text = _escape(str(value)[:_CONTEXT_MAX])
    if _PLAIN_RE.fullmatch(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _safe_message(record: logging.LogRecord) -> str:
    # the password first: `user:2024!pw` reads as an address, `pa?ss` as a query string, and
    # their rewrites would take the `user:` the rule opens on and show the rest
    text = without_passwords(record.getMessage())
    if not record.name.startswith("aci"):
        text = _ADDRESS_RE.sub("<address>", text)
        text = _KEYWORD_ADDRESS_RE.sub(r"\1=<address>", text)
        text = _QUERY_STRING_RE.sub("?<query>", text)
    return _escape(text)


def _exception_type(record: logging.LogRecord) -> str | None:
    # The exception type only: tracebacks can carry paths, hosts and arguments.
    if record.exc_info and record.exc_info[0] is not None:
        return record.exc_info[0].__name__
    return None


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg and the invocation context."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": _safe_message(record),
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value:
                line[name] = _escape(str(value)[:_CONTEXT_MAX])
        exc_type = _exception_type(record)
        if exc_type:
            line["exc_type"] = exc_type
        return json.dumps(line, ensure_ascii=False)


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        context = " ".join(
            f"{n}={_context_value(getattr(record, n))}"
            for n in CONTEXT_FIELDS
            if getattr(record, n, None)
        )
        text = f"{self.formatTime(record)} {record.levelname} {record.name} "
        text += _safe_message(record)
        exc_type = _exception_type(record)
        if exc_type:
            text += f" exc_type={exc_type}"
        return f"{text} [{context}]" if context else text


def configure_logging(
    level: str | int = "WARNING", *, json_lines: bool = False, stream: IO[str] | None = None
) -> None:
    """Configure the root logger: text or JSON lines on `stream` (default stderr), with the
    invocation context on every line."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(_ContextFilter())
    if json_lines:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(_TextFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    # `aci.announce` (a worker's start and stop lines) shows at the default level too.
    chosen = root.getEffectiveLevel()
    logging.getLogger("aci.announce").setLevel(
        min(chosen, logging.INFO) if chosen <= logging.WARNING else chosen
    )
    quiet_third_party(chosen)


def quiet_third_party(level: int = logging.WARNING) -> None:
    """httpx logs every request URL at INFO (host, port, any token in the query): never let
    an upstream's address reach our logs. drain3 says "Starting Drain3 template miner" at
    INFO for every index it builds: noise. While ClickHouse is down, urllib3 ("Retrying …
    /?query_id=…") and clickhouse-connect's HTTP driver ("Unexpected Http Driver Exception")
    warn on every call: at `level` WARNING or above (the default) they stay out, as the
    ClickHouse source says each change of state once itself."""
    for name in ("httpx", "httpcore", "drain3"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # At INFO or DEBUG the operator asked for them (masked like every third-party line).
    noisy = logging.ERROR if level >= logging.WARNING else logging.NOTSET
    for name in ("urllib3.connectionpool", "clickhouse_connect.driver._backend"):
        logging.getLogger(name).setLevel(noisy)


_TRACER: list[Any] = []  # [tracer or None], resolved once


def _tracer() -> Any:
    if not _TRACER:
        try:
            from opentelemetry import trace
        except ImportError:
            _TRACER.append(None)
        else:
            # A proxy: it follows a tracer provider that the application installs later.
            _TRACER.append(trace.get_tracer("aci-evidence"))
    return _TRACER[0]


_PROVIDER_CHECK: list[float | bool] = [0.0, False]  # [checked at (monotonic), installed]


def _provider_installed() -> bool:
    # Looked up at most once a second: it is asked three times per invocation, and an
    # application installs its tracer provider once, at start.
    now = time.monotonic()
    if now - float(_PROVIDER_CHECK[0]) < 1.0:
        return bool(_PROVIDER_CHECK[1])
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    installed = not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
    _PROVIDER_CHECK[:] = [now, installed]
    return installed


def _parent_context(parent: TraceParent | None) -> Any:
    if parent is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": parent.text})


_NO_SPAN: Final = contextlib.nullcontext()


def records_spans() -> bool:
    """Whether a span without a traceparent would be recorded (an installed tracer provider)."""
    return _tracer() is not None and _provider_installed()


def span(name: str, parent: TraceParent | None, **attributes: str) -> AbstractContextManager[Any]:
    """An OpenTelemetry span (child of `parent`, or of the current span) when the API is
    installed and something would record it; a shared no-op context otherwise (hot path)."""
    tracer = _tracer()
    if tracer is None or (parent is None and not _provider_installed()):
        return _NO_SPAN
    return _recorded_span(tracer, name, parent, attributes)


@contextlib.contextmanager
def _recorded_span(
    tracer: Any, name: str, parent: TraceParent | None, attributes: dict[str, str]
) -> Iterator[Any]:
    context = _parent_context(parent)
    with tracer.start_as_current_span(name, context=context) as current:
        for key, value in attributes.items():
            if value:
                current.set_attribute(f"aci.{key}", value)
        yield current
