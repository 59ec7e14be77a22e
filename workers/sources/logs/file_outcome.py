"""What one FILE call read beyond its matches (`Tally`), the notes the model hears about it,
and the ERROR a read that found nothing owes the agent (`workers.sources.logs.file_source`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contracts.status import ErrorCode
from workers.sources.base import SourceError
from workers.sources.logs.deadline import StopFlag
from workers.sources.logs.files import Reader
from workers.sources.logs.records import Digest

__all__ = ["Tally", "check_outcome", "kinds_of", "read_notes", "unlisted_text"]


@dataclass
class Tally:
    """What one call read, beyond its matches."""

    parsed: int = 0
    failed: int = 0
    text_matches: int = 0
    files_unparsed: int = 0
    headless: int = 0  # W3C data lines before any `#Fields:` (a file cut at rotation)
    sources_empty: int = 0
    future_matches: int = 0  # matching records dated past the clock (a wrong timezone)
    future_files: int = 0  # files not read: their first record is dated past the clock
    formats: set[str] = field(default_factory=set)
    skipped: dict[str, str] = field(default_factory=dict)  # real path: "a fifo" (never shown)
    # folders of a glob the system refused to list: real path -> "EACCES, permission denied"
    unlisted: dict[str, str] = field(default_factory=dict)


def unlisted_text(unlisted: dict[str, str]) -> str:
    """What the refused folders are said as, no path: `1 log folders could not be listed
    (EACCES, permission denied)`."""
    failures = ", ".join(sorted(set(unlisted.values())))
    return f"{len(unlisted)} log folders could not be listed ({failures})"


def read_notes(tally: Tally, reader: Reader, text_ok: bool, sources: int) -> list[str]:
    """What the model must hear about how the answer was read (no path, ever)."""
    notes: list[str] = []
    if tally.failed and (tally.text_matches or not text_ok or tally.files_unparsed):
        how = (
            f"{tally.text_matches} of the matches are such lines, matched as plain text "
            "and timed by the record before them in their file, else by its last write"
            if tally.text_matches
            else "a query of plain words alone also matches them as text"
        )
        files = (
            f" ({tally.files_unparsed} files had no line in their format)"
            if tally.files_unparsed
            else ""
        )
        notes.append(f"{tally.failed} lines read are not in their log format{files}; {how}")
    if tally.headless:
        notes.append(
            f"{tally.headless} W3C log lines come before any #Fields: directive (a file cut at "
            "rotation: its header is in the file before it) and are not IIS's default columns: "
            "their columns are unknown, so they are not read as records"
        )
    if reader.unread:
        kinds = ", ".join(sorted(set(reader.unread)))
        notes.append(
            f"{len(reader.unread)} matched log files are compressed with {kinds}, which this "
            "worker cannot read: the count is a lower bound"
        )
    if reader.cut:
        notes.append(
            f"{reader.cut} compressed log files are cut short (their end is missing: a "
            "rotation interrupted, a disk full); the lines before the cut were read: the "
            "count is a lower bound"
        )
    if reader.corrupt:
        notes.append(
            f"{reader.corrupt} compressed log files are corrupt part way; the "
            "lines before the damage were read: the count is a lower bound"
        )
    if reader.dictionary:
        notes.append(
            f"{reader.dictionary} log files are compressed with a zstd dictionary this "
            "worker does not have; the lines before it were read: the count is a lower bound"
        )
    if reader.refused:
        notes.append(
            f"{reader.refused} log files could not be read: the worker may not open them "
            f"({reader.refused_error}); their lines were not read: the count is a lower bound"
        )
    if failed := reader.unreadable - reader.refused:
        notes.append(
            f"{failed} log files could not be read to their end (the system failed a read: "
            f"{reader.read_error}); the lines before the failure were read: "
            "the count is a lower bound"
        )
    if reader.gone:
        notes.append(
            f"{reader.gone} log files were rotated away or removed while this call read the "
            "topic and were not found again (compressed into a new file meanwhile): their "
            "lines were not read; the count is a lower bound"
        )
    if reader.truncated:
        notes.append(
            f"{reader.truncated} log files were truncated while this call read the topic "
            "(a copytruncate rotation): the lines they held were not all read; the count is "
            "a lower bound"
        )
    if reader.long_unsure:
        notes.append(
            f"{reader.long_unsure} log lines longer than max_line_bytes "
            f"({reader.budget.max_line_bytes} bytes) were skipped unread and may hold a match: "
            "the count is a lower bound (the operator may raise [scan] max_line_bytes)"
        )
    if tally.unlisted:
        notes.append(
            f"{unlisted_text(tally.unlisted)}: the files in them were not read; the count is "
            "a lower bound"
        )
    if tally.skipped:  # what and how many, never where
        notes.append(
            f"{len(tally.skipped)} matched paths skipped: not a regular file "
            f"({kinds_of(tally.skipped)}), never opened; the count is over the log files read"
        )
    if tally.future_matches or tally.future_files:
        which = (
            f"{tally.future_matches} records that match"
            if tally.future_matches
            else f"The records of {tally.future_files} log files (not read, matching or not)"
        )
        notes.append(
            f"{which} are dated over 5 minutes in the future of this clock (a log source's "
            "timezone set wrong, most often): no window counted back from now holds them; they "
            "are not in this count"
        )
    if tally.sources_empty and sources > 1:
        notes.append(f"{tally.sources_empty} of this topic's {sources} log "
                     "sources match no file")  # fmt: skip
    return notes


def check_outcome(
    name: str, digest: Digest, tally: Tally, reader: Reader, lower_bound: bool, flag: StopFlag
) -> None:
    """Raise the ERROR a read that found nothing owes the agent (never "no evidence"): nothing
    in the format, only unreadable compressions, only broken files, or a cut-short search."""
    if digest.match_count:
        return  # something matched: an answer (a lower bound where a note says so)
    cut_short = reader.out_of_budget or flag.timed_out  # (said by the last one)
    if tally.parsed == 0 and tally.failed > 0:
        formats = ", ".join(sorted(tally.formats)) or "configured"
        raise SourceError(
            ErrorCode.EXECUTION,
            f"the log files of topic {name} are not in the configured format "
            f"({formats}): no line could be read as a record",
        )
    if reader.unread:
        kinds = ", ".join(sorted(set(reader.unread)))
        raise SourceError(
            ErrorCode.EXECUTION,
            f"{len(reader.unread)} log files of topic {name} are compressed with {kinds}, "
            "which this worker cannot read; nothing else matched",
        )
    if reader.refused == reader.broken > 0:
        raise SourceError(
            ErrorCode.EXECUTION,
            f"{reader.refused} log files of topic {name} could not be read: the worker may not "
            f"open them ({reader.refused_error}), and nothing else matched: the count is "
            "unknown; the operator must give the worker's user read access to them",
        )
    if reader.broken and not cut_short:
        raise SourceError(
            ErrorCode.EXECUTION,
            f"{reader.broken} log files of topic {name} ended in an error part way "
            f"({_damage(reader)}) and nothing read before it matched: the count is "
            "unknown; the operator must check these files",
        )
    if reader.gone and not cut_short:
        raise SourceError(
            ErrorCode.EXECUTION,
            f"{reader.gone} log files of topic {name} were rotated away or removed while this "
            "call read them and nothing read matched: the count is unknown; ask again",
        )
    if reader.truncated and not cut_short:
        raise SourceError(
            ErrorCode.EXECUTION,
            f"{reader.truncated} log files of topic {name} were truncated while this call "
            "read them (a copytruncate rotation) and nothing read matched: the count is "
            "unknown; ask again",
        )
    if tally.unlisted:
        raise SourceError(
            ErrorCode.EXECUTION,
            f"{unlisted_text(tally.unlisted)} for topic {name} and nothing read matched: the "
            "count is unknown; the operator must check the folders' permissions",
        )
    if reader.long_unsure and not cut_short:
        raise SourceError(
            ErrorCode.EXECUTION,
            f"{reader.long_unsure} log lines of topic {name} are longer than max_line_bytes "
            f"({reader.budget.max_line_bytes} bytes) and were skipped unread, and nothing else "
            "matched: the count is unknown; the operator may raise [scan] max_line_bytes",
        )
    if lower_bound:
        code = ErrorCode.TIMEOUT if flag.timed_out else ErrorCode.EXECUTION
        raise SourceError(
            code,
            f"the search of topic {name} stopped at its size or time limit before it found "
            "a match; try a shorter lookback_minutes or a narrower query",
        )


def kinds_of(skipped: dict[str, str]) -> str:
    """What the skipped paths are, each kind once: "a fifo, a socket"."""
    return ", ".join(sorted(set(skipped.values())))


def _damage(reader: Reader) -> str:
    kinds = (
        (reader.cut, "compressed and cut short (their end is missing)"),
        (reader.corrupt, "compressed and corrupt part way"),
        (reader.dictionary, "compressed with a zstd dictionary this worker does not have"),
        (
            reader.refused,
            f"could not be read: the worker may not open them, {reader.refused_error}",
        ),
        (
            reader.unreadable - reader.refused,
            f"could not be read: the system failed a read, {reader.read_error}",
        ),
    )
    return ", ".join(f"{count} {how}" for count, how in kinds if count)
