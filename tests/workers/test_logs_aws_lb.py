"""AWS load balancers' access logs under `apache_access` (`workers/sources/logs/awslogs.py`):
an Application Load Balancer's lines (the layout of AWS's documentation, with its fields in
their order) and a Classic Load Balancer's; and S3's server access log. Before, no line was a record in any format: every
call over an ALB's bucket an `EXECUTION` error, `level:error` over its 502s impossible.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from logs_helpers import file_source, search

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()
TG = "arn:aws:elasticloadbalancing:eu-west-1:123456789012:targetgroup/orders/73e2d6bc24d8a067"
CERT = "arn:aws:acm:eu-west-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"
LINES = [
    # served
    f"https 2026-12-04T11:50:00.186641Z app/shop-alb/50dc6c495c0c9188 192.168.131.39:2817"
    f' 10.0.0.1:80 0.000 0.001 0.000 200 200 34 366 "GET https://shop.example.com:443/'
    f' HTTP/1.1" "curl/8.4.0" ECDHE-RSA-AES128-GCM-SHA256 TLSv1.2 {TG}'
    f' "Root=1-58337262-36d228ad5d99923122bbe354" "shop.example.com" "{CERT}" 0'
    f' 2026-12-04T11:50:00.184000Z "forward" "-" "-" "10.0.0.1:80" "200" "-" "-"',
    # the target timed out: the balancer's own 504, the target sent nothing
    f"h2 2026-12-04T11:51:00.000001Z app/shop-alb/50dc6c495c0c9188 203.0.113.9:40112"
    f' 10.0.0.7:8080 0.001 -1 -1 504 - 812 202 "POST https://shop.example.com:443/api/charge'
    f' HTTP/2.0" "okhttp/4.12" ECDHE-RSA-AES128-GCM-SHA256 TLSv1.2 {TG}'
    f' "Root=1-6754a1c2-0f1e2d3c4b5a69788796a5b4" "shop.example.com" "{CERT}" 1'
    f' 2026-12-04T11:50:00.000001Z "forward" "-" "-" "10.0.0.7:8080" "-" "-" "-"',
    # no healthy target
    f"http 2026-12-04T11:52:00.5Z app/shop-alb/50dc6c495c0c9188 203.0.113.9:40113 - -1 -1 -1"
    f' 503 - 120 339 "GET http://shop.example.com:80/health HTTP/1.1" "ELB-HealthChecker/2.0"'
    f' - - {TG} "Root=1-6754a1c3-aaaa2d3c4b5a69788796a5b4" "-" "-" 0'
    f' 2026-12-04T11:52:00.500000Z "forward" "-" "-" "-" "-" "-" "-"',
    # a Classic Load Balancer's
    "2026-12-04T11:53:00.945958Z my-clb 192.168.131.39:2817 10.0.0.1:80 0.000073 2.001048"
    ' 0.000057 200 200 0 29 "GET http://www.example.com:80/ HTTP/1.1" "curl/7.38.0" - -',
]


@pytest.fixture
def source(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "alb.log"
    path.write_text("\n".join(LINES) + "\n")
    os.utime(path, (NOW - 60, NOW - 60))
    return file_source(tmp_path, "apache_access", ["*.log"], now=NOW)


def test_each_line_is_a_record(source) -> None:  # type: ignore[no-untyped-def]
    found = search(source, "")
    assert found.match_count == 4 and not found.unparsed_lines
    assert [(r.timestamp, r.level, r.message) for r in found.records] == [
        ("2026-12-04T11:50:00.186Z", "INFO", "GET https://shop.example.com:443/ HTTP/1.1 200 366"),
        ("2026-12-04T11:51:00.000Z", "ERROR",
         "POST https://shop.example.com:443/api/charge HTTP/2.0 504 202"),
        ("2026-12-04T11:52:00.500Z", "ERROR", "GET http://shop.example.com:80/health HTTP/1.1 503 339"),
        ("2026-12-04T11:53:00.945Z", "INFO", "GET http://www.example.com:80/ HTTP/1.1 200 29"),
    ]  # fmt: skip
    timeout = found.records[1].fields
    assert timeout["client"] == "203.0.113.9" and timeout["upstream_host"] == "10.0.0.7:8080"
    assert "target_status" not in timeout and "duration_ms" not in timeout  # never answered
    assert timeout["scheme"] == "h2" and timeout["target_group"] == TG
    assert found.records[0].fields["duration_ms"] == 1.0
    assert found.records[3].fields["upstream_time_ms"] == 2001.048


@pytest.mark.parametrize(
    ("query", "count"),
    [
        ("level:error", 2),
        ("http_status:504", 1),
        ("trace_id:1-6754a1c2-0f1e2d3c4b5a69788796a5b4", 1),
        ("target_status:>=200", 2),
        ("-target_status:* level:error", 2),
        ("upstream_time_ms:>1000", 1),
        ("uri:/api/charge", 1),
        ("client:203.0.113.9", 2),
        ("user_agent:ELB-HealthChecker", 1),
        ("server_name:shop.example.com", 2),
    ],
)
def test_an_agents_questions(source, query: str, count: int) -> None:  # type: ignore[no-untyped-def]
    assert search(source, query).match_count == count


OWNER = "79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be"
S3_LINES = [
    # AWS's documented example, dated in the window
    f"{OWNER} amzn-s3-demo-bucket1 [04/Dec/2026:11:50:38 +0000] 192.0.2.3 {OWNER}"
    ' 3E57427F3EXAMPLE REST.GET.VERSIONING - "GET /amzn-s3-demo-bucket1?versioning HTTP/1.1"'
    ' 200 - 113 - 7 - "-" "S3Console/0.4" - s9lzHYrFp76ZVxRcpX9+5cjAnEH2ROuNkd2BHfIa6UkFVdtjf5mKR3'
    "/eTPFvsiP/XV/VLi31234= SigV4 ECDHE-RSA-AES128-GCM-SHA256 AuthHeader"
    " amzn-s3-demo-bucket1.s3.us-west-1.amazonaws.com TLSV1.2 - -",
    f"{OWNER} shop-assets [04/Dec/2026:11:51:00 +0000] 10.0.0.7"
    " arn:aws:sts::123456789012:assumed-role/orders/i-0abc 7D6A2F1E9EXAMPLE REST.GET.OBJECT"
    ' invoices/o-1042.pdf "GET /shop-assets/invoices/o-1042.pdf HTTP/1.1" 403 AccessDenied 243'
    ' - 12 - "-" "aws-sdk-go/1.44.0" -',
]


def test_s3_server_access_log_lines_are_records(tmp_path: Path) -> None:
    path = tmp_path / "s3.log"
    path.write_text("\n".join(S3_LINES) + "\n")
    os.utime(path, (NOW - 60, NOW - 60))
    source = file_source(tmp_path, "apache_access", ["s3.log"], now=NOW)
    found = search(source, "")
    assert [(r.timestamp, r.level, r.message) for r in found.records] == [
        ("2026-12-04T11:50:38.000Z", "INFO", "GET /amzn-s3-demo-bucket1?versioning HTTP/1.1 200 113"),
        ("2026-12-04T11:51:00.000Z", "WARN", "GET /shop-assets/invoices/o-1042.pdf HTTP/1.1 403 AccessDenied"),
    ]  # fmt: skip
    denied = found.records[1].fields
    assert (denied["bucket"], denied["key"], denied["operation"]) == (
        "shop-assets", "invoices/o-1042.pdf", "REST.GET.OBJECT",
    )  # fmt: skip
    assert found.records[0].fields["ssl_protocol"] == "TLSV1.2"
    assert search(source, "error_code:AccessDenied bucket:shop-assets").match_count == 1
    assert search(source, "http_status:>=400").match_count == 1
