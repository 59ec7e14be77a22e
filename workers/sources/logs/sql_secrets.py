"""Secrets in a statement's text that no `name=` stands before (a slow log, PostgreSQL's
statement log, an ORM's): `masking` masks a secret's setting (`SET @db_pass := '...'`,
`set_config`, `IDENTIFIED BY`); here what only the statement's shape says.

- `INSERT INTO users (name, password) VALUES ('bob', '...'), (...)`: the value in each row at
  the place of a column under a secret's name (`secret`), a quoted literal or a number (a PIN),
  as `***`; at a bind parameter's place (`$2`), PostgreSQL's `DETAIL: parameters: $2 = '...'`
  (joined to its statement as one record) is masked, as for `UPDATE ... SET password = $2`;
- an encryption function's key: MySQL's `AES_ENCRYPT(x, '...')`, `AES_DECRYPT`, `DES_ENCRYPT`,
  `DES_DECRYPT`, pgcrypto's `pgp_sym_encrypt(x, '...')`, `pgp_sym_decrypt`, `encrypt(x, '...',
  'aes')`, `decrypt`: its second argument, a quoted literal (pgcrypto's `hmac(x, '...', 'sha256')`
  is not masked: its check would cost every record).

Each statement's arguments are read once, character by character, from its `(`; a call
inside another's arguments is not read again (`AES_ENCRYPT(AES_DECRYPT(x, 'k1'), 'k2')` shows
`k1`); each expression is possessive or bounded: linear.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from workers.masking import MASK

__all__ = ["may_hold_sql_secret", "without_sql_secrets"]

_INSERT: Final = re.compile(
    r"\binsert\s++(?:(?:low_priority|delayed|high_priority|ignore)\s++)*+(?:into\s++)?"
    r"[\w.`\"\[\]]{1,200}+\s*+\(([^()]{1,4000}+)\)\s*+values?\s*+(?=\()",
    re.IGNORECASE,
)
_KEYED: Final = re.compile(
    r"\b(?:aes_(?:en|de)crypt|des_(?:en|de)crypt|pgp_sym_(?:en|de)crypt(?:_bytea)?+"
    r"|(?<![\w.])(?:en|de)crypt)\s*+(?=\()",
    re.IGNORECASE,
)
_SET_BOUND: Final = re.compile(r"([\w.`\"]{1,100}+)\s*+=\s*+\$(\d{1,5}+)(?!\d)")
_PARAMETER: Final = re.compile(r"\$(\d{1,5}+)\s*+=\s*+'((?:[^']|'')*+)'?")
_ARGS_MAX: Final = 100  # the arguments of one call or row read, at most


def may_hold_sql_secret(low: str) -> bool:
    """Whether `without_sql_secrets` may change the text (its lowered form's substrings)."""
    return (
        ("insert" in low and "values" in low)
        or "crypt" in low
        or ("$" in low and "parameters:" in low)
    )


def without_sql_secrets(text: str, secret: Callable[[str], bool]) -> str:
    """The text with the secrets of the module docstring as `***`."""
    spans: list[tuple[int, int]] = []
    bound: set[str] = set()
    read = 0  # (where the rows or arguments read so far end: each character is read once)
    for found in _INSERT.finditer(text):
        columns = [c.strip().strip('`"[]') for c in found.group(1).split(",")]
        places = {n for n, name in enumerate(columns) if secret(name)}
        if places and found.start() >= read:
            read = _rows(text, found.end(), places, spans, bound)
    read = 0
    for found in _KEYED.finditer(text):
        if found.start() < read:
            continue  # inside the last call's arguments: `aes_encrypt(aes_decrypt(x, 'k'), ...)`
        args, read = _arguments(text, found.end())
        if len(args) >= 2 and text[args[1][0] : args[1][0] + 1] in ("'", '"'):
            spans.append(args[1])
    if "$" in text:
        bound.update(m.group(2) for m in _SET_BOUND.finditer(text) if secret(m.group(1)))
        if bound and "parameters:" in text:
            spans.extend(
                (m.start(2) - 1, m.end())
                for m in _PARAMETER.finditer(text, text.index("parameters:"))
                if m.group(1) in bound
            )
    if not spans:
        return text
    parts: list[str] = []
    done = 0
    for start, end in sorted(spans):
        if start < done:
            continue
        value = text[start:end]
        quote = value[0] if value[:1] in ("'", '"') else ""
        closed = quote and len(value) > 1 and value.endswith(quote)
        parts += (text[done:start], quote + MASK + (quote if closed else ""))
        done = end
    return "".join(parts) + text[done:]


def _rows(
    text: str, pos: int, places: set[int], spans: list[tuple[int, int]], bound: set[str]
) -> int:
    """Note the values at `places` of each row from `pos` (a row's `(`), bind parameters'
    numbers in `bound`; where the rows end."""
    while pos < len(text) and text[pos] == "(":
        args, pos = _arguments(text, pos)
        for n in places:
            if n < len(args):
                start, end = args[n]
                value = text[start:end]
                if value.startswith("$") and value[1:].isdigit():
                    bound.add(value[1:])
                elif value[:1] in ("'", '"') or value.replace(".", "", 1).isdigit():
                    spans.append((start, end))
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text) or text[pos] != ",":
            return pos
        pos += 1
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return pos


def _arguments(text: str, pos: int) -> tuple[list[tuple[int, int]], int]:
    """The spans of the arguments of the call or row whose `(` is at `pos` (whitespace left
    out), and the position after its `)` (the text's end when it has none)."""
    args: list[tuple[int, int]] = []
    depth = 0
    start = pos + 1
    i = pos + 1
    n = len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            i += 1
            while i < n:
                if text[i] == "\\":
                    i += 2
                    continue
                if text[i] == c:
                    if i + 1 < n and text[i + 1] == c:  # `''`: a quote inside
                        i += 2
                        continue
                    break
                i += 1
        elif c == "(":
            depth += 1
        elif c == ")" or (c == "," and depth == 0):
            if depth == 0:
                args.append(_stripped(text, start, i))
                if c == ")" or len(args) >= _ARGS_MAX:
                    return args, i + 1
                start = i + 1
            else:
                depth -= 1
        i += 1
    args.append(_stripped(text, start, n))
    return args, n


def _stripped(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, min(end, len(text))
