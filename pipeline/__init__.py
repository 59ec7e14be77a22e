"""The transport: invocations and their two views on Redis streams."""

from __future__ import annotations

__all__: list[str] = []
