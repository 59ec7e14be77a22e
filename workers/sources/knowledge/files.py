"""The confined file walk of the knowledge index: which files it may read, and reading them.

Only regular files whose real path lies inside the (real) folder are read: a symlink out of
it (`/etc/passwd`, `../secret.md`, `/proc/self/environ`), a directory symlink, a fifo or device,
a hidden path and a name that is not UTF-8 (logged once, escaped) are skipped. A file is read
by walking from the open folder one component at a time without following symlinks, so a
directory swapped for a symlink between the scan and the read is refused, not followed out.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
from pathlib import Path, PurePath
from typing import Final

__all__ = ["DIR_FLAGS", "RUNBOOK_SUFFIXES", "files_fingerprint", "read_inside", "runbook_files"]

RUNBOOK_SUFFIXES: Final = (".md", ".markdown", ".txt", ".rst")

log = logging.getLogger("aci.knowledge")

_warned_names: set[str] = set()


def _skip_name(rel: str) -> bool:
    # A name that is not UTF-8 (os.walk hands it over with surrogate escapes) cannot be a
    # document's `source`: skip it, and say so once, escaped.
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        if shown not in _warned_names:
            _warned_names.add(shown)
            log.warning("skipping a knowledge file whose name is not UTF-8: %s", shown)
        return True
    return False


def runbook_files(folder: Path) -> list[tuple[str, Path]]:
    """(source name, real path) of every runbook (`RUNBOOK_SUFFIXES`) the index may serve:
    regular files whose real path lies inside the real folder. Directory symlinks are not
    followed (a target inside the folder is walked anyway), hidden paths are skipped."""
    root = folder.resolve()
    found: list[tuple[str, Path]] = []
    for top, dirs, names in os.walk(root):  # followlinks=False
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if name.startswith(".") or not name.endswith(RUNBOOK_SUFFIXES):
                continue
            path = Path(top, name)
            rel = path.relative_to(root).as_posix()
            if _skip_name(rel):
                continue
            try:
                real = path.resolve(strict=True)
                inside = real.is_relative_to(root) and stat.S_ISREG(real.stat().st_mode)
            except (OSError, RuntimeError):  # dangling or looping link, vanished file
                continue
            if inside:
                found.append((rel, real))
    return sorted(found)


DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


def read_inside(root_fd: int, rel: PurePath) -> str | None:
    """The text of the regular file at `rel` (symlink-free) under the open folder `root_fd`,
    or None. Each component is opened relative to the one before without following a symlink,
    so a directory swapped for a symlink after the scan is refused (ELOOP), never followed out
    of the folder; a fifo swapped in never blocks the read."""
    *dirs, name = rel.parts
    opened: list[int] = []
    try:
        parent = root_fd
        for part in dirs:
            parent = os.open(part, DIR_FLAGS, dir_fd=parent)
            opened.append(parent)
        fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
    except OSError:
        return None
    finally:
        for dir_fd in opened:
            os.close(dir_fd)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return handle.read().decode("utf-8", errors="replace")


def files_fingerprint(folder: Path, salt: str) -> str:
    """A hash of `salt` and every indexable file's relative path, size and mtime."""
    digest = hashlib.sha256(salt.encode())
    for rel, path in runbook_files(folder):
        try:
            info = path.stat()
        except OSError:
            continue
        digest.update(f"{rel}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()
