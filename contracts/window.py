"""Incident time: the absolute window of a log call, and the as-of time a harness pins it to.

A `query_logs` request keeps only topic, query and lookback (the model never sets a time).
When a call is admitted, its lookback is resolved to an absolute window that ends at the
harness's pinned incident time (`as_of`) or, without one, at the admitting clock; the worker,
and a replay's re-execute a week later, read that recorded window. These are the pure parts:
reading an as-of value, checking it against a clock, the window's ends, and how the window
shows in a normalised scope (`with_window`) and in its fingerprint (`pin_scope`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Final

__all__ = [
    "AS_OF_SKEW_MS",
    "AsOfError",
    "as_of_problem",
    "format_utc_ms",
    "has_zone",
    "parse_as_of",
    "pin_scope",
    "window_bounds",
    "with_window",
]

# How far ahead of the admitting clock a pinned incident time may be (clocks of a harness and
# a worker differ by this much at most); later is refused, never clamped: a window that ends
# in the future reads records that do not exist yet, and moving it would answer another scope.
AS_OF_SKEW_MS: Final = 5 * 60_000
_MAX_MS: Final = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, the last ISO 8601 year
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MS: Final = timedelta(milliseconds=1)


class AsOfError(ValueError):
    """An as-of (incident) time that cannot be used: not ISO 8601, before 1970, or further in
    the future than `AS_OF_SKEW_MS`. Not retryable as given."""


def format_utc_ms(epoch_ms: int) -> str:
    """`2026-03-14T02:00:00.000Z`: how the window and as-of show in a scope."""
    moment = _EPOCH + epoch_ms * _MS  # exact (a float timestamp is not, past 2^53 µs)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _moment(value: str | datetime) -> datetime:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise AsOfError("as-of must be an ISO 8601 time or a datetime")
    text = value.strip()
    text = text[:-1] + "Z" if text.endswith("z") else text
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise AsOfError(
            f"as-of {value[:40]!r} is not an ISO 8601 time (e.g. 2026-03-14T10:00:00+08:00)"
        ) from None


def has_zone(value: str | datetime) -> bool:
    """Whether an as-of names its zone (one without is read as UTC); True for text that is
    not a time at all (`parse_as_of` refuses it)."""
    try:
        moment = _moment(value)
    except AsOfError:
        return True
    return moment.tzinfo is not None and moment.utcoffset() is not None


def parse_as_of(value: str | datetime) -> int:
    """Epoch milliseconds of an ISO 8601 time (`2026-03-14T10:00:00+08:00`, `...Z`) or a
    `datetime`; `AsOfError` otherwise. A time without a zone is UTC (the zone the scope's
    `as_of` shows it back in), never the reader's local zone: say the zone to be sure."""
    moment = _moment(value)
    if not has_zone(moment):
        moment = moment.replace(tzinfo=UTC)
    epoch_ms = (moment - _EPOCH) // _MS
    problem = as_of_problem(epoch_ms, None)
    if problem:
        raise AsOfError(problem)
    return epoch_ms


def as_of_problem(as_of_ms: int, now_ms: int | None) -> str:
    """Why an as-of time cannot be used against the clock `now_ms` ('' when it can; None:
    only its range is checked)."""
    if not 0 <= as_of_ms <= _MAX_MS:
        return "as-of must lie between 1970 and 9999"
    if now_ms is not None and as_of_ms > now_ms + AS_OF_SKEW_MS:
        ahead = (as_of_ms - now_ms) / 60_000
        return f"as-of is {ahead:.0f} minutes in the future; pin a time that has passed"
    return ""


def window_bounds(lookback_minutes: int, end_ms: int) -> tuple[int, int]:
    """The absolute window `[end - lookback, end]` (epoch ms, both ends included)."""
    return end_ms - lookback_minutes * 60_000, end_ms


def pin_scope(scope: dict[str, Any], as_of_ms: int | None) -> dict[str, Any]:
    """The scope a fingerprint covers: a pinned as-of is part of the question (the same query
    at another incident time is another call); an unpinned call's window is not, so the same
    question asked again a minute later is still a duplicate of the first."""
    if as_of_ms is None:
        return scope
    return {**scope, "as_of": format_utc_ms(as_of_ms)}


def with_window(scope: dict[str, Any], start_time: str, end_time: str) -> dict[str, Any]:
    """The scope as the Control View shows it: with the absolute window the call read."""
    return {**scope, "start_time": start_time, "end_time": end_time}
