"""The evidence sources, the stages that run them, and the worker process."""

from __future__ import annotations

from workers.sources import Source, SourceError

__all__ = ["Source", "SourceError"]
