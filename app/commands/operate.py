"""The operator's commands: `status`, `worker`, `demo`, `acl`, `mcp`, `replay`, `export`,
`import`, `bench`. Each maps its flags to a typed call (of the library or of another `app/`
module) and its answer to an exit code; none does the work itself.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from typing import Any

from app.commands.calls import need_url
from app.errors import EXIT_OK, CommandError
from pipeline.settings import Settings, SettingsError

__all__ = [
    "cmd_acl",
    "cmd_bench",
    "cmd_demo",
    "cmd_export",
    "cmd_import",
    "cmd_mcp",
    "cmd_replay",
    "cmd_status",
    "cmd_worker",
]


async def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    """`status`: the queue's report once, or `--watch`ed."""
    from app.status import run_status

    return await run_status(settings, need_url(settings), as_json=args.json, watch=args.watch)


async def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    """`worker`: one worker process until SIGTERM or Ctrl-C."""
    from workers.runtime import serve_worker

    if args.partitions is not None and max(args.partitions) >= settings.partitions:
        raise CommandError(
            f"--partitions: indexes are 0 to {settings.partitions - 1} (ACI_PARTITIONS is "
            f"{settings.partitions})",
            prefix="aci-evidence worker",
        )
    if args.concurrency < 1:
        raise CommandError("--concurrency: at least 1", prefix="aci-evidence worker")
    metrics = None
    serving: Any = contextlib.nullcontext()
    if args.metrics_port is not None:
        from workers.metrics import WorkerMetrics, serve_metrics

        metrics = WorkerMetrics()
        serving = serve_metrics(metrics, args.metrics_port, args.metrics_host)
    with contextlib.ExitStack() as stack:
        try:
            port = stack.enter_context(serving)
        except OSError as exc:  # the port is taken: one line, not a traceback
            raise CommandError(
                f"--metrics-port: cannot listen on {args.metrics_port} "
                f"({exc.strerror or type(exc).__name__})",
                prefix="aci-evidence worker",
            ) from None
        if port is not None:
            logging.getLogger("aci.announce").info(
                "metrics on %s:%d/metrics", args.metrics_host, port
            )
        # Signals, sources, Redis, gc.freeze, run and drain: the one worker bootstrap.
        await serve_worker(
            settings,
            need_url(settings),
            concurrency=args.concurrency,
            metrics=metrics,
            partitions=args.partitions,
        )
    return EXIT_OK


async def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    """`demo`: the scripted diagnosis."""
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


async def cmd_acl(args: argparse.Namespace, settings: Settings) -> int:
    """`acl`: the users' rules with SHA-256 password hashes: a password is never printed,
    and a role whose password variable is unset is created `off`."""
    from pipeline.acl import ROLES, AclError, acl_rules, aclfile, aclfile_template, setuser_command

    prefix = args.prefix or settings.prefix
    passwords = {role: os.environ[var] for role, var in _ACL_ENV.items() if os.environ.get(var)}
    for role, password in passwords.items():  # name the variable, never the value
        if any(c.isspace() for c in password):
            raise SettingsError(f"{_ACL_ENV[role]}: a password without whitespace")
    try:
        if args.template:  # no passwords involved: deploy/redis/entrypoint.sh fills them in
            sys.stdout.write(aclfile_template(prefix, args.redis_major, args.redis_minor))
            return EXIT_OK
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
        raise SettingsError(str(exc)) from None
    for role in ROLES:
        if role not in passwords:
            print(f"{role}: {_ACL_ENV[role]} is not set; the user is off", file=sys.stderr)
    sys.stdout.write(text)
    return EXIT_OK


async def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    """`mcp`: the three tools over MCP."""
    from hosts.mcp_server import ServeOptions, serve

    options = ServeOptions(
        session=args.session,
        local=args.local,
        timeout=args.timeout,
        http_port=args.http,
        host=args.host,
        token=args.token,
        as_of=args.as_of,
        trusted_proxies=tuple(args.trusted_proxy),
    )
    return await serve(options, settings)


async def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    """`replay`."""
    from app.replay import run_replay

    return await run_replay(args, settings)


async def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    """`export`."""
    from app.replay import run_export

    return await run_export(args, settings)


async def cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    """`import`."""
    from app.replay import run_import

    return await run_import(args, settings)


async def cmd_reindex(args: argparse.Namespace, settings: Settings) -> int:
    """`reindex`: backfill the sessions' call indexes from the call records recorded before
    them, and mark every partition complete (an administrator's URL: it SCANs and writes)."""
    from pipeline.call_index import reindex
    from pipeline.redis_io import open_redis

    async with open_redis(need_url(settings), cluster=settings.redis_cluster) as redis:
        done = await reindex(redis, settings.keys())
    print(json.dumps(done))
    return EXIT_OK


async def cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    """`bench pipeline`."""
    if args.cluster:
        from app.bench_cluster import bench_cluster

        print(json.dumps(await bench_cluster(total=args.total, workers=args.workers)))
        return EXIT_OK
    from app.bench import run_bench

    return await run_bench(
        total=args.total,
        as_json=args.json,
        peers=not args.no_peers,
        agent_rounds=args.agent_rounds,
        agent_pause=args.agent_pause,
        latency_seconds=args.latency_seconds,
    )
