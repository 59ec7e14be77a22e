"""Docker `json-file` lines with `attrs`: what the daemon adds to every line when it runs a
container with `--log-opt labels=...`, `env=...` (`env-regex`, `labels-regex`) or `tag=...`.

The lines are written as moby's `jsonlog.JSONLogs.MarshalJSONBuf` writes them (`log`,
`stream`, `attrs` as Go's `json.Marshal` of a `map[string]string`: keys sorted, `<>&`
escaped, then `time`); no Docker daemon runs here to record them. An `env` value is the
container's environment, which often holds a secret: a key that names one is masked `***`, as
is a URL's password in any value.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest
from logs_helpers import file_source, project, search

from contracts.views import encode_view
from workers.sources.logs.check import check_logs
from workers.sources.logs.config import parse_logs_config
from workers.sources.logs.file_source import FileLogSource
from workers.sources.logs.formats import MAX_FIELDS
from workers.sources.logs.masking import secret_name

NOW = 1_796_413_700.0
CID = "4f" * 32


def docker_line(log: str, attrs: dict[str, str], i: int = 0, stream: str = "stdout") -> str:
    body = {"log": log, "stream": stream, "attrs": dict(sorted(attrs.items()))}
    head = msgspec.json.encode(body).decode()[:-1]
    head = head.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return head + f',"time":"2026-12-04T19:46:37.{i:06d}123Z"}}\n'


ATTRS = {
    "com.example.team": "payments",
    "tag": "orders/4f4f4f4f4f4f",
    "DB_PASSWORD": "hunter2",
    "STRIPE_API_KEY": "sk_live_51H",
    "GITHUB_TOKEN": "ghp_x1",
    "DATABASE_URL": "postgres://orders:s3cret@db:5432/orders?sslmode=require",
    "AWS_SECRET_ACCESS_KEY": "wJalr",
    "MONKEY_BUSINESS": "bananas",
    "KEYSPACE": "orders_ks",
}


def write(tmp_path: Path, lines: list[str]) -> Path:
    folder = tmp_path / "containers" / CID
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{CID}-json.log"
    path.write_text("".join(lines))
    os.utime(path, (NOW - 60, NOW - 60))
    return path


def source(tmp_path: Path) -> FileLogSource:
    return file_source(tmp_path, "docker", [f"containers/{CID}/*-json.log"], now=NOW)


def test_attrs_are_fields_and_secrets_are_masked(tmp_path: Path) -> None:
    lines = [
        docker_line("order o-1042 placed <ok> & paid\n", ATTRS, 0),
        docker_line(
            '{"level":"error","ts":1796413597.0,"msg":"charge failed","tag":"app-own"}\n', ATTRS, 1
        ),
    ]
    write(tmp_path, lines)
    found = search(source(tmp_path), "", lookback=1440)
    assert found.match_count == 2 and not found.unparsed_lines
    plain, app = sorted(found.records, key=lambda r: r.message)[::-1]
    assert plain.message == "order o-1042 placed <ok> & paid"
    assert plain.fields["com_example_team"] == "payments"
    assert plain.fields["tag"] == "orders/4f4f4f4f4f4f"
    assert plain.fields["container_id"] == CID[:12] and plain.fields["stream"] == "stdout"
    for secret in ("DB_PASSWORD", "STRIPE_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY"):
        assert plain.fields[secret] == "***"
    assert plain.fields["DATABASE_URL"] == "postgres://orders:***@db:5432/orders?sslmode=require"
    assert plain.fields["MONKEY_BUSINESS"] == "bananas" and plain.fields["KEYSPACE"] == "orders_ks"
    # the app's own field of the same name wins; its level and message are read as before
    assert (
        app.level == "ERROR" and app.message == "charge failed" and app.fields["tag"] == "app-own"
    )
    assert app.fields["com_example_team"] == "payments"
    # found by their values as words, and `tag` by name; never by a secret
    src = source(tmp_path)
    assert search(src, "payments", lookback=1440).match_count == 2
    assert search(src, "tag:orders/4f4f", lookback=1440).match_count == 1
    for secret in ("hunter2", "sk_live", "ghp_x1", "s3cret", "wJalr"):
        assert search(src, secret, lookback=1440).match_count == 0
    view = encode_view(project(found))
    for secret in (b"hunter2", b"sk_live", b"ghp_x1", b"s3cret", b"wJalr"):
        assert secret not in view


def test_attrs_are_bounded_like_other_fields(tmp_path: Path) -> None:
    many = {f"com.example.label{n:03d}": "v" * 10 for n in range(300)}
    write(tmp_path, [docker_line("hello\n", many)])
    (record,) = search(source(tmp_path), "hello", lookback=1440).records
    assert len(record.fields) <= MAX_FIELDS + 1
    assert isinstance(record.fields["fields_dropped"], int)
    assert record.fields["fields_dropped"] >= 300 - MAX_FIELDS


def test_a_line_without_attrs_is_read_as_before(tmp_path: Path) -> None:
    line = docker_line("hello\n", {}).replace(',"attrs":{}', "")
    assert '"attrs"' not in line
    write(tmp_path, [line])
    (record,) = search(source(tmp_path), "hello", lookback=1440).records
    assert record.fields == {"stream": "stdout", "container_id": CID[:12]}


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("DB_PASSWORD", True), ("PGPASS", True), ("passwd", True), ("SSH_PASSPHRASE", True),
        ("client_secret", True), ("GITHUB_TOKEN", True), ("accessToken", True),
        ("GOOGLE_APPLICATION_CREDENTIALS", True), ("PRIVATE_KEY_PEM", True), ("key", True),
        ("STRIPE_API_KEY", True), ("apikey", True), ("AUTH", True), ("basic.auth", True),
        ("MONKEY", False), ("KEYSPACE", False), ("passenger", False), ("AUTHOR", False),
        ("com.example.team", False), ("tag", False), ("PATH", False), ("HOSTNAME", False),
    ],
)  # fmt: skip
def test_which_names_are_secrets(name: str, secret: bool) -> None:
    assert secret_name(name) is secret


def test_a_line_cut_short_shows_no_secret_as_text(tmp_path: Path) -> None:
    # A full disk cuts the last line inside its attrs: a line not in the format, matched as
    # text by a query of words, shown without the secret; `check` shows it so too.
    whole = docker_line("order o-1042 placed\n", ATTRS, 1)
    cut = whole[: whole.index("sk_live") + 4]
    assert "hunter2" in cut
    write(tmp_path, [docker_line("hello\n", ATTRS, 0), cut])
    src = source(tmp_path)
    found = search(src, "o-1042", lookback=1440)
    assert found.match_count == 1 and found.unparsed_lines == 1
    (line,) = found.records
    assert '"DB_PASSWORD":"***"' in line.message and '"STRIPE_API_KEY":"***' in line.message
    assert "hunter2" not in line.message and "sk_l" not in line.message
    assert "postgres://orders:***@db" in line.message
    assert search(src, "hunter2", lookback=1440).match_count == 0
    config = parse_logs_config(
        f'roots = ["{tmp_path}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "docker"\n'
        f'paths = ["{tmp_path}/containers/{CID}/*-json.log"]\n'
    )
    (topic,) = check_logs(config, NOW)
    (file,) = topic.sources[0].files
    assert file.unparsed == 1 and file.example and "hunter2" not in file.example


# Secrets an `env=` copy carries that a name or a URL alone did not catch (each value holds
# `tokN`, none of which may reach any output).
MORE_ATTRS = {
    "Authorization": "Bearer eyJhbGciOi.tok1",
    "DB_PWD": "tok2",
    "SESSION_COOKIE": "tok3",
    "JWT": "eyJ.tok4",
    "SENTRY_DSN": "https://tok5@o1.ingest.sentry.io/1",
    "JAVA_OPTS": "-Xmx1g -Dspring.datasource.password=tok6 -Duser.timezone=UTC",
    "MSSQL_CONNECTION": "Server=db;User Id=sa;Password=tok7;Encrypt=true",
    "EXTRA_HEADERS": "X-Api-Key: tok8",
    "REDIS_URL": "redis://:tok9@cache:6379/0",
    "DATABASE_URL": "postgres://orders:p@ss-tok10@db:5432/orders",
    "UPSTREAM": "Bearer tok11",
    "CREDS": "tok12",
}


def test_secrets_inside_values_and_under_more_names_are_masked(tmp_path: Path) -> None:
    attrs = {**MORE_ATTRS, "LOG_LEVEL": "info", "TIMEOUT": "30s", "com.example.team": "payments"}
    whole = docker_line("order o-1042 placed\n", attrs, 1)
    write(tmp_path, [whole, whole[: whole.index('"time"') - 2]])  # and one cut short, as text
    src = source(tmp_path)
    found = search(src, "o-1042", lookback=1440)
    assert found.match_count == 2 and found.unparsed_lines == 1
    record = next(r for r in found.records if r.fields)
    assert record.fields["LOG_LEVEL"] == "info" and record.fields["TIMEOUT"] == "30s"
    assert record.fields["com_example_team"] == "payments"
    assert (
        record.fields["JAVA_OPTS"] == "-Xmx1g -Dspring.datasource.password=*** -Duser.timezone=UTC"
    )
    assert record.fields["DATABASE_URL"] == "postgres://orders:***@db:5432/orders"
    shown = encode_view(project(found)) + msgspec.json.encode(found)
    leaked = [f"tok{n}" for n in range(1, 13) if f"tok{n}".encode() in shown]
    assert leaked == []
    for n in range(1, 13):
        assert search(src, f"tok{n}", lookback=1440).match_count == 0
    config = parse_logs_config(
        f'roots = ["{tmp_path}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "docker"\n'
        f'paths = ["{tmp_path}/containers/{CID}/*-json.log"]\n'
    )
    (topic,) = check_logs(config, NOW)
    example = topic.sources[0].files[0].example
    assert example and not [n for n in range(1, 13) if f"tok{n}" in example]


def test_an_attr_value_that_is_no_string_is_masked_inside(tmp_path: Path) -> None:
    line = docker_line("hello\n", {}).replace(
        '"attrs":{}', '"attrs":{"cfg":{"db_password":"tok1"}}'
    )
    write(tmp_path, [line])
    (record,) = search(source(tmp_path), "hello", lookback=1440).records
    assert "tok1" not in str(record.fields["cfg"])


def test_a_json_escaped_url_in_an_example_line_loses_its_password() -> None:
    from workers.sources.logs.masking import without_secrets

    line = '{"msg":"connecting","dsn":"mysql:\\/\\/root:tok1@db\\/app"}'
    assert "tok1" not in without_secrets(line)
    # a header's name and its scheme both say secret: the credential after them is masked too
    assert "dXNlcjpwYXNz" not in without_secrets("Authorization: Basic dXNlcjpwYXNz")


def test_a_quoted_password_inside_an_attr_value_is_masked(tmp_path: Path) -> None:
    # a value holding a config dump or a libpq conninfo: the password under its name quoted
    # (Python's dict, JSON with spaces, a value with a space) was shown whole
    attrs = {
        "APP_CONFIG": "{'host': 'db', 'password': 'tok13'}",
        "APP_JSON": '{"user": "app", "password": "tok14"}',
        "PGOPTS": 'host=db password="tok 15" sslmode=require',
        "DB_URL": "postgres://app:tok16 x@db/app",
    }
    write(tmp_path, [docker_line("hello\n", attrs)])
    found = search(source(tmp_path), "hello", lookback=1440)
    (record,) = found.records
    assert record.fields["APP_CONFIG"] == "{'host': 'db', 'password': '***'}"
    assert record.fields["PGOPTS"] == 'host=db password="***" sslmode=require'
    shown = encode_view(project(found)) + msgspec.json.encode(found)
    assert [n for n in (13, 14, 15, 16) if f"tok{n}".encode() in shown] == []
