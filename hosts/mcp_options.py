"""`aci-evidence mcp`'s options, typed (`ServeOptions`), and what is wrong with them in one
line (`check_options`, `mode_problem`): the server refuses to start rather than serve
something other than what its host was configured for."""

from __future__ import annotations

import ipaddress
from typing import Final

import msgspec

from hosts.listen import is_loopback
from hosts.mcp_http import DEFAULT_LIMITS, HttpLimits
from hosts.mcp_pending import DEFAULT_WAIT_S
from pipeline.keys import is_valid_session_id
from pipeline.settings import Settings

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "NO_MODE_PROBLEM",
    "TOKEN_ENV",
    "ServeOptions",
    "check_options",
    "mode_problem",
]

DEFAULT_TIMEOUT_S: Final = DEFAULT_WAIT_S  # answered pending before hosts give up (mcp_pending)
TOKEN_ENV: Final = "ACI_MCP_TOKEN"
_MIN_TOKEN_CHARS: Final = 16


class ServeOptions(msgspec.Struct, frozen=True, kw_only=True):
    """How `aci-evidence mcp` serves (the command line, typed)."""

    session: str | None = None  # one session for every call; None: one per connection
    local: bool = False  # run the stages in this process (else ACI_REDIS_URL is required)
    timeout: float = DEFAULT_TIMEOUT_S  # queue mode: a call still running then is pending
    http_port: int | None = None  # serve Streamable HTTP on this port instead of stdio
    host: str = "127.0.0.1"  # the HTTP bind address
    token: str | None = None  # HTTP bearer token (else ACI_MCP_TOKEN); needed off loopback
    limits: HttpLimits = DEFAULT_LIMITS  # HTTP sessions: bounds, idle timeout, per client
    trusted_proxies: tuple[str, ...] = ()  # whose X-Forwarded-For names the client (else none)
    as_of: str | None = None  # pin every query_logs call to this incident time (ISO 8601)


def check_options(options: ServeOptions) -> str | None:
    """What is wrong with the options, in one line (None when they are fine)."""
    if options.session is not None and not is_valid_session_id(options.session):
        return "--session: 1-128 letters, digits, '.', '_' or '-'"
    if not options.timeout > 0 or options.timeout == float("inf"):
        return "--timeout: a positive number of seconds"
    if options.http_port is not None and not 0 < options.http_port < 65536:
        return "--http: a port from 1 to 65535"
    token = options.token
    if token is not None and not (
        len(token) >= _MIN_TOKEN_CHARS and all("!" <= c <= "~" for c in token)
    ):
        return f"--token: at least {_MIN_TOKEN_CHARS} printable characters, no spaces"
    if options.http_port is not None and token is None and not is_loopback(options.host):
        return f"--host: a non-loopback address needs a bearer token (--token or {TOKEN_ENV})"
    for proxy in options.trusted_proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            return "--trusted-proxy: an IP address or network, e.g. 10.0.0.5 or 10.0.0.0/24"
    return options.limits.problem()


NO_MODE_PROBLEM: Final = (
    "aci-evidence mcp: set ACI_REDIS_URL to serve the queue, or pass --local to run the "
    "stages in this process (on the MOCK data unless sources are configured)"
)


def mode_problem(options: ServeOptions, settings: Settings) -> str | None:
    """Why the server has no mode to serve in (None when it has one): the queue needs
    ACI_REDIS_URL, in-process needs `--local`; never a quiet fallback to in-process."""
    if options.local or settings.redis_url:
        return None
    return NO_MODE_PROBLEM
