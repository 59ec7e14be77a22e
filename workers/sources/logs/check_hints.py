"""What `aci-evidence check` suggests to an operator (`check` reads the files): the glob for a
path that names a folder, the key of a JSON line that holds its time."""

from __future__ import annotations

import os
import re
from typing import Final

import msgspec

__all__ = ["folder_hint", "time_key"]

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
