"""`ACI_LOGS_CONFIG`: validated at worker start, one-line errors naming the key; the router."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from contracts import ErrorCode, QueryLogsRequest, Topic
from workers.sources import SourceError, open_sources
from workers.sources.logs.config import LogsConfigError, parse_logs_config
from workers.sources.logs.router import LogRouter, logs_source_from_env
from workers.sources.logs.source import MockLogSource

FILE_TOPIC = '[topics.APPLICATION]\nbackend = "file"\npaths = ["/var/log/shop/*.jsonl*"]\n'


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("x = [", "not valid TOML"),
        ("", "topics: give at least one"),
        ('[topics.APPLICATIO]\nbackend = "mock"\n', "topics.APPLICATIO: unknown topic"),
        ('[topics.APPLICATION]\nbackend = "loki"\n', "topics.APPLICATION.backend: Invalid value"),
        ('[topics.APPLICATION]\nscenario = "x"\n', "topics.APPLICATION.backend: missing key"),
        (
            '[topics.APPLICATION]\nbackend = "file"\nformat = "jsonl"\n',
            "topics.APPLICATION.paths: missing key",
        ),
        (
            'roots = ["/var/log"]\n' + FILE_TOPIC + 'format = "json"\n',
            "topics.APPLICATION.format: Invalid enum value 'json' (one of jsonl",
        ),
        (
            'roots = ["/var/log"]\n' + FILE_TOPIC + 'format = "jsonl"\nfoo = 1\n',
            "topics.APPLICATION.foo: unknown key",
        ),
        (
            FILE_TOPIC + 'format = "jsonl"\n',
            'topics.APPLICATION.paths[0]: not under any of roots (none set: add its folder, e.g. roots = ["',
        ),
        (
            'roots = ["/var/log"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "jsonl"\npaths = ["/var/log/**/a.log"]\n',
            "topics.APPLICATION.paths[0]: '**' (any depth) is not supported",
        ),
        (
            'roots = ["/var/log"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "jsonl"\npaths = ["/var/log/../etc/passwd"]\n',
            'not under any of roots (roots = ["/var/log"])',
        ),
        (
            'roots = ["/proc"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "jsonl"\npaths = ["/proc/self/environ"]\n',
            "roots[0]: /proc, /sys and /dev are not log roots",
        ),
        ('roots = ["/sys/kernel"]\n[topics.APPLICATION]\nbackend = "mock"\n', "roots[0]: /proc"),
        (
            'roots = ["var/log"]\n[topics.APPLICATION]\nbackend = "mock"\n',
            "roots[0]: must be an absolute",
        ),
        (
            'timezone = "Mars/Base"\n[topics.APPLICATION]\nbackend = "mock"\n',
            "timezone: unknown time zone",
        ),
        (  # before: "Expected `str | null`, got `int`": what to write is said now
            'roots = ["/var/log"]\n' + FILE_TOPIC + 'format = "jsonl"\ntimezone = 8\n',
            'topics.APPLICATION.timezone: a string: an IANA zone or an offset ("Asia/Shanghai", '
            '"+08:00")',
        ),
        ('bogus = 1\n[topics.APPLICATION]\nbackend = "mock"\n', "bogus: unknown key"),
        (
            '[scan]\nmax_seconds = 0\n[topics.APPLICATION]\nbackend = "mock"\n',
            "scan: max_seconds must be in",
        ),
        (
            '[topics.APPLICATION]\nbackend = "clickhouse"\n',
            "topics.APPLICATION: backend clickhouse needs a [clickhouse] section",
        ),
        (
            '[clickhouse]\ndsn = "tcp://x"\n[topics.APPLICATION]\nbackend = "clickhouse"\n',
            "clickhouse: dsn: must start with",
        ),
        (
            '[clickhouse]\ndsn = "chdb://memory"\n[topics.APPLICATION]\nbackend = "clickhouse"\ntable = "a;b"\n',
            "topics.APPLICATION.table: a table name",
        ),
        (
            'default_lookback = 30\n[topics.APPLICATION]\nbackend = "mock"\n',
            "default_lookback: set ACI_LOGS_DEFAULT_LOOKBACK instead",
        ),
        # a query reads field names lowercase: `durationMillis` could never be named (before:
        # accepted, listed among the valid fields, and every query for it "unknown field")
        (
            'roots = ["/var/log"]\n' + FILE_TOPIC + 'format = "jsonl"\n'
            '[topics.APPLICATION.fields]\ndurationMillis = "attr.durationMillis"\n',
            "topics.APPLICATION.fields.durationMillis: a field name is lowercase letters, digits "
            "and _ (a query reads field names lowercase: durationmillis)",
        ),
        # the same in a ClickHouse topic: its `fields` are LogAttributes keys, looked up by the
        # lowercase name the query gives (before: accepted, and every query "unknown field")
        (
            '[clickhouse]\ndsn = "chdb://x"\n[topics.APPLICATION]\nbackend = "clickhouse"\n'
            'fields = ["http_status", "durationMillis"]\n',
            "topics.APPLICATION.fields: 'durationMillis': a field name is lowercase letters, "
            "digits and _ (a query reads field names lowercase: durationmillis)",
        ),
        (
            'roots = ["/var/log"]\n' + FILE_TOPIC + 'format = "regex"\n'
            "pattern = '(?P<time>\\S+) (?P<reqTime>\\d+) (?P<message>.*)'\n",
            "topics.APPLICATION.pattern: group 'reqTime' is not a field name (lowercase letters",
        ),
    ],
)
def test_every_mistake_is_one_line_naming_the_key(text: str, says: str) -> None:
    with pytest.raises(LogsConfigError) as caught:
        parse_logs_config(text)
    message = str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert message.startswith("ACI_LOGS_CONFIG: ") and "\n" not in message
    assert says in message, message


# A new user's first mistakes (an on-call pass): each error says what to write instead.
# Before: `unknown key` alone, `must be absolute` for a `~`, and `[topic.APPLICATION]` (the
# singular) said only "give at least one [topics.<TOPIC>] table".
_SOURCE = 'roots = ["/var/log"]\n' + FILE_TOPIC + 'format = "jsonl"\n'


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            'roots = ["/var/log"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "jsonl"\n'
            'path = ["/var/log/a.log"]\n',
            "topics.APPLICATION.path: unknown key (did you mean paths?)",
        ),
        (
            _SOURCE + 'timezome = "UTC"\n',
            "topics.APPLICATION.timezome: unknown key (did you mean timezone?)",
        ),
        (
            _SOURCE
            + '[[topics.APPLICATION.sources]]\npaths = ["/var/log/b.log"]\nformat = "plain"\n'
            'servce = "b"\n',
            "topics.APPLICATION.sources[0].servce: unknown key (did you mean service?)",
        ),
        (
            _SOURCE + '[topics.APPLICATION.source]\npaths = ["/var/log/b.log"]\n',
            "topics.APPLICATION.source: unknown key (did you mean sources? each one a "
            "[[topics.APPLICATION.sources]] table)",
        ),
        (
            'root = ["/var/log"]\n[topics.APPLICATION]\nbackend = "mock"\n',
            "root: unknown key (did you mean roots?)",
        ),
        (
            '[scan]\nmax_line_byte = 5\n[topics.APPLICATION]\nbackend = "mock"\n',
            "scan.max_line_byte: unknown key (did you mean max_line_bytes?)",
        ),
        (
            _SOURCE + "colour = 1\n",
            "topics.APPLICATION.colour: unknown key (one of backend, paths, format, fields, "
            "timezone, service, time_unit, pattern, time_format, sources)",
        ),
        (
            'roots = ["/var/log"]\n[topic.APPLICATION]\nbackend = "mock"\n',
            "topics: give at least one [topics.<TOPIC>] table (the file has [topic.APPLICATION]: "
            "did you mean [topics.APPLICATION]?)",
        ),
        (
            'roots = ["/home/me/logs"]\n[topics.APPLICATION]\nbackend = "file"\n'
            'format = "jsonl"\npaths = ["~/logs/*.log"]\n',
            "topics.APPLICATION.paths: '~/logs/*.log' must be absolute (~ is not expanded: "
            f"write the home folder out, {os.path.expanduser('~/logs/*.log')})",
        ),
        (
            'roots = ["~/logs"]\n[topics.APPLICATION]\nbackend = "mock"\n',
            "roots[0]: must be an absolute folder below / (~ is not expanded: write the home "
            f"folder out, {os.path.expanduser('~/logs')})",
        ),
    ],
)
def test_a_new_users_mistake_says_what_to_write(text: str, says: str) -> None:
    with pytest.raises(LogsConfigError) as caught:
        parse_logs_config(text)
    assert says in str(caught.value), str(caught.value)


def test_a_mistake_in_the_file_names_its_key_not_the_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret-location.toml"
    secret.write_text("x = [")
    with pytest.raises(LogsConfigError) as caught:
        logs_source_from_env({"ACI_LOGS_CONFIG": str(secret)})
    assert "secret-location" not in str(caught.value)


def test_a_file_it_cannot_read_is_named_never_its_contents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The operator's own path, as given (before: "cannot read the file" named no path,
    # confusing with a relative one, read from the worker's working folder).
    missing = tmp_path / "missing.toml"
    with pytest.raises(LogsConfigError) as caught:
        logs_source_from_env({"ACI_LOGS_CONFIG": str(missing)})
    assert str(caught.value) == (
        f"ACI_LOGS_CONFIG: cannot read the file '{missing}' (No such file or directory)"
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LogsConfigError) as caught:
        logs_source_from_env({"ACI_LOGS_CONFIG": "conf/logs.toml"})
    assert str(caught.value) == (
        "ACI_LOGS_CONFIG: cannot read the file 'conf/logs.toml' (No such file or directory; "
        f"a relative path is read from the working folder {tmp_path})"
    )
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(LogsConfigError, match=r"^ACI_LOGS_CONFIG: 'fifo' is not a regular file$"):
        logs_source_from_env({"ACI_LOGS_CONFIG": "fifo"})
    # a name with a terminal escape is shown escaped, on one line
    with pytest.raises(LogsConfigError) as caught:
        logs_source_from_env({"ACI_LOGS_CONFIG": "a\x1b]0;x\x07\nb.toml"})
    assert "'a\\x1b]0;x\\x07\\nb.toml'" in str(caught.value)
    assert "\x1b" not in str(caught.value) and "\n" not in str(caught.value)
    # what the file holds never reaches the message: a password written in it by mistake
    for name, data in (("latin.toml", b"password = 'hunter2\xe9'\n"),
                       ("big.toml", b"# hunter2\n" + b" " * (1024 * 1024))):  # fmt: skip
        (tmp_path / name).write_bytes(data)
        with pytest.raises(LogsConfigError) as caught:
            logs_source_from_env({"ACI_LOGS_CONFIG": name})
        assert f"the file '{name}' " in str(caught.value) and "hunter2" not in str(caught.value)


def test_without_the_variable_mock_stays_the_default() -> None:
    assert isinstance(logs_source_from_env({}), MockLogSource)


async def test_a_topic_the_file_leaves_out_is_an_error_not_no_evidence(tmp_path: Path) -> None:
    config = tmp_path / "logs.toml"
    config.write_text('[topics.APPLICATION]\nbackend = "mock"\n')
    router = logs_source_from_env({"ACI_LOGS_CONFIG": str(config)})
    assert isinstance(router, LogRouter)
    found = await router.fetch(QueryLogsRequest(topic=Topic.APPLICATION, query="timeout"))
    assert found.source_kind == "MOCK" and found.match_count > 0
    with pytest.raises(SourceError) as caught:
        await router.fetch(QueryLogsRequest(topic=Topic.SYSTEM_EVENTS, query=""))
    assert caught.value.code is ErrorCode.UNAVAILABLE
    assert "SYSTEM_EVENTS is not configured" in caught.value.message
    await router.aclose()


async def test_the_worker_refuses_to_start_on_a_bad_file(tmp_path: Path) -> None:
    config = tmp_path / "logs.toml"
    config.write_text('[topics.APPLICATION]\nbackend = "file"\n')
    with pytest.raises(LogsConfigError, match=r"topics\.APPLICATION\.paths: missing key"):
        async with open_sources({"ACI_LOGS_CONFIG": str(config)}, only=("query_logs",)):
            pass


def test_the_default_lookback_is_the_pipelines(tmp_path: Path) -> None:
    from workers.sources.logs.config import load_logs_config

    config = tmp_path / "logs.toml"
    config.write_text('[topics.APPLICATION]\nbackend = "mock"\n')
    loaded = load_logs_config({"ACI_LOGS_CONFIG": str(config), "ACI_LOGS_DEFAULT_LOOKBACK": "15"})
    assert loaded is not None and loaded.default_lookback == 15
    with pytest.raises(LogsConfigError, match="ACI_LOGS_DEFAULT_LOOKBACK"):
        load_logs_config({"ACI_LOGS_CONFIG": str(config), "ACI_LOGS_DEFAULT_LOOKBACK": "0"})
