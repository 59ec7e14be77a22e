"""compose.yaml, checked as far as a machine without a container engine allows."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import redis as redis_sync
import yaml

from chaos.services import free_port, wait_port
from pipeline.acl import aclfile_template

ROOT = Path(__file__).resolve().parents[1]


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return data


def test_services_images_and_health_checks() -> None:
    services = _compose()["services"]
    # What `docker compose up` starts (services of a profile start only when it is asked for).
    assert {n for n, s in services.items() if "profiles" not in s} == {"redis", "mariadb", "worker"}
    assert services["redis"]["image"].startswith("redis:7")
    assert "--appendonly" in services["redis"]["command"]
    assert "--aclfile" in services["redis"]["command"]
    # a call's record and result hash stay compact (the embedded Redis's setting too)
    assert _flag(services["redis"]["command"], "--hash-max-listpack-value") == "2048"
    assert services["mariadb"]["image"].startswith("mariadb:")
    for name in ("redis", "mariadb", "worker"):
        assert services[name]["healthcheck"]["test"], name


def test_mariadb_is_seeded_with_shop_and_a_select_only_account() -> None:
    mariadb = _compose()["services"]["mariadb"]
    assert "./deploy/mariadb-init:/docker-entrypoint-initdb.d:ro" in mariadb["volumes"]
    seed = ROOT / "deploy" / "mariadb-init"
    assert (seed / "10-shop.sql").read_text().count("INSERT INTO") > 5
    reader = (seed / "20-reader.sql").read_text()
    assert "GRANT SELECT ON `shop`.*" in reader and "ALL PRIVILEGES" not in reader


def test_worker_scales_and_runs_the_worker_command() -> None:
    worker = _compose()["services"]["worker"]
    assert worker["build"] == "."
    assert worker["command"][0] == "worker"
    assert "container_name" not in worker and "ports" not in worker  # --scale worker=N works
    env = worker["environment"]
    assert env["ACI_REDIS_URL"].startswith("redis://worker:${ACI_ACL_WORKER_PASSWORD:-")
    assert env["ACI_MYSQL_SHOP_URL"].startswith("mysql://aci_reader:")
    assert set(worker["depends_on"]) == {"redis", "mariadb"}
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["aci-evidence"]' in dockerfile


def test_the_worker_has_a_writable_knowledge_cache() -> None:
    # The image runs as nobody: without a folder of its own every lookup would be UNAVAILABLE.
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "ENV ACI_CACHE_DIR=/var/cache/aci-evidence" in dockerfile
    assert "chown nobody:nogroup /var/cache/aci-evidence" in dockerfile
    assert dockerfile.index("chown nobody") < dockerfile.index("USER nobody")
    worker = _compose()["services"]["worker"]
    assert "knowledge-cache:/var/cache/aci-evidence" in worker["volumes"]
    assert "knowledge-cache" in _compose()["volumes"]


def test_the_image_copies_every_package_the_wheel_installs() -> None:
    # `pip install .` in the image builds the wheel from what was copied: a package left out
    # is a console script that dies with "No module named ...".
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    copied = set(re.findall(r"^COPY (\S+) \./\1$", (ROOT / "Dockerfile").read_text(), re.M))
    assert set(packages) <= copied, f"not copied into the image: {set(packages) - copied}"
    script = project["project"]["scripts"]["aci-evidence"]
    assert script.split(".")[0] in packages


# -- Redis users ---------------------------------------------------------------------------

REDIS_DEPLOY = ROOT / "deploy" / "redis"
_PASSWORDS = {
    "ACI_ACL_ADMIN_PASSWORD": "adm-1",
    "ACI_ACL_SUBMITTER_PASSWORD": "sub-2",
    "ACI_ACL_WORKER_PASSWORD": "wrk-3",
    "ACI_ACL_AUDITOR_PASSWORD": "aud-4",
}


def test_redis_runs_with_the_users_of_pipeline_acl() -> None:
    redis = _compose()["services"]["redis"]
    assert redis["entrypoint"] == ["/bin/sh", "/etc/aci-redis/entrypoint.sh"]
    assert "./deploy/redis:/etc/aci-redis:ro" in redis["volumes"]
    command = redis["command"]
    assert command[:2] == ["docker-entrypoint.sh", "redis-server"]  # the image's user drop
    assert command[command.index("--aclfile") + 1] == "/tmp/aci-redis/users.acl"
    # One source of truth: the template is what `aci-evidence acl --template` prints for the
    # image's Redis (7.2) and the worker's prefix. Regenerate it when the rules change.
    prefix = _compose()["services"]["worker"]["environment"]["ACI_PREFIX"]
    assert (REDIS_DEPLOY / "users.acl.template").read_text() == aclfile_template(prefix, 7, 2)
    # Every password comes from the environment; the defaults say change-me, nothing else.
    for name in _PASSWORDS:
        assert redis["environment"][name] == f"${{{name}:-change-me-{name.split('_')[2].lower()}}}"
    text = (ROOT / "compose.yaml").read_text()
    assert set(re.findall(r"ACI_ACL_[A-Z]+_PASSWORD:-([^}]*)", text)) <= {
        "change-me-admin", "change-me-submitter", "change-me-worker", "change-me-auditor"
    }  # fmt: skip
    # The health check signs in as the read-only auditor, its password from the environment.
    check = " ".join(redis["healthcheck"]["test"])
    assert "--user auditor" in check and "$$ACI_ACL_AUDITOR_PASSWORD" in check


def _entrypoint(tmp_path: Path, env: dict[str, str], *command: str) -> subprocess.Popen[str]:
    # The image's entrypoint, run here: the template of the local Redis (7.0 refuses a rule
    # naming CLIENT SETINFO, which 7.2 needs), the aclfile in tmp_path.
    (tmp_path / "users.acl.template").write_text(aclfile_template("aci", 7, 0))
    full = {
        "PATH": os.environ["PATH"],
        "ACI_ACL_TEMPLATE": str(tmp_path / "users.acl.template"),
        "ACI_ACL_FILE": str(tmp_path / "acl" / "users.acl"),
        **env,
    }
    return subprocess.Popen(
        ["sh", str(REDIS_DEPLOY / "entrypoint.sh"), *command],
        env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_the_entrypoint_writes_hashes_and_redis_signs_each_user_in(tmp_path: Path) -> None:
    port = free_port()
    proc = _entrypoint(
        tmp_path, _PASSWORDS, "redis-server", "--port", str(port), "--bind", "127.0.0.1",
        "--save", "", "--dir", str(tmp_path), "--aclfile", str(tmp_path / "acl" / "users.acl"),
    )  # fmt: skip
    try:
        wait_port(port, up=True, limit=10)
        written = (tmp_path / "acl" / "users.acl").read_text()
        assert (tmp_path / "acl" / "users.acl").stat().st_mode & 0o077 == 0
        for password in _PASSWORDS.values():
            assert password not in written
            assert hashlib.sha256(password.encode()).hexdigest() in written
        for user, name in [("default", "ADMIN"), ("submitter", "SUBMITTER"),
                           ("worker", "WORKER"), ("auditor", "AUDITOR")]:  # fmt: skip
            client = redis_sync.Redis(
                port=port, username=user, password=_PASSWORDS[f"ACI_ACL_{name}_PASSWORD"]
            )
            assert client.ping() is True
            client.close()
        auditor = redis_sync.Redis(port=port, username="auditor", password="aud-4")
        with pytest.raises(redis_sync.exceptions.NoPermissionError):
            auditor.xadd("{aci}:invocations", {"d": "{}"})
        auditor.close()
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ACI_ACL_WORKER_PASSWORD": ""}, "ACI_ACL_WORKER_PASSWORD is not set"),
        ({"ACI_ACL_AUDITOR_PASSWORD": "two words"}, "must not contain whitespace"),
    ],
)
def test_the_entrypoint_refuses_a_missing_or_broken_password(
    tmp_path: Path, change: dict[str, str], message: str
) -> None:
    proc = _entrypoint(tmp_path, {**_PASSWORDS, **change}, "true")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and message in err
    assert "two words" not in err + out  # a password is never echoed
    assert not (tmp_path / "acl" / "users.acl").exists()


def test_the_entrypoint_warns_about_change_me_defaults(tmp_path: Path) -> None:
    proc = _entrypoint(
        tmp_path, {**_PASSWORDS, "ACI_ACL_WORKER_PASSWORD": "change-me-worker"}, "true"
    )
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert "WARNING: ACI_ACL_WORKER_PASSWORD is still a change-me default" in err


# -- the `cluster` profile ---------------------------------------------------------------------

NODES = [f"redis-node-{n}" for n in range(1, 7)]


def _flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_the_cluster_profile_has_six_nodes_with_the_users_and_aof() -> None:
    compose = _compose()
    services = compose["services"]
    cluster = {n for n, s in services.items() if s.get("profiles") == ["cluster"]}
    assert cluster == {*NODES, "redis-cluster-create", "worker-cluster"}
    for name in NODES:
        node = services[name]
        command = node["command"]
        assert node["image"] == services["redis"]["image"]
        assert node["entrypoint"] == services["redis"]["entrypoint"]  # the ACL users
        assert node["environment"] == services["redis"]["environment"]
        assert command[:2] == ["docker-entrypoint.sh", "redis-server"]
        assert _flag(command, "--cluster-enabled") == "yes"
        assert _flag(command, "--aclfile") == "/tmp/aci-redis/users.acl"
        assert _flag(command, "--appendonly") == "yes"
        assert _flag(command, "--hash-max-listpack-value") == "2048"
        # MOVED and ASK name the node by its service name, which the workers resolve.
        assert _flag(command, "--cluster-announce-hostname") == name
        assert _flag(command, "--cluster-preferred-endpoint-type") == "hostname"
        # Replicas authenticate to their masters; the password only from the environment.
        assert _flag(command, "--masterauth") == "${ACI_ACL_ADMIN_PASSWORD:-change-me-admin}"
        assert f"{name}:/data" in node["volumes"] and name in compose["volumes"]
        assert "./deploy/redis:/etc/aci-redis:ro" in node["volumes"]
        assert node["healthcheck"]["test"]
    assert len({_flag(services[n]["command"], "--cluster-config-file") for n in NODES}) == 1


def test_the_cluster_is_created_once_with_a_replica_per_master() -> None:
    create = _compose()["services"]["redis-cluster-create"]
    [script] = create["command"]
    assert "--cluster create" in script and "--cluster-replicas 1" in script
    assert "--cluster-yes" in script and "for n in 1 2 3 4 5 6" in script
    assert "cluster_state:ok ||" in script  # a restarted stack keeps its cluster
    assert create["restart"] == "no"
    assert create["environment"]["REDISCLI_AUTH"] == "${ACI_ACL_ADMIN_PASSWORD:-change-me-admin}"
    assert create["depends_on"] == {n: {"condition": "service_healthy"} for n in NODES}


def test_cluster_workers_use_the_cluster_client_over_sixteen_partitions() -> None:
    from pipeline.redis_io import cluster_url
    from pipeline.settings import Settings

    worker = _compose()["services"]["worker-cluster"]
    env = worker["environment"]
    assert env["ACI_REDIS_URL"].startswith("redis+cluster://worker:${ACI_ACL_WORKER_PASSWORD:-")
    assert worker["depends_on"]["redis-cluster-create"] == {
        "condition": "service_completed_successfully"
    }
    assert worker["command"] == _compose()["services"]["worker"]["command"]
    assert "container_name" not in worker and "ports" not in worker  # --scale works
    resolved = {k: re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", v) for k, v in env.items()}
    settings = Settings.from_env(resolved)
    assert settings.partitions == 16 and settings.wait_replicas == 1
    assert (
        cluster_url(settings.redis_url or "") == "redis://worker:change-me-worker@redis-node-1:6379"
    )
