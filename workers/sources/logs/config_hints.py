"""What the text of `ACI_LOGS_CONFIG` means beyond its schema (`config` validates it): zone
names (`zone_of`), and what a new user's mistake is said as, so that the one-line error says
what to write instead: a key spelt almost as a known one (`path`, `timezome`, `source`,
`[topic.APPLICATION]`), a key unknown there (the keys known there listed), a `~` (not
expanded: TOML is no shell)."""

from __future__ import annotations

import difflib
import os
import re
from datetime import UTC, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["home_hint", "topics_hint", "unknown_key", "zone_of"]


def zone_of(name: str) -> tzinfo:
    """`UTC`, a fixed offset (`+08:00`) or an IANA name; `ValueError` otherwise."""
    if name.upper() in ("UTC", "Z"):
        return UTC
    found = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", name)
    hours, minutes = (int(found.group(2)), int(found.group(3))) if found else (0, 0)
    if found and hours <= 23 and minutes <= 59:
        sign = -1 if found.group(1) == "-" else 1
        return timezone(sign * timedelta(hours=hours, minutes=minutes))
    if not found and len(name) <= 64:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a folder of tzdata
            pass
    shown = name if len(name) <= 64 else name[:61] + "..."
    raise ValueError(f"unknown time zone {shown!r} (UTC, +08:00 or an IANA name)")


def _known(parent: str, raw: object) -> list[str]:
    """The keys a table of the file takes, in the order the docs give them."""
    from workers.sources.logs import config  # (it imports this module)

    tables: dict[str, Any] = {
        "": config.LogsConfig, "scan": config.ScanBudget, "clickhouse": config.ClickhouseConnection
    }  # fmt: skip
    backend = raw.get("backend") if isinstance(raw, dict) else None
    if re.fullmatch(r"topics\.\w+\.sources\[\d+\]", parent):
        return list(config.FileSource.__struct_fields__)
    if re.fullmatch(r"topics\.\w+", parent):
        kind = {"clickhouse": config.ClickhouseTopic, "mock": config.MockTopic}
        return ["backend", *kind.get(str(backend), config.FileTopic).__struct_fields__]
    table = tables.get(parent)
    keys = list(table.__struct_fields__) if table is not None else []
    return [k for k in keys if k != "default_lookback"]  # (set by ACI_LOGS_DEFAULT_LOOKBACK)


def unknown_key(full: str, raw: object) -> str:
    """`unknown key (did you mean paths?)`, or the keys known there."""
    parent, _, name = full.rpartition(".")
    known = _known(parent, raw)
    if not known:
        return "unknown key"
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close and close[0] == "sources":
        return f"unknown key (did you mean sources? each one a [[{parent}.sources]] table)"
    if close:
        return f"unknown key (did you mean {close[0]}?)"
    return f"unknown key (one of {', '.join(known)})"


def topics_hint(raw: dict[str, Any]) -> str:
    """Why the file has no `[topics.<TOPIC>]` table: a table spelt almost so."""
    for key, value in raw.items():
        if isinstance(value, dict) and difflib.get_close_matches(key, ["topics"], cutoff=0.6):
            first = next(iter(value), "APPLICATION")
            return f" (the file has [{key}.{first}]: did you mean [topics.{first}]?)"
    return ""


def home_hint(path: str) -> str:
    """A path written with `~`: TOML does not expand it, nor does the worker."""
    if not path.startswith("~"):
        return ""
    return f" (~ is not expanded: write the home folder out, {os.path.expanduser(path)})"
