"""A worker process with fault-injecting sources: `python -m chaos.worker [--log-level L]
worker --concurrency N` (same command line and environment as `python -m app.cli`).

Every configured source is wrapped with `FaultySource` through `workers.sources.wrap_sources`
(the fault-injection hook): a request whose text carries `chaos-hang` never answers (the
worker's deadline must turn it into ERROR/TIMEOUT), one carrying `chaos-garbage` gets an answer
of the wrong shape (it must become ERROR/PROJECTION). Any other request reaches the real source.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any, Final

import anyio

from contracts import LookupKnowledgeRequest, QueryLogsRequest, QueryMysqlRequest, Request
from pipeline.settings import Settings
from workers.runtime import serve_worker
from workers.sources import Source

__all__ = ["GARBAGE", "HANG", "FaultySource", "main", "marker_of"]

HANG: Final = "chaos-hang"
GARBAGE: Final = "chaos-garbage"
_GARBAGE_ANSWERS: Final[dict[type[Any], Any]] = {
    LookupKnowledgeRequest: {"unexpected": [1, 2, 3], "note": "no hits anywhere"},
    QueryLogsRequest: {"rows": "not a log answer", "match_count": "many"},
    QueryMysqlRequest: {"columns": 5, "rows": {"a": 1}},
}


def marker_of(request: Request) -> str:
    """The fault marker a request carries, or ''."""
    text = request.sql if isinstance(request, QueryMysqlRequest) else request.query
    for marker in (HANG, GARBAGE):
        if marker in text:
            return marker
    return ""


class FaultySource:
    """Wraps a real source; injects a hang or a garbage answer for marked requests."""

    def __init__(self, inner: Source) -> None:
        self.inner = inner

    async def fetch(self, request: Request) -> Any:
        """The inner source's answer, unless the request is marked."""
        marker = marker_of(request)
        if marker == HANG:
            await anyio.sleep(3600)
        if marker == GARBAGE:
            return _GARBAGE_ANSWERS[type(request)]
        return await self.inner.fetch(request)

    async def aclose(self) -> None:
        """Close the inner source."""
        await self.inner.aclose()


async def _run(concurrency: int) -> None:
    settings = Settings.from_env()
    assert settings.redis_url, "ACI_REDIS_URL is not set"
    # The one worker bootstrap (signals, gc.freeze, drain), with the sources wrapped in faults
    # and not warmed up: a scenario's workers start as they always have.
    await serve_worker(
        settings, settings.redis_url, concurrency=concurrency, warm=False, wrap=FaultySource
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point (`python -m chaos.worker`)."""
    parser = argparse.ArgumentParser(prog="chaos.worker")
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument("command", choices=["worker"])
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    anyio.run(_run, args.concurrency)
    return 0


if __name__ == "__main__":
    sys.exit(main())
