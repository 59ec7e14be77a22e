"""`check` over JSON lines whose message (level) sits under a key `jsonl` does not know: it
names the records without one and the key of the first line that holds text (a level word)
to map in `fields`. Before, it said "everything reads well" while every record's message was
empty (one empty template for all: Azure Monitor's `Log_s`, a Cloud Logging export before
`cloudlogging`) and every record level-less (a `sev` key).
"""

from __future__ import annotations

import time
from pathlib import Path

import msgspec

from workers.sources.logs.check import check_logs
from workers.sources.logs.config import parse_logs_config


def problems(tmp_path: Path, records: list[dict[str, object]], fields: str = "") -> list[str]:
    (tmp_path / "app.json").write_text(
        "".join(msgspec.json.encode(r).decode() + "\n" for r in records)
    )
    config = parse_logs_config(
        f'roots = ["{tmp_path}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "jsonl"\n'
        f'paths = ["{tmp_path}/app.json"]\n{fields}'
    )
    (topic,) = check_logs(config, time.time())
    return topic.problems()


def test_the_keys_to_map_are_named(tmp_path: Path) -> None:
    records: list[dict[str, object]] = [
        {"TimeGenerated": "2026-12-04T11:50:00Z", "ContainerAppName_s": "orders",
         "Log_s": "payment gateway timeout for o-1042", "sev": "error"},
        {"TimeGenerated": "2026-12-04T11:50:01Z", "ContainerAppName_s": "orders",
         "Log_s": "retrying", "sev": "warning"},
    ]  # fmt: skip
    fields = '[topics.APPLICATION.fields]\ntime = "TimeGenerated"\n'
    where = f"APPLICATION: {tmp_path}/app.json"
    assert problems(tmp_path, records, fields) == [
        f'{where}: 2 of 2 records have no message (no key jsonl reads as one); "Log_s" holds '
        'text: [topics.APPLICATION.fields] message = "Log_s"',
        f'{where}: 2 of 2 records have no level (no key jsonl reads as one); "sev" holds one: '
        '[topics.APPLICATION.fields] level = "sev"',
    ]
    fields += 'message = "Log_s"\nlevel = "sev"\n'
    assert problems(tmp_path, records, fields) == []


def test_a_record_that_reads_well_is_no_problem(tmp_path: Path) -> None:
    records: list[dict[str, object]] = [
        {"ts": "2026-12-04T11:50:00Z", "level": "info", "msg": "started"},
        {"ts": "2026-12-04T11:50:01Z", "msg": "no level here", "kind": "request"},
        {"ts": "2026-12-04T11:50:02Z", "level": "error", "msg": "failed"},
    ]
    assert problems(tmp_path, records) == []


def test_no_key_to_name_says_only_what_is_missing(tmp_path: Path) -> None:
    records: list[dict[str, object]] = [{"ts": "2026-12-04T11:50:00Z", "n": 1, "ok": True}]
    assert problems(tmp_path, records) == [
        f"APPLICATION: {tmp_path}/app.json: 1 of 1 records have no message (no key jsonl reads "
        "as one)"
    ]


def logfmt_problems(tmp_path: Path, text: str, fields: str = "") -> list[str]:
    (tmp_path / "app.log").write_text(text)
    config = parse_logs_config(
        f'roots = ["{tmp_path}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "logfmt"\n'
        f'paths = ["{tmp_path}/app.log"]\n{fields}'
    )
    (topic,) = check_logs(config, time.time())
    return topic.problems()


def test_logfmt_keys_to_map_are_named(tmp_path: Path) -> None:
    text = (
        'ts=2026-12-04T11:50:00Z sev=error app=orders text="payment gateway timeout"\n'
        'ts=2026-12-04T11:50:01Z sev=warn app=orders text="retrying now"\n'
    )
    where = f"APPLICATION: {tmp_path}/app.log"
    assert logfmt_problems(tmp_path, text) == [
        f'{where}: 2 of 2 records have no message (no key logfmt reads as one); "text" holds '
        'text: [topics.APPLICATION.fields] message = "text"',
        f'{where}: 2 of 2 records have no level (no key logfmt reads as one); "sev" holds one: '
        '[topics.APPLICATION.fields] level = "sev"',
    ]
    fields = '[topics.APPLICATION.fields]\nmessage = "text"\nlevel = "sev"\n'
    assert logfmt_problems(tmp_path, text, fields) == []


def test_logfmt_time_key_is_named(tmp_path: Path) -> None:
    text = 'when=2026-12-04T11:50:00Z level=error msg="payment gateway timeout"\n'
    assert logfmt_problems(tmp_path, text) == [
        f"APPLICATION: {tmp_path}/app.log: no line is in format logfmt: no key it reads as the "
        'time; "when" holds one: [topics.APPLICATION.fields] time = "when"'
    ]
