"""How the FILE backend says what it refuses or cannot read, and which rotated files are
copies of another (`files` lists and reads; this keeps its judgements small and apart).

- `RefusedFile`: a matched path resolving outside the log roots, or on a kernel
  pseudo-filesystem: the whole source is refused (AUTHORIZATION).
- `kind_of`: what a matched path that is no regular file is ("a fifo").
- `failure_of`: an `OSError` as its errno's name and meaning ("EACCES, permission denied").
- `without_copies`: the listed files less a compressed copy still beside its plain file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from contracts.status import ErrorCode
from workers.sources.base import SourceError

if TYPE_CHECKING:
    from workers.sources.logs.files import LogFile

__all__ = ["RefusedFile", "failure_of", "kind_of", "without_copies"]


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


def failure_of(exc: OSError) -> str:
    """An `OSError` as its errno's name and meaning: `EACCES, permission denied`."""
    code = exc.errno or 0
    return f"{errno.errorcode.get(code, str(code))}, {os.strerror(code).lower()}"


# The names a compressor gives its output: `gzip app.log.1` writes `app.log.1.gz` (logrotate's
# `compress`, `compressext`), `xz` `.xz`, and so on.
_COMPRESSED_NAMES: Final = (".gz", ".xz", ".bz2", ".zst", ".zstd", ".lz4", ".z", ".Z")


def without_copies(files: Iterable[LogFile]) -> list[LogFile]:
    """The files less each compressed copy of another one still beside it: `app.log.1.gz`
    written no earlier than `app.log.1` was last, while logrotate's `compress` runs (its
    output growing, the plain file removed only once it is whole). The plain file holds every
    line the copy holds or will: read both and each line counts twice, read the partial copy
    and its lines count again, said as cut short. An older `app.log.gz` is no copy of what
    `app.log` holds now: read as its own."""
    by_name = {f.real: f for f in files}
    kept: list[LogFile] = []
    for file in by_name.values():
        stem, ext = os.path.splitext(file.real)
        plain = by_name.get(stem) if ext in _COMPRESSED_NAMES else None
        if plain is None or file.mtime_ms < plain.mtime_ms:
            kept.append(file)
    return kept
