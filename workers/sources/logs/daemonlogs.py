"""Layouts of daemons' own text logs that `plain` recognises line by line (no key to set):

- Ruby's `Logger` (Rails, Sidekiq): `E, [2026-12-05T11:20:11.876973 #17958] ERROR -- orders:
  msg`; its level word (`ANY`, `Logger#unknown`, none), `pid`, `logger` (the progname), and
  `exception` where it logged an exception (`msg (ArgumentError)`, then its frames);
- PHP's `error_log`: `[05-Dec-2026 11:20:30 Europe/Berlin] PHP Warning:  msg`, the time read in
  the zone it names; `Fatal error` and `Parse error` FATAL, `Recoverable fatal error` ERROR,
  `Warning` WARN, `Notice`, `Deprecated`, `Strict Standards` INFO (the word in `level_name`),
  `exception` an uncaught one's class (`Uncaught RuntimeException: ...`);
- PHP-FPM's log: `[05-Dec-2026 11:21:39] WARNING: [pool www] child 21095 said into stderr:
  "..."`, its level word or that of the PHP message the child said, `pid` the child's;
- PHP-FPM's slow log: `[05-Dec-2026 11:21:36]  [pool www] pid 21003`, WARN (a slow request);
- BIND 9's `named`: `05-Dec-2026 11:22:17.676 zoneload: error: zone ...`, its severity
  (`debug 3` DEBUG), `logger` the category;
- Sidekiq's log (its `Pretty` formatter): `2026-12-05T11:33:57.388Z pid=3480 tid=1ps
  class=ChargeJob jid=60a2... WARN: msg`, `pid`, `thread`, `logger` (the job's class),
  `job_id`, and any other pair of its context under its own name;
- Exim's `mainlog`: `2026-12-05 11:31:56 1xZnzg-0000NN-0v ** nosuchuser@localhost: Unrouteable
  address`, the message id in `message_id` (out of the message, so one template holds every
  message's), `**` (failed) ERROR, `==` (deferred) WARN, `<=`, `=>`, `->`, `>>`, `*>` INFO;
- Squid's `cache.log`: `2026/12/05 11:28:29| WARNING: msg`, `WARNING`, `ERROR`, `FATAL`,
  `BUG` (ERROR) after `| `, an SMP worker (`kid1`) in `process`;
- CUPS's `error_log`: `E [05/Dec/2026:11:22:34 +0000] msg`, its letter (`X`, `A`, `C` FATAL,
  `d` DEBUG).

Lines after a head join it as `multiline` says (Ruby's backtrace frames, PHP's `Stack trace:`);
PHP-FPM writes each line a child said on a line of its own, so a trace line a child said right
after its previous line joins that record, and a slow log entry's `script_filename = ` and
`[0x...] f() file:line` lines join its head.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, tzinfo
from typing import Final
from zoneinfo import ZoneInfo

from contracts.results import JsonScalar
from workers.sources.logs.formats import text_entry
from workers.sources.logs.levels import canonical_level, keep_level_name
from workers.sources.logs.log4j import Head
from workers.sources.logs.multiline import Continued, Pending, continues
from workers.sources.logs.records import Entry
from workers.sources.logs.stamps import STAMP, ZONE_ABBREVIATIONS, matched_ms, stamp_ms

__all__ = ["LEVEL_TEXTS", "daemon_head", "read_postfix"]

# Text a record read here holds when its level is not named by a word of `levels` (lowered,
# for the prefilter): PHP's `Deprecated` and `Strict Standards` are INFO, a PHP-FPM slow log
# entry (`[05-Dec-2026 11:21:36]  [pool www] pid 21003`) WARN, PHP's `Parse error` and CUPS's
# `X [...]` FATAL, Squid's `| BUG 3279: ` ERROR, Exim's delivery flags; AWS Lambda's platform
# `Task timed out after` ERROR, its `START`/`END`/`REPORT` INFO, a REPORT's `Status: timeout`
# ERROR, one whose memory ran out WARN (`lambdalogs`).
LEVEL_TEXTS: Final = {
    "fatal": ("x [", "parse error"),
    "error": ("| bug", " ** ", "task timed out after ", "status: timeout", "status: error",
              "status: failure"),
    "warn": ("]  [pool ", " == ", "report requestid: "),
    "info": ("deprecated", "strict standards", " <= ", " => ", " -> ", " >> ", " *> ",
             "requestid: "),
}  # fmt: skip

_DMY: Final = r"\d\d-(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)-\d{4} \d\d:\d\d:\d\d"
_RUBY: Final = re.compile(
    r"[DIWEFA], \[(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?) #(?P<pid>\d{1,10})\] +"
    r"(?P<level>DEBUG|INFO|WARN|ERROR|FATAL|ANY) -- (?P<prog>.{0,200}?): (?P<message>.*)",
    re.S,
)
_RUBY_HEADER: Final = re.compile(
    r"# Logfile created on (?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}) by \S+$"
)
# `msg (ArgumentError)`: Logger writes an exception as its message and class, then its frames
_RUBY_RAISED: Final = re.compile(r" \(((?:[A-Z]\w*::)*[A-Z]\w*)\)$")
_PHP: Final = re.compile(
    r"\[(?P<time>" + _DMY + r") (?P<zone>[A-Za-z][\w+-]{0,40}(?:/[\w+-]{1,40}){0,2})\] "
    r"(?P<message>.*)",
    re.S,
)
_PHP_LEVEL: Final = re.compile(  # PHP-FPM's child says `NOTICE: PHP message: PHP Warning: ...`
    r"(?:[A-Z]{4,7}: PHP message: )?PHP (?P<name>Fatal error|Recoverable fatal error"
    r"|Parse error|Warning|Notice|Deprecated|Strict Standards|Unknown error):  "
)
_PHP_LEVELS: Final = {
    "Fatal error": "FATAL", "Parse error": "FATAL", "Recoverable fatal error": "ERROR",
    "Unknown error": "ERROR", "Warning": "WARN", "Notice": "INFO", "Deprecated": "INFO",
    "Strict Standards": "INFO",
}  # fmt: skip
_PHP_UNCAUGHT: Final = re.compile(r"Uncaught ([A-Za-z_\\][\w\\]{0,200})")
_FPM: Final = re.compile(
    r"\[(?P<time>" + _DMY + r")\] (?P<level>DEBUG|NOTICE|WARNING|ERROR|ALERT): (?P<message>.*)",
    re.S,
)
_FPM_CHILD: Final = re.compile(r"(?:\[pool [^\]]{1,100}\] )?child (\d{1,10})\b")
_FPM_SAID: Final = re.compile(
    r"(?P<child>\[pool [^\]]{1,100}\] child \d{1,10}) said into std(?:err|out): \"(?P<said>.*)\""
    r"(?:, pipe is closed)?$",
    re.S,
)
_FPM_SLOW: Final = re.compile(
    r"\[(?P<time>" + _DMY + r")\]  (?P<message>\[pool [^\]]{1,100}\] pid (?P<pid>\d{1,10}))$"
)
_FPM_SLOW_LINE: Final = re.compile(r"script_filename = |\[0x[0-9a-f]{8,16}\] ")
_BIND: Final = re.compile(
    STAMP + r" (?:(?P<category>[a-z][a-z0-9_-]{0,40}): )?"
    r"(?P<level>critical|error|warning|notice|info|debug(?: \d{1,3})?): (?P<message>.*)",
    re.S,
)
# Exim's mainlog: `2026-12-05 11:31:56 [pid] 1xZnzg-0000NN-0v ** rcpt: reason` (`+pid`,
# `+millisec`, `+tod_log_zone` as its log_selector adds them), the message id 6-6-2 (4.97+:
# 6-11-4), then a delivery flag: `**` failed (a bounce), `==` deferred, `<=` `=>` `->` `>>` `*>`
_EXIM: Final = re.compile(
    r"(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?(?: [+-]\d{4})?)"
    r" (?:\[(?P<pid>\d{1,10})\] )?(?P<id>[0-9A-Za-z]{6}-[0-9A-Za-z]{6,11}-[0-9A-Za-z]{2,4})"
    r" (?P<message>(?:(?P<flag><=|=>|->|>>|\*>|\*\*|==)(?= ))?.*)",  # a flag, then a space
    re.S,
)
_EXIM_LEVELS: Final = {"**": "ERROR", "==": "WARN"}
# Sidekiq's `Pretty` formatter: `2026-12-05T11:33:57.388Z pid=3480 tid=1ps class=ChargeJob
# jid=60a2... elapsed=0.0 INFO: done` (its context pairs before the level)
_SIDEKIQ: Final = re.compile(
    r"(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z) pid=(?P<pid>\d{1,10})"
    r" tid=(?P<tid>\w{1,40})(?P<context>(?: [a-z_][\w.-]{0,40}=\S{0,400}){0,16})"
    r" (?P<level>DEBUG|INFO|WARN|ERROR|FATAL|ANY): (?P<message>.*)",
    re.S,
)
_SIDEKIQ_NAMES: Final = {"class": "logger", "jid": "job_id"}
# Squid's cache.log: `2026/12/05 11:28:29| WARNING: ...` (`kid1| ` under SMP workers)
_SQUID_CACHE: Final = re.compile(
    STAMP + r"(?: (?P<kid>kid\d{1,4}))?\| (?:(?P<level>WARNING|ERROR|FATAL|BUG)(?: \d{1,6})?: )?"
    r"(?P<message>.*)",
    re.S,
)
_CUPS: Final = re.compile(r"(?P<letter>[ACDEIWNXd]) \[" + STAMP + r"\] (?P<message>.*)", re.S)
# its letters: emerg, alert, crit, error, warn, notice, info, debug, debug2
_CUPS_LEVELS: Final = dict(
    zip(
        "XACEWNIDd",
        ("FATAL", "FATAL", "FATAL", "ERROR", "WARN", "INFO", "INFO", "DEBUG", "DEBUG"),
        strict=True,
    )
)


@functools.lru_cache(maxsize=64)
def _zone_named(name: str, default: tzinfo) -> tzinfo:
    """The zone PHP writes after its time (`date.timezone`: `UTC`, `Europe/Berlin`), else the
    topic's."""
    if name in ZONE_ABBREVIATIONS:
        return datetime.strptime(ZONE_ABBREVIATIONS[name], "%z").tzinfo or default
    try:
        return ZoneInfo(name)
    except (ValueError, OSError, KeyError):  # no such zone (ZoneInfoNotFoundError: KeyError)
        return default


def _entry(epoch: int, level: str, raw: str, message: str, fields: dict[str, JsonScalar]) -> Entry:
    if level:
        keep_level_name(fields, raw, level)
    return Entry(epoch, level, "", message, fields)


def daemon_head(zone: tzinfo, now_ms: int) -> Head:
    """A head reader of the layouts above (None: the line is none of them)."""
    said: list[str] = [""]  # the PHP-FPM child whose said line was the latest head
    slow = [False]  # the latest head is a PHP-FPM slow log entry's

    def head(text: str) -> Pending | Continued | None:
        first = text[:1]
        if first == "[":
            return _php(text)
        if slow[0]:
            if _FPM_SLOW_LINE.match(text):
                return Continued(text, None)
            slow[0] = False
        said[0] = ""
        if "0" <= first <= "9":
            return _digits(text)
        second = text[1:3]
        if second == ", ":
            return _ruby(text)
        if second == " [":
            return _cups(text)
        if first == "#" and (header := _RUBY_HEADER.match(text)):
            return lambda: stamp_ms("iso", header.group("time"), zone, now_ms), (
                lambda epoch: Entry(epoch, "", "", text[2:], {})
            )
        return None

    def _digits(text: str) -> Pending | None:
        # each layout's mark first: an ISO-stamped line of another program (the most common
        # kind under `plain`) is tried against none of the patterns, or one
        tenth = text[10:11]
        if tenth == " ":
            if text[4:5] == "/":  # Squid's `2026/12/05 11:28:29| ` (`kid1| `)
                return _squid_cache(text) if "| " in text[19:32] else None
            # Exim's `2026-12-05 11:31:56 [pid] 1xZnzg-0000NN-0v` (`.123`, ` +0100` after it)
            mark = text[26:27] == "-" or text[19:20] == "." or text[20:21] in ("[", "+", "-")
            return _exim(text) if mark else None
        if tenth == "T":
            if " pid=" in text[19:40]:
                return _sidekiq(text)
            return _bind(text)  # BIND's `print-time iso8601`
        return _bind(text) if text[2:3] == "-" else None  # `05-Dec-2026 11:22:17.676`

    def _php(text: str) -> Pending | Continued | None:
        prefix, said[0] = said[0], ""
        if slow[0] and _FPM_SLOW_LINE.match(text):
            return Continued(text, None)
        slow[0] = False
        if fpm := _FPM.match(text):
            return _fpm(fpm, prefix)
        if found := _FPM_SLOW.match(text):
            slow[0] = True
            return lambda: stamp_ms("dmy", found.group("time"), zone, now_ms), (
                lambda epoch: Entry(epoch, "WARN", "", found.group("message"),
                                    {"pid": found.group("pid")})
            )  # fmt: skip
        if (found := _PHP.match(text)) is None:
            return None
        at = _zone_named(found.group("zone"), zone)

        def build(epoch: int) -> Entry:
            message = found.group("message")
            fields: dict[str, JsonScalar] = {}
            return Entry(epoch, _php_level(message, fields), "", message, fields)

        return lambda: stamp_ms("dmy", found.group("time"), at, now_ms), build

    def _fpm(found: re.Match[str], prefix: str) -> Pending | Continued:
        message = found.group("message")
        inner = _FPM_SAID.match(message)

        def build(epoch: int) -> Entry:
            fields: dict[str, JsonScalar] = {}
            if child := _FPM_CHILD.match(message):
                fields["pid"] = child.group(1)
            raw = found.group("level")
            level = _php_level(inner.group("said"), fields) if inner else ""
            if not level:
                fields.pop("level_name", None)
                level = canonical_level(raw) or ""
                keep_level_name(fields, raw, level)
            return Entry(epoch, level, "", message, fields)

        pending: Pending = (lambda: stamp_ms("dmy", found.group("time"), zone, now_ms), build)
        if inner is None:
            return pending
        said[0] = inner.group("child")
        if prefix == said[0] and continues(inner.group("said")):
            return Continued(inner.group("said"), pending)
        return pending

    def _bind(text: str) -> Pending | None:
        found = _BIND.match(text)
        if found is None:
            return None

        def build(epoch: int) -> Entry:
            raw = found.group("level")
            fields: dict[str, JsonScalar] = {}
            if category := found.group("category"):
                fields["logger"] = category
            level = canonical_level(raw.split()[0]) or ""
            return _entry(epoch, level, raw, found.group("message"), fields)

        return lambda: matched_ms(found, zone, now_ms), build

    def _exim(text: str) -> Pending | None:
        found = _EXIM.match(text)
        if found is None:
            return None

        def build(epoch: int) -> Entry:
            flag = found.group("flag")
            fields: dict[str, JsonScalar] = {"message_id": found.group("id")}
            if pid := found.group("pid"):
                fields["pid"] = pid
            level = _EXIM_LEVELS.get(flag, "INFO") if flag else ""
            return Entry(epoch, level, "", found.group("message"), fields)

        return lambda: stamp_ms("iso", found.group("time"), zone, now_ms), build

    def _sidekiq(text: str) -> Pending | None:
        found = _SIDEKIQ.match(text)
        if found is None:
            return None

        def build(epoch: int) -> Entry:
            fields: dict[str, JsonScalar] = {
                "pid": found.group("pid"),
                "thread": found.group("tid"),
            }
            for pair in found.group("context").split():
                name, _, value = pair.partition("=")
                fields.setdefault(_SIDEKIQ_NAMES.get(name, name), value)
            raw, message = found.group("level"), found.group("message")
            if raw == "ANY":  # Logger#unknown, as Ruby's own layout
                return Entry(epoch, "", "", message, {**fields, "level_name": raw})
            return text_entry(epoch, raw, message, fields)

        return lambda: stamp_ms("iso", found.group("time"), zone, now_ms), build

    def _squid_cache(text: str) -> Pending | None:
        found = _SQUID_CACHE.match(text)
        if found is None:
            return None

        def build(epoch: int) -> Entry:
            raw = found.group("level") or ""
            fields: dict[str, JsonScalar] = {"process": kid} if (kid := found.group("kid")) else {}
            level = "ERROR" if raw == "BUG" else canonical_level(raw) or ""
            return _entry(epoch, level, raw, found.group("message"), fields)

        return lambda: matched_ms(found, zone, now_ms), build

    def _cups(text: str) -> Pending | None:
        found = _CUPS.match(text)
        if found is None:
            return None
        letter = found.group("letter")
        return lambda: matched_ms(found, zone, now_ms), (
            lambda epoch: _entry(epoch, _CUPS_LEVELS[letter], letter, found.group("message"), {})
        )

    def _ruby(text: str) -> Pending | None:
        found = _RUBY.match(text)
        if found is None:
            return None

        def build(epoch: int) -> Entry:
            raw, message = found.group("level"), found.group("message")
            fields: dict[str, JsonScalar] = {"pid": found.group("pid")}
            if prog := found.group("prog"):
                fields["logger"] = prog
            if raised := _RUBY_RAISED.search(message.split("\n", 1)[0]):
                name = raised.group(1)
                if "::" in name or name.endswith(("Error", "Exception", "Interrupt", "Exit")):
                    fields["exception"] = name
            if raw == "ANY":  # Logger#unknown: a message of no known severity
                fields["level_name"] = raw
                return Entry(epoch, "", "", message, fields)
            return text_entry(epoch, raw, message, fields)

        return lambda: stamp_ms("iso", found.group("time"), zone, now_ms), build

    return head


def _php_level(message: str, fields: dict[str, JsonScalar]) -> str:
    """The level a PHP message names (`PHP Fatal error:  ...`, after FPM's `NOTICE: PHP
    message: ` too), its word in `level_name` and an uncaught exception's class, or ''."""
    found = _PHP_LEVEL.match(message)
    if found is None:
        return ""
    name = found.group("name")
    fields["level_name"] = name
    if uncaught := _PHP_UNCAUGHT.match(message, found.end()):
        fields["exception"] = uncaught.group(1)
    return _PHP_LEVELS[name]


# Postfix through syslog (`postfix/smtp[19404]: C17FB174165: to=<...>, ..., status=deferred
# (...)`): the queue id first, its own `warning: ` / `error: ` / `fatal: ` / `panic: ` before
# a message (Postfix's msg_warn and the like), else a delivery's status
_POSTFIX: Final = re.compile(
    r"(?:(?P<queue>[0-9A-F]{6,20}|[0-9B-DF-HJ-NP-TV-Zb-df-hj-np-tv-z]{10,20}): )?"
    r"(?:(?P<said>warning|error|fatal|panic): )?"
)
# A sender names the address (`to=<status=sent@localhost>`) and a remote server its reply
# (`status=bounced (host said: ...)`): of the statuses a line names, the most severe is taken,
# so no address hides a bounce (the first one was: the address's `sent`)
_POSTFIX_STATUS: Final = re.compile(r"\bstatus=([a-z]{1,20})\b")
_POSTFIX_LEVELS: Final = {
    "bounced": "ERROR", "expired": "ERROR", "deferred": "WARN", "sent": "INFO",
    "warning": "WARN", "error": "ERROR", "fatal": "FATAL", "panic": "FATAL",
}  # fmt: skip
_RANK: Final = ("", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")


def read_postfix(entry: Entry) -> None:
    """A Postfix line read through syslog: its queue id in `queue_id`, and the level its
    delivery status or its own `warning: ` says (`bounced` ERROR, `deferred` WARN), where it
    is more severe than the line's PRI (Postfix logs a bounce at `mail.info`)."""
    found = _POSTFIX.match(entry.message)
    if found is None:  # pragma: no cover - every part of the pattern is optional
        return
    if queue := found.group("queue"):
        entry.fields["queue_id"] = queue
    word = found.group("said") or max(
        _POSTFIX_STATUS.findall(entry.message, found.end()),
        key=lambda w: _RANK.index(_POSTFIX_LEVELS.get(w, "")),
        default="",
    )
    level = _POSTFIX_LEVELS.get(word, "")
    if level and _RANK.index(level) > _RANK.index(entry.level if entry.level in _RANK else ""):
        entry.level = level
        entry.fields["level_name"] = word
