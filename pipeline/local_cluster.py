"""A private Redis Cluster on loopback: `masters` redis-server processes in cluster mode, each
with `replicas` replicas, joined by `redis-cli --cluster create`; for tests, chaos scenarios and
`bench pipeline --cluster`. Nothing is persisted (`--save ""`, no AOF): a killed master's data
lives on only in its replica, which is what a failover test needs.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from pipeline.embedded import HASH_VALUE_BYTES


class ServiceError(RuntimeError):
    """A local cluster node did not start, stop or agree in time."""


def wait_port(port: int, up: bool, limit: float = 30.0) -> None:
    """Wait until the port accepts connections (`up`) or refuses them."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                if up:
                    return
        except OSError:
            if not up:
                return
        time.sleep(0.05)
    raise ServiceError(f"port {port} did not come {'up' if up else 'down'} in {limit}s")


__all__ = ["LocalCluster", "cluster_port", "local_cluster"]


def cluster_port() -> int:
    """A free port P with P + 10000 (the cluster bus) free too, both at most 65535."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 45000)
        try:
            for candidate in (port, port + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port
    raise ServiceError("no free port pair for a cluster node")


def _cli(port: int, *args: str, timeout: float = 30.0) -> str:
    done = subprocess.run(
        ["redis-cli", "-p", str(port), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise ServiceError(f"redis-cli {args[:2]} failed: {done.stderr.strip()[:200]}")
    return done.stdout


class LocalCluster:
    """Redis Cluster nodes on free loopback ports (the first `masters` start as masters)."""

    def __init__(self, folder: Path, masters: int = 3, replicas: int = 1,
                 node_timeout_ms: int = 2000) -> None:  # fmt: skip
        self.folder = folder
        self.masters = masters
        self.replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        self.ports = [cluster_port() for _ in range(masters * (1 + replicas))]
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        """A `redis+cluster://` URL naming one node (the client learns the rest)."""
        return f"redis+cluster://127.0.0.1:{self.ports[0]}"

    def start_node(self, port: int) -> None:
        data = self.folder / str(port)
        data.mkdir(exist_ok=True)
        self.procs[port] = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
             "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf",
             "--cluster-node-timeout", str(self.node_timeout_ms), "--dir", str(data),
             "--save", "", "--appendonly", "no", "--logfile", str(data / "redis.log"),
             "--cluster-require-full-coverage", "no", "--repl-diskless-sync-delay", "0",
             "--hash-max-ziplist-value", str(HASH_VALUE_BYTES)],  # as the embedded Redis
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_port(port, up=True)

    def start(self) -> None:
        for port in self.ports:
            self.start_node(port)
        if len(self.ports) == 1:  # `--cluster create` wants 3 masters: one node takes all
            _cli(self.ports[0], "cluster", "addslotsrange", "0", "16383")
            self.wait_ok()
            return
        _cli(self.ports[0], "--cluster", "create",
             *(f"127.0.0.1:{p}" for p in self.ports),
             "--cluster-replicas", str(self.replicas), "--cluster-yes", timeout=60)  # fmt: skip
        self.wait_ok()

    def wait_ok(self, limit: float = 30.0) -> None:
        """Until every live node says `cluster_state:ok` and knows every slot."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            live = [p for p, proc in self.procs.items() if proc.poll() is None]
            try:
                infos = [_cli(p, "cluster", "info") for p in live]
            except (ServiceError, subprocess.TimeoutExpired):
                infos = []
            if (
                infos
                and all(
                    "cluster_state:ok" in i and "cluster_slots_assigned:16384" in i for i in infos
                )
                and self._replicas_synced(live)
            ):
                return
            time.sleep(0.1)
        raise ServiceError(f"the cluster was not ok within {limit}s")

    def _replicas_synced(self, live: list[int]) -> bool:
        # A replica takes writes (and answers WAIT) only once its link to the master is up.
        try:
            infos = [_cli(p, "info", "replication") for p in live]
        except (ServiceError, subprocess.TimeoutExpired):
            return False
        return all("role:master" in i or "master_link_status:up" in i for i in infos)

    def master_ports(self) -> list[int]:
        """Ports of the masters serving slots now (after any failover or reshard)."""
        out = _cli(next(p for p, pr in self.procs.items() if pr.poll() is None), "cluster", "nodes")
        ports = []
        for line in out.splitlines():
            fields = line.split()
            if "master" in fields[2] and "fail" not in fields[2] and len(fields) > 8:
                ports.append(int(fields[1].split("@")[0].rsplit(":", 1)[1]))
        return ports

    def master_of(self, slot: int) -> int:
        """The port of the master serving `slot` now."""
        out = _cli(next(p for p, pr in self.procs.items() if pr.poll() is None), "cluster", "nodes")
        for line in out.splitlines():
            fields = line.split()
            if "master" not in fields[2] or "fail" in fields[2]:
                continue
            for span in fields[8:]:
                if span.startswith("["):
                    continue  # a slot being migrated or imported
                low, _, high = span.partition("-")
                if int(low) <= slot <= int(high or low):
                    return int(fields[1].split("@")[0].rsplit(":", 1)[1])
        raise ServiceError(f"no master serves slot {slot}")

    def wait_failover(self, dead: int, limit: float = 30.0) -> float:
        """Until a replica of the killed master `dead` serves its slots; the seconds it took."""
        started = time.monotonic()
        while time.monotonic() - started < limit:
            with contextlib.suppress(ServiceError, subprocess.TimeoutExpired, StopIteration):
                if dead not in self.master_ports() and len(self.master_ports()) == self.masters:
                    self.wait_ok(limit)
                    return time.monotonic() - started
            time.sleep(0.05)
        raise ServiceError(f"no failover within {limit}s")

    def restart(self, port: int) -> None:
        """Start a killed node again on its port and data folder: it rejoins (a killed master
        comes back as a replica of the one promoted in its place) and syncs."""
        self.start_node(port)
        self.wait_ok()

    def node_id(self, port: int) -> str:
        return _cli(port, "cluster", "myid").strip()

    def kill(self, port: int) -> None:
        """SIGKILL one node (no shutdown, nothing saved)."""
        proc = self.procs[port]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def reshard(self, source: int, target: int, slots: int) -> None:
        """Move `slots` slots (the source's lowest) from one master to another, live."""
        _cli(self.ports[0], "--cluster", "reshard", f"127.0.0.1:{source}",
             "--cluster-from", self.node_id(source), "--cluster-to", self.node_id(target),
             "--cluster-slots", str(slots), "--cluster-yes", "--cluster-pipeline", "100",
             timeout=300)  # fmt: skip
        self.wait_ok()

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)


@contextlib.contextmanager
def local_cluster(
    masters: int = 3, replicas: int = 1, node_timeout_ms: int = 2000
) -> Iterator[LocalCluster]:
    """A started cluster, stopped and removed afterwards."""
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        raise ServiceError("redis-server and redis-cli must be on PATH")
    folder = Path(tempfile.mkdtemp(prefix="aci-cluster-"))
    cluster = LocalCluster(folder, masters, replicas, node_timeout_ms)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)
