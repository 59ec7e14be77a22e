"""The JVM's unified logging (`-Xlog`, JDK 9+: the GC log, `-Xlog:gc*:file=gc.log:time,uptime,
level,tags`), read by `plain`: `[2026-12-05T14:00:00.123+0000][1201.9s][info][gc] GC(41) Pause
Full (G1 Compaction Pause) 255M->250M(256M) 1402.118ms`. The decorators come in the JVM's
order (time or utctime first; uptime, timemillis, uptimemillis, timenanos, uptimenanos,
hostname, pid, tid), the level and tags padded as the JVM pads them (`[info ][gc,heap   ]`).

The level is the one in brackets (`warning` WARN), the tags the `logger` (`logger:gc,alloc`),
the pid and tid fields, and a pause's or phase's time at the end (`1402.118ms`) `duration_ms`,
so `duration_ms:>1000` finds the long pauses. Before, every record was level-less (the level
stayed in the message: `level:warn` missed `To-space exhausted`) and no pause could be
compared. A log without a time decorator (the JVM's default `uptime,level,tags`) has no wall
time to read: no line is a record, and `check` says so."""

from __future__ import annotations

import re
from datetime import tzinfo
from typing import Final

from contracts.results import JsonScalar
from workers.sources.logs.formats import text_entry
from workers.sources.logs.multiline import Pending
from workers.sources.logs.records import Entry
from workers.sources.logs.stamps import STAMP, matched_ms

__all__ = ["JVM_FIELDS", "jvm_head"]

JVM_FIELDS: Final = ("duration_ms",)
_JVM: Final = re.compile(
    r"\[" + STAMP + r"\](?:\[[^\[\]]{1,40}\]){0,9}?"
    r"(?:\[(?P<pid>\d{1,10})\]\[(?P<tid>\d{1,10})\])?"
    r"\[(?P<level>trace|debug|info|warning|error) *\]\[(?P<tags>[a-z0-9_,]{1,200}) *\] ?"
    r"(?P<message>.*)",
    re.S,
)
_DURATION: Final = re.compile(r" (\d{1,12}(?:\.\d{1,9})?)ms$")


def jvm_head(text: str, zone: tzinfo, now_ms: int) -> Pending | None:
    """A line of the JVM's unified logging that starts with a time decorator, or None."""
    if not text.startswith("[") or (found := _JVM.match(text)) is None:
        return None

    def build(epoch: int) -> Entry:
        message = found.group("message")
        fields: dict[str, JsonScalar] = {"logger": found.group("tags")}
        if found.group("pid"):
            fields["pid"], fields["thread"] = found.group("pid", "tid")
        if duration := _DURATION.search(message):
            fields["duration_ms"] = float(duration.group(1))
        return text_entry(epoch, found.group("level"), message, fields)

    return lambda: matched_ms(found, zone, now_ms), build
