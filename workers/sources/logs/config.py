"""Operator configuration of `query_logs`: which backend serves each logical topic.

`ACI_LOGS_CONFIG` names a TOML file (docs/logs.md is the reference). Without it the MOCK world
serves every topic. The file is read and validated once, when the worker starts: every mistake
is one `LogsConfigError` (a `ValueError`) whose one-line text names the key, e.g.
`ACI_LOGS_CONFIG: topics.APPLICATION.format: must be one of jsonl, logfmt, ...`. A file it
cannot read is named (the operator's path); its contents are never quoted.

Shapes (a tagged union on `backend`):
- `file`: `paths` (globs under one of the top-level `roots`, wildcards in folders too, no `**`),
  `format`, optional `fields` (our name = the record's key), `timezone`, `service`;
- `clickhouse`: `table` (an OpenTelemetry Collector `otel_logs` table), `service_names` and/or
  `attributes` (LogAttributes/ResourceAttributes key = value) narrowing it to the topic;
- `mock`: the built-in incident world (`scenario`).
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any, Final, Literal

import msgspec

from contracts.fingerprint import DEFAULT_LOOKBACK_MINUTES
from contracts.requests import LOOKBACK_MAX_MINUTES
from contracts.status import Topic
from pipeline.settings import SettingsError
from workers.sources.logs.config_hints import home_hint, topics_hint, unknown_key, zone_of
from workers.sources.logs.regex_config import check_pattern

__all__ = [
    "FORMATS", "ClickhouseConnection", "ClickhouseTopic", "FileSource", "FileTopic", "LogsConfig",
    "LogsConfigError", "MockTopic", "ScanBudget", "TopicConfig", "load_logs_config",
    "parse_logs_config", "zone_of",
]  # fmt: skip

ENV_VAR: Final = "ACI_LOGS_CONFIG"
FORMATS: Final = (
    "jsonl", "logfmt", "cri", "docker", "syslog", "mysql_slow", "log4j", "apache_access",
    "nginx_access", "apache_error", "nginx_error", "klog", "oslo", "postgresql", "redis", "plain",
    "regex", "w3c", "postgresql_csv", "envoy",
)  # fmt: skip
Format = Literal[
    "jsonl", "logfmt", "cri", "docker", "syslog", "mysql_slow", "log4j", "apache_access",
    "nginx_access", "apache_error", "nginx_error", "klog", "oslo", "postgresql", "redis", "plain",
    "regex", "w3c", "postgresql_csv", "envoy",
]  # fmt: skip
# Named groups of a `format = "regex"` pattern that are not fields of the record.
REGEX_OWN_GROUPS: Final = ("time", "level", "message", "service")
# Pseudo-filesystems: never log roots (a "log" there is kernel state or another process's).
_FORBIDDEN_ROOTS: Final = ("/proc", "/sys", "/dev")
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_IDENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")  # a ClickHouse table, db.table allowed
# A `fields` name with a capital (FILE and ClickHouse alike): listed, and never found.
_LOWERCASE: Final = (
    "a field name is lowercase letters, digits and _ (a query reads field names lowercase: {})"
)


class LogsConfigError(SettingsError):
    """The logs configuration is wrong; `str()` is one line naming the key (a `SettingsError`,
    so `aci-evidence worker` prints that line and exits 2, not a traceback)."""


class ScanBudget(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What one call may read of files before it stops and says its count is a lower bound."""

    max_bytes: int = 256 * 1024 * 1024
    max_seconds: float = 10.0
    max_line_bytes: int = 1024 * 1024  # a longer line is skipped (and the count marked)
    max_files: int = 256

    def __post_init__(self) -> None:
        if self.max_bytes < 1 or self.max_line_bytes < 1 or self.max_files < 1:
            raise ValueError("max_bytes, max_line_bytes and max_files must be >= 1")
        if not 0 < self.max_seconds <= 600:
            raise ValueError("max_seconds must be in (0, 600]")


def _check_source(source: FileSource | FileTopic) -> None:
    """What one source must hold (the keys named relative to it)."""
    if not source.paths:
        raise ValueError("paths: give at least one glob")
    if source.format is None:
        raise ValueError("format: missing key")
    for path in source.paths:
        if not path.startswith("/"):
            raise ValueError(f"paths: {path!r} must be absolute{home_hint(path)}")
    for name in source.fields:
        if not _NAME.fullmatch(name):
            raise ValueError(f"fields.{name}: a field name is letters, digits and _")
        if name != name.lower():  # `durationMillis` would be listed and never found
            raise ValueError(f"fields.{name}: {_LOWERCASE.format(name.lower())}")
    if source.timezone is not None:
        try:
            zone_of(source.timezone)
        except ValueError as exc:
            raise ValueError(f"timezone: {exc}") from None
    check_pattern(source.pattern, source.format, source.time_format)


class FileSource(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One set of files of a topic, all in one format (`[[topics.<TOPIC>.sources]]`)."""

    paths: list[str]
    format: Format
    fields: dict[str, str] = {}
    timezone: str | None = None
    service: str = ""
    time_unit: Literal["auto", "s", "ms", "us", "ns"] = "auto"
    pattern: str = ""  # format = "regex": a Python regex with named groups
    time_format: str = ""  # a strptime format of the time group; else ISO 8601 / epoch

    def __post_init__(self) -> None:
        _check_source(self)

    def regex_fields(self) -> tuple[str, ...]:
        """The fields a `regex` pattern's other named groups add."""
        if self.format != "regex":
            return ()
        names = re.compile(self.pattern).groupindex
        return tuple(n for n in names if n not in REGEX_OWN_GROUPS)


class FileTopic(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    tag="file",
    tag_field="backend",
):
    """A topic read from log files matched by globs: one source given by the topic's own keys
    (`paths`, `format`, ...), and/or several in `sources`, each with its own paths and format."""

    paths: list[str] = []
    format: Format | None = None
    fields: dict[str, str] = {}
    timezone: str | None = None
    service: str = ""
    time_unit: Literal["auto", "s", "ms", "us", "ns"] = "auto"
    pattern: str = ""
    time_format: str = ""
    sources: list[FileSource] = []

    def __post_init__(self) -> None:
        if self.sources and not self.paths and self.format is None:
            return
        if not self.paths and not self.sources:
            raise ValueError("paths: missing key")
        _check_source(self)

    def file_sources(self) -> list[FileSource]:
        """Every source of the topic: the topic's own keys first, then `sources`."""
        own: list[FileSource] = []
        if self.paths and self.format is not None:
            own.append(
                FileSource(
                    paths=self.paths,
                    format=self.format,
                    fields=self.fields,
                    timezone=self.timezone,
                    service=self.service,
                    time_unit=self.time_unit,
                    pattern=self.pattern,
                    time_format=self.time_format,
                )
            )
        return own + list(self.sources)


class ClickhouseTopic(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    tag="clickhouse",
    tag_field="backend",
):
    """A topic read from an OpenTelemetry `otel_logs` table, narrowed to the topic."""

    table: str = "otel_logs"
    service_names: list[str] = []
    attributes: dict[str, str] = {}
    fields: list[str] = []  # more LogAttributes keys a query may name (beyond the topic's)
    row_limit: int = 1000  # rows fetched (LIMIT n+1) for the sample and the patterns

    def __post_init__(self) -> None:
        if not _IDENT.fullmatch(self.table) or self.table.count(".") > 1:
            raise ValueError("table: a table name, or database.table (letters, digits, _)")
        if not 1 <= self.row_limit <= 100_000:
            raise ValueError("row_limit: must be 1..100000")
        for name in self.fields:
            if not _NAME.fullmatch(name):
                raise ValueError(f"fields: {name!r} is not a field name (letters, digits, _)")
            if name != name.lower():  # looked up as LogAttributes[the lowercase name]: never
                raise ValueError(f"fields: {name!r}: {_LOWERCASE.format(name.lower())}")


class MockTopic(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    tag="mock",
    tag_field="backend",
):
    """A topic answered by the built-in MOCK incident world."""

    scenario: str | None = None

    def __post_init__(self) -> None:
        if self.scenario is not None:  # checked here, so the mistake names its key
            from workers.sources.logs.mocklog.scenarios import scenario_info

            try:
                scenario_info(self.scenario)
            except ValueError as exc:
                raise ValueError(f"scenario: {exc}") from None


TopicConfig = FileTopic | ClickhouseTopic | MockTopic


class ClickhouseConnection(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How to reach ClickHouse: `dsn` (`http://user@host:8123/db`, or `chdb:///abs/dir` for the
    in-process engine); the password is read from the variable `password_env`, never the file."""

    dsn: str
    password_env: str = ""
    connect_timeout_s: float = 5.0

    def __post_init__(self) -> None:
        if not self.dsn.startswith(("http://", "https://", "chdb://")):
            raise ValueError("dsn: must start with http://, https:// or chdb://")
        userinfo = re.split(r"[/?#]", self.dsn.split("://", 1)[1], maxsplit=1)[0].rpartition("@")[0]
        if ":" in userinfo:  # the file is read by more people than the password should be
            raise ValueError("dsn: holds a password; name the variable holding it in password_env")
        if not 0 < self.connect_timeout_s <= 60:
            raise ValueError("connect_timeout_s must be in (0, 60]")


class LogsConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole file: defaults, file roots, the scan budget, ClickHouse, one entry per topic."""

    topics: dict[Topic, TopicConfig] = {}
    roots: list[str] = []
    timezone: str = "UTC"
    default_lookback: int = DEFAULT_LOOKBACK_MINUTES  # from ACI_LOGS_DEFAULT_LOOKBACK, not the file
    sample_limit: int = 64
    scan: ScanBudget = ScanBudget()
    clickhouse: ClickhouseConnection | None = None

    def __post_init__(self) -> None:
        try:
            zone_of(self.timezone)
        except ValueError as exc:
            raise ValueError(f"timezone: {exc}") from None
        if not 1 <= self.default_lookback <= LOOKBACK_MAX_MINUTES:
            raise ValueError(f"default_lookback: must be 1..{LOOKBACK_MAX_MINUTES}")
        if not 1 <= self.sample_limit <= 1000:
            raise ValueError("sample_limit: must be 1..1000")


def _check_roots(config: LogsConfig) -> None:
    roots = []
    for i, root in enumerate(config.roots):
        clean = os.path.normpath("/" + root.lstrip("/"))  # POSIX keeps `//proc` as is
        if not root.startswith("/") or clean == "/":
            why = f"must be an absolute folder below /{home_hint(root)}"
            raise LogsConfigError(f"{ENV_VAR}: roots[{i}]: {why}")
        if any(clean == f or clean.startswith(f + "/") for f in _FORBIDDEN_ROOTS):
            raise LogsConfigError(f"{ENV_VAR}: roots[{i}]: /proc, /sys and /dev are not log roots")
        roots.append(PurePosixPath(clean))
    for topic, entry in config.topics.items():
        if isinstance(entry, ClickhouseTopic) and config.clickhouse is None:
            raise LogsConfigError(
                f"{ENV_VAR}: topics.{topic.value}: backend clickhouse needs a [clickhouse] section"
            )
        if not isinstance(entry, FileTopic):
            continue
        own = 1 if entry.paths else 0
        for i, source in enumerate(entry.file_sources()):
            where = "" if i < own else f"sources[{i - own}]."
            for j, glob in enumerate(source.paths):
                _check_glob(glob, roots, f"topics.{topic.value}.{where}paths[{j}]")


def _check_glob(glob: str, roots: list[PurePosixPath], key: str) -> None:
    path = PurePosixPath(os.path.normpath("/" + glob.lstrip("/")))
    if not any(path.is_relative_to(r) for r in roots):
        # Say what would fix it: the roots there are, or that there are none yet.
        shown = ", ".join(f'"{r}"' for r in roots)
        hint = (
            f" (roots = [{shown}])"
            if roots
            else f' (none set: add its folder, e.g. roots = ["{path.parent}"], at the top level)'
        )
        raise LogsConfigError(f"{ENV_VAR}: {key}: not under any of roots{hint}")
    if "**" in glob:  # read by `glob` as `*`: one level, where any depth was meant
        why = "'**' (any depth) is not supported: one wildcard per folder, /var/log/pods/*/*/*.log"
        raise LogsConfigError(f"{ENV_VAR}: {key}: {why}")


def _key_of(message: str) -> tuple[str, str]:
    # msgspec: "Expected `str`, got `int` - at `$.topics.APPLICATION.format`" → key, reason.
    found = re.search(r" - at `\$\.?([^`]*)`", message)
    if found is None:
        return "", message
    key = re.sub(r"\[(\w+)\]", r".\1", found.group(1).replace("`key` in ", ""))
    return key.strip("."), message[: found.start()]


def _convert(raw: object, kind: Any, prefix: str) -> Any:
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as exc:
        key, reason = _key_of(str(exc).splitlines()[0])
        reason = reason.replace("Object missing required field", "missing key")
        reason = reason.replace("Object contains unknown field", "unknown key")
        if reason.startswith("Invalid enum value") and key.endswith("format"):
            reason += f" (one of {', '.join(FORMATS)})"
        if reason.startswith("Invalid value") and key.endswith("backend"):
            reason += " (one of file, clickhouse, mock)"
        if reason.startswith("Expected `str") and key.split(".")[-1] == "timezone":
            reason = 'a string: an IANA zone or an offset ("Asia/Shanghai", "+08:00")'
        named = re.match(r"(?:missing|unknown) key `(\w+)`", reason)
        named = named or re.match(r"([\w.-]+): ", reason)
        if named is not None and (not key or key.startswith("sources.")):  # the key in front
            inner, reason = named.group(1), reason[named.end() :] or reason[: named.start(1) - 1]
            key, reason = ".".join(p for p in (key, inner) if p), reason.strip() or "missing key"
        key = re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", key)  # sources.0.format: sources[0].format
        full = ".".join(part for part in (prefix, key) if part) or "(top level)"
        if unknown := re.fullmatch(r"unknown key(?: `(\w+)`)?", reason):
            full = ".".join(p for p in (prefix, key, unknown.group(1)) if p)
            reason = unknown_key(full, raw)
        raise LogsConfigError(f"{ENV_VAR}: {full}: {reason}") from None


def parse_logs_config(text: str) -> LogsConfig:
    """Validate the TOML text; `LogsConfigError` (one line, naming the key) on any mistake."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LogsConfigError(f"{ENV_VAR}: not valid TOML: {exc}") from None
    if "default_lookback" in raw:  # one value for the executed and the fingerprinted scope
        raise LogsConfigError(
            f"{ENV_VAR}: default_lookback: set ACI_LOGS_DEFAULT_LOOKBACK instead (the pipeline "
            "normalises every call's scope with it)"
        )
    raw_topics = raw.pop("topics", {})
    if not isinstance(raw_topics, dict) or not raw_topics:
        why = f"give at least one [topics.<TOPIC>] table{topics_hint(raw)}"
        raise LogsConfigError(f"{ENV_VAR}: topics: {why}")
    topics: dict[Topic, TopicConfig] = {}
    for name, entry in raw_topics.items():
        if name not in Topic.__members__:
            valid = ", ".join(Topic.__members__)
            raise LogsConfigError(f"{ENV_VAR}: topics.{name}: unknown topic (one of {valid})")
        if isinstance(entry, dict) and "backend" not in entry:
            raise LogsConfigError(f"{ENV_VAR}: topics.{name}.backend: missing key")
        topics[Topic(name)] = _convert(entry, TopicConfig, f"topics.{name}")
    config: LogsConfig = msgspec.structs.replace(_convert(raw, LogsConfig, ""), topics=topics)
    _check_roots(config)
    return config


def load_logs_config(env: Mapping[str, str]) -> LogsConfig | None:
    """The configuration named by `ACI_LOGS_CONFIG`, or None when it is not set."""
    location = env.get(ENV_VAR, "").strip()
    if not location:
        return None
    shown = repr(location)  # the operator's own path, as given; escaped, on one line
    try:  # non-blocking open: a fifo named by mistake must not hang the worker's start
        fd = os.open(location, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise LogsConfigError(f"{ENV_VAR}: {shown} is not a regular file")
            text = handle.read(1024 * 1024 + 1)
    except OSError as exc:
        where = "" if location.startswith("/") else (
            f"; a relative path is read from the working folder {os.getcwd()}"
        )  # fmt: skip
        raise LogsConfigError(
            f"{ENV_VAR}: cannot read the file {shown} ({exc.strerror}{where})"
        ) from None
    if len(text) > 1024 * 1024:
        raise LogsConfigError(f"{ENV_VAR}: the file {shown} is over 1 MiB")
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        raise LogsConfigError(f"{ENV_VAR}: the file {shown} is not UTF-8") from None
    config = parse_logs_config(decoded)
    lookback = env.get("ACI_LOGS_DEFAULT_LOOKBACK", "").strip()
    if lookback:
        try:
            config = msgspec.structs.replace(config, default_lookback=int(lookback))
            config.__post_init__()
        except ValueError:
            raise LogsConfigError(
                f"ACI_LOGS_DEFAULT_LOOKBACK must be an int in 1..{LOOKBACK_MAX_MINUTES}"
            ) from None
    return config
