"""Small pure helpers for bounding text."""

from __future__ import annotations

__all__ = ["cut"]


def cut(text: str, limit: int) -> tuple[str, bool]:
    """A verbatim prefix of at most `limit` characters, and whether anything was cut."""
    if len(text) <= limit:
        return text, False
    return text[:limit], True
