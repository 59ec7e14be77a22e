"""The `aci-evidence` command line.

aci-evidence tools --format openai|responses|anthropic|mcp|schema
aci-evidence call TOOL --id ID --args JSON [--session S] [--local]
aci-evidence submit --file F.jsonl --session S [--wait] [--timeout SEC]
aci-evidence views --session S --view model|control [--follow]
aci-evidence status [--json]
aci-evidence worker [--concurrency N] [--partitions 0,3,5]
aci-evidence demo [--scenario NAME] [--json] [--keep-running]
aci-evidence acl [--prefix P] [--redis-major N] [--redis-minor N] [--aclfile | --template]
aci-evidence mcp | replay | export | import | bench pipeline   (see each module's docstring)

About 450 lines on purpose: the parser and one short `_cmd_*` per command, read as one table of
the commands. Each command only maps its flags to a typed call of the library (or of another
`app/` module) and its answer to an exit code; none does the work itself.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import anyio
import msgspec

from app.console.serve import add_console_parser, run_console
from contracts import export_tools
from pipeline.client import CallResult, EvidenceClient, InvalidSessionId, ToolCall
from pipeline.redis_io import PipelineError, open_redis
from pipeline.settings import Settings, SettingsError

__all__ = ["main"]

_ENCODER = msgspec.json.Encoder()


def _print_json(value: Any) -> None:
    sys.stdout.write(_ENCODER.encode(value).decode() + "\n")
    sys.stdout.flush()


def _need_url(settings: Settings) -> str:
    if not settings.redis_url:
        raise SettingsError("ACI_REDIS_URL is not set (use --local, or start Redis and set it)")
    return settings.redis_url


async def _cmd_call(args: argparse.Namespace, settings: Settings) -> int:
    if args.local:
        from workers.sources import open_sources
        from workers.stage import run_stages

        async with open_sources(only=(args.tool,)) as sources:
            outcome = await run_stages(
                tool=args.tool,
                tool_call_id=args.id,
                arguments=args.args,
                session_id=args.session,
                sources=sources,
                settings=settings,
            )
        _print_json(
            {
                "lifecycle": outcome.control.status,
                "model": outcome.observation,
                "control": outcome.control,
            }
        )
        return 0
    async with EvidenceClient.connect(settings, _need_url(settings)) as client:
        call = ToolCall(tool=args.tool, tool_call_id=args.id, arguments=args.args)
        result = await client.call(args.session, call, timeout=args.timeout)
    if result is None:
        print(f"no result within {args.timeout}s; it stays readable later", file=sys.stderr)
        return 3
    sys.stdout.write(result.as_json().decode() + "\n")
    return 0


async def _cmd_submit(args: argparse.Namespace, settings: Settings) -> int:
    calls: list[ToolCall] = []
    text = await anyio.Path(args.file).read_text(encoding="utf-8")
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            call = ToolCall(
                tool=item["tool"], tool_call_id=item.get("id"), arguments=item.get("arguments")
            )
        except (ValueError, KeyError, TypeError):
            print(f'line {number}: expected {{"id", "tool", "arguments"}}', file=sys.stderr)
            return 2
        calls.append(call)
    async with EvidenceClient.connect(settings, _need_url(settings)) as client:
        immediate = await client.submit_many(args.session, calls)
        if not args.wait:
            _print_json({"submitted": len(calls)})
            return 0
        ids = [c.tool_call_id for c, r in zip(calls, immediate, strict=True) if r is None]
        found = await client.wait(args.session, ids, args.timeout)
    # Per line: a line repeating an earlier (session, id) shares that invocation's result.
    finals: list[CallResult] = [
        r if r is not None else found[c.tool_call_id]
        for c, r in zip(calls, immediate, strict=True)
        if r is not None or c.tool_call_id in found
    ]
    ready = sum(1 for r in finals if r.lifecycle == "READY")
    _print_json(
        {
            "submitted": len(calls),
            "ready": ready,
            "error": len(finals) - ready,
            "pending": len(calls) - len(finals),
        }
    )
    return 0


async def _cmd_views(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.views import read_views

    async with open_redis(_need_url(settings), cluster=settings.redis_cluster) as redis:
        async for batch in read_views(redis, settings, args.session, args.view, follow=args.follow):
            for data in batch:
                sys.stdout.write(data.decode() + "\n")
            sys.stdout.flush()
    return 0


async def _cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from app.status import run_status

    return await run_status(settings, _need_url(settings), as_json=args.json, watch=args.watch)


async def _cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from workers.runtime import serve_worker

    if args.partitions is not None and max(args.partitions) >= settings.partitions:
        sys.stderr.write(f"aci-evidence: --partitions: ACI_PARTITIONS is {settings.partitions}\n")
        return 2

    from workers.logging_setup import configure_logging

    configure_logging(args.log_level, json_lines=args.log_json)  # adds the invocation context
    metrics = None
    serving: Any = contextlib.nullcontext()
    if args.metrics_port is not None:
        from workers.metrics import WorkerMetrics, serve_metrics

        metrics = WorkerMetrics()
        serving = serve_metrics(metrics, args.metrics_port)
    with serving as port:
        if port is not None:
            logging.getLogger("aci.worker").info("metrics on :%d/metrics", port)
        # Signals, sources, Redis, gc.freeze, run and drain: the one worker bootstrap.
        await serve_worker(
            settings,
            _need_url(settings),
            concurrency=args.concurrency,
            metrics=metrics,
            partitions=args.partitions,
        )
    return 0


async def _cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from app.demo import run_demo

    return await run_demo(
        settings, scenario=args.scenario, as_json=args.json, keep_running=args.keep_running
    )


_ACL_ENV = {
    "submitter": "ACI_ACL_SUBMITTER_PASSWORD",
    "worker": "ACI_ACL_WORKER_PASSWORD",
    "auditor": "ACI_ACL_AUDITOR_PASSWORD",
}


def _redis_cli_arg(arg: str) -> str:
    # redis-cli splits a line on spaces and reads escapes inside double quotes only.
    if not any(c in arg for c in ' "\\'):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


async def _cmd_acl(args: argparse.Namespace, settings: Settings) -> int:
    # Prints the users' rules with SHA-256 password hashes: a password is never printed, and
    # a role whose password variable is unset is created `off`.
    import os

    from pipeline.acl import ROLES, AclError, acl_rules, aclfile, aclfile_template, setuser_command

    prefix = args.prefix or settings.prefix
    passwords = {role: os.environ[var] for role, var in _ACL_ENV.items() if os.environ.get(var)}
    try:
        if args.template:  # no passwords involved: deploy/redis/entrypoint.sh fills them in
            sys.stdout.write(aclfile_template(prefix, args.redis_major, args.redis_minor))
            return 0
        if args.aclfile:
            admin = os.environ.get("ACI_ACL_ADMIN_PASSWORD")
            if not admin:
                raise AclError("ACI_ACL_ADMIN_PASSWORD is not set (the `default` user's)")
            text = aclfile(prefix, passwords, args.redis_major, args.redis_minor,
                           admin_password=admin)  # fmt: skip
        else:
            lines = [
                setuser_command(
                    role,
                    acl_rules(prefix, role, args.redis_major, args.redis_minor),
                    passwords.get(role),
                )
                for role in ROLES
            ]
            text = "".join(" ".join(_redis_cli_arg(a) for a in line) + "\n" for line in lines)
    except AclError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    for role in ROLES:
        if role not in passwords:
            print(f"{role}: {_ACL_ENV[role]} is not set; the user is off", file=sys.stderr)
    sys.stdout.write(text)
    return 0


async def _cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    from hosts.mcp_server import ServeOptions, serve

    options = ServeOptions(
        session=args.session,
        local=args.local,
        timeout=args.timeout,
        http_port=args.http,
        host=args.host,
        token=args.token,
    )
    return await serve(options, settings)


async def _cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    from app.replay import run_replay

    return await run_replay(args, settings)


async def _cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    from app.replay import run_export

    return await run_export(args, settings)


async def _cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    from app.replay import run_import

    return await run_import(args, settings)


async def _cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    if args.cluster:
        from app.bench_cluster import bench_cluster

        print(json.dumps(await bench_cluster(total=args.total, workers=args.workers)))
        return 0
    from app.bench import run_bench

    return await run_bench(total=args.total, as_json=args.json, peers=not args.no_peers)


_PARTITIONS_USAGE = "partitions: comma-separated indexes, e.g. 0,3,5"


def _partition_list(text: str) -> list[int]:
    try:
        indexes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(_PARTITIONS_USAGE) from None
    if min(indexes) < 0:
        raise argparse.ArgumentTypeError(_PARTITIONS_USAGE)
    return indexes


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aci-evidence", description=__doc__.split("\n")[0])
    parser.add_argument("--log-level", default="WARNING")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("tools", help="print the tool definitions")
    p.add_argument(
        "--format", default="openai", choices=["openai", "responses", "anthropic", "mcp", "schema"]
    )
    p = sub.add_parser("call", help="run one tool call and print its lifecycle and views")
    p.add_argument("tool")
    p.add_argument("--id", required=True)
    p.add_argument("--args", default="{}")
    p.add_argument("--session", default="cli")
    p.add_argument("--local", action="store_true", help="run the stages in-process, no Redis")
    p.add_argument("--timeout", type=float, default=30.0)
    p = sub.add_parser("submit", help="submit a JSON Lines file of tool calls")
    p.add_argument("--file", required=True)
    p.add_argument("--session", required=True)
    p.add_argument("--wait", action="store_true")
    p.add_argument("--timeout", type=float, default=60.0)
    p = sub.add_parser("views", help="print a session's views as JSON lines")
    p.add_argument("--session", required=True)
    p.add_argument("--view", choices=["model", "control"], required=True)
    p.add_argument("--follow", action="store_true")
    p = sub.add_parser("status", help="streams, pending entries, consumers, states")
    p.add_argument("--json", action="store_true")
    p.add_argument("--watch", action="store_true", help="refresh every second")
    p = sub.add_parser("worker", help="run a worker process")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus metrics")
    p.add_argument("--log-json", action="store_true", help="structured JSON log lines")
    p.add_argument(
        "--partitions", type=_partition_list, default=None, help="read only these, e.g. 0,3,5"
    )
    p = sub.add_parser("demo", help="a scripted diagnosis on the embedded default")
    p.add_argument("--scenario", default=None)
    p.add_argument("--json", action="store_true")
    p.add_argument("--keep-running", action="store_true")
    p = sub.add_parser("acl", help="print least-privilege Redis users (ACL SETUSER or aclfile)")
    p.add_argument("--prefix", default=None, help="key prefix (default: ACI_PREFIX or aci)")
    p.add_argument("--redis-major", type=int, default=7)
    p.add_argument("--redis-minor", type=int, default=0)
    form = p.add_mutually_exclusive_group()
    form.add_argument("--aclfile", action="store_true", help="an aclfile instead of commands")
    form.add_argument(
        "--template", action="store_true", help="an aclfile with hash placeholders (compose)"
    )
    p = sub.add_parser("mcp", help="serve the three tools over MCP (stdio, or --http PORT)")
    p.add_argument("--session", help="one session for every call (default: one per connection)")
    p.add_argument("--local", action="store_true", help="run the stages in-process, no Redis")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds before a call is pending")
    p.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on PORT")
    p.add_argument("--host", default="127.0.0.1", help="the HTTP bind address")
    p.add_argument("--token", help="bearer token for --http (else ACI_MCP_TOKEN)")
    p = sub.add_parser("replay", help="re-project, re-execute or re-inject recorded invocations")
    p.add_argument("--session")
    p.add_argument("--since", help="ISO time or epoch ms")
    p.add_argument("--until", help="ISO time or epoch ms")
    p.add_argument("--tool")
    p.add_argument("--status", help="lifecycle status: READY or ERROR")
    p.add_argument("--evidence", help="evidence status: EVIDENCE_FOUND, NO_EVIDENCE or ERROR")
    p.add_argument("--id", help="tool call id")
    p.add_argument("--file", help="replay an exported JSON Lines file instead of Redis")
    p.add_argument("--reexecute", action="store_true", help="run the requests against sources")
    p.add_argument("--into", metavar="SESSION", help="re-inject under a new session")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("export", help="export a session's invocations and results (JSON Lines)")
    p.add_argument("--session", required=True)
    p.add_argument("--file", required=True)
    p = sub.add_parser("import", help="import an exported JSON Lines file")
    p.add_argument("--file", required=True)
    p.add_argument("--session", help="import under this session instead of the recorded one")
    p = sub.add_parser("bench", help="measure the pipeline beside the raw Redis round trip")
    p.add_argument("what", choices=["pipeline"])
    p.add_argument("--total", type=int, default=20_000)
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-peers", action="store_true")
    p.add_argument("--cluster", action="store_true", help="1 vs 3 shards of a local cluster")
    p.add_argument("--workers", type=int, default=2, help="worker processes (with --cluster)")
    add_console_parser(sub)
    return parser


_COMMANDS = {
    "call": _cmd_call,
    "submit": _cmd_submit,
    "views": _cmd_views,
    "status": _cmd_status,
    "worker": _cmd_worker,
    "demo": _cmd_demo,
    "acl": _cmd_acl,
    "bench": _cmd_bench,
    "mcp": _cmd_mcp,
    "replay": _cmd_replay,
    "export": _cmd_export,
    "import": _cmd_import,
    "console": run_console,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `aci-evidence` console script."""
    args = _parser().parse_args(argv)
    from workers.logging_setup import configure_logging

    # Every command logs through the safe formatters: no tracebacks, no upstream addresses.
    configure_logging(args.log_level)
    if args.command == "tools":
        from workers.sources.mysql.source import data_source_names  # query_mysql's enum

        _print_json(export_tools(args.format, data_sources=data_source_names(os.environ)))
        return 0
    try:
        settings = Settings.from_env()
        return anyio.run(_COMMANDS[args.command], args, settings)
    except SettingsError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    except InvalidSessionId as exc:
        print(f"bad input: {exc}", file=sys.stderr)
        return 2
    except PipelineError as exc:
        print(f"pipeline error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except BaseExceptionGroup as group:
        # Task groups wrap failures; broken infrastructure and bad input still get their
        # one-line message.
        expected = PipelineError | InvalidSessionId | BaseExceptionGroup
        if group.subgroup(lambda e: not isinstance(e, expected)) is not None:
            raise
        first = _first_leaf(group)
        if isinstance(first, InvalidSessionId):
            print(f"bad input: {first}", file=sys.stderr)
            return 2
        print(f"pipeline error: {type(first).__name__}: {first}", file=sys.stderr)
        return 1


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
