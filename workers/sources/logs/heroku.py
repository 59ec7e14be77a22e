"""Heroku's log lines (`heroku logs`, a log drain's file: `2026-12-05T14:00:00.123456+00:00
heroku[router]: at=error code=H12 desc="Request timeout" method=GET path="/orders" ...`),
read through `syslog` (no host: the source and dyno are the tag, `app` and `pid`). The
router's `at=` is the level (`at=error` ERROR; before, every router line level-less), its
pairs the access fields (`status` `http_status`, `path` `uri`, `method`, `fwd` `client`,
`service=30000ms` `duration_ms`, `connect` `connect_ms`, `bytes`) and `code` (`H12`), `dyno`,
`request_id`, `host` (the app's host name) under their own names; the platform's `Error R14
(Memory quota exceeded)` and `Error H10 (App crashed)` lines ERROR. A pair's value is kept as
written, so the prefilter finds it in the line."""

from __future__ import annotations

import re
from typing import Final

from workers.sources.logs.records import Entry

__all__ = ["HEROKU_FIELDS", "read_heroku"]

_PAIR: Final = re.compile(r'(?<!\S)([a-z_]+)=("[^"]*"|\S*)')
_NAMES: Final = {
    "status": "http_status", "path": "uri", "fwd": "client", "service": "duration_ms",
    "connect": "connect_ms", "method": "method", "bytes": "bytes", "code": "code",
    "desc": "desc", "dyno": "dyno", "request_id": "request_id", "host": "app_host",
    "protocol": "protocol",
}  # fmt: skip
HEROKU_FIELDS: Final = tuple(n for n in _NAMES.values() if n not in ("method", "uri", "bytes"))
_LEVELS: Final = {"error": "ERROR", "warning": "WARN", "info": "INFO"}
_PLATFORM_ERROR: Final = re.compile(r"Error [HLR]\d\d ")  # Heroku's error codes


def read_heroku(entry: Entry) -> None:
    """A Heroku line's level and fields, in place (the module docstring)."""
    if entry.fields.get("pid") == "router":
        for key, value in _PAIR.findall(entry.message):
            if (name := _NAMES.get(key)) is None:
                continue
            value = value.strip('"')
            if name in ("http_status", "bytes") and value.isdigit() and len(value) < 10:
                entry.fields[name] = int(value)
            elif name in ("duration_ms", "connect_ms") and value.removesuffix("ms").isdigit():
                entry.fields[name] = int(value.removesuffix("ms"))
            elif value:
                entry.fields[name] = value
        at = re.match(r"at=(\w+)", entry.message)
        if at and (level := _LEVELS.get(at.group(1))):
            entry.level = level
    elif _PLATFORM_ERROR.match(entry.message) and not entry.level:
        entry.level = "ERROR"
