"""Runbooks a question names by their alert name (`named_sources`).

Runbook collections name each runbook's file after the alert it answers (openshift/runbooks
`alerts/cluster-etcd-operator/etcdNoLeader.md`, prometheus-operator's `KubePodCrashLooping.md`,
gitlab's `ci_pending_builds.md`), and the on-call engineer's first question is that name,
pasted. A question names a runbook when the whole question, or one camelCase word of it, or
one snake_case word (`alertname=ci_pending_builds`), or the stem of a file name it holds
(`runbooks/high-cpu.md`), spelled without case, spaces and punctuation, is the runbook's file
name spelled the same way (a hyphenated phrase in prose, `out-of-memory`, names nothing; a
path names the runbook it spells, not its namesakes in other folders),
and that file name has at least two parts (camelCase humps or words: `TargetDown`,
`gitlab-com-is-down`; `kubernetes.md` is too plain to name anything) and at least
`MIN_NAME_CHARS` letters. Titles name nothing: a page titled by the product it is about
(gitlab's `k8s-operations.md` under `# GitLab`) made "GitLab pages returns 404" name it; an
alert runbook's title is its file name again (`Kube Pod Crash Looping`). `README` and `index`
pages name a folder, not a runbook.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from typing import Final

__all__ = [
    "MIN_NAME_CHARS",
    "fragments",
    "name_key",
    "named_sources",
    "names_section",
    "runbook_names",
]

MIN_NAME_CHARS: Final = 6
_PARTS: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_WORD: Final = re.compile(r"[A-Za-z0-9]+")  # `etcdNoLeader.md`, `alertname=etcdNoLeader`
_CAMEL: Final = re.compile(r"[a-z0-9][A-Z]")
# Each tried only where a run starts: linear in the question, not quadratic.
_SNAKE: Final = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+")
_FILE: Final = re.compile(r"(?<![\w./-])[\w./-]+\.(?:md|markdown|txt|rst)(?!\w)", re.I)
_FOLDER_PAGES: Final = frozenset({"readme", "index"})
# A link's fragment (`…/checks/#l5d-identity-issuer-cert-is-time-valid`): a letter in it, so
# "issue #4711" names no section.
_FRAGMENT: Final = re.compile(r"(?:(?<=[/\s(<])|^)#([\w.-]++)")


def name_key(text: str) -> str:
    """The name as compared: lower case, no spaces, punctuation or underscores."""
    return re.sub(r"[\W_]+", "", text).lower()


def _is_name(text: str) -> bool:
    return len(_PARTS.findall(text)) >= 2 and len(name_key(text)) >= MIN_NAME_CHARS


def runbook_names(
    sources: Iterable[str], aliases: Iterable[tuple[str, str]] = ()
) -> dict[str, list[str]]:
    """Name key -> the runbooks (sources, in order) whose file name it is, or the name of a
    symlink to it (`aliases`: (link name, source), `KubePodCrashLooping.md` -> a shared
    `k8s/crashloop.md`)."""
    names: dict[str, list[str]] = {}
    pairs = [(source, source) for source in sources] + list(aliases)
    for name, source in pairs:
        stem = PurePosixPath(name).stem
        key = name_key(stem)
        if key not in _FOLDER_PAGES and _is_name(stem) and source not in names.get(key, []):
            names.setdefault(key, []).append(source)
    return names


def named_sources(query: str, names: Mapping[str, list[str]]) -> list[str]:
    """The runbooks `query` names (module docstring), in the order of `names`; [] if none."""
    keys = [name_key(query)]
    keys += [name_key(w) for w in _WORD.findall(query) if _CAMEL.search(w)]
    keys += [name_key(w) for w in _SNAKE.findall(query)]
    keys += [name_key(PurePosixPath(f).stem) for f in _FILE.findall(query)]
    found: list[str] = []
    for key in keys:
        for source in names.get(key, ()):
            if source not in found:
                found.append(source)
    for path in _FILE.findall(query):  # a path names the runbook it spells, not its namesakes
        namesakes = names.get(name_key(PurePosixPath(path).stem), [])
        if spelled := [s for s in namesakes if _spells(path, s)]:
            found = [s for s in found if s in spelled or s not in namesakes]
    return found


def _spells(path: str, source: str) -> bool:
    """`path` (as pasted: case aside, `./` and `../` left out) is the end of `source`."""
    tail = [p.lower() for p in PurePosixPath(path).parts if p not in (".", "..", "/")]
    return [p.lower() for p in PurePosixPath(source).parts[-len(tail) :]] == tail


def fragments(query: str) -> set[str]:
    """The link fragments a question holds (`#l5d-identity-issuer-cert-is-time-valid`)."""
    found = _FRAGMENT.findall(query)
    return {f for f in found if len(f) >= 4 and any(c.isalpha() for c in f)}


def names_section(heading: str, anchor: str, wanted: set[str]) -> bool:
    """Whether a heading is the section a fragment links to: its explicit id (`anchor`, from
    `{#id}`: Hugo, kramdown, Pandoc) or, without one, its generated id (lower case, words
    joined by `-`)."""
    if anchor:
        return anchor in wanted
    slug = re.sub(r"[^\w\- ]", "", heading.lower()).strip().replace(" ", "-")
    return slug in wanted
