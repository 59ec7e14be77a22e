"""Checking the books after a scenario, from what Redis holds.

For every planned call: exactly one final state hash, exactly one PROJECTING and one final entry
on the lifecycle stream, exactly one Model Observation and one Control View; an outcome allowed
by its expectation (a source failure is never NO_EVIDENCE), and of the planned call's own scope
(the scope key recorded and finished with is the planned call's: `wrong` otherwise, e.g. a
forged or pre-claimed call under its id). No view or lifecycle entry for an id that was never
submitted (nothing minted). Every call with a record is in its session's call index (else
`unlisted`: a session page would miss it). Every stream entry, every state hash and every log
line is scanned for the configured secrets, hosts and ports.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Final

import msgspec

from chaos.load import Expect, Planned
from pipeline.envelope import scope_key
from pipeline.keys import GROUP, Keys
from pipeline.record import (
    CONTROL,
    EVIDENCE,
    MODEL,
    SCOPE_KEY,
    STATUS,
    lifecycle_entry,
    read_records,
    view_entry,
)

__all__ = ["Books", "check_books", "leak_pattern", "scan"]


class Books(msgspec.Struct, kw_only=True):
    """The outcome of the check (every count but `finals` and `states` must be zero)."""

    planned: int
    finals: int = 0
    lost: int = 0
    duplicates: int = 0
    minted: int = 0
    masked: int = 0  # a failure (or an injected fault) that did not end as its ERROR
    wrong: int = 0  # an outcome its expectation does not allow (other than masked)
    pending_left: int = 0
    leaked: int = 0
    # A finished call missing from its session's call index (`{P}:calls:<session>`): the
    # console, `replay` and `export` would not list it.
    unlisted: int = 0
    states: dict[str, int] = msgspec.field(default_factory=dict)
    examples: list[str] = msgspec.field(default_factory=list)

    @property
    def clean(self) -> bool:
        """True when nothing was lost, duplicated, minted, masked, left pending or leaked."""
        bad = (self.lost, self.duplicates, self.minted, self.masked, self.wrong, self.unlisted)
        return not any(bad) and not self.pending_left and not self.leaked


# What makes a number an address's port (`db-1:PORT`, `[::1]:PORT`, "port PORT", "port=PORT").
_BEFORE_PORT: Final = (r"[A-Za-z0-9\]]:", "port ", "port=", "port: ")


def leak_pattern(needles: Iterable[str]) -> re.Pattern[str] | None:
    """One regex for secrets, hosts and ports (a port only as a whole number)."""
    parts = []
    for needle in needles:
        if not needle:
            continue
        if needle.isdigit():
            # A port leaks as part of an address (`host:PORT`, "port PORT"), not as a bare
            # number: evidence itself holds numbers (rows_examined, cost_ms, order ids in URIs,
            # hex fingerprints) that can equal a random free port.
            # JSON's `"cost_ms":41234` is a value, `db-1:41234` an address. The number comes
            # first and each look-behind covers it: a pattern that starts with look-behinds is
            # tried at every position of every text (0.9 s of a CI-scale row's 1.5 s of books;
            # this form matches the same spans about 35x faster).
            behind = "|".join(rf"(?<={before}{needle})" for before in _BEFORE_PORT)
            parts.append(rf"{needle}(?:{behind})(?![\d])")
        else:
            parts.append(re.escape(needle))
    return re.compile("|".join(parts)) if parts else None


def _around(text: str, at: int) -> str:
    return text[max(0, at - 80) : at + 80]


def scan(texts: Iterable[str], pattern: re.Pattern[str] | None) -> list[str]:
    """The texts that contain a secret, host or port (160 characters around the hit)."""
    if pattern is None:
        return []
    return [_around(t, m.start()) for t in texts if (m := pattern.search(t))]


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


async def _xrange_all(redis: Any, stream: str) -> list[tuple[bytes, dict[bytes, bytes]]]:
    out: list[tuple[bytes, dict[bytes, bytes]]] = []
    start = "-"
    while True:
        chunk = await redis.xrange(stream, start, "+", count=5000)
        if start != "-" and chunk:
            chunk = chunk[1:]
        out += chunk
        if len(chunk) < 4999:
            return out
        start = chunk[-1][0]


async def _check_listed(
    redis: Any,
    keys: Keys,
    planned: dict[tuple[str, str], Planned],
    states: Sequence[dict[str, Any]],
    books: Books,
) -> None:
    """Every call with a record is in its session's call index (never a page missing one)."""
    listed: dict[str, set[str]] = {}
    for (session, call_id), record in zip(planned, states, strict=True):
        if not record:
            continue
        if session not in listed:
            members = await redis.zrange(keys.calls(session), 0, -1)
            listed[session] = {_text(m) for m in members}
        if call_id not in listed[session]:
            books.unlisted += 1
            books.examples.append(f"unlisted {(session, call_id)}: not in its session's index")


def _allowed(expect: str, st: str, evidence: str, code: str) -> str:
    """'' when the outcome is allowed; else 'masked' or 'wrong'."""
    if expect in (Expect.TIMEOUT, Expect.PROJECTION):
        return "" if (evidence, code) == ("ERROR", expect) else "masked"
    if evidence == "ERROR":
        return ""  # a source that was down (counted in `states`, never hidden)
    if expect == Expect.FOUND:
        return "" if evidence == "EVIDENCE_FOUND" else "masked"
    return "" if evidence == "NO_EVIDENCE" else "wrong"


async def check_books(
    redis: Any,
    prefix: str | Keys,
    plan: Sequence[Planned],
    *,
    needles: Sequence[str],
    logs: str = "",
) -> Books:
    """Check the books of one scenario (see the module docstring), over every partition."""
    keys = prefix if isinstance(prefix, Keys) else Keys(prefix)
    books = Books(planned=len(plan))
    planned = {(p.session, p.call.tool_call_id): p for p in plan}
    pattern = leak_pattern(needles)
    texts: list[str] = []
    model: Counter[tuple[str, str]] = Counter()
    control: Counter[tuple[str, str]] = Counter()
    for session in sorted({p.session for p in plan}):
        for stream, counter in ((keys.model(session), model), (keys.control(session), control)):
            for _eid, f in await _xrange_all(redis, stream):
                entry = view_entry(f)
                counter[(session, entry.tool_call_id)] += 1
                texts.append(_text(entry.data))
    opened: Counter[tuple[str, str]] = Counter()
    closed: Counter[tuple[str, str]] = Counter()
    lifecycles = {part.lifecycle for part in keys.parts}
    streams = [s for part in keys.parts for s in (part.lifecycle, part.invocations, part.dead)]
    for stream in streams:
        for _eid, f in await _xrange_all(redis, stream):
            texts.extend(_text(v) for v in f.values())
            if stream in lifecycles:
                life = lifecycle_entry(f)
                key = (life.session or "", life.tool_call_id or "")
                (opened if life.submitted else closed)[key] += 1
    states = await read_records(redis, keys, list(planned))
    status: Counter[str] = Counter()
    for (key, p), record in zip(planned.items(), states, strict=True):
        state = {k: _text(v) for k, v in record.items()}
        texts.extend(state.values())
        st = state.get(STATUS, "")
        finished = st in ("READY", "ERROR") and MODEL in state and CONTROL in state
        counts = (opened[key], closed[key], model[key], control[key])
        if not finished or 0 in counts:
            books.lost += 1
            books.examples.append(f"lost {key}: st={st!r} counts={counts}")
            continue
        books.finals += 1
        if any(c > 1 for c in counts):
            books.duplicates += 1
            books.examples.append(f"duplicate {key}: counts={counts}")
        asked = scope_key(p.call.tool, p.call.tool_call_id, p.call.arguments)
        if state.get(SCOPE_KEY, asked) != asked:
            books.wrong += 1
            books.examples.append(f"wrong {key}: another scope's call under its id")
            continue
        evidence = state.get(EVIDENCE, "")
        code = json.loads(state[MODEL]).get("error", {}).get("code", "")
        status[f"{st}/{code or evidence}"] += 1
        verdict = _allowed(p.expect, st, evidence, code)
        if verdict:
            setattr(books, verdict, getattr(books, verdict) + 1)
            books.examples.append(f"{verdict} {key}: expected {p.expect}, got {evidence} {code}")
    await _check_listed(redis, keys, planned, states, books)
    seen = set(model) | set(control) | set(closed) | set(opened)
    books.minted = len(seen - set(planned))
    books.states = dict(sorted(status.items()))
    for part in keys.parts:  # every worker creates the group of every partition it reads
        pending = await redis.xpending(part.invocations, GROUP)
        books.pending_left += int(pending["pending"])
    hits = scan(texts, pattern) + scan(logs.splitlines(), pattern)
    books.leaked = len(hits)
    books.examples += [f"leak: {h}" for h in hits[:5]]
    books.examples = books.examples[:12]
    return books
