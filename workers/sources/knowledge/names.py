"""Runbooks a question names by their alert name (`named_sources`).

Runbook collections name each runbook after the alert it answers, in its file name and its
title (openshift/runbooks `etcdNoLeader.md` under `# etcdNoLeader`, prometheus-operator's
`KubePodCrashLooping.md` titled `Kube Pod Crash Looping`), and the on-call engineer's first
question is that name, pasted. A question names a runbook when the whole question, or one
camelCase word of it, spelled without case, spaces and punctuation, is the runbook's file name
or title spelled the same way, and that name has at least two parts (camelCase humps or
words: `TargetDown`, `Kube Pod Crash Looping`; a one-word title such as `Introduction` or
`Watchdog` is too plain to name anything) and at least `MIN_NAME_CHARS` letters. `README` and
`index` pages name a folder, not a runbook, by their file name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from typing import Final

__all__ = ["MIN_NAME_CHARS", "name_key", "named_sources", "runbook_names"]

MIN_NAME_CHARS: Final = 6
_PARTS: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_WORD: Final = re.compile(r"[A-Za-z0-9]+")  # `etcdNoLeader.md`, `alertname=etcdNoLeader`
_CAMEL: Final = re.compile(r"[a-z0-9][A-Z]")
_FOLDER_PAGES: Final = frozenset({"readme", "index"})


def name_key(text: str) -> str:
    """The name as compared: lower case, no spaces, punctuation or underscores."""
    return re.sub(r"[\W_]+", "", text).lower()


def _is_name(text: str) -> bool:
    return len(_PARTS.findall(text)) >= 2 and len(name_key(text)) >= MIN_NAME_CHARS


def runbook_names(rows: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Name key -> the runbooks (sources, in order) it names, from (source, title) pairs."""
    names: dict[str, list[str]] = {}
    for source, title in rows:
        stem = PurePosixPath(source).stem
        spellings = [title] if name_key(stem) in _FOLDER_PAGES else [stem, title]
        for spelling in spellings:
            key = name_key(spelling)
            if _is_name(spelling) and source not in names.get(key, []):
                names.setdefault(key, []).append(source)
    return names


def named_sources(query: str, names: Mapping[str, list[str]]) -> list[str]:
    """The runbooks `query` names (module docstring), in the order of `names`; [] if none."""
    keys = [name_key(query)]
    keys += [name_key(w) for w in _WORD.findall(query) if _CAMEL.search(w)]
    found: list[str] = []
    for key in keys:
        for source in names.get(key, ()):
            if source not in found:
                found.append(source)
    return found
