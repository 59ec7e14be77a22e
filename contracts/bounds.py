"""Operator-set bounds on everything the agent sees.

The agent can never raise these and tool descriptions never mention them.
"""

from __future__ import annotations

import msgspec

__all__ = ["DEFAULT_BOUNDS", "Bounds"]


class Bounds(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds on canonical results and on the model observation (items, characters, bytes)."""

    rag_max_evidence: int = 5
    rag_excerpt_chars: int = 700
    rag_field_chars: int = 200  # title, breadcrumb, source, document_id

    logs_max_patterns: int = 8
    logs_max_events: int = 20
    logs_message_chars: int = 300
    logs_template_chars: int = 240
    logs_field_chars: int = 120
    logs_max_fields: int = 24  # fields per event
    logs_max_bytes: int = 24_576  # patterns and events of the canonical result, as JSON

    mysql_max_rows: int = 50
    mysql_max_columns: int = 40
    mysql_cell_chars: int = 300
    mysql_max_bytes: int = 12_288

    observation_max_bytes: int = 16_384

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            if getattr(self, name) < 1:
                raise ValueError(f"bound {name} must be >= 1")
        if self.observation_max_bytes < 1024:
            raise ValueError("bound observation_max_bytes must be >= 1024")


DEFAULT_BOUNDS = Bounds()
