"""What `aci-evidence check` suggests to an operator (`check` reads the files): the glob for a
path that names a folder, whose a file the worker may not open is and what to change, the key
of a JSON line that holds its time (its message, its level: records of none), the format
that places text its format leaves unplaced."""

from __future__ import annotations

import grp
import os
import pwd
import re
import stat
from collections.abc import Callable
from datetime import tzinfo
from typing import Final

import msgspec

from workers.sources.logs.formats import logfmt_pairs, make_parser
from workers.sources.logs.levels import canonical_level
from workers.sources.logs.records import Entry

__all__ = ["folder_hint", "owner_of", "time_key", "unplaced", "unread_keys"]

_ISO: Final = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d")


def folder_hint(paths: list[str]) -> str:
    """A path naming a folder (a new user's first guess), and the glob to write instead."""
    for path in paths:
        if os.path.isdir(path):
            folder = path.rstrip("/") or "/"
            return (
                f": {path} is a folder; name its files with a glob: "
                f'paths = ["{folder}/*.log"] (or "{folder}/*")'
            )
    return ""


def owner_of(path: str) -> str:
    """`; owner postgres, group adm, mode 0640): give the worker's user read access (its group,
    or an ACL)` for a file the worker may not open (the text after its failure's name)."""
    try:
        st = os.stat(path)
    except OSError:
        return ""
    try:
        user = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        user = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    mode = stat.S_IMODE(st.st_mode)
    return (
        f"; owner {user}, group {group}, mode {mode:04o}): give the worker's user read access "
        "(its group, or an ACL"
    )


def time_key(line: str, fmt: str = "jsonl") -> str:
    """The first key (dotted when nested, three deep at most) of a JSON line (of a logfmt one:
    `fmt`) whose value is an ISO 8601 time, or '' (a line of no object, or of no such value)."""
    return _first_key(line, lambda value: bool(_ISO.match(value)), fmt)


def unread_keys(entries: list[Entry], line: str, fmt: str = "jsonl") -> tuple[int, str, int, str]:
    """JSON (logfmt: `fmt`) records most of which have no message (or no level): how many, and
    the first key of a line that holds text (a level word) to map as `message` (`level`), or
    ''."""
    no_message = sum(not e.message for e in entries)
    no_level = sum(not e.level for e in entries)
    text = _first_key(line, lambda v: " " in v.strip() and not _ISO.match(v), fmt)
    word = _first_key(line, lambda v: len(v) <= 12 and canonical_level(v.strip()) is not None, fmt)
    return (
        no_message if 2 * no_message > len(entries) else 0, text,
        no_level if 2 * no_level > len(entries) else 0, word,
    )  # fmt: skip


def _first_key(line: str, holds: Callable[[str], bool], fmt: str) -> str:
    if fmt == "logfmt":  # flat: its first such key
        return next((k for k, v in logfmt_pairs(line).items() if holds(v)), "")
    try:
        found = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError):  # nested past msgspec's depth
        return ""
    level: list[tuple[str, object]] = [("", found)]
    for _ in range(4):  # breadth first: the shallowest key wins
        deeper: list[tuple[str, object]] = []
        for prefix, value in level:
            if isinstance(value, dict):
                deeper += [(f"{prefix}.{k}".lstrip("."), v) for k, v in value.items()]
            elif prefix and isinstance(value, str) and holds(value):
                return prefix
        level = deeper
    return ""


def unplaced(
    entries: list[Entry],
    lines: list[str],
    fmt: str,
    zone: tzinfo,
    now_ms: int,
    least: tuple[int, int],
    tried: tuple[str, ...],
) -> tuple[int, str, str]:
    """How many records hold text their format's layout does not place (kept in the field
    `prefix`: Sidekiq's context, BIND's category under `log4j`), the first such text, and the
    named format (of `tried`) that reads at least as many of the lines and gives as many
    records a level (`least`) with no text unplaced ('' : none; of several, the one that
    reads the most, then levels the most, then places the most fields)."""
    count, first = _unplaced_text(entries)
    if not count:
        return 0, "", ""
    best: tuple[int, int, int] = (-1, -1, -1)
    name = ""
    for other in tried:
        if other == fmt:
            continue
        parser = make_parser(other, {}, zone, "", "auto", now_ms)
        read = [e for line in lines for e in parser.feed(line)] + parser.flush()
        reads, levelled = len(lines) - parser.failed, sum(bool(e.level) for e in read)
        score = (reads, levelled, sum(len(e.fields) for e in read))
        enough = reads >= least[0] and levelled >= least[1]
        if read and enough and score > best and not _unplaced_text(read)[0]:
            best, name = score, other
    return count, first, name


def _unplaced_text(entries: list[Entry]) -> tuple[int, str]:
    texts = [str(e.fields["prefix"]) for e in entries if "prefix" in e.fields]
    return len(texts), texts[0] if texts else ""
