"""A small incident written to real log files by real producers, and its `ACI_LOGS_CONFIG`.

`write_file_scenario(folder, now)` is for the demo, the tests and the benchmark: the
application logs through Python's `logging` (a JSON-lines formatter, a `RotatingFileHandler`
whose rotated file is then gzipped as logrotate's `compress` does), the database writes a
slow query log in MariaDB's exact format, and the system log is in rsyslog's file format
(RFC 3339 timestamps). The story: at T0 = now - 8 min the order-service's connection pool
runs dry (HikariPool timeouts, HTTP 503) behind a slow `SELECT ... FOR UPDATE` on orders,
then the pod restarts after an OOM kill.
"""

from __future__ import annotations

import gzip
import json
import logging
import logging.handlers
import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

__all__ = ["JsonLineFormatter", "write_file_scenario"]

_FIELDS: Final = (
    "service",
    "host",
    "pod",
    "trace_id",
    "exception",
    "uri",
    "http_status",
    "cost_ms",
)


class JsonLineFormatter(logging.Formatter):
    """One JSON object per record: `timestamp` (ISO, UTC), `level`, `message`, `logger`, and
    the `extra` fields named in `_FIELDS`."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _FIELDS:
            if hasattr(record, name):
                out[name] = getattr(record, name)
        return json.dumps(out)


def _app_log(folder: Path, now: float) -> None:
    path = folder / "app" / "shop.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=40_000, backupCount=3)
    handler.setFormatter(JsonLineFormatter())
    logger = logging.Logger("com.shop.order.OrderController")
    logger.addHandler(handler)
    base = {"service": "order-service", "host": "node-3", "pod": "order-service-7d9f-x2k4q"}

    def emit(at: float, level: int, message: str, **extra: object) -> None:
        record = logger.makeRecord(
            logger.name, level, "app", 0, message, (), None, extra={**base, **extra}
        )
        record.created = at
        logger.handle(record)

    t0 = now - 8 * 60
    for i in range(360):  # an hour of routine traffic, every 10 s
        at = now - 3600 + i * 10
        emit(at, logging.INFO, f"GET /api/orders/{1000 + i} 200 in {20 + i % 30}ms",
             uri=f"/api/orders/{1000 + i}", http_status=200, cost_ms=20 + i % 30)  # fmt: skip
        if at >= t0 and i % 2 == 0:
            emit(at + 1, logging.ERROR,
                 "HikariPool-1 - Connection is not available, request timed out after 30000ms.",
                 exception="java.sql.SQLTransientConnectionException", http_status=503,
                 uri="/api/orders", cost_ms=30000, trace_id=f"{i:032x}")  # fmt: skip
    handler.close()
    for rotated in sorted(path.parent.glob("shop.jsonl.*")):
        if not rotated.name.endswith(".gz"):  # logrotate's compress: keep the mtime
            with rotated.open("rb") as src, gzip.open(f"{rotated}.gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            stat = rotated.stat()
            os.utime(f"{rotated}.gz", (stat.st_atime, stat.st_mtime))
            rotated.unlink()


def _slow_log(folder: Path, now: float) -> None:
    path = folder / "mysql" / "slow.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "/usr/sbin/mariadbd, Version: 10.11.6-MariaDB-0+deb12u1-log (Debian 12). started with:",
        "Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock",
        "Time\t\t    Id Command\tArgument",
    ]
    for i in range(30):
        at = int(now - 3000 + i * 100)
        slow = at >= now - 8 * 60
        seconds = 4.2 + i / 10 if slow else 0.3
        sql = (
            f"SELECT * FROM orders WHERE customer_id = {500 + i} AND status = 'PENDING' FOR UPDATE;"
            if slow
            else f"SELECT id, total FROM orders WHERE id = {9000 + i};"
        )
        stamp = datetime.fromtimestamp(at, UTC).strftime("%y%m%d %H:%M:%S")
        lines += [
            f"# Time: {stamp}",
            "# User@Host: shop[shop] @ app-3 [10.0.3.7]",
            f"# Thread_id: {40 + i}  Schema: shop  QC_hit: No",
            f"# Query_time: {seconds:.6f}  Lock_time: {seconds * 0.8 if slow else 0.000012:.6f}"
            f"  Rows_sent: 1  Rows_examined: {120000 if slow else 1}",
            f"# Rows_affected: 0  Bytes_sent: {180 + i}",
            f"SET timestamp={at};",
            sql,
        ]
    path.write_text("\n".join(lines) + "\n")


def _syslog(folder: Path, now: float) -> None:
    path = folder / "system" / "syslog"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(12):  # cron every 5 minutes
        at = datetime.fromtimestamp(now - 3600 + i * 300, UTC).isoformat(timespec="microseconds")
        lines.append(f"{at} node-3 CRON[{2000 + i}]: (root) CMD (run-parts /etc/cron.hourly)")
    oom = datetime.fromtimestamp(now - 4 * 60, UTC).isoformat(timespec="microseconds")
    back = datetime.fromtimestamp(now - 3 * 60, UTC).isoformat(timespec="microseconds")
    lines += [
        f"{oom} node-3 kernel: Out of memory: Killed process 4242 (java) total-vm:4194304kB",
        f"{back} node-3 kubelet[812]: Back-off restarting failed container order-service",
    ]
    path.write_text("\n".join(lines) + "\n")


def write_file_scenario(folder: Path, now: float | None = None) -> Path:
    """Write the incident's log files under `folder` and return its `ACI_LOGS_CONFIG` file
    (APPLICATION jsonl, DATABASE_SLOW_QUERY mysql_slow, SYSTEM_EVENTS syslog)."""
    now = time.time() if now is None else now
    folder = folder.resolve()
    _app_log(folder, now)
    _slow_log(folder, now)
    _syslog(folder, now)
    config = folder / "logs.toml"
    config.write_text(
        f'roots = ["{folder}"]\ntimezone = "UTC"\n\n'
        f'[topics.APPLICATION]\nbackend = "file"\nformat = "jsonl"\n'
        f'paths = ["{folder}/app/shop.jsonl*"]\n\n'
        f'[topics.DATABASE_SLOW_QUERY]\nbackend = "file"\nformat = "mysql_slow"\n'
        f'service = "orders-db"\npaths = ["{folder}/mysql/slow.log*"]\n\n'
        f'[topics.SYSTEM_EVENTS]\nbackend = "file"\nformat = "syslog"\n'
        f'paths = ["{folder}/system/syslog*"]\n'
    )
    return config
