"""What `aci-evidence check` suggests to an operator (`check` reads the files): the glob for a
path that names a folder, whose a file the worker may not open is and what to change, the key
of a JSON line that holds its time."""

from __future__ import annotations

import grp
import os
import pwd
import re
import stat
from typing import Final

import msgspec

__all__ = ["folder_hint", "owner_of", "time_key"]

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


def time_key(line: str) -> str:
    """The first key (dotted when nested, three deep at most) of a JSON line whose value is an
    ISO 8601 time, or '' (a line of no JSON object, or of no such value)."""
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
            elif prefix and isinstance(value, str) and _ISO.match(value):
                return prefix
        level = deeper
    return ""
