"""Opening the evidence sources a worker runs with, from operator configuration."""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any

from workers.source import Source

__all__ = ["open_sources"]

log = logging.getLogger("aci.sources")

# tool → (module, factory). A source whose module is absent is simply not offered; its
# tool then finishes as ERROR/UNAVAILABLE on this worker.
_FACTORIES = {
    "lookup_knowledge": ("workers.knowledge", "knowledge_source_from_env"),
    "query_logs": ("workers.logs", "MockLogSource.from_env"),
    "query_mysql": ("workers.mysql", "MysqlSource.from_env"),
}


def _factory(module_name: str, path: str) -> Any:
    target: Any = importlib.import_module(module_name)
    for part in path.split("."):
        target = getattr(target, part)
    return target


@contextlib.asynccontextmanager
async def open_sources(
    env: Mapping[str, str] | None = None, only: tuple[str, ...] | None = None
) -> AsyncIterator[dict[str, Source]]:
    """The configured sources by tool name; closed on exit."""
    env = os.environ if env is None else env
    sources: dict[str, Source] = {}
    if env.get("ACI_INSTANT_SOURCES") == "1":
        from workers.instant import InstantSource

        instant = InstantSource()
        yield dict.fromkeys(_FACTORIES, instant)
        return
    try:
        for tool, (module_name, path) in _FACTORIES.items():
            if only is not None and tool not in only:
                continue
            try:
                factory = _factory(module_name, path)
            except (ImportError, AttributeError):
                log.warning("no source for %s in this build", tool)
                continue
            sources[tool] = factory(env)
        yield sources
    finally:
        for source in sources.values():
            with contextlib.suppress(Exception):
                await source.aclose()
