"""Level words of real logs and the six levels every backend answers with.

Records and queries are normalised alike: a record's `WARNING`, `warn`, `W`, syslog's
`warning` or zerolog's `WRN` is `WARN`, and so is a query's `level:WARNING`, `level:warning`
or `level:W`. The word a record was written with, when it is not its level's own name
(`notice`, `crit`, `E`, `INF`), is kept in the field `level_name`, so a plain-word query
`notice` still finds those records.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from contracts.results import JsonScalar

__all__ = [
    "LEVELS", "LEVEL_WORDS", "SYSLOG_NAMES", "canonical_level", "implied_level", "keep_level_name",
]  # fmt: skip

LEVELS: Final = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")
LEVEL_WORDS: Final = {
    "TRACE": "TRACE", "DEBUG": "DEBUG", "DBG": "DEBUG", "INFO": "INFO", "INFORMATION": "INFO",
    "NOTICE": "INFO", "WARN": "WARN", "WARNING": "WARN", "ERROR": "ERROR", "ERR": "ERROR",
    "FATAL": "FATAL", "CRITICAL": "FATAL", "CRIT": "FATAL", "ALERT": "FATAL",
    "EMERG": "FATAL", "PANIC": "FATAL", "DPANIC": "FATAL", "SEVERE": "ERROR",
    "EMERGENCY": "FATAL", "INFORMATIONAL": "INFO", "FINE": "DEBUG", "FINER": "TRACE",
    "FINEST": "TRACE", "CONFIG": "INFO", "VERBOSE": "TRACE", "NOTE": "INFO",
    "LOG": "INFO",  # PostgreSQL's (DEBUG1..DEBUG5 below)
    "SYSTEM": "INFO",  # MySQL 8's start and shutdown lines (`[System]`)
    # three- and four-letter forms: zerolog, Serilog, NATS (TRC DBG INF WRN ERR FTL PNC VRB),
    # log15 and Grafana's logfmt (TRCE DBUG EROR)
    "TRC": "TRACE", "VRB": "TRACE", "INF": "INFO", "WRN": "WARN", "FTL": "FATAL",
    "PNC": "FATAL", "TRCE": "TRACE", "DBUG": "DEBUG", "EROR": "ERROR",
    # single letters: klog/glog I/W/E/F, Android V/D/I/W/E/F/A
    "T": "TRACE", "V": "TRACE", "D": "DEBUG", "I": "INFO", "N": "INFO", "W": "WARN",
    "E": "ERROR", "F": "FATAL", "C": "FATAL", "A": "FATAL",
}  # fmt: skip
# Syslog severities 0..7 by name (RFC 5424), as the level_name of a record with a PRI.
SYSLOG_NAMES: Final = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")


def canonical_level(word: str) -> str | None:
    """The level a word names (`notice` → INFO, `W` → WARN, `trace3` → TRACE), or None."""
    text = word.strip().upper()
    if text.startswith("TRACE") and text[5:].isdigit():  # Apache's trace1..trace8
        return "TRACE"
    if text.startswith("DEBUG") and text[5:].isdigit():  # PostgreSQL's DEBUG1..DEBUG5
        return "DEBUG"
    return LEVEL_WORDS.get(text)


def keep_level_name(fields: dict[str, JsonScalar], raw: str, level: str) -> None:
    """Keep the word a record was written with when it is not its level's own name."""
    if raw and raw.strip().upper() != level:
        fields.setdefault("level_name", raw.strip())


# Kibana's JSON log before 8 (`{"type":"log",...,"tags":["error","plugins"],...}`): its level
# is only one of its tags (flattened as their JSON text), the most severe named.
_KIBANA_TAGS: Final = ("fatal", "error", "warning", "info", "debug", "trace")
_KIBANA_TYPES: Final = ("log", "error", "response", "ops")


def implied_level(flat: Mapping[str, Any], time_key: str) -> tuple[str, str] | None:
    """A JSON record's level when no key names it: Serilog's CLEF without `@l` is INFO,
    Kibana's the most severe level word among its `tags`; else None."""
    if time_key == "@t":
        return "@l", "INFO"
    tags = flat.get("tags")
    if (
        time_key != "@timestamp"
        or not isinstance(tags, str)
        or flat.get("type") not in _KIBANA_TYPES
    ):
        return None
    return next((("tags", w) for w in _KIBANA_TAGS if f'"{w}"' in tags), None)
