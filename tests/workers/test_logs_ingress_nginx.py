"""The Kubernetes NGINX Ingress controller's access log under `nginx_access`
(`workers/sources/logs/ingress.py`): what its default format adds after the user agent is
fields (the request's time `duration_ms`, the pod's status `target_status`, the request id).
Before, all of it was the text `extra`: `duration_ms:>1000` over an ingress found nothing.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from logs_helpers import file_source, search

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()
LOG = (
    '10.0.0.3 - - [04/Dec/2026:11:50:00 +0000] "GET /api/charge HTTP/1.1" 502 150 "-" '
    '"curl/8.4.0" 83 1.502 [default-orders-80] [] 10.1.0.23:8080 0 1.500 502 '
    "7f1e0c0e2a1b3c4d5e6f708192a3b4c5\n"
    '10.0.0.3 - - [04/Dec/2026:11:50:01 +0000] "POST /api/pay HTTP/2.0" 200 15 "https://shop/" '
    '"Mozilla/5.0" 120 0.051 [default-pay-8080] [default-pay-canary-8080] 10.1.0.24:8080, '
    "10.1.0.25:8080 0, 15 0.001, 0.050 502, 200 8f1e0c0e2a1b3c4d5e6f708192a3b4c5\n"
    '10.0.0.3 - - [04/Dec/2026:11:50:02 +0000] "GET /healthz HTTP/1.1" 503 0 "-" "kube-probe/1.29" '
    "90 0.000 [upstream-default-backend] [] - - - - 9f1e0c0e2a1b3c4d5e6f708192a3b4c5\n"
    'I1204 11:50:03.000000       7 controller.go:190] "Configuration changes detected"\n'
    '10.0.0.3 - - [04/Dec/2026:11:50:04 +0000] "GET / HTTP/1.1" 200 5 "-" "curl" 0.004 x\n'
)


@pytest.fixture
def source(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "ingress.log"
    path.write_text(LOG)
    os.utime(path, (NOW - 60, NOW - 60))
    return file_source(tmp_path, "nginx_access", ["ingress.log"], now=NOW)


def test_the_controllers_fields(source) -> None:  # type: ignore[no-untyped-def]
    found = search(source, "")
    first, retried, default, plain = (r.fields for r in found.records)
    assert first == {
        "client": "10.0.0.3", "method": "GET", "uri": "/api/charge", "protocol": "HTTP/1.1",
        "http_status": 502, "bytes": 150, "user_agent": "curl/8.4.0", "bytes_received": 83,
        "duration_ms": 1502.0, "upstream_cluster": "default-orders-80",
        "upstream_host": "10.1.0.23:8080", "upstream_bytes": 0, "upstream_time_ms": 1500.0,
        "target_status": 502, "request_id": "7f1e0c0e2a1b3c4d5e6f708192a3b4c5",
    }  # fmt: skip
    assert retried["upstream_host"] == "10.1.0.24:8080, 10.1.0.25:8080"
    assert (retried["target_status"], retried["upstream_time_ms"]) == (200, 50.0)  # last try
    assert retried["alternative_upstream"] == "default-pay-canary-8080"
    assert "upstream_host" not in default and "target_status" not in default
    assert plain["extra"] == "0.004 x"  # another format's additions: kept as written
    assert found.unparsed_lines == 1  # the controller's own klog line


@pytest.mark.parametrize(
    ("query", "count"),
    [
        ("duration_ms:>1000", 1),
        ("target_status:502", 1),
        ("upstream_cluster:default-orders-80", 1),
        ("request_id:8f1e0c0e2a1b3c4d5e6f708192a3b4c5", 1),
        ("upstream_host:10.1.0.25", 1),
    ],
)
def test_an_agents_questions(source, query: str, count: int) -> None:  # type: ignore[no-untyped-def]
    assert search(source, query).match_count == count
