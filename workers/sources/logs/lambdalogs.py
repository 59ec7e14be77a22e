"""AWS Lambda's text log lines (its runtimes' default format, as CloudWatch Logs holds them and
an export or `sam logs` writes them), read by `plain`: Node's and Java's
`2026-12-05T14:00:00.123Z<TAB>8f5a1b2c-...<TAB>ERROR<TAB>Invoke Error ...`, Python's
`[ERROR]<TAB>2026-12-05T14:00:00.123Z<TAB>8f5a1b2c-...<TAB>charge failed`, and the platform's
`2026-12-05T14:00:03.012Z 9f5a1b2c-... Task timed out after 3.00 seconds` (ERROR). The level
is the runtime's, the invocation's id `request_id` (`request_id:8f5a1b2c-...` finds every line
of one invocation). Before, the level and the id stayed in the message, level-less records:
`level:error` over a function's errors found none.

The platform's `START RequestId: ...`, `END RequestId: ...` and `REPORT RequestId: ...
Duration: 1402.11 ms<TAB>Billed Duration: ...<TAB>Memory Size: 128 MB<TAB>Max Memory Used: 127
MB` lines are records where they carry a time: a CloudWatch export's prefix
(`2026-12-05T14:00:03.012Z REPORT RequestId: ...`; an export writes it before a runtime's line
too, read as that line), `aws logs tail`'s (`awstail.py`).
INFO, `request_id` their id, REPORT's figures numbers (`duration_ms`, `billed_duration_ms`,
`init_duration_ms`, `memory_size_mb`, `max_memory_used_mb`; `status`, `error_type`): a
`Status: timeout` or `error` is ERROR, a Max Memory Used at the Memory Size (out of memory)
WARN. Bare, as the Lambda console and `sam local` print them, they have no time of their own:
lines not in the format, matched as text (a time taken from the line before would be a
guess)."""

from __future__ import annotations

import re
from datetime import tzinfo
from typing import Final

from contracts.results import JsonScalar
from workers.sources.logs.formats import text_entry
from workers.sources.logs.multiline import Pending
from workers.sources.logs.records import Entry
from workers.sources.logs.stamps import STAMP, matched_ms

__all__ = ["LAMBDA_FIELDS", "LAMBDA_NUMBERS", "lambda_head", "platform_entry"]

_ID: Final = r"(?P<request>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
_WORDS: Final = r"TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|CRITICAL"
_RUNTIME: Final = re.compile(
    r"(?:\[(?P<python>" + _WORDS + r")\]\t)?" + STAMP + r"\t" + _ID
    + r"\t(?:(?P<level>" + _WORDS + r")\t)?(?P<message>.*)",
    re.S,
)  # fmt: skip
_TIMED_OUT: Final = "Task timed out after "
_TIMEOUT: Final = re.compile(STAMP + r" " + _ID + r" (?P<message>Task timed out after .*)", re.S)
_STAMPED: Final = re.compile(STAMP + r"[ \t](?=(?:START|END|REPORT) RequestId: )")
# A CloudWatch export to S3 writes each event after its time: `<time> <the runtime's line>`
_EXPORTED: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (?=\S)")
_PLATFORM: Final = re.compile(r"(?:START|END|REPORT) RequestId: " + _ID + r"(?=\s|$)")
# REPORT's figures: its name, our field, whether a number (values are one token each)
_FIGURES: Final = {
    "Duration": "duration_ms",
    "Billed Duration": "billed_duration_ms",
    "Init Duration": "init_duration_ms",
    "Billed Restore Duration": "billed_restore_duration_ms",
    "Restore Duration": "restore_duration_ms",
    "Memory Size": "memory_size_mb",
    "Max Memory Used": "max_memory_used_mb",
    "Status": "status",
    "Error Type": "error_type",
}
# (left to right, a longer name is read before a shorter one inside it: `Billed Duration`)
_FIGURE: Final = re.compile(r"(?<!\w)(" + "|".join(_FIGURES) + r"): (\S{1,200})")
_NUMBER: Final = re.compile(r"\d{1,12}(?:\.\d{1,6})?")
LAMBDA_NUMBERS: Final = tuple(v for v in _FIGURES.values() if v.endswith(("_ms", "_mb")))
LAMBDA_FIELDS: Final = tuple(v for v in _FIGURES.values() if v != "duration_ms")  # + request_id


def platform_entry(epoch: int, message: str) -> Entry | None:
    """The platform's START, END or REPORT line (`message`, its time read) as a record, or
    None when it is none."""
    found = _PLATFORM.match(message)
    if found is None:
        return None
    fields: dict[str, JsonScalar] = {"request_id": found.group("request")}
    if message.startswith("REPORT"):
        for name, value in _FIGURE.findall(message, found.end()):
            ours = _FIGURES[name]
            if ours in LAMBDA_NUMBERS:
                if _NUMBER.fullmatch(value):
                    fields.setdefault(ours, float(value) if "." in value else int(value))
            else:
                fields.setdefault(ours, value)
    level = "INFO"
    if str(fields.get("status", "")).lower() in ("timeout", "error", "failure"):
        level = "ERROR"
    elif fields.get("max_memory_used_mb", -1) == fields.get("memory_size_mb"):
        level = "WARN"  # every MB used: the function ran out of memory (or was about to)
    return Entry(epoch, level, "", message, fields)


def lambda_head(text: str, zone: tzinfo, now_ms: int) -> Pending | None:
    """A line of a Lambda runtime's, of the platform's timeout or of its START, END or REPORT
    after a time, or None."""
    if (
        "\t" not in text[:80]
        and " Task timed out after " not in text[:120]
        and "RequestId: " not in text[:64]
    ):
        return None  # (most lines: no regular expression tried)
    if (stamped := _STAMPED.match(text)) is not None:
        platform = platform_entry(0, text[stamped.end() :])
        if platform is not None:

            def timed(epoch: int) -> Entry:
                platform.epoch_ms = epoch
                return platform

            return lambda: matched_ms(stamped, zone, now_ms), timed
    found = _RUNTIME.match(text) or _TIMEOUT.match(text)
    if found is None and (exported := _EXPORTED.match(text)) is not None:
        rest = text[exported.end() :]  # an S3 export's time, then the runtime's line
        found = _RUNTIME.match(rest) or _TIMEOUT.match(rest)
    if found is None:
        return None

    def build(epoch: int) -> Entry:
        fields: dict[str, JsonScalar] = {"request_id": found.group("request")}
        message = found.group("message")
        if found.re is _TIMEOUT or message.startswith(_TIMED_OUT):
            return Entry(epoch, "ERROR", "", message, fields)
        return text_entry(epoch, found.group("python") or found.group("level"), message, fields)

    return lambda: matched_ms(found, zone, now_ms), build
