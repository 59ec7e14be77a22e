"""Envoy's and Istio's default access log (`format = "envoy"`, docs/logs.md): every sidecar
of a mesh writes it, and under `plain` it was read with no level, no status and no field.

The first line is the example of Envoy's documentation (configuration/observability/
access_log/usage.rst, envoyproxy/envoy, Apache-2.0); the others are written here in the
shapes of Envoy's default format string and Istio's default proxy format."""

from __future__ import annotations

import os
import time
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from logs_helpers import file_source, search, search_written
from test_logs_python_crash import container_log

from workers.sources.logs.check import check_logs
from workers.sources.logs.config import parse_logs_config
from workers.sources.logs.formats import make_parser

NOW = 1_796_400_000.0  # 2026-12-04T16:00:00Z

ENVOY_DOCS = (
    '[2016-04-15T20:17:00.310Z] "POST /api/v1/locations HTTP/2" 204 - 154 0 226 100 '
    '"10.0.35.28" "nsq2http" "cc21d9b0-cf5c-432b-8c7e-98aeb7988cd2" "locations" '
    '"tcp://10.0.2.1:80"'
)
# Envoy's default format: an upstream with no healthy host, a retried connection failure on a
# TCP proxy (no HTTP status), a client's 404, a slow success
ENVOY = (
    '[2026-12-04T15:40:00.120Z] "GET /api/orders/42 HTTP/1.1" 503 UH 0 19 0 - "10.1.2.3" '
    '"curl/8.5.0" "5f0c7a52-2b8e-4c1e-9a51-0d7d2f1b9c11" "orders.shop" "-"\n'
    '[2026-12-04T15:40:01.004Z] "- - -" 0 UF,URX 0 0 30 - "-" "-" "-" "-" "10.1.9.7:5432"\n'
    '[2026-12-04T15:40:02.500Z] "GET /favicon.ico HTTP/2" 404 - 0 0 1 1 "-" "Mozilla/5.0 (X11)" '
    '"0e9e6c1d-6b5b-4d3e-8a9e-2f9f0c1c2d3e" "shop.example" "10.1.4.4:8080"\n'
    '[2026-12-04T15:40:03.250Z] "POST /api/charge HTTP/1.1" 200 - 512 88 2310 2301 '
    '"203.0.113.9, 10.1.0.1" "okhttp/4.12" "a1b2c3d4-0000-4000-8000-000000000001" '
    '"payments.shop" "10.1.5.5:9000"\n'
)
# Istio's default: RESPONSE_CODE_DETAILS, CONNECTION_TERMINATION_DETAILS and
# UPSTREAM_TRANSPORT_FAILURE_REASON after the flags; the cluster and addresses after the host
ISTIO = (
    '[2026-12-04T15:41:00.010Z] "GET /status/418 HTTP/1.1" 418 - via_upstream - "-" 0 135 4 4 '
    '"-" "curl/8.5.0" "84961386-6d84-429d-98bd-c5aee93b5c88" "httpbin:8000" "10.44.1.27:80" '
    "outbound|8000||httpbin.foo.svc.cluster.local 10.44.1.23:37652 10.0.45.184:8000 "
    "10.44.1.23:46520 - default\n"
    '[2026-12-04T15:41:01.020Z] "POST /api/charge HTTP/2" 503 UF,URX '
    "upstream_reset_before_response_started{connection_failure} - "
    '"TLS_error:_268435581:SSL_routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED" 120 91 '
    '1002 - "-" "okhttp/4.12" "5a1e0c0f-3d4b-4f6a-9d3e-7a1b2c3d4e5f" "payments:9000" '
    '"10.44.2.9:9000" outbound|9000||payments.shop.svc.cluster.local - 10.0.51.7:9000 '
    "10.44.1.23:51234 - -\n"
)


def _records(text: str) -> tuple[list[Any], int]:
    parser = make_parser("envoy", {}, UTC, "", "auto", int(NOW * 1000))
    entries = [e for line in text.splitlines(keepends=True) for e in parser.feed(line)]
    return entries + parser.flush(), parser.failed


def test_envoys_documented_example_is_one_record_with_its_fields() -> None:
    (entry,), failed = _records(ENVOY_DOCS + "\n")
    assert failed == 0 and entry.level == "INFO"
    assert entry.message == "POST /api/v1/locations HTTP/2 204"
    assert entry.fields == {
        "method": "POST", "uri": "/api/v1/locations", "protocol": "HTTP/2",
        "http_status": 204, "bytes_received": 154, "bytes": 0, "duration_ms": 226,
        "upstream_time_ms": 100, "client": "10.0.35.28", "user_agent": "nsq2http",
        "request_id": "cc21d9b0-cf5c-432b-8c7e-98aeb7988cd2", "authority": "locations",
        "upstream_host": "tcp://10.0.2.1:80",
    }  # fmt: skip
    assert entry.epoch_ms == 1_460_751_420_310


def test_the_level_comes_from_the_status_and_the_flags_are_a_field() -> None:
    entries, failed = _records(ENVOY)
    assert failed == 0
    assert [(e.level, e.fields.get("response_flags")) for e in entries] == [
        ("ERROR", "UH"), ("ERROR", "UF,URX"), ("WARN", None), ("INFO", None),
    ]  # fmt: skip
    # a TCP proxy's line: no method, no status; its upstream failure is an error
    assert entries[1].message == "- - - 0 UF,URX"
    assert "method" not in entries[1].fields and entries[1].fields["http_status"] == 0
    assert entries[3].fields["client"] == "203.0.113.9, 10.1.0.1"


# An upstream that failed after its response had started: Envoy logs the status it had
# already sent downstream (200) and says the failure in its flags and details (`UC`, the
# upstream connection terminated; `UR`, the upstream reset the stream;
# `upstream_reset_after_response_started{...}`): the client got a body cut short. Before, the
# status alone gave the level: INFO, and `level:error` over an upstream dying mid-response
# found none of them.
MID_RESPONSE = (
    '[2026-12-04T15:42:00.010Z] "GET /export.csv HTTP/1.1" 200 UC '
    'upstream_reset_after_response_started{connection_termination} - "-" 0 1048576 4012 '
    '12 "-" "curl/8.5.0" "84961386-6d84-429d-98bd-c5aee93b5c89" "files:8000" "10.44.1.28:80" '
    "outbound|8000||files.shop.svc.cluster.local 10.44.1.23:37654 10.0.45.185:8000 "
    "10.44.1.23:46522 - default\n"
    '[2026-12-04T15:42:01.010Z] "GET /export.csv HTTP/2" 200 UR 0 65536 30001 11 "-" '
    '"curl/8.5.0" "5f0c7a52-2b8e-4c1e-9a51-0d7d2f1b9c12" "files.shop" "10.1.4.5:8080"\n'
)


def test_an_upstream_failing_after_its_response_started_is_an_error() -> None:
    entries, failed = _records(MID_RESPONSE + ENVOY)
    assert failed == 0
    levels = [
        (e.fields.get("response_flags"), e.fields.get("http_status"), e.level) for e in entries
    ]
    assert levels[:2] == [("UC", 200, "ERROR"), ("UR", 200, "ERROR")], levels
    # a 404 with no flag and a 200 with none: as before
    assert levels[4:] == [(None, 404, "WARN"), (None, 200, "INFO")], levels


def test_istios_default_adds_its_details_cluster_and_addresses() -> None:
    entries, failed = _records(ISTIO)
    assert failed == 0
    teapot, failure = entries
    assert teapot.level == "WARN" and teapot.fields["response_code_details"] == "via_upstream"
    assert teapot.fields["upstream_cluster"] == "outbound|8000||httpbin.foo.svc.cluster.local"
    assert teapot.fields["downstream_remote"] == "10.44.1.23:46520"
    assert teapot.fields["route_name"] == "default"
    assert failure.level == "ERROR" and failure.fields["response_flags"] == "UF,URX"
    assert failure.fields["upstream_failure_reason"].endswith("CERTIFICATE_VERIFY_FAILED")
    assert failure.message == (
        "POST /api/charge HTTP/2 503 UF,URX "
        "upstream_reset_before_response_started{connection_failure}"
    )
    assert "route_name" not in failure.fields and "upstream_local" not in failure.fields


def test_an_on_call_query_finds_the_failing_calls(tmp_path: Path) -> None:
    text = ENVOY + ISTIO

    def count(query: str) -> int:
        return search_written(tmp_path, "envoy", text, query, now=NOW).match_count

    assert count("level:ERROR") == 3
    assert count("response_flags:UF") == 2 and count("URX") == 2
    assert count("http_status:>=500") == 2 and count("duration_ms:>1000") == 2
    assert count("upstream_host:10.1.9.7") == 1 and count("authority:payments") == 2
    assert count('"connection_failure"') == 1 and count("CERTIFICATE_VERIFY_FAILED") == 1
    assert count("upstream_cluster:payments.shop") == 1


def test_check_names_envoy_for_a_sidecars_log_read_as_plain(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "istio-proxy.log").write_text(ENVOY + ISTIO)
    config = parse_logs_config(
        f'roots = ["{logs}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "plain"\n'
        f'paths = ["{logs}/*.log"]\n'
    )
    (topic,) = check_logs(config, time.time())
    assert topic.problems() == [
        f'APPLICATION: {logs}/istio-proxy.log: format = "envoy" gives 6 of its records a '
        "level (plain: 0 of 6)"
    ]


def test_a_sidecars_lines_in_the_kubelets_cri_files_are_read_as_envoys(tmp_path: Path) -> None:
    # Kubernetes keeps a sidecar's stdout in `pods/<ns>_<pod>_<uid>/istio-proxy/0.log`: the
    # access lines among the agent's zap lines; before, a record without level or field
    folder = tmp_path / "pods" / "shop_web-1_0d8a" / "istio-proxy"
    folder.mkdir(parents=True)
    stamps = iter(f"2026-12-04T15:4{n}:00.5{n}0000000Z" for n in range(10))
    (folder / "0.log").write_text(
        f"{next(stamps)} stderr F 2026-12-04T15:40:00.500000Z\tinfo\tEnvoy proxy is ready\n"
        + "".join(f"{next(stamps)} stdout F {line}\n" for line in (ENVOY + ISTIO).splitlines())
    )
    source = file_source(tmp_path, "cri", ["pods/*/*/0.log"], now=NOW)
    found = search(source, "level:ERROR", 60)
    assert found.match_count == 3
    assert {r.fields["response_flags"] for r in found.records} == {"UH", "UF,URX"}
    assert {r.fields["container"] for r in found.records} == {"istio-proxy"}
    assert search(source, "response_flags:UF", 60).match_count == 2
    assert search(source, "http_status:404", 60).match_count == 1
    assert search(source, "level:INFO ready", 60).match_count == 1  # the agent's own line


# Istio's JSON access log (`meshConfig.accessLogEncoding: JSON`): its default keys, written
# here for the lines above; null where the text format writes `-`
ISTIO_JSON = (
    '{"start_time":"2026-12-04T15:41:01.020Z","route_name":null,"method":"POST",'
    '"path":"/api/charge","protocol":"HTTP/2","response_code":503,"response_flags":"UF,URX",'
    '"response_code_details":"upstream_reset_before_response_started{connection_failure}",'
    '"connection_termination_details":null,"upstream_transport_failure_reason":"TLS_error:'
    '_268435581:SSL_routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED","bytes_received":120,'
    '"bytes_sent":91,"duration":1002,"upstream_service_time":null,"x_forwarded_for":null,'
    '"user_agent":"okhttp/4.12","request_id":"5a1e0c0f-3d4b-4f6a-9d3e-7a1b2c3d4e5f",'
    '"authority":"payments:9000","upstream_host":"10.44.2.9:9000","upstream_cluster":'
    '"outbound|9000||payments.shop.svc.cluster.local","upstream_local_address":null,'
    '"downstream_local_address":"10.0.51.7:9000","downstream_remote_address":'
    '"10.44.1.23:51234","requested_server_name":null}\n'
    '{"start_time":"2026-12-04T15:41:00.010Z","route_name":"default","method":"GET",'
    '"path":"/status/418","protocol":"HTTP/1.1","response_code":418,"response_flags":"-",'
    '"response_code_details":"via_upstream","connection_termination_details":null,'
    '"upstream_transport_failure_reason":null,"bytes_received":0,"bytes_sent":135,'
    '"duration":4,"upstream_service_time":"4","x_forwarded_for":null,'
    '"user_agent":"curl/8.5.0","request_id":"84961386-6d84-429d-98bd-c5aee93b5c88",'
    '"authority":"httpbin:8000","upstream_host":"10.44.1.27:80","upstream_cluster":'
    '"outbound|8000||httpbin.foo.svc.cluster.local","upstream_local_address":'
    '"10.44.1.23:37652","downstream_local_address":"10.0.45.184:8000",'
    '"downstream_remote_address":"10.44.1.23:46520","requested_server_name":null}\n'
)


def test_istios_json_access_log_is_read_as_its_text_layout(tmp_path: Path) -> None:
    # before: no key jsonl reads as a time, every call an EXECUTION error
    every = search_written(tmp_path, "jsonl", ISTIO_JSON, now=NOW)
    assert every.match_count == 2 and not every.unparsed_lines
    teapot, failure = sorted(every.records, key=lambda r: r.timestamp)
    assert failure.timestamp == "2026-12-04T15:41:01.020Z" and failure.level == "ERROR"
    assert failure.message == (
        "POST /api/charge HTTP/2 503 UF,URX "
        "upstream_reset_before_response_started{connection_failure}"
    )
    assert failure.fields["response_flags"] == "UF,URX" and failure.fields["http_status"] == 503
    assert failure.fields["duration_ms"] == 1002 and failure.fields["bytes"] == 91
    assert "route_name" not in failure.fields and "client" not in failure.fields
    assert teapot.level == "WARN" and teapot.fields["upstream_time_ms"] == 4
    assert teapot.fields["downstream_remote"] == "10.44.1.23:46520"
    assert teapot.fields["uri"] == "/status/418" and "response_flags" not in teapot.fields

    def count(query: str) -> int:
        return search_written(tmp_path, "jsonl", ISTIO_JSON, query, now=NOW).match_count

    assert count("level:ERROR response_flags:UF") == 1 and count("http_status:>=400") == 2
    assert count('"POST /api/charge"') == 1 and count("upstream_cluster:httpbin") == 1


@pytest.mark.parametrize("fmt", ["cri", "docker"])
@pytest.mark.parametrize("text", [ENVOY + ISTIO, ISTIO_JSON], ids=["text", "json"])
def test_a_sidecars_access_lines_in_either_layout_are_read_in_container_logs(
    tmp_path: Path, fmt: str, text: str
) -> None:
    lines = [("stdout", line) for line in text.splitlines()]
    path = tmp_path / "0.log"
    path.write_text(container_log(fmt, lines))
    os.utime(path, (NOW - 60, NOW - 60))
    source = file_source(tmp_path, fmt, ["0.log"], now=NOW)
    # the runtime's time for a text line (11:51), Istio's `start_time` for a JSON one
    failed = search(source, "level:ERROR response_flags:UF", 600).records
    statuses = sorted(r.fields["http_status"] for r in failed)
    assert statuses == ([503] if text == ISTIO_JSON else [0, 503])
    assert search(source, "upstream_cluster:payments.shop", 600).match_count == 1


def test_an_istio_json_format_of_strings_is_read_too(tmp_path: Path) -> None:
    # a mesh's own `accessLogFormat` of the default keys, each value a quoted command
    # (`"response_code": "%RESPONSE_CODE%"`): numbers written as strings, `-` for none
    line = (
        '{"start_time":"2026-12-04T15:42:00.000Z","method":"GET","path":"/api/stock",'
        '"protocol":"HTTP/1.1","response_code":"504","response_flags":"UT",'
        '"response_code_details":"upstream_response_timeout","bytes_received":"0",'
        '"bytes_sent":"24","duration":"15001","upstream_service_time":"-",'
        '"x_forwarded_for":"-","user_agent":"curl/8.5.0","request_id":"r-1",'
        '"authority":"stock:8080","upstream_host":"10.44.3.3:8080",'
        '"upstream_cluster":"outbound|8080||stock.shop.svc.cluster.local"}\n'
    )
    (record,) = search_written(tmp_path, "jsonl", line, "duration_ms:>10000", now=NOW).records
    assert record.level == "ERROR" and record.fields["http_status"] == 504
    assert record.fields["bytes"] == 24 and "upstream_time_ms" not in record.fields
    assert record.message == "GET /api/stock HTTP/1.1 504 UT upstream_response_timeout"


def test_a_phrase_of_the_request_line_finds_an_envoy_access_log_in_logfmt(tmp_path: Path) -> None:
    # Envoy's `text_format` of Istio's keys as `key=value` pairs: `logfmt` reads the record
    # as Istio's JSON (its message the request line, composed of the line's values). The
    # prefilter looked for a phrase of that message in the line, where its words lie apart:
    # the record was shown, but a phrase of its own message answered NO_EVIDENCE (0 of 1).
    text = (
        "start_time=2026-12-04T15:41:01.020Z method=POST path=/api/charge protocol=HTTP/2 "
        "response_code=503 response_flags=UF,URX duration=1002\n"
        "start_time=2026-12-04T15:41:02.020Z method=GET path=/health protocol=HTTP/1.1 "
        "response_code=200 response_flags=- duration=1\n"
    )
    (record,) = search_written(tmp_path, "logfmt", text, "level:error", now=NOW).records
    assert record.message == "POST /api/charge HTTP/2 503 UF,URX"
    for phrase in ('"POST /api/charge"', '"503 UF,URX"', '"HTTP/2 503"'):
        found = search_written(tmp_path, "logfmt", text, phrase, now=NOW)
        assert found.match_count == 1, phrase
    assert search_written(tmp_path, "logfmt", text, '"GET /api"', now=NOW).match_count == 0


# A client that sends its credentials in the Host header (`curl http://admin:pw@api/` through
# a proxy that keeps them, a hand-written `Host: admin:pw@api.local`): Envoy logs :authority
# as it came, with no scheme, so the URL rule never saw it (shown on FILE and CLICKHOUSE)
CREDENTIAL = "Hunter2Authority"


@pytest.mark.parametrize(
    ("authority", "shown"),
    [
        (f"admin:{CREDENTIAL}@api.local", "admin:***@api.local"),
        (f"admin:{CREDENTIAL}@api.local:8443", "admin:***@api.local:8443"),
        (f"admin:{CREDENTIAL}@[::1]:80", "admin:***@[::1]:80"),
        (f"admin:{CREDENTIAL}@x@api.local", "admin:***@api.local"),  # an `@` unencoded
        ("api.local:8443", "api.local:8443"),
        ("nginx:1.25@sha256:0123abcd", "nginx:1.25@sha256:0123abcd"),  # an image, no secret
    ],
)
async def test_credentials_in_an_authority_are_masked_on_file_and_clickhouse(
    tmp_path: Path, authority: str, shown: str
) -> None:
    import json

    from test_logs_clickhouse import fetch, make_table, row, source_for

    text = (
        f'[2026-12-04T15:40:00.120Z] "GET /a HTTP/1.1" 503 UH 0 19 0 - "10.1.2.3" "curl/8.5.0" '
        f'"5f0c7a52" "{authority}" "-"\n'
    )
    istio = {
        "start_time": "2026-12-04T15:40:01.000Z", "method": "GET", "path": "/b",
        "protocol": "HTTP/1.1", "response_code": 503, "response_flags": "UH",
        "authority": authority,
    }  # fmt: skip
    (tmp_path / "text").mkdir()
    (tmp_path / "json").mkdir()
    on_text = search_written(tmp_path / "text", "envoy", text, "http_status:503", now=NOW)
    istio_line = json.dumps(istio) + "\n"
    on_json = search_written(tmp_path / "json", "jsonl", istio_line, "http_status:503", now=NOW)
    table = make_table([row(10, "ERROR", "api", "GET /c 503", authority=authority)])
    on_clickhouse = await fetch(source_for(table), "")
    for found in (on_text, on_json, on_clickhouse):
        assert found.match_count == 1
        assert found.records[0].fields["authority"] == shown, found.source_kind
    secret = await fetch(source_for(table), CREDENTIAL)
    assert secret.match_count == 0 and not secret.records


@pytest.mark.serial
@pytest.mark.parametrize("unit", ["@", "@x", "@-.", "a:b@"])
def test_an_authoritys_password_is_found_in_linear_time(unit: str) -> None:
    from logs_helpers import cpu_seconds

    from workers.sources.logs.masking import mask_fields

    def seconds(count: int) -> float:
        value = "admin:" + unit * count + "!"
        return cpu_seconds(lambda: mask_fields({"authority": value}))

    quarter, whole = seconds(250_000 // len(unit)), seconds(1_000_000 // len(unit))
    assert whole < 8 * quarter + 0.3, (quarter, whole)


# An app's own JSON record that happens to hold keys of Istio's (`response_code`, `path`,
# `start_time`: a request it logs) was read as Istio's access log: its time became the
# request's start (a day early: the record left the window), its level the status's (an
# ERROR shown INFO: `level:error` missed it), its message the request line, its own `uri`
# overwritten by `path`
APP_RECORDS = [
    {
        "ts": "2026-12-04T15:50:00Z", "severity": "ERROR", "msg": "db write failed",
        "response_code": 200, "path": "/x", "start_time": "2026-12-04T15:49:59Z",
    },
    {
        "time": "2026-12-04T15:50:01Z", "lvl": "error", "message": "upstream failed",
        "response_code": 200, "path": "/y", "uri": "/real", "start_time": "2026-12-03T08:00:00Z",
    },
    {
        "@timestamp": "2026-12-04T15:50:02Z", "log.level": "error", "message": "boom",
        "response_code": "200", "response_flags": "-", "start_time": "2026-12-04T15:49:00Z",
    },
]  # fmt: skip


def test_an_apps_json_record_with_istios_keys_keeps_its_own_time_level_and_message(
    tmp_path: Path,
) -> None:
    import json

    text = "".join(json.dumps(r) + "\n" for r in APP_RECORDS)
    found = search_written(tmp_path, "jsonl", text, "level:error", now=NOW)
    assert found.match_count == 3
    assert sorted(r.message for r in found.records) == [
        "boom", "db write failed", "upstream failed",
    ]  # fmt: skip
    assert sorted(r.timestamp for r in found.records) == [
        "2026-12-04T15:50:00.000Z", "2026-12-04T15:50:01.000Z", "2026-12-04T15:50:02.000Z",
    ]  # fmt: skip
    (second,) = [r for r in found.records if r.message == "upstream failed"]
    assert second.fields["uri"] == "/real" and second.fields["path"] == "/y"
