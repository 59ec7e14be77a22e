"""The `real-log-files` demo's slow log written by a private MariaDB, and its honest fallback."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from app.demo_slowlog import mariadb_slow_log

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("mariadbd") is None and not Path("/usr/sbin/mariadbd").exists(),
        reason="no mariadbd",
    ),
]


def _servers_under(folder: Path) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    return [line for line in ps.stdout.splitlines() if str(folder) in line]


def test_mariadb_writes_the_slow_log_and_stops(tmp_path: Path) -> None:
    target = tmp_path / "slow.log"
    ok, version = mariadb_slow_log(tmp_path, target)
    assert ok and "MariaDB" in version
    text = target.read_text()
    assert text.count("FOR UPDATE") == 4 and "Rows_examined: 20000" in text
    assert "CREATE TABLE" not in text  # the setup ran with long_query_time = 1000
    assert not (tmp_path / "mariadb").exists() and not _servers_under(tmp_path)


def test_a_server_that_cannot_start_leaves_the_written_log(tmp_path: Path) -> None:
    folder = tmp_path / ("x" * 120)  # its unix socket path is too long for the kernel
    folder.mkdir()
    target = tmp_path / "slow.log"
    target.write_text("the written log\n")
    ok, why = mariadb_slow_log(folder, target)
    assert not ok and why.startswith("the private mariadbd failed")
    assert target.read_text() == "the written log\n" and not _servers_under(folder)
    assert not (folder / "mariadb").exists()
