"""The `log4j` format's heads: Java's log4j / log4j2 / logback / Spring Boot layouts.

A leading time (`stamps`), a level word, then the thread (`[main]`) and logger before ` - ` or
`: ` (the level first too: Cassandra's); Logstash's `[%d][%-5p][%-25c] %m`; ActiveMQ's
`%d | %-5p | %m | %c | %t` (the message between pipes, the logger and thread last); JBoss's
`%d %-5p [%c] (%t) %s` (the logger in brackets, the thread in parentheses). Multi-line
stack traces are joined to their record by `multiline.HeadParser` (docs/logs.md, "log4j").
Text between the time and the level that is no thread or logger is kept (`_unplaced`: the
field `prefix`), never dropped; `check` says so (`check_hints.unplaced`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import tzinfo
from typing import Final

from contracts.results import JsonScalar
from workers.sources.logs.formats import text_entry
from workers.sources.logs.multiline import Continued, Pending
from workers.sources.logs.records import Entry
from workers.sources.logs.stamps import STAMP, matched_ms

__all__ = ["LEVEL_WORD", "Head", "log4j_head"]

LEVEL_WORD: Final = (
    r"TRACE|DEBUG|INFO|NOTICE|WARN(?:ING)?|ERROR|SEVERE|FATAL|CRIT(?:ICAL)?|ALERT|EMERG(?:ENCY)?"
    r"|FINE(?:R|ST)?|CONFIG|Note|Warning|trace|debug|info(?:rmation)?|notice|warn(?:ing)?|error"
    r"|fatal|critical"  # Icinga 2's `information/Facility: `
    r"|TRC|DBG|INF|WRN|ERR|FTL|VRB"  # zerolog, Serilog, NATS
)
_LOG4J: Final = re.compile(
    r"\[?" + STAMP + r"\]?\s+(?P<pre>.{0,80}?)(?<![\w.$])(?P<level>" + LEVEL_WORD + r")\b"
    r"(?P<closed>(?<=\[\w{3}) *\]|(?<=\[\w{4}) ?\]|(?<=\[\w{5})\])?"  # `[%-5p]`
    r":?\s*(?:-\s+)?(?P<rest>.*)",
    re.S,
)
# The level first (Cassandra's `%-5level [%thread] %date{ISO8601} %F:%L - %msg%n`).
_LOG4J_LEVEL_FIRST: Final = re.compile(
    r"(?P<level>" + LEVEL_WORD + r")\s+(?P<pre>\[[^\]\n]{0,200}\])?\s*\[?" + STAMP + r"\]?"
    r"\s+(?P<rest>.*)",
    re.S,
)
# Logstash's plain log and Elasticsearch's before 7: `[%d{ISO8601}][%-5p][%-25c] %m`
_LOG4J_BRACKETS: Final = re.compile(
    r"\[" + STAMP + r"\]\[(?P<level>" + LEVEL_WORD + r") *\]\[(?P<logger>[^\]\s]+) *\]"
    r" ?(?P<message>.*)",
    re.S,
)
# ActiveMQ's default (`conf/log4j2.properties`): `%d | %-5p | %m | %c | %t%n`; a thread's name
# may hold spaces and ` | ` may be in the message, so the logger is the last dotted name between
# pipes before the last one.
_LOG4J_PIPES: Final = re.compile(
    r"\[?" + STAMP + r"\]? \| (?P<level>" + LEVEL_WORD + r") *\| (?P<message>.*) \| "
    r"(?P<logger>[A-Za-z_$][\w$]*(?:\.[\w$]+)+) \| (?P<thread>[^|\n]*?) *",
    re.S,
)
# JBoss Log Manager's `%d %-5p [%c] (%t) %s%e` (WildFly, Keycloak, Quarkus): the logger in
# brackets right after the level, the thread in parentheses (a thread's name may hold some).
_JBOSS: Final = re.compile(
    r"\[(?P<logger>[A-Za-z_$][\w$]*(?:\.[\w$]+)+)\] "
    r"\((?P<thread>[^()\n]{0,200}(?:\([^()\n]{0,100}\)[^()\n]{0,100})*)\) (?P<message>.*)",
    re.S,
)
_LOG4J_REST: Final = re.compile(r"(?P<head>.{0,300}?)(?P<sep> - |: | : )(?P<message>.*)", re.S)
_THREAD: Final = re.compile(r"\[([^\]\[]*(?:\[[^\]]*\][^\]\[]*)*)\]")
_LOGGER: Final = re.compile(r"[A-Za-z_$][\w$]*(?:\.[\w$]+)+(?:@\d+)?")
_NAME: Final = re.compile(r"[\w$.@-]+(?::\d+)?")  # `%F:%L` too: `CassandraDaemon.java:507`

Head = Callable[[str], Pending | Continued | None]


def log4j_head(zone: tzinfo, now_ms: int) -> Head:
    def head(text: str) -> Pending | None:
        if bracketed := _LOG4J_BRACKETS.match(text):
            return _bracketed(bracketed, zone, now_ms)
        if piped := _LOG4J_PIPES.fullmatch(text):
            return _bracketed(piped, zone, now_ms)
        found = _LOG4J.match(text) or _LOG4J_LEVEL_FIRST.match(text)
        if found is None:
            return None

        def when() -> int | None:
            return matched_ms(found, zone, now_ms)

        def build(epoch: int) -> Entry:
            fields: dict[str, JsonScalar] = {}
            rest, pre = found.group("rest"), found.group("pre")
            if not (pre or "").strip() and (jboss := _JBOSS.match(rest)):
                fields = {"logger": jboss.group("logger"), "thread": jboss.group("thread")}
                return text_entry(epoch, found.group("level"), jboss.group("message"), fields)
            closed = bool(found.groupdict().get("closed"))  # `[%-5p] [%t] [%c] - %m`
            split = _LOG4J_REST.match(rest)
            pre = pre[:-1] if closed else pre
            before = pre + " " + (split.group("head") if split else "")
            cut = len(pre)  # `before[:cut]`: the text before the level, not in the message
            if thread := _THREAD.search(before):
                fields["thread"] = thread.group(1).strip()
                before = before[: thread.start()] + " " + before[thread.end() :]
                cut -= max(0, min(cut, thread.end()) - thread.start() - 1)
            # The logger: the one name left beside a pid and `---` (Spring Boot); text before
            # `: ` that is not such a name belongs to the message ("Failed to reach Redis: ...").
            names = [t for t in before.split() if not t.isdigit() and t.strip("-")]
            names = [t[1:-1] if closed and t[:1] + t[-1:] == "[]" else t for t in names]
            logger = None
            if split is not None and len(names) == 1:  # `%c - %m`: any name; `: ` a dotted one
                named = _NAME if split.group("sep") != ": " else _LOGGER
                logger = names[0] if named.fullmatch(names[0]) else None
            if logger is not None:
                fields["logger"] = logger
            elif split is not None and not names and "thread" in fields:
                logger = ""  # `[thread] - message` (Zookeeper): the message follows the separator
            message = split.group("message") if split is not None and logger is not None else rest
            _unplaced(before if logger is not None else before[:cut], fields)
            return text_entry(epoch, found.group("level"), message, fields)

        return when, build

    return head


def _unplaced(text: str, fields: dict[str, JsonScalar]) -> None:
    """What a head holds besides its time, level, thread, logger and message, kept: a number
    the pid (Spring Boot's `12345 ---`, HDFS's; a `pid=3480` too), a lone dotted name the
    logger (Python's `%(name)s`), any other text the field `prefix`, as written (Sidekiq's
    `pid=3480 tid=1ps class=ChargeJob jid=...`, BIND's category: before, dropped)."""
    words = [w for w in text.split() if any(c.isalnum() for c in w)]
    logger = fields.get("logger")
    for written in (logger, f"[{logger}]"):  # the logger read, once (`[%c]` in brackets)
        if logger and written in words:
            words.remove(written)
            break
    if words and words[0].isdigit():
        fields["pid"] = words.pop(0)
    elif pid := next((w[4:] for w in words if w.startswith("pid=") and w[4:].isdigit()), ""):
        fields["pid"] = pid  # Sidekiq's `pid=3480`: `pid:3480` finds it (it stays in prefix)
    if len(words) == 1 and "logger" not in fields and _LOGGER.fullmatch(words[0]):
        fields["logger"] = words.pop()
    if words:
        fields["prefix"] = " ".join(words)


def _bracketed(found: re.Match[str], zone: tzinfo, now_ms: int) -> Pending:
    def build(epoch: int) -> Entry:
        fields: dict[str, JsonScalar] = {"logger": found.group("logger")}
        if "thread" in found.groupdict():
            fields["thread"] = found.group("thread")
        return text_entry(epoch, found.group("level"), found.group("message"), fields)

    return lambda: matched_ms(found, zone, now_ms), build
