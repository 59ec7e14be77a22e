"""AWS Lambda's text log lines (its runtimes' default format, as CloudWatch Logs holds them and
an export or `sam logs` writes them), read by `plain`: Node's and Java's
`2026-12-05T14:00:00.123Z<TAB>8f5a1b2c-...<TAB>ERROR<TAB>Invoke Error ...`, Python's
`[ERROR]<TAB>2026-12-05T14:00:00.123Z<TAB>8f5a1b2c-...<TAB>charge failed`, and the platform's
`2026-12-05T14:00:03.012Z 9f5a1b2c-... Task timed out after 3.00 seconds` (ERROR). The level
is the runtime's, the invocation's id `request_id` (`request_id:8f5a1b2c-...` finds every line
of one invocation). Before, the level and the id stayed in the message, level-less records:
`level:error` over a function's errors found none. The platform's `START`, `END` and `REPORT`
lines carry no time: lines not in the format, matched as text."""

from __future__ import annotations

import re
from datetime import tzinfo
from typing import Final

from contracts.results import JsonScalar
from workers.sources.logs.formats import text_entry
from workers.sources.logs.multiline import Pending
from workers.sources.logs.records import Entry
from workers.sources.logs.stamps import STAMP, matched_ms

__all__ = ["lambda_head"]

_ID: Final = r"(?P<request>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
_WORDS: Final = r"TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|CRITICAL"
_RUNTIME: Final = re.compile(
    r"(?:\[(?P<python>" + _WORDS + r")\]\t)?" + STAMP + r"\t" + _ID
    + r"\t(?:(?P<level>" + _WORDS + r")\t)?(?P<message>.*)",
    re.S,
)  # fmt: skip
_TIMED_OUT: Final = "Task timed out after "
_TIMEOUT: Final = re.compile(STAMP + r" " + _ID + r" (?P<message>Task timed out after .*)", re.S)


def lambda_head(text: str, zone: tzinfo, now_ms: int) -> Pending | None:
    """A line of a Lambda runtime's or of the platform's timeout, or None."""
    if "\t" not in text[:80] and " Task timed out after " not in text[:120]:
        return None  # (most lines: no regular expression tried)
    found = _RUNTIME.match(text) or _TIMEOUT.match(text)
    if found is None:
        return None

    def build(epoch: int) -> Entry:
        fields: dict[str, JsonScalar] = {"request_id": found.group("request")}
        message = found.group("message")
        if found.re is _TIMEOUT or message.startswith(_TIMED_OUT):
            return Entry(epoch, "ERROR", "", message, fields)
        return text_entry(epoch, found.group("python") or found.group("level"), message, fields)

    return lambda: matched_ms(found, zone, now_ms), build
