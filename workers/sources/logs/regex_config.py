"""The checks of a `format = "regex"` source's `pattern` and `time_format` (config.py).

The pattern is Python `re` syntax; it must have a named group `time`, and every named group
is a field name (`time`, `level`, `message`, `service` are the record's own, the others its
fields).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["check_pattern"]

_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_pattern(pattern: str, fmt: str, time_format: str) -> None:
    """`ValueError` naming the key when a source's `pattern` / `time_format` is wrong."""
    if fmt != "regex":
        if pattern:
            raise ValueError('pattern: only for format = "regex"')
        if time_format and fmt not in ("plain",):
            raise ValueError('time_format: only for format = "regex" or "plain"')
        return
    if not pattern:
        raise ValueError('pattern: missing key (format = "regex" needs a Python regex)')
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"pattern: not a Python regular expression ({exc})") from None
    if "time" not in compiled.groupindex:
        raise ValueError("pattern: needs a named group (?P<time>...) for the record's time")
    for name in compiled.groupindex:
        if not _NAME.fullmatch(name) or name != name.lower():  # a query reads names lowercase
            raise ValueError(
                f"pattern: group {name!r} is not a field name (lowercase letters, digits, _: "
                "a query reads field names lowercase)"
            )
