"""`aws logs tail`'s output (AWS CLI v2, its default `--format detailed`), read by `plain`:
`2026-12-05T14:00:00.123000+00:00 <log stream> <message>`, the event's time in UTC (without a
fraction when it has none), the stream a field `log_stream` (`log_stream:*web*`), and the
message read as a record's: a Lambda runtime's line (`2026-12-05T14:00:00.123Z<TAB><id><TAB>
ERROR<TAB>...`: its level and `request_id`), the platform's `START`/`END`/`REPORT`
(`lambdalogs.py`), a JSON object (as `jsonl` reads it: its level, message and fields), or text
with a level first, after its own time or not (`[ERROR] ...`, `2026-12-05 14:00:00,123 WARN
...`). The event's time is the record's (CloudWatch's, not the message's own).

A stream is only taken as one when it looks like one: a `/` in it (Lambda's
`2026/12/05/[$LATEST]<hex>`, ECS's `<prefix>/<container>/<task>`, a CloudWatch agent's file
path), an EC2 instance id (`i-0abc...`, the agent's default), or 32 hex digits at its end: a
line of an app that writes Python's `isoformat()` then `started server` keeps `started` in
its message (so do `/usr/sbin/mariadbd:` and `[main/INFO]`). Before, every line was a
level-less record whose message began with the stream: `level:error` over a function's tail
found nothing."""

from __future__ import annotations

import re
from datetime import tzinfo
from typing import Final

from contracts.results import JsonScalar
from workers.sources.logs.formats import JsonLines, parse_time, text_entry
from workers.sources.logs.lambdalogs import lambda_head, platform_entry
from workers.sources.logs.log4j import LEVEL_WORD
from workers.sources.logs.multiline import Pending
from workers.sources.logs.records import Entry
from workers.sources.logs.stamps import STAMP

__all__ = ["TAIL_FIELDS", "tail_head"]

TAIL_FIELDS: Final = ("log_stream",)
_TAIL: Final = re.compile(
    r"(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{6})?\+00:00) (?P<stream>\S{1,512}) "
    r"(?P<message>.*)",
    re.S,
)
_EC2: Final = re.compile(r"i-[0-9a-f]{8}(?:[0-9a-f]{9})?")
_HEX32: Final = re.compile(r"[0-9a-f]{32}")
_LEVELED: Final = re.compile(
    r"(?:" + STAMP + r"\]?\s+)?[\[<(]?(?P<level>" + LEVEL_WORD + r")\b[\]>)]?:?\s*(?P<message>.*)",
    re.S,
)


def _message(epoch: int, message: str, zone: tzinfo, now_ms: int) -> Entry:
    """The record an event's message is (its time the event's)."""
    if (runtime := lambda_head(message, zone, now_ms)) is not None:
        return runtime[1](epoch)
    if (platform := platform_entry(epoch, message)) is not None:
        return platform
    if message.startswith("{"):
        reader = JsonLines({}, zone, "", "auto")
        reader.runtime_epoch = epoch  # an object without a time of its own
        if found := reader.feed(message):
            found[0].epoch_ms = epoch
            return found[0]
    if (leveled := _LEVELED.match(message)) is not None:
        return text_entry(epoch, leveled.group("level"), leveled.group("message"), {})
    return text_entry(epoch, None, message, {})


def _is_stream(name: str) -> bool:
    """Whether a word looks like a log stream's name (not an app's `[main/INFO]` or
    `/usr/sbin/mariadbd:`: a bracket, quote or brace first, a colon or bracket last)."""
    if name[0] in "[(<{\"'" or name[-1] in ":],;":
        return False
    return "/" in name or bool(_EC2.fullmatch(name) or _HEX32.fullmatch(name, len(name) - 32))


def tail_head(text: str, zone: tzinfo, now_ms: int) -> Pending | None:
    """A line of `aws logs tail`'s output, or None."""
    if text[10:11] != "T" or (text[19:26] != "+00:00 " and text[26:33] != "+00:00 "):
        return None  # (most lines: no regular expression tried)
    found = _TAIL.match(text)
    if found is None or not _is_stream(found.group("stream")):
        return None
    epoch = parse_time(found.group("time"), zone)

    def build(at: int) -> Entry:
        entry = _message(at, found.group("message"), zone, now_ms)
        fields: dict[str, JsonScalar] = {"log_stream": found.group("stream")}
        entry.fields = fields | entry.fields
        return entry

    return lambda: epoch, build
