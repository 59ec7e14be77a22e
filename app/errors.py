"""The one top-level error handler of `aci-evidence`: whatever stops a command is said in one
line on stderr, and the exit code tells what happened.

| code | meaning |
|---|---|
| 0 | done: evidence found, or none in scope (`NO_EVIDENCE` is an answer, not a failure) |
| 1 | an error: `call` ended `ERROR` (not `submit --wait`), a replay changed or failed, Redis down |
| 2 | usage or configuration: a bad flag, an `ACI_*` value, a missing file, a bad input line |
| 3 | pending: calls without a result yet (they stay readable later) |
| 130 | aborted by the user (Ctrl-C), quietly |

Messages never quote a password or a URL. When stderr is a terminal, Redis is named by its
endpoint (host, port and database, or the socket path); when it is captured (a log, CI) only
as "ACI_REDIS_URL", so no host or port reaches a log (tests/abuse/test_secrets.py). An
exception that is none of these is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Final
from urllib.parse import urlsplit

from app.terminal import safe_text
from pipeline.call import InvalidSessionId
from pipeline.redis_io import (
    PipelineError,
    RedisConfigError,
    RedisProtocolError,
    RedisUnavailable,
    refusal_hint,
)
from pipeline.settings import SettingsError

__all__ = [
    "EXIT_ABORTED",
    "EXIT_CODES_HELP",
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_PENDING",
    "EXIT_USAGE",
    "CommandError",
    "endpoint_of",
    "guarded",
    "report",
]

EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
EXIT_USAGE: Final = 2
EXIT_PENDING: Final = 3
EXIT_ABORTED: Final = 130

EXIT_CODES_HELP: Final = (
    "exit codes: 0 done (evidence found or none), 1 error (a call ended ERROR, Redis down or "
    "refused), 2 usage or configuration, 3 calls still pending, 4 replay --reexecute ran "
    "against other sources than the recording's, 130 aborted (Ctrl-C)"
)


class CommandError(Exception):
    """A command refuses its input or cannot finish: `message` is the whole line to print
    (after `prefix: `) and `code` the exit code."""

    def __init__(self, message: str, *, code: int = EXIT_USAGE, prefix: str = "bad input") -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.prefix = prefix


def report(error: CommandError) -> int:
    """Say `error` on stderr as `guarded` does (one escaped line) and return its exit code: for
    a command that returns its code rather than raising (`replay`, `export`, `import`)."""
    sys.stderr.write(safe_text(f"{error.prefix}: {error.message}") + "\n")
    return error.code


def endpoint_of(url: str | None) -> str:
    """Where a Redis URL points, without user, password or query: `host:port/db`, or the
    socket path of a `unix://` URL."""
    if not url:
        return "(no ACI_REDIS_URL)"
    try:
        parts = urlsplit(url)
        if parts.scheme == "unix":
            return f"unix://{parts.path}"
        host = parts.hostname or "localhost"
        if ":" in host:
            host = f"[{host}]"
        port = parts.port or 6379
    except ValueError:
        return "(an unparsable ACI_REDIS_URL)"
    db = parts.path.strip("/")
    return f"{host}:{port}" + (f"/{db}" if db and db != "0" else "")


_ADMIN: Final = (
    "an administrator's URL (the Redis `default` user): it writes finished records, which no"
    " role may (docs/operations.md)"
)
_AUDITOR: Final = "the auditor's URL (a worker's works too)"
# Which Redis user each command needs: a NOPERM names it, not only "may not do this".
_ROLE_NEEDED: Final = {
    "import": _ADMIN,
    "reindex": "an administrator's URL (the Redis `default` user): it SCANs and writes indexes",
    "replay": _AUDITOR,
    "export": _AUDITOR,
    "views": _AUDITOR,
    "status": _AUDITOR,
    "console": _AUDITOR,
    "worker": "the worker's URL",
    "call": "the submitter's URL (a worker's works too)",
    "submit": "the submitter's URL (a worker's works too)",
    "mcp": "the submitter's URL (a worker's works too)",
}


def role_needed(command: str | None, into: bool = False) -> str | None:
    """The Redis user `command` needs, in words (`replay --into` needs an administrator)."""
    if command == "replay" and into:
        return f"`replay --into` needs {_ADMIN}"
    role = _ROLE_NEEDED.get(command or "")
    return f"`{command}` needs {role}" if role else None


def _where(url: str | None, terminal: bool) -> str:
    return f"at {endpoint_of(url)}" if terminal else "at ACI_REDIS_URL"


def _line(
    exc: BaseException, url: str | None, terminal: bool, role: str | None = None
) -> tuple[str, int] | None:
    """The one line and exit code for an expected failure; None for a bug. `role`: what the
    command needs (`role_needed`), said with a NOPERM."""
    match exc:
        case KeyboardInterrupt():
            return "", EXIT_ABORTED
        case CommandError():
            return f"{exc.prefix}: {exc.message}", exc.code
        case SettingsError() | RedisConfigError():
            return f"configuration error: {exc}", EXIT_USAGE
        case InvalidSessionId():
            return f"bad input: {exc}", EXIT_USAGE
        case RedisUnavailable():
            where = _where(url, terminal)
            return f"pipeline error: RedisUnavailable: no Redis answers {where}", EXIT_ERROR
        case RedisProtocolError() if (hint := refusal_hint(exc)) is not None:
            where = _where(url, terminal)
            if str(exc) == "NOPERM" and role:
                hint = (
                    f"{role}; the Redis user of ACI_REDIS_URL may not do this"
                    " (see `aci-evidence acl` for each role's rights)"
                )
            return f"pipeline error: RedisProtocolError: {exc} from Redis {where}: {hint}", 1
        case PipelineError():
            return f"pipeline error: {type(exc).__name__}: {exc}", EXIT_ERROR
        case OSError() if exc.filename is not None:
            return f"bad input: {exc.filename}: {exc.strerror or type(exc).__name__}", EXIT_USAGE
    return None


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


def guarded(
    run: Callable[[], int],
    url: Callable[[], str | None],
    role: Callable[[], str | None] = lambda: None,
) -> int:
    """Run one command; an expected failure (also inside a task group's exception group)
    becomes one line on stderr and its exit code. `url` gives the Redis URL to name, `role`
    the Redis user the command needs (`role_needed`, said with a NOPERM)."""
    try:
        return run()
    except BaseException as exc:  # sorted below; a bug is re-raised
        leaves = _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
        # Ctrl-C wins over whatever it interrupted; otherwise the first failure is told.
        leaves.sort(key=lambda e: not isinstance(e, KeyboardInterrupt))
        terminal = sys.stderr.isatty()
        lines = [_line(leaf, url(), terminal, role()) for leaf in leaves]
        if any(line is None for line in lines) or not lines:
            raise
        text, code = lines[0]  # type: ignore[misc]
        if text:
            sys.stderr.write(safe_text(text) + "\n")  # one line, nothing raw from outside
        return code
