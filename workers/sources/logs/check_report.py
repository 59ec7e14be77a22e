"""What `check` found in a file log topic, and the problems it reports of it, one line each
(`check` reads the files; docs/logs.md "Checking a configuration")."""

from __future__ import annotations

import re
from typing import Final

import msgspec

from workers.sources.logs import files as listing  # its MAX_NAMES read when used
from workers.sources.logs.check_hints import folder_hint

__all__ = ["CONTAINERS", "FileCheck", "SourceCheck", "TopicCheck"]

# Formats of a container runtime's lines around the app's own (`cri`).
CONTAINERS: Final = ("docker", "cri")
_ENVELOPE: Final = ", the app's own time, level and message inside a container runtime's line"


class FileCheck(msgspec.Struct, kw_only=True):
    """One file's sample read in its source's format."""

    path: str
    format: str
    lines: int  # non-blank lines read (at most SAMPLE_LINES)
    records: int
    unparsed: int  # lines not in the format
    first: str | None = None  # the records' earliest and latest time (the topic's zone)
    last: str | None = None
    future: int = 0  # records dated after now (beyond the clock skew allowed)
    # records dated after the file's last write (not in the future): a wrong timezone
    after_write: int = 0
    after_write_hours: float = 0.0  # the latest of them, hours after the mtime
    written: str = ""  # the file's mtime (the topic's zone)
    # its last record a zone's offset before its last write (`filetime.zone_behind`): the
    # offset its writer's local time seems to be in, and the gap in hours
    behind: str = ""
    behind_hours: float = 0.0
    ahead: str = ""  # ... or after it, in the future: the offset that fits
    foreign_zone: str = ""  # a zone its lines name (several offsets) that is not the topic's
    timezone: str = ""  # the topic's (or source's) timezone, as configured
    example: str = ""  # the first line not in the format, cut to EXAMPLE_CHARS, no URL password
    unread: str = ""  # why it was not (wholly) read: a compression, a broken file, long lines
    levelled: int = 0  # records with a level
    better: str = ""  # a named format that reads more of these lines, or levels ...
    better_reads: int = 0  # ... and how many lines it reads
    better_levelled: int = 0  # ... and how many of its records have a level
    time_key: str = ""  # JSON lines of no record: a key of the first that holds a time
    # JSON records most of which have no message (no level): how many, and a key that holds
    # text (a level word) in the first line, to map
    no_message: int = 0
    message_key: str = ""
    no_level: int = 0
    level_key: str = ""
    # `regex` lines the pattern matches whose `time` does not read: the first such time, and
    # the time_format it was read with ('' : ISO 8601 or an epoch number)
    time_unread: str = ""
    time_format: str = ""
    unplaced: int = 0  # records of text the format does not place (`prefix`), the first's,
    unplaced_text: str = ""
    placing: str = ""  # and a named format that places it


class SourceCheck(msgspec.Struct, kw_only=True):
    """One file source: its globs, format, how many files matched, the newest checked."""

    paths: list[str]
    format: str
    matched: int
    files: list[FileCheck]
    problem: str = ""  # the source could not be listed (outside roots, a pseudo-filesystem)
    # folders of its globs the system refused to list: "path: could not be listed (EACCES, ...)"
    unlisted: list[str] = []
    # matched paths that are no regular file, skipped unopened as a call skips them: "path: a fifo"
    skipped: list[str] = []
    listing_cut: bool = False  # more than MAX_NAMES names looked at: `matched` a lower bound
    unchecked: int = 0  # matched files older than the MAX_FILES newest: not sampled


class TopicCheck(msgspec.Struct, kw_only=True):
    """One topic of the configuration."""

    topic: str
    backend: str
    sources: list[SourceCheck] = []

    def problems(self) -> list[str]:
        """What an operator should look at, one line each (empty: the topic reads well)."""
        out: list[str] = []
        for source in self.sources:
            globs = ", ".join(source.paths)
            if source.problem:
                out.append(f"{self.topic}: {globs}: {source.problem}")
            elif source.listing_cut:
                out.append(
                    f"{self.topic}: {globs}: the listing stopped after {listing.MAX_NAMES} names "
                    f"({source.matched} files matched before it): a call's count is a lower "
                    "bound; narrow the glob"
                )
            elif source.matched == 0 and not source.skipped and not source.unlisted:
                out.append(f"{self.topic}: {globs}: no file matches{folder_hint(source.paths)}")
            out += (
                f"{self.topic}: {folder}: a call cannot read the files in it (an ERROR when "
                "nothing else matches, else a lower bound); check the folder's permissions"
                for folder in source.unlisted
            )
            out += (
                f"{self.topic}: {skipped}: skipped, never opened (not a regular file; a call "
                "reads the regular files beside it, or is refused when there are none)"
                for skipped in source.skipped
            )
            for file in source.files:
                out += _file_problems(self.topic, file)
        return out


# The JVM's unified logging with its default decorators (`uptime,level,tags`): no wall time
_JVM_UNTIMED: Final = re.compile(r"\[\d+(?:\.\d+)?m?s\]\[(?:trace|debug|info|warning|error) *\]\[")


def _untimed(example: str) -> str:
    """What to change when the lines are of a producer that was told to write no time."""
    if _JVM_UNTIMED.match(example):
        return (
            ": the JVM's -Xlog lines without a time decorator (its default is uptime,level,"
            "tags): add time, -Xlog:gc*:file=gc.log:time,uptime,level,tags"
        )
    return ""


def _file_problems(topic: str, file: FileCheck) -> list[str]:
    out: list[str] = []
    where = f"{topic}: {file.path}"
    if file.unread:
        out.append(f"{where}: {'partly read' if file.lines else 'not read'}: {file.unread}")
    if file.lines and not file.records and file.time_key:
        out.append(
            f"{where}: no line is in format {file.format}: no key it reads as the time; "
            f'"{file.time_key}" holds one: [topics.{topic}.fields] time = "{file.time_key}"'
        )
    elif file.lines and not file.records:
        out.append(f"{where}: no line is in format {file.format}" + _untimed(file.example))
    if file.no_message:
        out.append(
            f"{where}: {file.no_message} of {file.records} records have no message (no key "
            f"{file.format} reads as one)"
            + (f'; "{file.message_key}" holds text: [topics.{topic}.fields] message = '
               f'"{file.message_key}"' if file.message_key else "")
        )  # fmt: skip
    if file.no_level and file.level_key:
        out.append(
            f"{where}: {file.no_level} of {file.records} records have no level (no key "
            f'{file.format} reads as one); "{file.level_key}" holds one: '
            f'[topics.{topic}.fields] level = "{file.level_key}"'
        )
    if file.time_unread and file.time_format:
        out.append(
            f'{where}: the pattern matches, but its time "{file.time_unread}" does not read '
            f'with time_format "{file.time_format}"'
        )
    elif file.time_unread:
        out.append(
            f'{where}: the pattern matches, but its time "{file.time_unread}" is neither ISO '
            "8601 nor an epoch number: set time_format (a strptime format)"
        )
    reads = file.lines - file.unparsed
    if file.better and (file.better_reads > reads or file.better in CONTAINERS):
        why = _ENVELOPE if file.better in CONTAINERS and file.better_reads == reads else ""
        out.append(
            f'{where}: format = "{file.better}" reads {file.better_reads} of {file.lines} '
            f"lines ({file.format}: {reads}){why}"
        )
    elif file.better:
        out.append(
            f'{where}: format = "{file.better}" gives {file.better_levelled} of its records a '
            f"level ({file.format}: {file.levelled} of {file.records})"
        )
    elif file.records and 2 * file.unparsed > file.lines:  # most of it read as text only
        out.append(
            f"{where}: {file.unparsed} of {file.lines} lines are not in format {file.format} "
            f"(the first: {file.example}); they are matched as text only, by words and phrases"
        )
    if file.unplaced:
        out.append(
            f"{where}: {file.unplaced} of {file.records} records carry text format {file.format}"
            f' does not place (kept in field prefix; the first: "{file.unplaced_text}")'
            + (f': format = "{file.placing}" reads them' if file.placing else "")
        )
    if file.future:
        fits = (
            f': its offset seems to be {file.ahead}: set timezone = "{file.ahead}" (or the '
            "host's IANA zone) for this source"
            if file.ahead
            else ""
        )
        out.append(f"{where}: {file.future} records dated in the future (check timezone{fits})")
    if file.foreign_zone:
        out.append(
            f"{where}: times written in zone {file.foreign_zone} are read in the topic's "
            f"timezone ({file.timezone}), which does not call itself {file.foreign_zone}: set "
            f"timezone to the server's log_timezone ({file.foreign_zone} names several offsets)"
        )
    if file.behind:
        out.append(
            f"{where}: its last record is {file.behind_hours:.1f} h before the file was last "
            f"written (mtime {file.written}): a program writing it now writes its local time "
            f'in another zone than timezone "{file.timezone}"; its offset is {file.behind}: '
            f'set timezone = "{file.behind}" (or the host\'s IANA zone) for this source'
        )
    if file.after_write:
        out.append(
            f"{where}: {file.after_write} records dated after the file was last written "
            f"({file.after_write_hours:.1f} h after its mtime {file.written}: check timezone)"
        )
    return out
