"""The small Protocol every evidence source implements, and the one error a source raises.

A source does the I/O for one tool and returns its raw upstream answer: for `query_logs` a
`contracts.LogsUpstream`, for `query_mysql` a `contracts.MysqlUpstream`, for
`lookup_knowledge` any RAG-shaped JSON object. The stage records that answer (for replay) and
projects it with the pure projectors of `contracts/`. A source reports a failure by raising
`SourceError` with a code and a short message that is safe to show the agent (no host, user,
password, DSN, path or stack trace); `failure_of` words an `OSError` so, without its path.
"""

from __future__ import annotations

import errno
import os
from typing import Any, Protocol

from contracts.requests import Request
from contracts.status import ErrorCode

__all__ = ["ImmediateSource", "Source", "SourceError", "failure_of"]


class SourceError(Exception):
    """A source failed in a way the agent should hear about; `message` must be safe.

    `logged`: the source has said this state in the log itself (a backend that reports going
    down once, not per call), so the warm-up does not say it a second time."""

    def __init__(
        self, code: ErrorCode, message: str, *, retryable: bool = False, logged: bool = False
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.logged = logged


class Source(Protocol):
    """Executes one tool's requests against its upstream."""

    async def fetch(self, request: Request) -> Any:
        """Run the request; return the raw upstream answer or raise `SourceError`."""
        ...

    async def aclose(self) -> None:
        """Release connections and files."""
        ...


class ImmediateSource(Source, Protocol):
    """A source that can answer without I/O (a fixed answer, an in-memory cache).

    The worker runs such calls inline, a whole read batch at a time, with no task and no
    deadline timer per call (nothing to time out: no I/O). `fetch_now` must not block.
    """

    def fetch_now(self, request: Request) -> Any:
        """The raw upstream answer at once, or raise `SourceError`."""
        ...


def failure_of(exc: OSError) -> str:
    """An `OSError` as its errno's name and meaning, no path: `EACCES, permission denied`."""
    code = exc.errno or 0
    return f"{errno.errorcode.get(code, str(code))}, {os.strerror(code).lower()}"
