"""How the FILE backend says what it refuses or cannot read, and which rotated files are
copies of another (`files` lists and reads; this keeps its judgements small and apart).

- `RefusedFile`: a matched path resolving outside the log roots, or on a kernel
  pseudo-filesystem: the whole source is refused (AUTHORIZATION).
- `kind_of`: what a matched path that is no regular file is ("a fifo").
- `open_listed`: a listed path opened when it is still the inode listed (no symlink, no fifo).
- `moved_to`: where a listed file is now when a rename rotation moved it meanwhile.
- `pseudo`, `opened_inside`: a kernel pseudo-filesystem's path; an opened file's real place.
- `without_copies`: the listed files less a copy still beside the file it copies (a
  compressed rotation being written, a `copytruncate` copy before the truncation).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from contracts.status import ErrorCode
from workers.sources.base import SourceError

if TYPE_CHECKING:
    from workers.sources.logs.files import LogFile

__all__ = [
    "RefusedFile", "kind_of", "moved_to", "open_listed", "opened_inside", "pseudo",
    "without_copies",
]  # fmt: skip

_PSEUDO: Final = ("/proc", "/sys", "/dev")  # kernel state, never a log, even via a symlinked root


class RefusedFile(SourceError):
    """A matched path resolving outside the log roots, or a root or match on a kernel
    pseudo-filesystem: the whole source is refused (a security signal, not a file to skip).
    Its message (the agent's) names no path; `path` and `why` are the operator's
    (`aci-evidence check` prints them)."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(
            ErrorCode.AUTHORIZATION,
            "a log file of this topic resolves outside the configured log roots; the "
            "operator must fix the configuration",
        )
        self.path, self.why = path, why


def kind_of(mode: int) -> str:
    """What a path of this mode is, when no regular file: "a fifo", "a socket", ..."""
    for test, name in (
        (stat.S_ISFIFO, "a fifo"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"  # fmt: skip


# The names a compressor gives its output: `gzip app.log.1` writes `app.log.1.gz` (logrotate's
# `compress`, `compressext`), `xz` `.xz`, and so on.
_COMPRESSED_NAMES: Final = (".gz", ".xz", ".bz2", ".zst", ".zstd", ".lz4", ".z", ".Z")


def without_copies(files: Iterable[LogFile]) -> list[LogFile]:
    """The files less each copy of another one still beside it, whose lines that one holds:

    - a compressed copy, `app.log.1.gz` written no earlier than `app.log.1` was last, while
      logrotate's `compress` runs (its output growing, the plain file removed once it is
      whole): read both and each line counts twice, read the partial copy and its lines
      count again, said as cut short. An older `app.log.gz` is no copy of what `app.log`
      holds now: read as its own.
    - a plain copy for `copytruncate`, `app.log.1` or `app.log-20261205` whose bytes are the
      start of `app.log`'s (its first and last 4 KiB where they are in `app.log`), until
      `app.log` is truncated: the live file holds every line of it.
    """
    by_name = {f.real: f for f in files}
    kept: list[LogFile] = []
    for file in by_name.values():
        stem, ext = os.path.splitext(file.real)
        plain = by_name.get(stem) if ext in _COMPRESSED_NAMES else None
        if plain is not None and file.mtime_ms >= plain.mtime_ms:
            continue
        live = _live_of(file, by_name)
        if live is None or not _starts(live, file):
            kept.append(file)
    return kept


# What logrotate appends to a rotated name: `.1`, `-20261205`, `.2026-12-05`, `-1733382000`.
_ROTATED: Final = re.compile(r"[.-][0-9][0-9._-]*")
_SAMPLE: Final = 4096
_OPEN: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _live_of(file: LogFile, by_name: dict[str, LogFile]) -> LogFile | None:
    """The listed file `file` would be a rotated copy of by its name (`app.log` of
    `app.log.1`), when it is at least as long."""
    folder, name = os.path.split(file.real)
    match = re.search(r"(?:" + _ROTATED.pattern + r")$", name)
    live = by_name.get(os.path.join(folder, name[: match.start()])) if match else None
    if live is None or live is file or not 0 < file.size <= live.size:
        return None
    return live


def _starts(live: LogFile, copy: LogFile) -> bool:
    """Whether `copy`'s first and last 4 KiB are `live`'s at the same places (each opened
    without following a symlink and checked to be the inode listed)."""
    spans = [(0, min(_SAMPLE, copy.size))]
    if copy.size > _SAMPLE:
        spans.append((copy.size - _SAMPLE, _SAMPLE))
    samples = [_read(f, spans) for f in (copy, live)]
    return samples[0] is not None and samples[0] == samples[1]


def _read(file: LogFile, spans: list[tuple[int, int]]) -> list[bytes] | None:
    try:
        fd = open_listed(file.real, file.dev, file.ino)
    except OSError:
        return None
    if fd is None:
        return None
    try:
        return [os.pread(fd, size, offset) for offset, size in spans]
    except OSError:
        return None
    finally:
        os.close(fd)


# open(2)'s errors of a file removed (rotated away) or replaced by a symlink since the listing
_GONE: Final = frozenset({errno.ENOENT, errno.ELOOP, errno.ENOTDIR})


def open_listed(path: str, dev: int, ino: int) -> int | None:
    """`path` opened (non-blocking: a fifo swapped in cannot block it) when it is still the
    regular file (`dev`, `ino`) the listing saw, else None (removed, replaced); an `OSError`
    when the system refuses it (EACCES)."""
    try:
        fd = os.open(path, _OPEN)
    except OSError as exc:
        if exc.errno in _GONE:
            return None
        raise
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (dev, ino) or not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd


_MOVED_LOOKS: Final = 4096  # names looked at in the folder for a moved file, at most


def moved_to(real: str, dev: int, ino: int) -> str | None:
    """The path in `real`'s folder that is the inode (`dev`, `ino`) now, when a rename moved
    it since the listing (a rotation: `app.log` is `app.log.1` now), or None (removed, or
    compressed into a new file). Only that folder, which the listing found inside the roots."""
    try:
        with os.scandir(os.path.dirname(real)) as entries:
            for n, entry in enumerate(entries):
                if n >= _MOVED_LOOKS:
                    return None
                if entry.inode() == ino and not entry.is_symlink():
                    with contextlib.suppress(OSError):
                        if entry.stat(follow_symlinks=False).st_dev == dev:
                            return entry.path
    except OSError:
        return None
    return None


def pseudo(real: str) -> bool:
    """Whether a real path lies on a kernel pseudo-filesystem (never a log)."""
    return any(real == p or real.startswith(p + "/") for p in _PSEUDO)


def opened_inside(fd: int, roots: list[Path]) -> bool:
    # What was opened, as the kernel resolved it: a folder of the path swapped for a symlink
    # between the listing's stat and the open (O_NOFOLLOW guards only the last name) would
    # open the same inode outside the roots; the descriptor's own path says where it is.
    if not roots:
        return True
    try:
        where = Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return True  # no /proc here: the inode check stands alone
    return any(where.is_relative_to(r) for r in roots) and not pseudo(str(where))
