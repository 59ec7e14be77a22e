"""The command line of `aci-evidence`: every subcommand, its flags and their help.

Each flag's help is one sentence, its default and, where one applies, the environment variable
that sets it. The global flags (`--log-level`, `--log-json`) are accepted before or after the
subcommand. A usage error is one line (`aci-evidence call: error: ...`), exit code 2.
"""

from __future__ import annotations

import argparse
import os
from importlib import metadata
from typing import Any, NoReturn

from app.errors import EXIT_CODES_HELP, EXIT_USAGE

__all__ = ["LOG_LEVELS", "build_parser", "version"]

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_ENV_COMMON = (
    "environment: ACI_REDIS_URL (the Redis to use), ACI_PREFIX (key prefix, default aci), "
    "ACI_PARTITIONS (default 1), ACI_REDIS_CLUSTER (1: a cluster)"
)


def version() -> str:
    """The installed package's version (or `unknown` when run from a bare checkout)."""
    try:
        return metadata.version("aci-evidence")
    except metadata.PackageNotFoundError:
        return "unknown"


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line: the command, the problem, where to look."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _say(text: str, default: Any = None, env: str | None = None) -> str:
    # `%%`: argparse formats help strings with `%`.
    shown = "" if default is None else f" (default: {default})"
    if env:
        shown = f"{shown[:-1]}; env {env})" if shown else f" (env {env})"
    return (text + shown).replace("%", "%%")


def _globals(p: argparse.ArgumentParser, *, top: bool) -> None:
    # At the top the defaults are real; after a subcommand SUPPRESS, so a flag given there
    # overrides the top one and an absent one leaves it alone.
    env_level = os.environ.get("ACI_LOG_LEVEL", "").strip() or "WARNING"
    p.add_argument(
        "--log-level",
        default=env_level if top else argparse.SUPPRESS,
        help=_say("log level: DEBUG, INFO, WARNING, ERROR or CRITICAL", "WARNING", "ACI_LOG_LEVEL"),
    )
    p.add_argument(
        "--log-json",
        action="store_true",
        default=os.environ.get("ACI_LOG_JSON", "").strip() == "1" if top else argparse.SUPPRESS,
        help=_say("log one JSON object per line instead of text", "off", "ACI_LOG_JSON=1"),
    )


def _sub(sub: Any, name: str, text: str, **kw: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        name, help=text, description=text[0].upper() + text[1:] + ".",
        epilog=kw.pop("epilog", _ENV_COMMON) + ". " + EXIT_CODES_HELP + ".", **kw,
    )  # fmt: skip
    _globals(p, top=False)
    return p


def _queue_commands(sub: Any) -> None:
    p = _sub(sub, "call", "run one tool call and print its lifecycle and both views")
    p.add_argument("tool", help="the tool: lookup_knowledge, query_logs or query_mysql")
    p.add_argument("--id", required=True, help="the framework's tool call id (required)")
    p.add_argument(
        "--args", default="{}",
        help=_say("the arguments as JSON, @FILE to read them from a file, or - for stdin", "{}"),
    )  # fmt: skip
    p.add_argument("--session", default="cli", help=_say("the evidence session", "cli"))
    p.add_argument(
        "--local", action="store_true",
        help=_say("run the stages in this process, without Redis or a worker", "off"),
    )  # fmt: skip
    p.add_argument(
        "--timeout", type=_seconds, default=30.0,
        help=_say("seconds to wait for the result before exiting 3 (pending)", 30.0),
    )  # fmt: skip
    p.add_argument(
        "--as-of", type=_as_of, default=None, metavar="ISO8601",
        help=_say("pin a query_logs call to an incident time (e.g. 2026-03-14T10:00:00+08:00; "
                  "without a zone: UTC): its lookback counts back from it", "now"),
    )  # fmt: skip
    p = _sub(sub, "cancel", "cancel one call: it ends ERROR/CANCELLED unless it is final first")
    p.add_argument("--session", required=True, help="the evidence session (required)")
    p.add_argument("--id", required=True, help="the call's tool call id (required)")
    p.add_argument(
        "--timeout", type=_seconds, default=30.0,
        help=_say("seconds to wait for the call to be final before exiting 3 (pending); exit "
                  "0 once final (cancelled, or final already), 1 if there is no such call", 30.0),
    )  # fmt: skip
    p = _sub(sub, "submit", "submit a JSON Lines file of tool calls")
    p.add_argument(
        "--file", required=True,
        help='the file: one {"id", "tool", "arguments"} object per line (required)',
    )  # fmt: skip
    p.add_argument("--session", required=True, help="the evidence session (required)")
    p.add_argument(
        "--as-of", type=_as_of, default=None, metavar="ISO8601",
        help=_say("pin the file's query_logs calls to an incident time (no zone: UTC)", "now"),
    )  # fmt: skip
    p.add_argument(
        "--wait", action="store_true",
        help=_say("wait for every result and print the counts; exit 3 if some are pending", "off"),
    )  # fmt: skip
    p.add_argument(
        "--timeout", type=_seconds, default=60.0,
        help=_say("seconds to wait for the results (--wait) or, without it, until a worker "
                  "admitted every call (exit 3 if not)", 60.0),
    )  # fmt: skip
    p = _sub(sub, "views", "print a session's published views as JSON lines")
    p.add_argument("--session", required=True, help="the evidence session (required)")
    p.add_argument(
        "--view", choices=["model", "control"], required=True,
        help="model: the Model Observations; control: the Harness Control Views (required)",
    )  # fmt: skip
    p.add_argument(
        "--follow", action="store_true",
        help=_say("keep printing new views until Ctrl-C (exit 130)", "off"),
    )  # fmt: skip


def _operator_commands(sub: Any) -> None:
    p = _sub(sub, "status", "streams, pending entries, consumers (live by heartbeat), states")
    p.add_argument("--json", action="store_true", help=_say("print one JSON object", "off"))
    p.add_argument(
        "--watch", action="store_true", help=_say("refresh every second until Ctrl-C", "off")
    )
    p = _sub(sub, "worker", "run a worker process (until SIGTERM or Ctrl-C)")
    p.add_argument(
        "--concurrency", type=int, default=16,
        help=_say("invocations this worker runs at once", 16),
    )  # fmt: skip
    p.add_argument(
        "--metrics-port", type=int, default=None,
        help=_say("serve Prometheus metrics on this port (0: a free one)", "none"),
    )  # fmt: skip
    p.add_argument(
        "--metrics-host", default=os.environ.get("ACI_METRICS_HOST", "127.0.0.1"),
        help=_say(
            "the metrics' bind address (0.0.0.0 for a scraper on another machine)",
            "127.0.0.1", "ACI_METRICS_HOST",
        ),
    )  # fmt: skip
    p.add_argument(
        "--partitions", type=_partition_list, default=None,
        help=_say("read only these partitions, e.g. 0,3,5", "all of ACI_PARTITIONS"),
    )  # fmt: skip
    p = _sub(
        sub, "demo", "a scripted diagnosis of an incident, on an embedded Redis",
        epilog="environment: ACI_REDIS_URL (use this Redis instead of a private one), "
        "ACI_MYSQL_SHOP_URL (the shop database; default: loaded into MariaDB on localhost)",
    )  # fmt: skip
    p.add_argument(
        "--scenario", default=None,
        help=_say(
            "the incident to play: db-pool-exhaustion, slow-query-storm, oom-kill-restarts, "
            "downstream-timeout (mock logs) or real-log-files (files the demo writes)",
            "db-pool-exhaustion", "ACI_MOCK_SCENARIO",
        ),
    )  # fmt: skip
    p.add_argument(
        "--json", action="store_true", help=_say("print one JSON transcript instead", "off")
    )
    p.add_argument(
        "--keep-running", action="store_true",
        help=_say("keep Redis and the workers up afterwards and print their URLs", "off"),
    )  # fmt: skip
    p = _sub(
        sub, "acl", "print least-privilege Redis users (ACL SETUSER commands or an aclfile)",
        epilog="environment: ACI_ACL_SUBMITTER_PASSWORD, ACI_ACL_WORKER_PASSWORD, "
        "ACI_ACL_AUDITOR_PASSWORD (a role without one is off), ACI_ACL_ADMIN_PASSWORD "
        "(--aclfile)",
    )  # fmt: skip
    p.add_argument("--prefix", default=None, help=_say("the key prefix", "aci", "ACI_PREFIX"))
    p.add_argument("--redis-major", type=int, default=7, help=_say("the Redis major version", 7))
    p.add_argument("--redis-minor", type=int, default=0, help=_say("the Redis minor version", 0))
    form = p.add_mutually_exclusive_group()
    form.add_argument(
        "--aclfile", action="store_true",
        help=_say("print an aclfile instead of commands", "off"),
    )  # fmt: skip
    form.add_argument(
        "--template", action="store_true",
        help=_say("an aclfile with password-hash placeholders (compose)", "off"),
    )  # fmt: skip


def _mcp_command(sub: Any) -> None:
    p = _sub(sub, "mcp", "serve the three tools over MCP (stdio, or --http PORT)")
    p.add_argument("--session", help=_say("one session for every call", "one per connection"))
    p.add_argument(
        "--local", action="store_true",
        help=_say("run the stages in this process, without Redis", "off"),
    )  # fmt: skip
    p.add_argument(
        "--timeout", type=float, default=4.0,
        help=_say("seconds before a call is answered as pending (hosts give up at 5)", 4.0),
    )  # fmt: skip
    p.add_argument(
        "--http", type=int, metavar="PORT",
        help=_say("serve Streamable HTTP on PORT", "stdio"),
    )  # fmt: skip
    p.add_argument("--host", default="127.0.0.1", help=_say("the HTTP bind address", "127.0.0.1"))
    p.add_argument(
        "--token",
        help=_say("bearer token for --http, required off loopback", "none", "ACI_MCP_TOKEN"),
    )
    p.add_argument(
        "--as-of", type=_as_of, default=None, metavar="ISO8601",
        help=_say("pin every query_logs call to an incident time (no zone: UTC; a call's "
                  "_meta dev.aci-evidence/as_of wins)", "now"),
    )  # fmt: skip
    p.add_argument(
        "--trusted-proxy", action="append", default=[], metavar="ADDRESS",
        help=_say("a reverse proxy whose X-Forwarded-For names the client (repeatable)",
                  "none: the socket peer is the client"),
    )  # fmt: skip


def _console_command(sub: Any) -> None:
    p = _sub(
        sub, "console", "serve the read-only web console (GET only, live over SSE)",
        epilog=_ENV_COMMON + ", ACI_CONSOLE_TOKEN (bearer token, required off loopback)",
    )  # fmt: skip
    p.add_argument(
        "--host", default="127.0.0.1", help=_say("the bind address (loopback)", "127.0.0.1")
    )
    p.add_argument("--port", type=int, default=8765, help=_say("the HTTP port", 8765))
    p.add_argument(
        "--root-path", default="", help=_say("the proxy's path prefix, e.g. /aci", "none")
    )


def _replay_commands(sub: Any) -> None:
    p = _sub(sub, "replay", "re-project, re-execute or re-inject recorded invocations")
    p.add_argument("--session", help=_say("only this session", "every session"))
    p.add_argument("--since", help=_say("only invocations from this ISO time or epoch ms", "any"))
    p.add_argument("--until", help=_say("only invocations up to this ISO time or epoch ms", "any"))
    p.add_argument("--tool", help=_say("only this tool", "every tool"))
    p.add_argument("--status", help=_say("only this lifecycle status: READY or ERROR", "any"))
    p.add_argument(
        "--evidence",
        help=_say("only this evidence status: EVIDENCE_FOUND, NO_EVIDENCE or ERROR", "any"),
    )
    p.add_argument("--id", help=_say("only this tool call id", "every id"))
    p.add_argument(
        "--file", help=_say("replay an exported JSON Lines file instead of Redis", "Redis")
    )
    p.add_argument(
        "--reexecute", action="store_true",
        help=_say("run the recorded requests against the sources again", "re-project only"),
    )  # fmt: skip
    p.add_argument(
        "--into", metavar="SESSION", help=_say("re-inject the calls under a new session", "off")
    )
    p.add_argument(
        "--json", action="store_true",
        help=_say("JSON lines: one per changed or failed invocation, then the summary", "off"),
    )  # fmt: skip
    p = _sub(sub, "export", "export a session's invocations and results (JSON Lines)")
    p.add_argument("--session", required=True, help="the session to export (required)")
    p.add_argument("--file", required=True, help="the file to write (required)")
    p = _sub(sub, "import", "import an exported JSON Lines file")
    p.add_argument("--file", required=True, help="the exported file (required)")
    p.add_argument("--session", help=_say("import under this session instead", "the recorded one"))
    _sub(
        sub, "reindex",
        "index the calls recorded before the sessions' call indexes existed (once, after every "
        "worker runs this version; an administrator's URL)",
    )  # fmt: skip
    p = _sub(sub, "bench", "measure the pipeline beside the raw Redis round trip")
    p.add_argument("what", choices=["pipeline"], help="what to measure: pipeline")
    p.add_argument("--total", type=int, default=20_000, help=_say("invocations per run", 20_000))
    p.add_argument("--json", action="store_true", help=_say("print one JSON object", "off"))
    p.add_argument(
        "--no-peers", action="store_true",
        help=_say("skip the other queues (dramatiq, taskiq)", "off"),
    )  # fmt: skip
    p.add_argument(
        "--agent-rounds", type=int, default=10,
        help=_say("rounds of one call and a burst of 8 after a pause (0: none)", 10),
    )  # fmt: skip
    p.add_argument(
        "--agent-pause", type=float, default=3.0,
        help=_say("seconds of quiet before each agent-shaped call", 3.0),
    )  # fmt: skip
    p.add_argument(
        "--latency-seconds", type=_seconds, default=3.0,
        help=_say("seconds of calls paced at 1,000/s for each p50/p99 figure", 3.0),
    )  # fmt: skip
    p.add_argument(
        "--cluster", action="store_true",
        help=_say("compare 1 and 3 shards of a local Redis Cluster", "off"),
    )  # fmt: skip
    p.add_argument(
        "--workers", type=int, default=2, help=_say("worker processes (with --cluster)", 2)
    )


_PARTITIONS_USAGE = "partitions: comma-separated indexes, e.g. 0,3,5"


def _seconds(text: str) -> float:
    # `nan` reached anyio as a deadline (a traceback); a negative wait never waited.
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("seconds: a number, e.g. 30") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError("seconds: a number above 0, e.g. 30")
    return value


def _as_of(text: str) -> str:
    # Checked here so a bad time is a usage error (exit 2) before anything is sent.
    import time

    from contracts.window import AsOfError, as_of_problem, parse_as_of

    try:
        problem = as_of_problem(parse_as_of(text), int(time.time() * 1000))
    except AsOfError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def _partition_list(text: str) -> list[int]:
    try:
        indexes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(_PARTITIONS_USAGE) from None
    if min(indexes) < 0:
        raise argparse.ArgumentTypeError(_PARTITIONS_USAGE)
    return indexes


def build_parser() -> argparse.ArgumentParser:
    """The whole `aci-evidence` parser."""
    parser = _Parser(
        prog="aci-evidence",
        description="Evidence tools for an AI diagnosis agent, carried on Redis streams.",
        epilog=EXIT_CODES_HELP + ". Global flags go before or after the subcommand.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    _globals(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = _sub(sub, "tools", "print the tool definitions", epilog="environment: none")
    p.add_argument(
        "--format", default="openai", choices=["openai", "responses", "anthropic", "mcp", "schema"],
        help=_say("the host format", "openai"),
    )  # fmt: skip
    p = _sub(
        sub, "check",
        "check the log topics and the runbook folder against the files they name (no Redis)",
        epilog="environment: ACI_LOGS_CONFIG (the log topics), ACI_KNOWLEDGE_DIR (the runbooks)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help=_say("print one JSON object", "off"))
    _queue_commands(sub)
    _operator_commands(sub)
    _mcp_command(sub)
    _console_command(sub)
    _replay_commands(sub)
    return parser
