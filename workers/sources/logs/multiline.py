"""Multi-line text records: a head line starts a record, continuation lines join it.

Used by every named text format (`textformats`). A line that is not a head continues the open
record when it looks like a continuation (an indented line, `Caused by:`, `... 3 more`, a
`Traceback`, an exception class and its message, a Ruby frame), up to `MAX_JOINED_LINES` lines
and `MAX_JOINED_CHARS` characters; any other line is no record: counted in `failed` and listed in
`rejected`, for the FILE source to match as plain text (nothing is dropped silently), unless
a continuation of the same record follows it: lines between a record and its stack frames are
its own (an exception's message over lines of its own: Tomcat's JSP compile errors). Such
lines are held up to the same caps (past them each is no record's at once, counted): a
record followed by lines of a megabyte holds no more than a joined record would.

A Python traceback the open record holds goes on to the line naming its exception (any class
a traceback ends with), then over its exception's message: every line after it that is no
head (a message of several lines printed as it is), to the caps above.

A program's crash written to stderr beside its log has no time of its own: Go's `panic: ...` and
`fatal error: ...` (then its goroutine dump), Java's `Exception in thread "main" ...` (then
its stack) and PHP's `PHP Fatal error:  ...` (then its `Stack trace:`) each start a record of
their own (level FATAL for Go and PHP, ERROR for Java; `exception` is `panic`, `fatal error`,
the class, PHP's uncaught class or `Fatal error`), timed by what follows it: the next record (the
restart's first line), or at the end of the file its last write (`eof_ms`, the mtime, when the
source gives it), never earlier than the record before it, whose time it takes otherwise.
Before any record, such a line is no record (above). Go's runtime explains some of its fatal
errors first, on lines of its own (`runtime: out of memory: cannot allocate 8192-byte block
(...)` before `fatal error: out of memory`, `runtime: goroutine stack exceeds ...-byte limit`
and `runtime: sp=...` before `fatal error: stack overflow`): such lines are held, and start the
crash record that follows them (or, inside a goroutine dump that goes on, join it); followed by
anything else they are no record.

java.util.logging's default layout writes a record on two lines: a head without a level
(`Dec 04, 2026 7:48:09 PM Main charge`, the class and method) and `WARNING: message`. That
second line is the record's level and message; the head's text is the field `source`. After
any other head, such a line is no part of the record (another program's, on the same stderr).

A line too long to read whose first bytes are a head (`skip`, `longlines`) opens its record
unread: its continuation lines are its own, not the record's before it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, NamedTuple

from workers.sources.logs.levels import canonical_level, keep_level_name
from workers.sources.logs.records import Entry

__all__ = [
    "EXCEPTION", "MAX_HEAD_CHARS", "MAX_HELD_RUNTIME", "MAX_JOINED_CHARS", "MAX_JOINED_LINES",
    "Continued", "Crash", "HeadParser", "Pending", "continues", "crash_of", "go_runtime",
]  # fmt: skip

MAX_JOINED_LINES: Final = 1000
MAX_JOINED_CHARS: Final = 64 * 1024
# Go's runtime writes one to three such lines before a throw; past this, the oldest held is
# released as no record's (a program that writes `runtime: ` lines by the thousand).
MAX_HELD_RUNTIME: Final = 16
# A line too long to read is a head (`HeadParser.skip`) when this many characters at most come
# before its message.
MAX_HEAD_CHARS: Final = 1024
# A head: how to read its time (None: not a time), and how to build its entry at that time.
Pending = tuple[Callable[[], int | None], Callable[[int], Entry]]


class Continued(NamedTuple):
    """A line in its format that continues the record before it (PostgreSQL's `DETAIL:` and
    `STATEMENT:` lines): `text` joins that record; with no record open, `alone` starts one
    (None: the line is no record, as a line not in the format: nginx's error log, where any
    line without its stamp is the rest of the entry before it)."""

    text: str
    alone: Pending | None


_CONTINUATION: Final = re.compile(
    r"\s|Caused by:|Suppressed:|Traceback \(|\.\.\. \d+ (?:more|common frames omitted)"
    r"|[\w$]+(?:\.[\w$]+)+(?::|$)|[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt)\b(?::|$)"
    # PHP's trace (`Throwable::getTraceAsString`) as Monolog writes it in a record's context:
    # `[stacktrace]`, `#0 /app/X.php(795): f()`, `#1 [internal function]: g()`, `#2 {main}`,
    # `[previous exception] [object] (...)`, the context's closing `"} `; PHP's `Stack trace:`
    r"|\[stacktrace\]$|\[previous exception\] |Stack trace:$|\"\} ?$"
    r"|#\d+ (?:\{main\}$|\[internal function\]: |[^(]{1,500}\(\d+\): )"
    # a Ruby frame (`Exception#backtrace`): `/usr/lib/ruby/3.1.0/socket.rb:1214:in `connect'`,
    # Ruby 3.4's `app.rb:6:in 'Integer'`
    r"|[^\s:]{1,500}:\d{1,7}:in [`']"
)
# A crash without a time of its own (module docstring) and the lines of a Go goroutine dump.
_CRASH: Final = re.compile(
    r"(?P<go>panic|fatal error): |Exception in thread \"[^\"]*\" (?P<java>[\w$]+(?:\.[\w$]+)*)"
    r"|(?P<python>Traceback \(most recent call last\):$)"  # Python's uncaught exception
    # PHP's fatal error on its stderr (the CLI's, a PHP-FPM child's undecorated line), then
    # its `Stack trace:`: `NOTICE: PHP message: PHP Fatal error:  Uncaught RuntimeException: `
    r"|(?:[A-Z]{4,7}: PHP message: )?PHP (?P<php>Fatal error|Parse error):  "
    r"(?:Uncaught (?P<uncaught>[A-Za-z_\\][\w\\]{0,200}))?"
)
# The line that ends a Python traceback and names its exception (`ConnectionError: ...`,
# `requests.exceptions.ConnectTimeout: ...`, `KeyboardInterrupt`), not indented.
_PYTHON_RAISED: Final = re.compile(r"([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)(?::|$)")
_GO_DUMP: Final = re.compile(
    r"\[signal |goroutine \d+ .*\]:$|created by |exit status \d+$|\.\.\.additional frames elided"
    r"|runtime stack:$"  # a fatal error's stack of the runtime itself (stack overflow)
    # a frame: `main.(*Server).handle(0x0, 0xc000010000)`, `main.Map[...].Get(...)`; no class
    # holds a parenthesis, so a hostile `((((...` line is read in linear time, not quadratic
    r"|[\w./\[\]-]+(?:\(\*[\w./\[\],-]+\)[\w./\[\]-]*)?\([^()]*\)$"
)
_TRACEBACK: Final = "Traceback (most recent call last):"
_CHAINED: Final = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
_JUL_LEVEL: Final = re.compile(r"(SEVERE|WARNING|INFO|CONFIG|FINEST|FINER|FINE): ")
# Its head: only after one is a `WARNING: ...` line that record's level and message (after
# another head, Go's `log` say, such a line is another program's, not a part of the record).
_JUL_HEAD: Final = re.compile(r"[A-Z][a-z]{2} \d\d?, \d{4} \d\d?:\d\d:\d\d [AP]M ")
EXCEPTION: Final = re.compile(
    r"\s*(?:Caused by: )?([\w$]+(?:\.[\w$]+)*(?:Exception|Error|Throwable|Exit|Interrupt))\b"
)


class Crash(NamedTuple):
    """A crash line's level, its `exception` field, and whether a goroutine dump follows."""

    level: str
    exception: str
    go: bool
    last: bool = False  # the exception is named on its last line (Python): `python_raised`


def crash_of(text: str) -> Crash | None:
    """The crash a line starts (module docstring), or None."""
    found = _CRASH.match(text)
    if found is None:
        return None
    go = found.group("go")
    if go is not None:
        return Crash("FATAL", go, True)
    if found.group("python") is not None:
        return Crash("ERROR", "Traceback", False, True)
    if (php := found.group("php")) is not None:
        return Crash("FATAL", found.group("uncaught") or php, False)
    return Crash("ERROR", found.group("java"), False)


def python_raised(text: str) -> str | None:
    """The exception a line of a Python traceback names when it is its last line, or None: a
    class (`ValueError: x`, `KeyboardInterrupt`) or a dotted name (`socket.timeout: x`), not a
    lowercase word (`done`, a program's own line after a traceback cut short)."""
    found = _PYTHON_RAISED.match(text)
    if found is None or (name := found.group(1)) == "Traceback":
        return None
    return name if "." in name or not name[0].islower() else None


def go_runtime(text: str) -> bool:
    """Whether a line is Go's runtime explaining a fatal error it is about to throw."""
    return text.startswith("runtime: ")


def continues(text: str, go: bool = False) -> bool:
    """Whether a line that is no head continues the record before it (`go`: a Go crash's)."""
    return bool(_CONTINUATION.match(text) or (go and _GO_DUMP.match(text)))


Clock = Callable[[], int | None]


def _crash(crash: Crash, text: str, since: Clock, until: list[Clock | None]) -> Pending:
    """A crash line's record: timed by what came after it (`until[0]`: the next head, or the
    file's last write at its end), never before the head before it (`since`)."""

    def when() -> int | None:
        lower = since()
        upper = until[0]() if until[0] is not None else None
        return lower if lower is None or upper is None else max(lower, upper)

    def build(epoch: int) -> Entry:
        return Entry(epoch, crash.level, "", text, {"exception": crash.exception})

    return when, build


class HeadParser:
    """Lines to entries: a head starts a record, continuation lines join it. A record is read
    (its time, its fields) only when it is complete and `keep` (the source's prefilter over its
    raw text) allows; lines that are no record are counted in `failed` and listed in
    `rejected` with the time of the head before them (None before any), the source takes them
    to match them as text: a record is emitted only when the next head arrives, so the last
    record emitted is not the one before such a line."""

    def __init__(self, head: Callable[[str], Pending | Continued | None], service: str) -> None:
        self.head, self.service, self.failed = head, service, 0
        self.keep: Callable[[str], bool] | None = None
        # the format's own fields from a record's joined lines (nginx's `client` on its last)
        self.joined: Callable[[Entry], None] | None = None
        self.skipped = 0  # records the prefilter said cannot match: read, not built
        self.rejected: list[tuple[int | None, str]] = []  # lines that are no record, timed
        self._open: Pending | None = None
        self._last: Callable[[], int | None] | None = None  # the time of the latest head
        self._last_read: tuple[object, int | None] = (None, None)  # and its value, once read
        self._crash = False  # the open record is a Go crash: its goroutine dump continues it
        self._until: list[Clock | None] | None = None  # the open crash's time, once known
        # The file's last write (its mtime), when a crash at its very end may take it as its
        # time: the source sets it, unless that write is after the window a call reads (a copy).
        self.eof_ms: int | None = None
        self._text = ""
        self._more: list[str] = []
        # lines no continuation after an open record, held: a continuation after them (a
        # stack frame) makes them the record's (an exception's message over lines of its own)
        self._between: list[str] = []
        self._size = self._held = 0  # the joined lines' characters, and the held ones'
        self._runtime: list[str] = []  # Go's `runtime: ` lines, held for the line after them
        # Python: inside a traceback of the open record (until the line naming its exception),
        # then in that exception's message (its lines after the first, unindented: to a head)
        self._traceback = self._message = False
        # A head too long to read (`skip`): its record is not built; its continuation lines
        # go to `unread`; the record it ended waits here for the next feed or flush.
        self.unread: Callable[[list[str]], None] | None = None
        self._unread, self._ready = False, list[Entry]()

    def skip(self, text: str) -> int | None:
        """A line too long to read (`longlines`), `text` its first bytes: when they are a
        head, its time (else None: the line may be anything). That head opens its record, not
        built (its continuation lines are its own, handed to `unread`), and ends the one
        before (handed out with the next feed or flush). A head counts only when its message
        runs to the cut (after at most `MAX_HEAD_CHARS`): the rest of the line is message, so the
        whole line is that head (a message in the middle, `log4j`'s pipes, may not be)."""
        found = self.head(text)
        if found is None or isinstance(found, Continued) or (epoch := found[0]()) is None:
            return None
        message = found[1](epoch).message
        if len(message) < len(text) - MAX_HEAD_CHARS or not text.endswith(message):
            return None
        self._reject(self._runtime)
        self._runtime = []
        if self._until is not None:
            self._until[0] = found[0]
        self._ready += self._emit()
        self._open, self._text, self._last, self._crash = found, text, found[0], False
        self._traceback, self._message, self._unread = False, False, True
        return epoch

    def feed(self, line: str) -> list[Entry]:
        if self._ready:
            ready, self._ready = self._ready, []
            return ready + self.feed(line)
        text = line.rstrip("\r\n")
        if not text.strip():
            return []
        if self._last is not None and go_runtime(text) and self.head(text) is None:
            self._hold(text)
            return []
        held, self._runtime = self._runtime, []
        found = self.head(text)
        if isinstance(found, Continued):
            # past the bound of a joined record, a line that may start one does (RabbitMQ's
            # stamped lines of one event, PostgreSQL's `DETAIL:`): a record, not a line of none
            if self._open is not None and (found.alone is None or not self._full()):
                self._reject(held)
                self._join_between()
                self._join(found.text)
                return []
            found = found.alone
        if found is not None:
            self._reject(held)
            if self._until is not None:
                self._until[0] = found[0]  # the crash was before this head: the restart's
            out = self._emit()
            self._open, self._text, self._last, self._crash = found, text, found[0], False
            self._traceback, self._message = text.endswith(_TRACEBACK), False
            return out
        if self._open is not None and not self._crash and self._python(text):
            self._reject(held)
            self._join_between()
            self._join(text)
            return []
        if self._open is not None and (
            continues(text, self._crash)
            or (not held and not self._more and not self._between and self._jul_level(text))
        ):
            for runtime in held if self._crash else ():  # inside a goroutine dump: its own
                self._join(runtime)
            self._reject([] if self._crash else held)
            self._join_between()
            self._join(text)
            return []
        if self._last is not None and (crash := crash_of(text)):
            out = self._emit()
            self._until = [None]
            first, *rest = [*held, text]  # the runtime's explanation starts the crash's record
            self._open, self._text = _crash(crash, first, self._last, self._until), first
            for later in rest:
                self._join(later)
            self._crash = crash.go
            self._traceback, self._message = crash.last, False
            return out
        self._reject(held)
        between = self._between
        if (
            self._open is not None
            and not self._crash
            and len(between) < MAX_JOINED_LINES
            and self._held < MAX_JOINED_CHARS
        ):
            between.append(text)
            self._held += len(text) + 1
        else:
            self._reject([text])
        return []

    def _python(self, text: str) -> bool:
        """Whether a line goes on a Python traceback of the open record: its first line, the
        line naming its exception (any class: `billing.BillingConfigError: ...`), a chained
        one's sentence, and after the exception every line that is no head (its message)."""
        if text.startswith(_TRACEBACK):
            self._traceback, self._message = True, False
            return True
        if self._traceback and text[0] not in " \t" and python_raised(text):
            self._traceback, self._message = False, True
            return True
        if self._message and text in _CHAINED:
            self._message = False
            return True
        return self._message and crash_of(text) is None

    def _join_between(self) -> None:
        between, self._between, self._held = self._between, [], 0
        for line in between:
            self._join(line)

    def _hold(self, text: str) -> None:
        if len(self._runtime) >= MAX_HELD_RUNTIME:
            self._reject(self._runtime[:1])
            del self._runtime[0]
        self._runtime.append(text)

    def _reject(self, lines: list[str]) -> None:
        if lines:
            self.failed += len(lines)
            self.rejected += [(self._last_time(), line) for line in lines]

    def _last_time(self) -> int | None:
        """The time of the head before a line that is no record (None before any), read once
        per head (a file of lines not in the format after one head)."""
        if self._last is None:
            return None
        if self._last_read[0] is not self._last:
            self._last_read = (self._last, self._last())
        return self._last_read[1]

    def _jul_level(self, text: str) -> bool:
        return bool(_JUL_LEVEL.match(text) and _JUL_HEAD.match(self._text))

    def _full(self) -> bool:
        return len(self._more) >= MAX_JOINED_LINES or self._size >= MAX_JOINED_CHARS

    def _join(self, text: str) -> None:
        if not self._full():
            self._more.append(text)
            self._size += len(text) + 1
        else:  # past the cap (a goroutine dump of a busy server): no record's, never dropped
            self._reject([text])

    def flush(self) -> list[Entry]:
        """The last record, at the end of the file."""
        self._reject(self._runtime)  # no crash came after them
        self._runtime = []
        if self._until is not None and self.eof_ms is not None:
            eof = self.eof_ms
            self._until[0] = lambda: eof  # a crash at the end: its process's last write
        ready, self._ready = self._ready, []
        return ready + self._emit()

    def _emit(self) -> list[Entry]:
        self._reject(self._between)  # no continuation came after them: no record's
        self._between, self._held = [], 0
        pending, more, text = self._open, self._more, self._text
        self._open, self._more, self._size, self._text = None, [], 0, ""
        self._until = None
        if self._unread:  # a head too long to read: not built, its lines heard
            self._unread = False
            if self.unread is not None:
                self.unread(more)
            return []
        if pending is None:
            return []
        if self.keep is not None and not self.keep("\n".join([text, *more]) if more else text):
            self.skipped += 1  # its time is not even read: the prefilter says it cannot match
            return []
        epoch = pending[0]()
        if epoch is None:  # the head's time is impossible (month 13): its lines are not a record
            self.failed += 1 + len(more)
            self.rejected += [(None, line) for line in (text, *more)]
            return []
        entry = pending[1](epoch)
        if not entry.service:
            entry.service = self.service
        if (
            more
            and not entry.level
            and _JUL_HEAD.match(text)
            and (jul := _JUL_LEVEL.match(more[0]))
        ):
            entry.fields["source"], entry.message = entry.message, more[0][jul.end() :]
            entry.level = canonical_level(jul.group(1)) or ""
            keep_level_name(entry.fields, jul.group(1), entry.level)
            more = more[1:]
        if more:
            entry.message = "\n".join([entry.message, *more])
            if "exception" not in entry.fields:
                for line in more:
                    if thrown := EXCEPTION.match(line):
                        entry.fields["exception"] = thrown.group(1)
                        break
            if self.joined is not None:
                self.joined(entry)
        return [entry]
