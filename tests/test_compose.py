"""compose.yaml, checked as far as a machine without a container engine allows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return data


def test_services_images_and_health_checks() -> None:
    services = _compose()["services"]
    assert set(services) == {"redis", "mariadb", "worker"}
    assert services["redis"]["image"].startswith("redis:7")
    assert "--appendonly" in services["redis"]["command"]
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
    assert env["ACI_REDIS_URL"].startswith("redis://redis:")
    assert env["ACI_MYSQL_SHOP_URL"].startswith("mysql://aci_reader:")
    assert set(worker["depends_on"]) == {"redis", "mariadb"}
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["aci-evidence"]' in dockerfile
