"""Container logs: Kubernetes' (the CRI format the kubelet writes: `<RFC3339Nano> <stream>
<P|F> <content>`) and Docker's `json-file` driver's; partial lines joined, JSON content read as
`jsonl`, names from the kubelet's or Docker's path layout, and a crash on a stream as one
record (docs/logs.md, "cri" and "docker")."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import tzinfo
from typing import Any, Final

import msgspec

from contracts.results import JsonScalar
from workers.sources.logs.accesslog import envoy_entry
from workers.sources.logs.formats import MAX_FIELDS, JsonLines, field_name, parse_time
from workers.sources.logs.levels import canonical_level, keep_level_name
from workers.sources.logs.masking import (
    MASK,
    secret_name,
    without_secret_values,
    without_secrets,
)
from workers.sources.logs.multiline import (
    EXCEPTION,
    MAX_HELD_RUNTIME,
    MAX_JOINED_CHARS,
    MAX_JOINED_LINES,
    Crash,
    continues,
    crash_of,
    go_runtime,
    python_raised,
)
from workers.sources.logs.records import Entry

__all__ = ["Cri", "DockerJson", "docker_fields", "kubelet_fields"]
# How long before a crash its `runtime: ` lines may be written to be its (Go: the same moment).
_RUNTIME_NEAR_MS: Final = 1000
# How long after a text record a continuation line (a Java stack's `java.lang.X: ...`, `\tat`,
# `Caused by:`) may be written to be its: an app writes a record and its stack at once, and
# the runtime splits them into lines of (nearly) one time.
_JOIN_NEAR_MS: Final = 1000

_CRI: Final = re.compile(r"(\S+) (stdout|stderr) ([PF]) ?(.*)", re.S)
# `kubectl logs --timestamps` (and `stern -t`'s lines): the runtime's RFC 3339 time, a space,
# the content; no stream, no tag (each line whole).
_KUBECTL: Final = re.compile(
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) (.*)", re.S
)


# A text content's own level, where its producer writes it first (never guessed from a word
# inside the message): klog's `E1204 19:11:00.000000  1 file.go:138] ` (the control plane's
# pods), `[ERROR] ` (CoreDNS), after an ISO time (HashiCorp's hclog: Vault, Consul, Nomad),
# zap's console `<ISO time>\t<level>\t` (Istio's proxies, controller-runtime's operators),
# a level in capitals after a time (log4j, logback, Spring Boot: Java's usual layouts),
# logfmt's `level=error` in a line of `key=value` pairs (Prometheus, Loki, Grafana), and
# Python's default layouts (`logging.basicConfig()`, uvicorn).
_TEXT_LEVEL: Final = re.compile(
    r"(?P<klog>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [^ \]]+:\d+\] "
    # log4j's, logback's and Spring Boot's `%d %-5level` (`2026-12-05 14:00:00.123 ERROR 1 ---
    # [main] ...`), logback's `%d [%thread] %-5level`: the level in capitals after the time
    r"|(?:\d{4}-\d\d-\d\d[T ])?\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?"
    r"(?: \[[^\]]{1,200}\])? +(?P<java>TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL) "
    r"|(?:\d{4}[-/]\d\d[-/]\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)? +)?"
    r"\[(?P<bracket>[A-Za-z]{3,9})\] "
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)\t(?P<zap>[A-Za-z]{3,9})\t"
    r"|[\w.-]{1,40}=(?=.{0,400}?(?<!\S)level=\"?(?P<logfmt>[A-Za-z]{1,9})\"?(?!\S))"
    # Python's defaults: `logging.basicConfig()`'s `ERROR:root:...`, uvicorn's `INFO:     ...`
    r"|(?P<python>DEBUG|INFO|WARNING|ERROR|CRITICAL):(?: +(?=\S)|[\w.-]{1,120}:)"
)


def text_level(text: str) -> tuple[str, str] | None:
    """The level a container's text line was written with and its word, or None."""
    found = _TEXT_LEVEL.match(text)
    if found is None:
        return None
    word = next(w for w in found.group("klog", "bracket", "zap", "java", "logfmt", "python") if w)
    level = canonical_level(word)
    return None if level is None else (level, word)


_KUBELET_PATH: Final = re.compile(r"/pods/([^/_]+)_([^/_]+)_[^/]+/([^/]+)/\d+\.log(?:\.[^/]*)?$")


def kubelet_fields(real_path: str) -> dict[str, str]:
    """`namespace`, `pod`, `container` from the kubelet's `pods/<ns>_<pod>_<uid>/<ctr>/N.log`
    (the names the cluster gave, not a location), or nothing for another layout."""
    found = _KUBELET_PATH.search(real_path)
    if found is None:
        return {}
    return {"namespace": found.group(1), "pod": found.group(2), "container": found.group(3)}


class _Held:
    """A crash on a stream (`multiline.crash_of`), its later lines joined until another line."""

    __slots__ = ("crash", "entry", "lines", "size")

    def __init__(self, entry: Entry, crash: Crash) -> None:
        self.entry, self.crash, self.lines, self.size = entry, crash, 0, 0

    def join(self, text: str) -> bool:
        """Join a line; False past the cap (the line is then no record's)."""
        if self.size < MAX_JOINED_CHARS and self.lines < MAX_JOINED_LINES:
            self.entry.message += "\n" + text
            self.size, self.lines = self.size + len(text) + 1, self.lines + 1
            if self.crash.last and (raised := python_raised(text)):
                self.entry.fields["exception"] = raised  # Python names it last
            elif "exception" not in self.entry.fields and (thrown := EXCEPTION.match(text)):
                self.entry.fields["exception"] = thrown.group(1)  # a stack's first class
            return True
        return False


# A text record open to the stack lines after it (no crash: its level stays as read).
_TEXT: Final = Crash("", "", False)


class Cri:
    """`<RFC3339Nano> <stream> <P|F> <content>`; P parts joined until the F line. A crash
    written to a stream (Go's `panic:` and its goroutine dump, Java's uncaught exception and
    its stack) is one record, as in the text formats (`multiline`)."""

    def __init__(
        self, inner: JsonLines, zone: tzinfo, service: str, origin: Mapping[str, str]
    ) -> None:
        self.inner, self.zone, self.origin = inner, zone, dict(origin)
        self.service = service or self.origin.get("container", "")
        self.failed = 0
        self.bare = 0  # lines read as `kubectl logs --timestamps` writes them
        self._parts: dict[str, tuple[int, int, list[str]]] = {}
        self._held: dict[str, _Held] = {}
        self._open: dict[str, _Held] = {}  # a stream's last text record, open to its stack
        # Go's `runtime: ` lines on a stream, held for the line after them (`multiline`)
        self._runtime: dict[str, list[tuple[int, str]]] = {}

    def feed(self, line: str) -> list[Entry]:
        split = self._split(line)
        if split is None:
            self.failed += bool(line.strip())
            return []
        epoch, stream, partial, content = split
        start, size, parts = self._parts.pop(stream, (epoch, 0, []))
        parts.append(content)
        size += len(content)  # kept as it grows: summing the parts per line was quadratic
        if partial and size < 1024 * 1024:
            self._parts[stream] = (start, size, parts)
            return []
        return self._deliver(start, stream, "".join(parts))

    def _split(self, line: str) -> tuple[int, str, bool, str] | None:
        """A line's time, stream, whether it is a part only, and its content (None: not one)."""
        found = _CRI.fullmatch(line.rstrip("\n"))
        if found is None and (bare := _KUBECTL.fullmatch(line.rstrip("\n"))) is not None:
            epoch = parse_time(bare.group(1), self.zone)
            self.bare += epoch is not None  # no runtime's envelope (any ISO-stamped line)
            return None if epoch is None else (epoch, "", False, bare.group(2))  # stream unknown
        epoch = parse_time(found.group(1), self.zone) if found else None
        if found is None or epoch is None:
            return None
        return epoch, found.group(2), found.group(3) == "P", found.group(4)

    def _deliver(self, epoch: int, stream: str, text: str) -> list[Entry]:
        if go_runtime(text):
            runtime = self._runtime.setdefault(stream, [])
            runtime.append((epoch, text))
            if len(runtime) <= MAX_HELD_RUNTIME:
                return []
            epoch, text = runtime.pop(0)  # the oldest held: a record of its own
            return self._deliver_now(epoch, stream, text, [])
        runtime = self._runtime.pop(stream, [])
        # Go writes its explanation and throws in one moment: a `runtime: ` line written long
        # before (an app's own, on a stream quiet since) is a record of its own, at its time
        near = [held for held in runtime if epoch - held[0] <= _RUNTIME_NEAR_MS]
        far = [
            self._entry(at, stream, line) for at, line in runtime if epoch - at > _RUNTIME_NEAR_MS
        ]
        return far + self._deliver_now(epoch, stream, text, near)

    def _deliver_now(
        self, epoch: int, stream: str, text: str, runtime: list[tuple[int, str]]
    ) -> list[Entry]:
        held = self._held.get(stream)
        if held is not None:
            if not text.strip() or continues(text, held.crash.go):
                for line in [t for _, t in runtime] + ([text] if text.strip() else []):
                    if not held.join(line):
                        self.failed += 1  # past the cap: a line not in the format, as text
                return []
            del self._held[stream]
        out = [] if held is None else [held.entry]
        if not text.strip() and not runtime:
            return out  # an empty line the app wrote: no record, as in the text formats
        crash = None if text.startswith("{") else crash_of(text)
        last = self._open.pop(stream, None)  # the text record before: is this line its?
        if last is not None:  # (a crash is a record of its own, a Traceback too)
            near = epoch - last.entry.epoch_ms <= _JOIN_NEAR_MS and not runtime and not crash
            if near and continues(text) and last.join(text):
                self._open[stream] = last
                return out
            out.append(last.entry)
        if crash is None:  # the runtime's lines explain no crash: records of their own
            out += [self._entry(at, stream, line) for at, line in runtime]
        if not text.strip():
            return out  # an empty line the app wrote: no record, as in the text formats
        if crash is None:
            entry = self._entry(epoch, stream, text)
            if text.startswith("{") or not entry.level:
                return [*out, entry]  # JSON, or text of no layout it knows: no stack joined
            self._open[stream] = _Held(entry, _TEXT)  # a known layout's: held for its stack
            return out
        lines = [t for _, t in runtime] + [text]  # the runtime's explanation starts the crash
        entry = self._entry(runtime[0][0] if runtime else epoch, stream, "\n".join(lines))
        entry.level, entry.fields["exception"] = crash.level, crash.exception
        self._held[stream] = _Held(entry, crash)
        return out

    def _entry(self, epoch: int, stream: str, text: str) -> Entry:
        if text.startswith("{"):
            self.inner.runtime_epoch = epoch  # a JSON record without a time: the runtime's
            inner = self.inner.feed(text)
            self.inner.runtime_epoch = None
            if inner:
                for key, value in self._origin(stream).items():
                    inner[0].fields.setdefault(key, value)
                if not inner[0].service:
                    inner[0].service = self.service
                return inner[0]
            self.inner.failed -= 1
        fields: dict[str, JsonScalar] = self._origin(stream)
        # an Envoy sidecar's access line (Istio's): its fields, a level from its status
        if text.startswith("[") and (access := envoy_entry(text, epoch)) is not None:
            access.fields.update(fields)
            access.service = self.service
            return access
        written = text_level(text)
        if written is None:
            return Entry(epoch, "", self.service, text, fields)  # no level is guessed
        keep_level_name(fields, written[1], written[0])
        return Entry(epoch, written[0], self.service, text, fields)

    def _origin(self, stream: str) -> dict[str, JsonScalar]:
        """The fields a line's place gives: its stream (unknown in `kubectl logs`), its names."""
        return {"stream": stream, **self.origin} if stream else dict(self.origin)

    def flush(self) -> list[Entry]:
        out = [e for s, (at, _, p) in self._parts.items() for e in self._deliver(at, s, "".join(p))]
        out += [held.entry for held in self._held.values()]
        out += [held.entry for held in self._open.values()]
        out += [self._entry(at, s, t) for s, lines in self._runtime.items() for at, t in lines]
        self._parts.clear()
        self._held.clear()
        self._open.clear()
        self._runtime.clear()
        return out


class _DockerLine(msgspec.Struct):
    log: str
    stream: str
    time: str
    attrs: dict[str, Any] = msgspec.field(default_factory=dict)


_DOCKER: Final = msgspec.json.Decoder(_DockerLine)
# rotations: `<id>-json.log.1`, and `<id>-json.log.1.gz` with `--log-opt compress=true`
_DOCKER_PATH: Final = re.compile(r"/([0-9a-f]{64})/\1-json\.log(?:\.\d+(?:\.gz)?)?$")


def _attr_fields(attrs: Mapping[str, Any]) -> dict[str, JsonScalar]:
    """Docker's `attrs` as fields: a secret's name masks its value, and inside any value a URL's
    password, a secret's `name=value` and an HTTP credential (`env=` copies the container's
    environment, which the app never chose to log; `masking`)."""
    fields: dict[str, JsonScalar] = {}
    for key, value in attrs.items():
        if len(fields) > MAX_FIELDS:
            break  # the rest are counted as dropped when merged
        if secret_name(key):
            fields[field_name(key)] = MASK
        elif isinstance(value, str):
            fields[field_name(key)] = without_secret_values(value)
        else:  # not Docker's own (a map of strings): its JSON, a secret member's value masked
            fields[field_name(key)] = without_secrets(msgspec.json.encode(value).decode())
    return fields


def docker_fields(real_path: str) -> dict[str, str]:
    """`container_id` (12 hex digits, as `docker ps` shows it) from Docker's
    `containers/<id>/<id>-json.log`, or nothing for another layout."""
    found = _DOCKER_PATH.search(real_path)
    return {} if found is None else {"container_id": found.group(1)[:12]}


class DockerJson(Cri):
    """Docker's `json-file` logging driver: `{"log": "<content>\\n", "stream": ..., "time":
    ...}` a line; a `log` without its newline is a part (Docker splits lines at 16 KiB),
    joined until the one with it. The content is read as in `cri`. The `attrs` the daemon adds
    with `--log-opt labels=`, `env=` or `tag=` are fields (after the app's own, at most
    `MAX_FIELDS` in all; secrets masked: `_attr_fields`)."""

    def __init__(
        self, inner: JsonLines, zone: tzinfo, service: str, origin: Mapping[str, str]
    ) -> None:
        super().__init__(inner, zone, service, origin)
        self._attrs: dict[str, tuple[dict[str, Any], dict[str, JsonScalar]]] = {}

    def _split(self, line: str) -> tuple[int, str, bool, str] | None:
        try:
            found = _DOCKER.decode(line)
        except msgspec.DecodeError:
            return None
        epoch = parse_time(found.time, self.zone)
        if epoch is None or found.stream not in ("stdout", "stderr"):
            return None
        if found.attrs:  # the same on every line of a container: converted once
            known = self._attrs.get(found.stream)
            if known is None or known[0] != found.attrs:
                self._attrs[found.stream] = (found.attrs, _attr_fields(found.attrs))
        else:
            self._attrs.pop(found.stream, None)
        content = found.log
        whole = content.endswith("\n")
        content = content[:-1] if whole else content
        return epoch, found.stream, not whole, content.removesuffix("\r")

    def _entry(self, epoch: int, stream: str, text: str) -> Entry:
        entry = super()._entry(epoch, stream, text)
        attrs = self._attrs.get(stream)
        if attrs is None:
            return entry
        fields, dropped = entry.fields, 0
        for key, value in attrs[1].items():
            if key in fields:
                continue  # the app's own field of that name, or ours (stream, container_id)
            if len(fields) >= MAX_FIELDS:
                dropped += 1
                continue
            fields[key] = value
        dropped += max(0, len(attrs[0]) - len(attrs[1]))
        if dropped:
            before = fields.get("fields_dropped", 0)
            fields["fields_dropped"] = (before if isinstance(before, int) else 0) + dropped
        return entry
