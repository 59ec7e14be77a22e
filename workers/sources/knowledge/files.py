"""The confined file walk of the knowledge index: which files it may read, and reading them.

Only regular files whose real path lies inside the (real) folder are read: a symlink out of
it (`/etc/passwd`, `../secret.md`, `/proc/self/environ`), a directory symlink, a fifo or device,
a hidden path and a name that is not UTF-8 (logged once, escaped) are skipped, and each
runbook name skipped so is said (`runbook_files(refused=...)`). A symlink to a runbook inside
the folder is that runbook, served once under its own name; the link's name is an alias. A
file is read by walking from the open folder one component at a time without following
symlinks, so a directory swapped for a symlink between the scan and the read is refused, not
followed out.

    NotIndexed        a runbook the walk lists but the index cannot read (said, never silent)
    +-- TooLarge      over ACI_KNOWLEDGE_MAX_FILE_BYTES
    +-- Unreadable    the read fails: permission denied, an I/O error
    +-- NotText       binary data, a broken encoding (`decoding.decode_runbook`)
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import stat
from collections import Counter
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Final

from workers.sources.knowledge.decoding import Undecodable, decode_runbook_as

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DIR_FLAGS",
    "DOCUMENT_SUFFIXES",
    "MAX_DEPTH",
    "RUNBOOK_SUFFIXES",
    "NotIndexed",
    "NotText",
    "TooLarge",
    "Unreadable",
    "files_fingerprint",
    "max_file_bytes_from_env",
    "other_kinds",
    "read_inside",
    "read_inside_as",
    "runbook_files",
]

RUNBOOK_SUFFIXES: Final = (".md", ".markdown", ".mdx", ".txt", ".rst")
# Kinds that hold prose the index does not read (an export, another markup): a folder's
# runbook may be one of them. Images, scripts, LICENSE and OWNERS files are not.
DOCUMENT_SUFFIXES: Final = frozenset(
    ".adoc .asciidoc .htm .html .xhtml .org .wiki .mediawiki .textile .tex .pod .ipynb"
    " .pdf .doc .docx .odt .rtf".split()
)
MAX_DEPTH: Final = 64  # folder levels walked below the knowledge folder
# A docs site's checkout holds its installed packages: thousands of README.md and CHANGELOG.md
# files of libraries (a Docusaurus or Backstage site: `npm install` before a local preview).
_PACKAGE_FOLDERS: Final = frozenset({"node_modules", "bower_components"})
DEFAULT_MAX_FILE_BYTES: Final = 1024 * 1024  # a runbook larger than this is not indexed

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


# A suffix said as it is written (it goes into a log line: no newline, no escape sequence).
_SUFFIX: Final = re.compile(r"\.[a-z0-9_+-]{1,11}")


def _kind(suffix: str) -> str:
    # How `runbook_files` counts a file of another kind: by its suffix, when it reads as one.
    if not suffix:
        return "no suffix"
    return suffix if _SUFFIX.fullmatch(suffix) else "other suffix"


def runbook_files(
    folder: Path,
    others: Counter[str] | None = None,
    refused: list[tuple[str, str]] | None = None,
    aliases: list[tuple[str, str]] | None = None,
) -> list[tuple[str, Path]]:
    """(source name, real path) of every runbook (`RUNBOOK_SUFFIXES`) the index may serve:
    regular files whose real path lies inside the real folder. Directory symlinks are not
    followed (a target inside the folder is walked anyway), hidden paths are skipped, and so
    are installed packages (`node_modules`) and folders deeper than `MAX_DEPTH` (said once).
    The walk keeps its own stack (a folder nested 1,000 deep is no recursion), and a file or
    link that changes or vanishes while it is listed is skipped, never an error. A symlink to
    a file inside the folder is listed once, under the file's own name: the link's name would
    serve the same text twice, and the per-hit check (`current.py`) reads a source without
    following links. `others`, given, counts the files passed over for their suffix (`.adoc`,
    `.html`, or `no suffix`), for the index to say so; `refused`, given, gets (name, why) of
    each runbook name or folder the walk could not take: a folder that cannot be listed
    (permission denied), a symlink out of the folder or to nothing, a fifo named `.md`;
    `aliases`, given, gets (link name, source) of each symlink to a runbook inside the folder
    (`KubePodCrashLooping.md -> k8s/crashloop.md`: the link's name still names it)."""
    root = folder.resolve()
    found: list[tuple[str, Path]] = []
    stack = [(root, 0)]
    while stack:
        top, depth = stack.pop()
        try:
            with os.scandir(top) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:  # vanished, swapped for a file or a link, unreadable
            if refused is not None and exc.errno in _UNREADABLE and top != root:
                refused.append((f"{_shown(top, root)}/", "a folder that cannot be listed"))
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if entry.name in _PACKAGE_FOLDERS:
                    _warn_once(f"skipping knowledge folders named {entry.name} (packages)")
                elif depth + 1 > MAX_DEPTH:
                    _warn_once(f"skipping knowledge folders deeper than {MAX_DEPTH} levels")
                else:
                    stack.append((Path(entry.path), depth + 1))
                continue
            if entry.name.lower().endswith(RUNBOOK_SUFFIXES):  # `RUNBOOK.MD` too
                why = _add_file(root, Path(entry.path), found, aliases)
                if why and refused is not None:
                    refused.append((_shown(Path(entry.path), root), why))
            elif others is not None and entry.is_file():  # a link to a folder is no file
                suffix = Path(entry.name).suffix.lower()
                others[_kind(suffix)] += 1
    for listed in (refused, aliases):
        if listed is not None:
            listed.sort()
    return sorted(dict(found).items())


def _shown(path: Path, root: Path) -> str:
    # A name for a log line or `check`: relative, a name that is not UTF-8 escaped.
    name = path.relative_to(root).as_posix()
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _add_file(
    root: Path, path: Path, found: list[tuple[str, Path]], aliases: list[tuple[str, str]] | None
) -> str:
    """Add the runbook at `path`; return why it is refused ("" when added or gone)."""
    name = path.relative_to(root).as_posix()
    if _skip_name(name):
        return ""
    try:
        real = path.resolve(strict=True)
        mode = real.stat().st_mode
    except (OSError, RuntimeError):  # dangling or looping link, vanished file
        return "a symlink to nothing" if path.is_symlink() else ""
    if not real.is_relative_to(root):
        return "a symlink out of the folder (only files inside it are read)"
    if not stat.S_ISREG(mode):
        return "not a regular file (a fifo, socket or device)"
    # Named as the file it is (a link's target keeps its own name, once).
    rel = real.relative_to(root).as_posix()
    if not _skip_name(rel):
        found.append((rel, real))
        if aliases is not None and rel != name:
            aliases.append((name, rel))
    return ""


def _warn_once(message: str) -> None:
    if message not in _warned_names:
        _warned_names.add(message)
        log.warning("%s", message)


DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


def other_kinds(others: Mapping[str, int]) -> str:
    """The files `runbook_files` passed over, the five commonest kinds: `3 .adoc, 1 .html`."""
    common = sorted(others.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    return ", ".join(f"{n} {suffix}" for suffix, n in common)


def max_file_bytes_from_env(env: Mapping[str, str]) -> int:
    """ACI_KNOWLEDGE_MAX_FILE_BYTES (1 KiB to 64 MiB; `ValueError` otherwise)."""
    text = env.get("ACI_KNOWLEDGE_MAX_FILE_BYTES", "").strip()
    value = int(text) if text.isdigit() else DEFAULT_MAX_FILE_BYTES if not text else 0
    if not 1024 <= value <= 64 * 1024 * 1024:
        raise ValueError("ACI_KNOWLEDGE_MAX_FILE_BYTES must be between 1024 and 67108864")
    return value


class NotIndexed(Exception):
    """A runbook the index cannot read; `reason` says why, for a log line or `check`."""

    reason = "cannot be read"


class TooLarge(NotIndexed):
    """A runbook larger than the size cap (ACI_KNOWLEDGE_MAX_FILE_BYTES): not read."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size
        self.reason = f"{size} bytes, over ACI_KNOWLEDGE_MAX_FILE_BYTES"


class Unreadable(NotIndexed):
    """The runbook's read failed (permission denied, an I/O error): `reason` is the errno's
    short text (`permission denied`), never a path."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = f"cannot be read ({reason})"


# The reasons a listed runbook's open or read fails that are the file's, not a race: said.
# (ENOENT, ELOOP, ENOTDIR mean it vanished or was swapped for a link since it was listed.)
_UNREADABLE: Final = frozenset({errno.EACCES, errno.EPERM, errno.EIO, errno.EISDIR, errno.ENXIO})


class NotText(NotIndexed):
    """The runbook's bytes are no text (`decoding.decode_runbook`): binary data, say."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _unreadable(exc: OSError) -> Unreadable:
    return Unreadable(os.strerror(exc.errno or errno.EIO).lower())


def read_inside(root_fd: int, rel: PurePath, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> str | None:
    """The text of the regular file at `rel` under the open folder `root_fd`, or None
    (`read_inside_as`)."""
    read = read_inside_as(root_fd, rel, max_bytes)
    return None if read is None else read[0]


def read_inside_as(
    root_fd: int, rel: PurePath, max_bytes: int = DEFAULT_MAX_FILE_BYTES
) -> tuple[str, str] | None:
    """The text of the regular file at `rel` (symlink-free) under the open folder `root_fd`,
    or None. Each component is opened relative to the one before without following a symlink,
    so a directory swapped for a symlink after the scan is refused (ELOOP), never followed out
    of the folder; a fifo swapped in never blocks the read. A file over `max_bytes` raises
    `TooLarge` (read no further than the cap, even while it grows), one whose read fails
    (permission denied) `Unreadable`, one that is no text (`decoding.decode_runbook`)
    `NotText`. None when it vanished or was swapped since it was listed. With the text, the
    encoding it was read as ("" for UTF-8: `decoding.decode_runbook_as`)."""
    *dirs, name = rel.parts
    opened: list[int] = []
    try:
        parent = root_fd
        for part in dirs:
            parent = os.open(part, DIR_FLAGS, dir_fd=parent)
            opened.append(parent)
        fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in _UNREADABLE:
            raise _unreadable(exc) from None
        return None
    finally:
        for dir_fd in opened:
            os.close(dir_fd)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > max_bytes:
            raise TooLarge(info.st_size)
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise _unreadable(exc) from None
        if len(data) > max_bytes:
            raise TooLarge(len(data))
    try:
        return decode_runbook_as(data)
    except Undecodable as exc:
        raise NotText(exc.reason) from None


def files_fingerprint(folder: Path, salt: str) -> str:
    """A hash of `salt`, every indexable file's relative path, size, mtime and access (mode,
    owner, group: a runbook made unreadable is rebuilt without it and said), and every
    link's name (an alias added or removed is a change)."""
    digest = hashlib.sha256(salt.encode())
    aliases: list[tuple[str, str]] = []
    for rel, path in runbook_files(folder, aliases=aliases):
        try:
            info = path.stat()
        except OSError:
            continue
        access = f"{info.st_mode:o}.{info.st_uid}.{info.st_gid}"
        digest.update(f"{rel}\0{info.st_size}\0{info.st_mtime_ns}\0{access}\n".encode())
    for name, rel in aliases:
        digest.update(f"alias\0{name}\0{rel}\n".encode())
    return digest.hexdigest()
