"""The clock of a data source's sessions (`ACI_MYSQL_CLOCK`).

An ISO 8601 time with its offset pins every session's clock: `SET timestamp` makes `NOW()`,
`CURDATE()` and friends that instant, and `time_zone` shows it in the same offset. A world with
its own time (the demo's mock incident of 2026-03-14) is then one clock across logs and SQL:
"the last day" in SQL means the incident's last day. Unset: the server's clock.
"""

from __future__ import annotations

from datetime import datetime

__all__ = ["clock_statement"]


def clock_statement(text: str | None) -> str:
    """The session statement pinning `NOW()` to `text` (ISO 8601 with an offset); "" for
    none. ValueError naming ACI_MYSQL_CLOCK when it is not such a time."""
    if not text:
        return ""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    offset = moment.utcoffset() if moment is not None else None
    if moment is None or offset is None:
        raise ValueError(
            "ACI_MYSQL_CLOCK must be an ISO 8601 time with an offset, e.g. 2026-03-14T10:10+08:00"
        )
    minutes = int(offset.total_seconds() // 60)
    zone = f"{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    return f"SET timestamp = {moment.timestamp():.6f}, time_zone = '{zone}'"
