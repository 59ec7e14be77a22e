"""Finding and reading a topic's log files: confined to the roots, newest first, bounded.

Confinement copies the knowledge folder's rule (workers/sources/knowledge/index.py): a file
is read only when its real path lies inside a real root and it is a regular file; it is then
opened by that real path with `O_NOFOLLOW` and checked to be the same inode, so a name
swapped for a symlink between the listing and the open is refused, not followed. A match
outside the roots (a symlink to /etc/passwd, even to a fifo) or on a kernel pseudo-filesystem
refuses the whole source: an AUTHORIZATION error whose text names no path. A match inside the
roots that is no regular file (a log shipper's fifo `app.log.pipe` beside `app.log`, a socket,
a device) is skipped, never opened (opening a fifo can block), and handed to the caller by
real path and kind (`skipped`), so the regular files beside it still answer.

Listing: each folder is read lazily, every name looked at (a folder a wildcard matches, as
Docker's `containers/*/`, too) counts against `MAX_NAMES` and the `StopFlag` is checked every
few hundred names; a cut listing marks the count as a lower bound. A folder a wildcard matches
is read only when its real path lies inside the roots (else the source is refused, unlisted).

Reading: files in descending mtime, those last written before the window pruned. A `Reader`
meters every byte against the call's `ScanBudget` (decompressed bytes for a compressed file,
its codec read from its magic bytes: `compression`) and checks the `StopFlag` every few
thousand lines; a plain file larger than the remaining budget is read from its tail. A line
over `max_line_bytes` is skipped in bounded chunks (`longlines`: whether it could match).
Anything that stops the reading early marks the count as a lower bound; a compressed file cut
short or corrupt part way (or a zstd frame that needs a dictionary), and any file of which the
system failed a read (EIO), keeps the lines read before the damage and is counted (`broken`,
and of them `cut`, `dictionary`, `unreadable`).
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import re
import stat
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Final

from workers.sources.base import failure_of
from workers.sources.logs.compression import UNREADABLE, compression_of, damage_of, decompressed
from workers.sources.logs.config import ScanBudget
from workers.sources.logs.deadline import StopFlag
from workers.sources.logs.file_judgement import (
    RefusedFile,
    kind_of,
    moved_to,
    open_listed,
    opened_inside,
    pseudo,
    without_copies,
)
from workers.sources.logs.secret_shapes import CONTROL_SEQUENCE

if TYPE_CHECKING:
    from workers.sources.logs.longlines import Judge, LongLineProbe

__all__ = [
    "UNREADABLE", "LogFile", "Reader", "RefusedFile", "compression_of",
    "find_files", "without_colour",
]  # fmt: skip

# open(2)'s errors of a file removed (rotated away) or replaced by a symlink since the listing
_GONE: Final = frozenset({errno.ENOENT, errno.ELOOP, errno.ENOTDIR})
_CHECK_EVERY: Final = 2048
_CHUNK: Final = 1024 * 1024
# Terminal colour and style codes (SGR, `ESC [ ... m`) and the other control sequences a
# program wrote into its log file (`ESC[K`, an OSC title, `ESC(B`: `secret_shapes`):
# presentation, not text (a level or a word split by one is not found otherwise).
_SGR: Final = re.compile(CONTROL_SEQUENCE.encode())


def without_colour(data: bytes) -> bytes:
    """Raw log bytes without their terminal control sequences (the scan's lines, the peeks')."""
    return _SGR.sub(b"", data)


class LogFile:
    """A file to read: its real path (never shown), identity, mtime and size."""

    __slots__ = ("dev", "ino", "mtime_ms", "real", "size")

    def __init__(self, real: str, st: os.stat_result) -> None:
        self.real, self.dev, self.ino = real, st.st_dev, st.st_ino
        self.mtime_ms, self.size = int(st.st_mtime * 1000), st.st_size


# Names looked at per call, at most, matching or not (a folder a hostile program filled with a
# million files would otherwise be listed and stat'ed whole on every call); past it the
# listing stops and the count is a lower bound. The deadline is checked every few hundred.
MAX_NAMES: Final = 65_536
_LIST_CHECK_EVERY: Final = 256
_MAGIC: Final = re.compile(r"[*?[]")


def _listing(
    pattern: str, roots: list[Path], unlisted: dict[str, str] | None = None
) -> Generator[str | None, None, None]:
    """Each name the listing of a glob examines: its path when it matches, else None (so
    the caller meters every name looked at, folders too, not only the matches). Each folder
    is read lazily (`glob` reads one whole, however large, before the first match). A folder
    the system refuses to list or search (EACCES) goes in `unlisted` with its failure."""
    unlisted = {} if unlisted is None else unlisted
    folder, base = os.path.split(pattern)
    if not _MAGIC.search(folder):
        yield from _names(folder, base, roots, unlisted, dirs_only=False)
        return
    with contextlib.closing(_folders(folder, roots, unlisted)) as folders:
        for found in folders:
            yield None  # a folder looked at, matched or not
            if found is not None:
                yield from _names(found, base, roots, unlisted, dirs_only=False)


def _folders(
    pattern: str, roots: list[Path], unlisted: dict[str, str]
) -> Generator[str | None, None, None]:
    """As `_listing`, of a pattern of folders (`containers/*`): each match is a folder (a
    symlink to one too, as in `glob`) checked to lie inside the roots before it is read."""
    folder, base = os.path.split(pattern)
    if not _MAGIC.search(folder):  # the folder the walk starts in: inside the roots too
        _confined(folder, roots)
        yield from _names(folder, base, roots, unlisted, dirs_only=True)
        return
    with contextlib.closing(_folders(folder, roots, unlisted)) as parents:
        for parent in parents:
            yield None
            if parent is not None:
                yield from _names(parent, base, roots, unlisted, dirs_only=True)


def _names(
    folder: str, base: str, roots: list[Path], unlisted: dict[str, str], *, dirs_only: bool
) -> Generator[str | None, None, None]:
    """The names of one folder `base` matches (None for each that does not); `dirs_only`:
    the folders among them, each `_confined` (`folder` is, when `dirs_only`: a folder in it
    that is no symlink lies inside the roots too, its realpath(3) spared). A folder missing
    matches nothing; one the system refuses (EACCES: the worker may not list or search it)
    is put in `unlisted`, never taken for a folder of no file."""
    if not _MAGIC.search(base):
        path = os.path.join(folder, base)
        try:
            st = os.lstat(path) if base else None
        except OSError as exc:
            if exc.errno not in _GONE:
                unlisted.setdefault(os.path.realpath(folder or os.curdir), failure_of(exc))
            st = None
        found = (
            (os.path.isdir(path) if st is not None else False) if dirs_only
            else st is not None or not base
        )  # fmt: skip
        if found and dirs_only:
            _confined(path, roots)
        yield path if found else None
        return
    match = re.compile(fnmatch.translate(base)).match
    hidden = base.startswith(".")  # as glob: `*` does not match a leading dot
    try:
        with os.scandir(folder or os.curdir) as entries:
            for entry in entries:
                name = entry.name
                ok = match(name) is not None and (hidden or not name.startswith("."))
                ok, plain = _folder(entry) if ok and dirs_only else (ok, False)
                hit = os.path.join(folder, name) if ok else None
                if hit is not None and dirs_only and not plain:
                    _confined(hit, roots)
                yield hit
    except OSError as exc:  # a missing folder matches nothing; a refused one is said
        if exc.errno not in _GONE:
            unlisted.setdefault(os.path.realpath(folder or os.curdir), failure_of(exc))


def _folder(entry: os.DirEntry[str]) -> tuple[bool, bool]:
    """Whether the entry is a folder (a symlink's target: stat(2), which opens nothing), and
    whether it is one by its own name (no symlink)."""
    try:
        return entry.is_dir(), not entry.is_symlink()
    except OSError:
        return False, False


def _confined(folder: str, roots: list[Path]) -> None:
    """Refuse the source (`RefusedFile`) when a folder a wildcard matched resolves outside
    the roots (a container's folder symlinked elsewhere), before anything in it is listed."""
    real = os.path.realpath(folder)
    if pseudo(real) or not any(Path(real).is_relative_to(r) for r in roots):
        why = f"{folder} resolves outside the log roots"
        raise RefusedFile(real, "on a kernel pseudo-filesystem" if pseudo(real) else why)


def find_files(
    globs: list[str],
    roots: list[str],
    start_ms: int,
    max_files: int,
    flag: StopFlag | None = None,
    needed: Callable[[LogFile], bool] | None = None,
    *,
    skipped: dict[str, str] | None = None,
    unlisted: dict[str, str] | None = None,
) -> tuple[list[LogFile], bool, int]:
    """The files the globs match, newest first, pruned to the window (by mtime, or by
    `needed`: `filetime.FileTimes.needed` reads the records' own time); `True` when more than
    `max_files` matched (the oldest were left out) or the listing was cut (more than
    `MAX_NAMES` names, or `flag` expired); and how many regular files matched before the
    pruning (0 with `False`: the globs match no regular file at all). Matches inside the roots
    that are no regular file are never opened; each is put in `skipped` (its real path: what
    it is, "a fifo"), once however many globs match it. A folder of a glob the system refuses
    to list or search (EACCES) is put in `unlisted` (its real path: the failure, "EACCES,
    permission denied"): its files are unknown, never "no file"."""
    real_roots = [Path(os.path.realpath(r)) for r in roots]
    if any(pseudo(str(r)) for r in real_roots):
        # a root that is a symlink into /proc: nothing under it is a log
        raise RefusedFile(str(next(r for r in real_roots if pseudo(str(r)))),
                          "a log root on a kernel pseudo-filesystem")  # fmt: skip
    seen: dict[tuple[int, int], LogFile] = {}
    names, cut = 0, False
    for pattern in globs:
        refused = unlisted if unlisted is not None else {}
        with contextlib.closing(_listing(pattern, real_roots, refused)) as listing:
            for name in listing:
                names += 1
                if names > MAX_NAMES or (
                    flag is not None and names % _LIST_CHECK_EVERY == 0 and flag.expired()
                ):
                    cut = True
                    break
                if name is not None:
                    _add(name, real_roots, seen, skipped)
        if cut:
            break
    files = sorted(without_copies(seen.values()), key=lambda f: (-f.mtime_ms, f.real))
    matched = len(files)
    files = [f for f in files if (f.mtime_ms >= start_ms if needed is None else needed(f))]
    return files[:max_files], cut or len(files) > max_files, matched


def _add(
    name: str,
    real_roots: list[Path],
    seen: dict[tuple[int, int], LogFile],
    skipped: dict[str, str] | None,
) -> None:
    real = os.path.realpath(name)
    try:
        st = os.stat(real)  # stat(2) opens nothing: a fifo cannot block it
    except OSError:
        return  # rotated away since the listing: nothing to read
    if stat.S_ISDIR(st.st_mode):
        return
    # Outside the roots or on a pseudo-filesystem, whatever it is, the source is refused: a
    # symlink pointing out of the roots is how a hostile name would reach another file.
    if not any(Path(real).is_relative_to(r) for r in real_roots):
        raise RefusedFile(real, f"{name} resolves outside the log roots")
    if pseudo(real):
        raise RefusedFile(real, "on a kernel pseudo-filesystem")
    if not stat.S_ISREG(st.st_mode):
        if skipped is not None:  # inside the roots: no log to read, never opened
            skipped.setdefault(real, kind_of(st.st_mode))
        return
    seen.setdefault((st.st_dev, st.st_ino), LogFile(real, st))


class Reader:
    """Meters the bytes and lines of one call over all its files."""

    def __init__(self, budget: ScanBudget, flag: StopFlag, roots: list[str] | None = None) -> None:
        self.budget, self.flag = budget, flag
        self.roots = [Path(os.path.realpath(r)) for r in roots or []]
        self.bytes_read = 0
        self.lines = 0
        self.stopped = False  # stopped early: budget, deadline, a long line, a broken file
        self.out_of_budget = False
        self.unread: list[str] = []  # compressions of matched files it could not read
        self.broken = 0  # files that ended in an error part way (corrupt, or one below)
        self.cut = 0  # ... of them, compressed and cut short: their end is missing
        self.dictionary = 0  # ... a zstd frame that needs a dictionary
        self.unreadable = 0  # ... a read the system failed (EIO), compressed or plain
        self.read_error = ""  # ... their failures, each kind once ("EIO, input/output error")
        self.refused, self.refused_error = 0, ""  # ... of them, refused at the open (EACCES)
        self.long_lines = 0  # lines over `max_line_bytes`, skipped
        self.long_unsure = 0  # ... of them, those that may have matched (`longlines`)
        self.longest = 0  # ... the longest of them, in bytes
        self.long_probe: Callable[[], LongLineProbe] | None = None  # set per file by the scan
        self.long_judge: Judge | None = None  # ... and whether it may match (None: it may)
        self.gone = 0  # files rotated away or removed since the listing, not found again
        self.truncated = 0  # plain files shorter than listed: `copytruncate`, the rest copied

    def _open(self, file: LogFile) -> BinaryIO | None:
        """The file opened and checked, or None when it was removed or replaced since the
        listing and is not in its folder under another name (a rename rotation meanwhile:
        `app.log` is `app.log.1` now, found by its inode); an `OSError` when the system
        refuses it (EACCES: the worker may not read it)."""
        fd = open_listed(file.real, file.dev, file.ino)
        if fd is None:
            moved = moved_to(file.real, file.dev, file.ino)
            fd = None if moved is None else open_listed(moved, file.dev, file.ino)
        if fd is None:
            self.gone += 1
            return None
        if not opened_inside(fd, self.roots):
            os.close(fd)
            return None
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")

    def lines_of(self, file: LogFile) -> Generator[str, None, None]:
        """The decoded lines of one file (invalid UTF-8 replaced), within the budget."""
        try:
            raw = self._open(file)
        except OSError as exc:  # a file it may not open (EACCES): unreadable, none of it read
            self._unreadable(exc, refused=True)
            return
        if raw is None:  # rotated or replaced since the listing: what it held was not read
            self.stopped = True
            return
        with raw:
            left = self.budget.max_bytes - self.bytes_read
            if left <= 0:
                self.stopped = self.out_of_budget = True
                return
            codec = ""
            try:
                codec = compression_of(raw)
                if codec in UNREADABLE:
                    self.unread.append(codec)  # counted and named: never a silent exact 0
                    self.stopped = True
                    return
                stream = decompressed(raw, codec, self.flag.expired)
                if codec == "" and file.size > left:
                    raw.seek(file.size - left)  # the newest part; the first partial line dropped
                    self.stopped = True
                    self._skip_rest(stream)
                yield from self._read(stream)
                if codec == "" and os.fstat(raw.fileno()).st_size < file.size:
                    self.stopped, self.truncated = True, self.truncated + 1
            except Exception as exc:  # the codec's, the system's (`damage_of`); others raise
                damage = damage_of(exc, codec)
                if not damage:
                    raise
                if damage == "unreadable" and isinstance(exc, OSError):
                    self._unreadable(exc)  # what was read before the failure stands
                    return
                self.stopped = True  # what was read before the damage stands
                self.broken += 1
                self.cut += damage == "cut"
                self.dictionary += damage == "dictionary"

    def _unreadable(self, exc: OSError, refused: bool = False) -> None:
        self.stopped, self.broken, self.unreadable = True, self.broken + 1, self.unreadable + 1
        self.refused += refused
        # its name and what it means: `EACCES, permission denied` (the worker's user or group)
        name = "refused_error" if refused else "read_error"
        failure, said = failure_of(exc), getattr(self, name)
        if failure not in said.split("; "):  # each kind once, in the order met
            setattr(self, name, f"{said}; {failure}" if said else failure)

    @property
    def corrupt(self) -> int:
        """The broken files none of the others: bytes that do not decode."""
        return self.broken - self.cut - self.dictionary - self.unreadable

    def _skip_rest(self, stream: BinaryIO, probe: LongLineProbe | None = None) -> None:
        while not self.flag.expired():
            chunk = stream.readline(_CHUNK)
            self.bytes_read += len(chunk)
            if probe is not None:
                probe.feed(chunk)
            if not chunk or chunk.endswith(b"\n") or self._over():
                return

    def _over(self) -> bool:
        if self.bytes_read >= self.budget.max_bytes:
            self.stopped = self.out_of_budget = True
            return True
        return False

    def _read(self, stream: BinaryIO) -> Iterator[str]:
        cap = self.budget.max_line_bytes
        checked_at = self.bytes_read
        while True:
            self.lines += 1
            # Every few thousand lines, and every MiB: long lines are slow to parse and mine
            # (40 lines of 1 MiB ran 15 s past a 0.5 s deadline when only lines were counted).
            if self.lines % _CHECK_EVERY == 0 or self.bytes_read - checked_at >= _CHUNK:
                checked_at = self.bytes_read
                if self.flag.expired():
                    self.stopped = True
                    return
            line = stream.readline(cap + 1)
            if not line:
                # a zstd file's end is judged by a walk of its frames, stopped at the deadline
                # (`compression.zstd_end`): past it, the end read may not be the file's
                self.stopped = self.stopped or self.flag.expired()
                return
            self.bytes_read += len(line)
            if len(line) > cap and not line.endswith(b"\n"):
                probe = self.long_probe() if self.long_probe is not None else None
                if probe is not None:
                    probe.feed(line)
                before = self.bytes_read - len(line)
                self._skip_rest(stream, probe)
                self.longest = max(self.longest, self.bytes_read - before)
                self.long_lines += 1  # a line longer than the cap may hold a match: not exact
                unsure = not self.long_judge or self.long_judge(line, probe) or self.flag.expired()
                self.long_unsure += unsure
                self.stopped = self.stopped or unsure
            else:
                if b"\x1b" in line:  # coloured lines read as their text
                    line = without_colour(line)
                if b"\r" in line:  # CRLF files: no \r in any message or template
                    if line.endswith(b"\r\n"):
                        line = line[:-2] + b"\n"
                    elif line.endswith(b"\r"):
                        line = line[:-1]
                yield line.decode("utf-8", "replace")
            if self._over() or self.flag.cancelled:
                self.stopped = True
                return
