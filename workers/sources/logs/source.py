"""The `query_logs` source: the query language, matching, and the MOCK source.

A query is whitespace-separated clauses, all of which must hold (docs/logs.md is the
reference): `word` and `"quoted phrase"` match case-insensitively as substrings of the message
or any field value, with a number boundary where a term starts or ends with a digit (`terms`:
`10.0.0.1` is not in `10.0.0.12`); `field:value` matches a substring of that field (numbers
compare equal, `field:>N`, `>=`, `<`, `<=` compare); `field:*` asks for the field to be
present; a leading `-` excludes. An empty query matches every record. A query that cannot be
parsed raises `SourceError(SCHEMA)` saying what is wrong, so it can never read as "no
evidence". Other backends (FILE, CLICKHOUSE: `file_source`, `clickhouse`) share
`parse_log_query`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Final, Literal

import msgspec

from contracts.fingerprint import DEFAULT_LOOKBACK_MINUTES
from contracts.logs import LogsUpstream
from contracts.requests import LOOKBACK_MAX_MINUTES, QueryLogsRequest
from contracts.results import LogScope
from contracts.status import ErrorCode, Topic
from workers.sources.base import SourceError
from workers.sources.calltime import pinned_end
from workers.sources.kept import cache_dir_from_env
from workers.sources.logs.deadline import StopFlag, run_stoppable
from workers.sources.logs.levels import canonical_level
from workers.sources.logs.mocklog import (
    DEFAULT_SCENARIO,
    NUMERIC_FIELDS,
    SCENARIOS,
    TOPIC_FIELDS,
    TopicIndex,
    format_time,
    index_of,
    scenario_info,
)
from workers.sources.logs.mocklog.summary import summarise
from workers.sources.logs.query_text import bad_query as _bad
from workers.sources.logs.query_text import check_unquoted as _check_unquoted
from workers.sources.logs.query_text import read_quoted as _read_quoted
from workers.sources.logs.terms import contains

__all__ = [
    "SCENARIOS",
    "Clause",
    "MockLogSettings",
    "MockLogSource",
    "ParsedQuery",
    "check_fields",
    "match_positions",
    "parse_log_query",
    "summarise",
]

# The sample is the raw upstream answer kept for replay with every invocation, so it is kept
# small: enough for the timeline (first/last of each template plus the most severe records).
SAMPLE_LIMIT: Final = 64
_FIELD: Final = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(.*)", re.S)
_COMPARISON: Final = re.compile(r"(>=|<=|>|<)(.*)", re.S)

Op = Literal["contains", "gt", "ge", "lt", "le", "exists"]
_OPS: Final[dict[str, Op]] = {">": "gt", ">=": "ge", "<": "lt", "<=": "le"}


class Clause(msgspec.Struct, frozen=True, kw_only=True):
    """One clause: `field` None means the message and every field value."""

    field: str | None = None
    op: Op = "contains"
    value: str = ""  # lowered
    number: float | None = None  # the value as a number, when it is one
    negated: bool = False


class ParsedQuery(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed query: clauses that must all hold; no clauses matches every record."""

    clauses: tuple[Clause, ...] = ()


def _number(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None  # nan, inf, 1e999: no number (SCHEMA)


def _field_clause(name: str, value: str, negated: bool, at: int, *, quoted: bool = False) -> Clause:
    field = name.lower()
    if quoted is False and value:
        _check_unquoted(value, at)
    if value == "":
        raise _bad(
            f"{name}: at character {at} has no value; write {name}:value, "
            'or quote text to search for it as is ("like:this")'
        )
    if value == "*":
        return Clause(field=field, op="exists", negated=negated)
    compared = _COMPARISON.fullmatch(value)
    if compared is not None:
        number = _number(compared.group(2))
        if number is None:
            raise _bad(f"{name}:{compared.group(1)} at character {at} needs a number")
        return Clause(field=field, op=_OPS[compared.group(1)], number=number, negated=negated)
    stripped = value.strip("*").lower()
    if field == "level":  # level:WARNING, level:notice, level:E: the level records carry
        stripped = (canonical_level(stripped) or stripped).lower()
    return Clause(field=field, value=stripped, number=_number(stripped), negated=negated)


def _word_clause(word: str, negated: bool, at: int) -> Clause | None:
    if not negated and word.upper() in ("OR", "||"):
        raise _bad(f"{word} is not supported: all terms must match; run one query per alternative")
    if not negated and word.upper() == "NOT":
        raise _bad(f"{word} is not supported; put '-' before a term to exclude it")
    if not negated and word.upper() in ("AND", "&&"):
        return None  # terms are ANDed anyway
    if word.startswith("-"):
        message = "a clause takes one leading '-'; quote text that starts with dashes"
        raise _bad(f"'-{word}' at character {at}: {message} (\"--verbose\")")
    _check_unquoted(word, at)
    stripped = word.strip("*").lower()
    if not stripped:
        if negated:
            raise _bad(f"'-{word}' at character {at} would exclude every record")
        return None  # a bare * matches everything
    return Clause(value=stripped, negated=negated)


def _next_clause(text: str, pos: int) -> tuple[Clause | None, int]:
    start, n = pos, len(text)
    negated = text[pos] == "-"
    pos += negated
    if pos >= n or text[pos].isspace():
        raise _bad(f"a lone '-' at character {start + 1}; write -term or -field:value")
    if text[pos] == '"':
        phrase, pos = _read_quoted(text, pos)
        if not phrase.strip():
            raise _bad(f"empty quoted phrase at character {start + 1}")
        return Clause(value=phrase.lower(), negated=negated), pos
    end = pos
    while end < n and not text[end].isspace() and text[end] != '"':
        end += 1
    word = text[pos:end]
    found = _FIELD.fullmatch(word)
    is_field = found is not None and not found.group(2).startswith("//")  # not http://...
    if end < n and text[end] == '"':
        if not (found is not None and is_field and found.group(2) == ""):
            raise _bad(f"the quote at character {end + 1} must start a phrase or follow field:")
        value, end = _read_quoted(text, end)
        return _field_clause(found.group(1), value, negated, start + 1, quoted=True), end
    if found is not None and is_field:
        return _field_clause(found.group(1), found.group(2), negated, start + 1), end
    return _word_clause(word, negated, start + 1), end


def parse_log_query(text: str) -> ParsedQuery:
    """Parse a query; `SourceError(SCHEMA)` saying what is wrong when it cannot be parsed."""
    clauses: list[Clause] = []
    pos = 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        clause, pos = _next_clause(text, pos)
        if clause is not None:
            clauses.append(clause)
    return ParsedQuery(clauses=tuple(clauses))


def check_fields(
    query: ParsedQuery,
    topic: Topic,
    extra: tuple[str, ...] = (),
    comparable: frozenset[str] | None = None,
) -> None:
    """Reject fields the topic does not have and comparisons the field cannot take (`extra`:
    more field names a configured backend declares; `comparable`: those of them that may
    hold numbers, compared as numbers when their value reads as one, text otherwise; None:
    all of them, as a ClickHouse topic's attributes)."""
    comparable = frozenset(extra) if comparable is None else comparable
    known = TOPIC_FIELDS[topic] + tuple(n for n in extra if n not in TOPIC_FIELDS[topic])
    for clause in query.clauses:
        name = clause.field
        if name is None:
            continue
        if name not in known:
            raise _bad(
                f"unknown field {name!r} for topic {topic.value}; fields: {', '.join(known)}"
            )
        numeric = name in NUMERIC_FIELDS
        if clause.op in ("gt", "ge", "lt", "le") and not (numeric or name in comparable):
            raise _bad(f"{name} is text; compare (>, >=, <, <=) only numeric fields")
        if numeric and clause.op == "contains" and clause.number is None:
            raise _bad(f"{name} takes a number, e.g. {name}:500 or {name}:>=500")


def _field_hit(clause: Clause, values: Mapping[str, str], raw: Mapping[str, object]) -> bool:
    name = clause.field or ""
    if clause.op == "exists":
        return name in values
    value = raw.get(name)
    if clause.op == "contains":
        if clause.number is not None and isinstance(value, int | float):
            return bool(value == clause.number)
        found = values.get(name)
        return found is not None and contains(found, clause.value)
    if not isinstance(value, int | float) or clause.number is None:
        return False
    limit = clause.number
    match clause.op:
        case "gt":
            return value > limit
        case "ge":
            return value >= limit
        case "lt":
            return value < limit
        case _:
            return value <= limit


def match_positions(
    ix: TopicIndex, query: ParsedQuery, positions: range, stop: StopFlag | None = None
) -> list[int]:
    """Positions (ascending, so in time order) of the records that satisfy every clause;
    with `stop`, the loop ends early once it expires (the caller then reports a timeout)."""
    if not query.clauses:
        return list(positions)
    must = [c.value for c in query.clauses if c.field is None and not c.negated]
    must_not = [c.value for c in query.clauses if c.field is None and c.negated]
    fielded = [c for c in query.clauses if c.field is not None]
    hays, values, records = ix.haystacks, ix.values, ix.records
    out: list[int] = []
    for i in positions:
        if stop is not None and not i & 4095 and stop.expired():
            break
        hay = hays[i]
        if any(not contains(hay, t) for t in must) or any(contains(hay, t) for t in must_not):
            continue
        if fielded and not all(
            _field_hit(c, values[i], records[i].fields) != c.negated for c in fielded
        ):
            continue
        out.append(i)
    return out


class MockLogSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Operator settings of the MOCK source. Env: `ACI_MOCK_SCENARIO`,
    `ACI_LOGS_DEFAULT_LOOKBACK`, ACI_CACHE_DIR (where the world is kept; "": nowhere)."""

    scenario: str = DEFAULT_SCENARIO
    default_lookback: int = DEFAULT_LOOKBACK_MINUTES
    sample_limit: int = SAMPLE_LIMIT
    cache_dir: str = ""

    def __post_init__(self) -> None:
        scenario_info(self.scenario)  # ValueError naming the valid scenarios
        if not 1 <= self.default_lookback <= LOOKBACK_MAX_MINUTES:
            raise ValueError(f"ACI_LOGS_DEFAULT_LOOKBACK must be 1..{LOOKBACK_MAX_MINUTES}")
        if self.sample_limit < 1:
            raise ValueError("sample_limit must be >= 1")


class MockLogSource:
    """`query_logs` over a deterministic generated incident world (`source_kind` MOCK)."""

    source_kind: Final = "MOCK"

    def __init__(self, settings: MockLogSettings | None = None) -> None:
        self.settings = settings or MockLogSettings()

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> MockLogSource:
        """Settings from the environment; `ValueError` on an unknown scenario or bad lookback."""
        scenario = env.get("ACI_MOCK_SCENARIO", "").strip() or DEFAULT_SCENARIO
        lookback_text = env.get("ACI_LOGS_DEFAULT_LOOKBACK", "").strip()
        try:
            lookback = int(lookback_text) if lookback_text else DEFAULT_LOOKBACK_MINUTES
        except ValueError:
            raise ValueError("ACI_LOGS_DEFAULT_LOOKBACK must be an int") from None
        cache = str(cache_dir_from_env(env))
        return cls(MockLogSettings(scenario=scenario, default_lookback=lookback, cache_dir=cache))

    async def fetch(self, request: QueryLogsRequest) -> LogsUpstream:
        """Run the query over the scenario's window; `SourceError(SCHEMA)` on a bad query."""
        query = parse_log_query(request.query)
        check_fields(query, request.topic)
        # The first call builds the world (about a second); later calls take milliseconds. The
        # thread stops at the call's deadline instead of burning CPU for an abandoned call.
        return await run_stoppable(lambda flag: self.search(request, query, flag), 600.0)

    def search(
        self, request: QueryLogsRequest, query: ParsedQuery, stop: StopFlag | None = None
    ) -> LogsUpstream:
        """The synchronous search behind `fetch`; `stop` ends it with `SourceError(TIMEOUT)`."""
        index = index_of(self.settings.scenario, self.settings.cache_dir)
        lookback = request.lookback_minutes or self.settings.default_lookback
        end_ms = index.world.now_ms if (pin := pinned_end()) is None else pin  # as-of pinned
        start_ms = end_ms - lookback * 60_000
        topic_index = index.topics[request.topic]
        matches = match_positions(topic_index, query, topic_index.window(start_ms, end_ms), stop)
        if stop is not None and stop.expired():
            raise SourceError(ErrorCode.TIMEOUT, "the query did not finish within its time limit")
        scope = LogScope(
            topic=request.topic,
            query=request.query,
            lookback_minutes=lookback,
            start_time=format_time(start_ms),
            end_time=format_time(end_ms),
        )
        patterns, records = summarise(topic_index, matches, self.settings.sample_limit, scope)
        return LogsUpstream(
            source_kind=self.source_kind,
            scope=scope,
            match_count=len(matches),
            patterns=patterns,
            records=records,
        )

    async def aclose(self) -> None:
        """Nothing to release: the world is immutable in-process data."""
