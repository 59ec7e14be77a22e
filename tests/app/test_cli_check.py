"""`aci-evidence check`: a new user's log configuration checked against their files before
any worker serves it: what each file reads as, what does not, and the format that would."""

from __future__ import annotations

import calendar
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from workers.sources.logs.check import check_logs
from workers.sources.logs.config import LogsConfig, parse_logs_config
from workers.sources.logs.router import LogRouter

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "tests" / "workers" / "logs_samples"


def check(
    config: Path | None, *flags: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ACI_")}, **(env or {})}
    if config is not None:
        env["ACI_LOGS_CONFIG"] = str(config)
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "check", *flags],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def plain_config(logs: Path) -> LogsConfig:
    """One file topic, APPLICATION: every `*.log` of `logs` in format plain."""
    return parse_logs_config(
        f'roots = ["{logs}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "plain"\n'
        f'paths = ["{logs}/*.log"]\n'
    )


def plain_topic(tmp_path: Path, text: str, glob: str = "app.log") -> tuple[Path, Path]:
    """`logs/app.log` holding `text`, and a config file of one plain topic over `glob` in that
    folder: (the folder, the config file)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log").write_text(text)
    config = tmp_path / "logs.toml"
    config.write_text(
        f'roots = ["{logs}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "plain"\n'
        f'paths = ["{logs}/{glob}"]\n'
    )
    return logs, config


def setup(tmp_path: Path, fmt: str, *names: str, extra: str = "") -> Path:
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in names:
        shutil.copy(SAMPLES / name, logs / name)
    config = tmp_path / "logs.toml"
    config.write_text(
        f'roots = ["{logs}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "{fmt}"\n'
        f'paths = ["{logs}/*.log"]\n{extra}[topics.SYSTEM_EVENTS]\nbackend = "mock"\n'
    )
    return config


def test_a_wrong_format_is_named_with_the_one_that_reads_the_file(tmp_path: Path) -> None:
    done = check(setup(tmp_path, "syslog", "nats-server.log"))
    assert done.returncode == 1, done.stderr
    logs = tmp_path / "logs"
    assert f"{logs}/nats-server.log: 22 lines: 0 records, 22 lines not in the format" in done.stdout
    assert "not in the format: [2986] 2026/12/04 19:33:23.069006 [INF] Starting" in done.stdout
    assert (
        f'APPLICATION: {logs}/nats-server.log: format = "plain" reads 22 of 22 lines (syslog: 0)'
        in done.stdout
    )
    assert "SYSTEM_EVENTS (mock)" in done.stdout and not done.stderr


def test_a_configuration_that_reads_well_exits_0_and_json_says_the_same(tmp_path: Path) -> None:
    config = setup(tmp_path, "plain", "nats-server.log", "mosquitto.log")
    done = check(config)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.endswith("everything reads well\n")
    as_json = check(config, "--json")
    assert as_json.returncode == 0
    (body,) = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert body["problems"] == []
    files = {Path(f["path"]).name: f for f in body["topics"][0]["sources"][0]["files"]}
    assert files["mosquitto.log"]["records"] == 13
    assert files["mosquitto.log"]["first"] == "2026-12-04T19:46:48.000Z"
    assert files["nats-server.log"]["unparsed"] == 0


def test_no_configuration_is_said_and_a_broken_one_is_one_line(tmp_path: Path) -> None:
    unset = check(None)
    assert unset.returncode == 0 and "ACI_LOGS_CONFIG is not set" in unset.stdout
    missing = check(tmp_path / "nope.toml")
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.strip().splitlines() == [
        f"configuration error: ACI_LOGS_CONFIG: cannot read the file '{tmp_path}/nope.toml' "
        "(No such file or directory)"
    ]


def test_no_file_a_wrong_timezone_and_a_hostile_line(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    soon = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() + 3600))
    # a terminal's title sequence is removed from a file's bytes when they are read; control
    # characters that are no sequence are shown escaped, never raw (the line comes first: an
    # indented line after a record would be read as the record's continuation)
    (logs / "app.log").write_text(f"\x1b]0;pwned\x07\x08\x1bZ not a record\n{soon} INFO started\n")
    config = tmp_path / "logs.toml"
    config.write_text(
        f'roots = ["{logs}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "plain"\n'
        f'paths = ["{logs}/app.log"]\ntimezone = "UTC"\n'  # written in UTC+2, say: an hour ahead
        f'[topics.SYSTEM_EVENTS]\nbackend = "file"\nformat = "syslog"\npaths = ["{logs}/x/*"]\n'
    )
    done = check(config)
    assert done.returncode == 1
    assert f"APPLICATION: {logs}/app.log: 1 records dated in the future" in done.stdout
    assert f"SYSTEM_EVENTS: {logs}/x/*: no file matches" in done.stdout
    assert "\x1b" not in done.stdout and "\x08" not in done.stdout and "pwned" not in done.stdout
    assert "not in the format: \\x08\\x1bZ not a record" in done.stdout


def test_check_logs_reads_only_the_newest_files_first_lines(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "big.log").write_text("2026-12-04 19:00:00 INFO x\n" * 5000)
    config = plain_config(logs)
    (topic,) = check_logs(config, time.time())
    (file,) = topic.sources[0].files
    assert (file.lines, file.records, file.unparsed) == (2000, 2000, 0)
    assert topic.problems() == []


def test_a_line_over_the_cap_and_a_broken_archive_are_said_as_what_they_are(
    tmp_path: Path,
) -> None:
    # Both were "replaced or unreadable since it was listed" (a line over max_line_bytes, a
    # truncated gzip) or nothing at all when some lines were read before them.
    import gzip

    logs = tmp_path / "logs"
    logs.mkdir()
    good = "2026-12-04 19:00:00 INFO x\n"
    (logs / "a-long.log").write_text("y" * 300 + "\n")
    (logs / "b-long-then-good.log").write_text(good + "y" * 300 + "\n" + good)
    whole = gzip.compress((good * 200).encode())
    (logs / "c-cut.log.1").write_bytes(whole[: len(whole) // 2])
    zstandard = pytest.importorskip("zstandard")
    whole = zstandard.ZstdCompressor().compress((good * 200).encode())
    (logs / "d-cut.log.2").write_bytes(whole[: len(whole) // 2])  # zstd: no error of its own
    config = parse_logs_config(
        f'roots = ["{logs}"]\n[scan]\nmax_line_bytes = 100\n[topics.APPLICATION]\n'
        f'backend = "file"\nformat = "plain"\npaths = ["{logs}/*"]\n'
    )
    (topic,) = check_logs(config, time.time())
    files = {Path(f.path).name: f for f in topic.sources[0].files}
    # what to do, and to what (a new user's pass: "skipped" alone did not say that every call
    # over the file whose query the line might match is a lower bound, or an ERROR when
    # nothing else matches)
    long = (
        "1 lines longer than max_line_bytes (100) skipped (the longest 301 bytes): a call "
        "they may match is a lower bound, an ERROR when nothing else matches; raise [scan] "
        "max_line_bytes above it to read them"
    )
    assert files["a-long.log"].unread == long
    assert files["b-long-then-good.log"].records == 2
    assert files["b-long-then-good.log"].unread == long
    cut = "a compressed file cut short (its end is missing): read up to the cut"
    assert files["c-cut.log.1"].unread == files["d-cut.log.2"].unread == cut
    problems = topic.problems()
    assert f"APPLICATION: {logs}/b-long-then-good.log: partly read: {long}" in problems
    assert f"APPLICATION: {logs}/a-long.log: not read: {long}" in problems
    assert not any("replaced or unreadable" in p for p in problems)


def test_a_password_in_a_dsn_of_the_example_line_is_not_printed(tmp_path: Path) -> None:
    # The first line not in the format is shown; an app that logs its DSN at start put the
    # password in check's output (a terminal, a ticket the output is pasted into).
    _, config = plain_topic(
        tmp_path,
        "connecting to postgresql://orders:hunter2@db.internal:5432/orders?sslmode=require\n"
        "2026-12-04 19:00:00 INFO started\n",
    )
    for flags in ((), ("--json",)):
        done = check(config, *flags)
        assert done.returncode == 0, done.stderr
        assert "hunter2" not in done.stdout
        assert "postgresql://orders:***@db.internal:5432/orders" in done.stdout


def test_container_runtime_lines_read_in_the_apps_format_are_named(tmp_path: Path) -> None:
    # Docker's json-file lines configured as jsonl (each line is JSON: a new user's first
    # choice) and the kubelet's CRI lines as plain (each starts with a time) read "well", every
    # record level-less with the app's JSON or the stream as its message: check said nothing.
    logs = tmp_path / "logs"
    logs.mkdir()
    app = '{"level":"error","ts":1796413597.0,"msg":"payment failed"}'
    (logs / "docker-json.log").write_text(
        '{"log":"' + app.replace('"', '\\"') + '\\n","stream":"stdout",'
        '"time":"2026-12-04T19:46:37.000000001Z"}\n'
    )
    (logs / "cri.log").write_text(f"2026-12-04T19:46:37.000000001Z stdout F {app}\n")
    text = (
        f'roots = ["{logs}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "jsonl"\n'
        f'paths = ["{logs}/docker-json.log"]\n[topics.SYSTEM_EVENTS]\nbackend = "file"\n'
        f'format = "plain"\npaths = ["{logs}/cri.log"]\n'
    )
    problems = [p for topic in check_logs(parse_logs_config(text), time.time()) for p in
                topic.problems()]  # fmt: skip
    assert problems == [
        f'APPLICATION: {logs}/docker-json.log: format = "docker" reads 1 of 1 lines (jsonl: 1), '
        "the app's own time, level and message inside a container runtime's line",
        f'SYSTEM_EVENTS: {logs}/cri.log: format = "cri" reads 1 of 1 lines (plain: 1), '
        "the app's own time, level and message inside a container runtime's line",
    ]


def test_a_sample_of_long_lines_stops_at_its_byte_cap(tmp_path: Path) -> None:
    # 2,000 lines of 120 KB were all held and parsed by 17 formats: a 240 MB file took 5 s
    # and 500 MB of memory for one file, eight per source
    from workers.sources.logs.check import SAMPLE_BYTES

    logs = tmp_path / "logs"
    logs.mkdir()
    line = "2026-12-04 19:00:00 INFO " + "x" * 100_000 + "\n"
    (logs / "wide.log").write_text(line * 400)
    config = plain_config(logs)
    (topic,) = check_logs(config, time.time())
    (file,) = topic.sources[0].files
    assert file.lines == file.records == -(-SAMPLE_BYTES // len(line)) < 400


def test_the_example_is_the_line_not_in_the_format_not_the_one_after_it(tmp_path: Path) -> None:
    # A multi-line format says a record's lines failed when the next head arrives (a month
    # 13, lines past the joined cap): the example shown was that next, good line.
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log").write_text(
        "2026-12-04 10:00:00 INFO first\n2026-13-04 10:00:01 INFO month 13\n"
        "2026-12-04 10:00:02 INFO good\n"
    )
    config = plain_config(logs)
    (topic,) = check_logs(config, time.time())
    (file,) = topic.sources[0].files
    assert (file.records, file.unparsed) == (2, 1)
    assert file.example == "2026-13-04 10:00:01 INFO month 13"


def test_a_format_that_reads_the_lines_but_no_level_is_named_with_one_that_does(
    tmp_path: Path,
) -> None:
    # Python's `%(asctime)s %(name)s %(levelname)s %(message)s`: `plain` reads every line but
    # finds no level in it (the logger's name stands between)
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log").write_text(
        "2026-12-04 20:15:28,123 shop.orders WARNING disk almost full\n"
        "2026-12-04 20:15:29,001 shop.orders ERROR charge failed\n"
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "ValueError: bad\n"
    )
    config = plain_config(logs)
    (topic,) = check_logs(config, time.time())
    assert topic.problems() == [
        f'APPLICATION: {logs}/app.log: format = "log4j" gives 2 of its records a level '
        "(plain: 0 of 2)"
    ]


def test_the_runbook_folder_is_checked_as_the_index_reads_it(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    (kb / "sub").mkdir(parents=True)
    (kb / "sub" / "disk.md").write_text("# Disk full\n\nRun `df -h` on the node.\n")
    (kb / "empty.md").write_text("---\ntitle: draft\n---\n")
    (kb / "big.md").write_text("a" * 3000)
    (kb / "export.adoc").write_text("= Old runbook\n")
    (kb / "page.html").write_text("<h1>x</h1>\n")
    env = {"ACI_KNOWLEDGE_DIR": str(kb), "ACI_KNOWLEDGE_MAX_FILE_BYTES": "2048"}
    done = check(None, env=env)
    assert done.returncode == 1, done.stderr
    assert f"knowledge: {kb}: 3 runbooks, 1 sections" in done.stdout
    assert "  sub/disk.md: 'Disk full', 1 sections" in done.stdout
    assert done.stdout.splitlines()[-3:] == [
        "  knowledge: big.md: 3000 bytes, over ACI_KNOWLEDGE_MAX_FILE_BYTES (2048): not indexed",
        "  knowledge: empty.md: holds no text: nothing of it can be found",
        "  knowledge: 2 files are not runbooks and are not read (1 .adoc, 1 .html)",
    ]
    missing = check(None, env={"ACI_KNOWLEDGE_DIR": str(tmp_path / "nope")})
    assert missing.returncode == 1
    assert (
        f"knowledge: ACI_KNOWLEDGE_DIR {tmp_path}/nope is not a readable folder" in missing.stdout
    )
    # A relative folder is read from the working folder: said (before, only its name).
    relative = check(None, env={"ACI_KNOWLEDGE_DIR": "no-such-runbooks"})
    assert relative.returncode == 1
    assert (
        "knowledge: ACI_KNOWLEDGE_DIR no-such-runbooks is not a readable folder (a relative path"
        f" is read from the working folder {ROOT}): lookups fail" in relative.stdout
    )
    bad = check(None, env={"ACI_KNOWLEDGE_MAX_FILE_BYTES": "12"})
    assert bad.returncode == 2 and "ACI_KNOWLEDGE_MAX_FILE_BYTES must be between" in bad.stderr


def test_a_runbook_that_is_not_utf8_is_listed_with_what_it_was_read_as(tmp_path: Path) -> None:
    # A Big5 runbook was Windows-1252 mojibake, and nothing said how it was read: now it
    # reads, and the listing says so (a note: the exit stays 0).
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "disk.txt").write_bytes("磁碟已滿 /var\n\n清理舊的日誌檔案。\n".encode("big5"))
    (kb / "cache.md").write_bytes("# Procédure\n\nRedémarrer.\n".encode("latin-1"))
    done = check(None, env={"ACI_KNOWLEDGE_DIR": str(kb)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  disk.txt: '磁碟已滿 /var', 1 sections, read as Big5 (traditional Chinese)" in (
        done.stdout
    )
    assert "  cache.md: 'Procédure', 1 sections, read as Windows-1252" in done.stdout


def test_a_dsn_in_a_compact_json_example_line_keeps_its_host_and_the_members_after_it(
    tmp_path: Path,
) -> None:
    # Go's and Node's JSON loggers write no space: the password ran to the mail address of a
    # later member, shown as the DSN's host (`postgres://app:***@example.com`)
    _, config = plain_topic(
        tmp_path,
        '{"db_url":"postgres://app:hunter2@db.internal:5432/app","user":"alice@example.com"}\n'
        "2026-12-04 19:00:00 INFO started\n",
    )
    done = check(config, "--json")
    assert done.returncode == 0, done.stderr
    assert "hunter2" not in done.stdout
    shown = '{"db_url":"postgres://app:***@db.internal:5432/app","user":"alice@example.com"}'
    assert json.dumps(shown)[1:-1] in done.stdout


def test_an_example_line_masks_what_a_record_would(tmp_path: Path) -> None:
    # the example line is no record: it is masked as a record's text would be (a password in
    # SQL, GitHub's `Authorization: token ...`), beside the rules of Docker's attrs
    _, config = plain_topic(
        tmp_path,
        "CREATE USER 'app'@'%' IDENTIFIED BY 'hunter2-sql' -- Authorization: token ghp_x9Z\n"
        "2026-12-04 19:00:00 INFO started\n",
    )
    done = check(config, "--json")
    assert done.returncode == 0, done.stderr
    assert "hunter2-sql" not in done.stdout and "ghp_x9Z" not in done.stdout
    assert "IDENTIFIED BY '***'" in done.stdout


def test_a_refused_source_names_its_path_and_why_not_zero_files(tmp_path: Path) -> None:
    # A symlink out of the roots: the source is refused (AUTHORIZATION, as a call would be).
    # The check said "0 files match" and a problem that named no path; the operator now reads
    # which one. (A fifo was refused the same way: it is now skipped, the test below.)
    logs, config = plain_topic(tmp_path, "2026-12-04 19:00:00 INFO started\n", "app.log*")
    odd = logs / "app.log.pipe"
    (tmp_path / "elsewhere.log").write_text("x\n")
    odd.symlink_to(tmp_path / "elsewhere.log")
    done = check(config)
    assert done.returncode == 1, done.stdout + done.stderr
    why = f"{odd} resolves outside the log roots"
    target = tmp_path / "elsewhere.log"
    assert f"not listed: {target}: {why}: the source is refused" in done.stdout, done.stdout
    assert "0 files match" not in done.stdout


def test_a_fifo_beside_a_log_is_named_as_skipped_and_the_log_is_read(tmp_path: Path) -> None:
    # A shipper's named pipe matched by `app.log*` beside a readable log: a call skips it
    # unopened and reads `app.log`; the check says the same, naming the pipe for the operator.
    logs, config = plain_topic(tmp_path, "2026-12-04 19:00:00 INFO started\n", "app.log*")
    os.mkfifo(logs / "app.log.pipe")
    done = check(config)
    assert done.returncode == 1, done.stdout + done.stderr  # a problem: narrow the glob
    assert "1 file matches" in done.stdout, done.stdout
    assert f"{logs / 'app.log'}: 1 lines: 1 records" in done.stdout, done.stdout
    assert f"{logs / 'app.log.pipe'}: a fifo: skipped" in done.stdout, done.stdout
    assert "the source is refused" not in done.stdout


def test_a_yearless_file_is_dated_by_its_last_write_and_records_after_it_are_said(
    tmp_path: Path,
) -> None:
    # An old syslog (mtime a year back): its records cannot be later than its last write, so
    # `Nov  3` is that year's, not this year's (before: shown as this year's, "reads well").
    # A file whose records lie hours after its own last write is read in a wrong zone (local
    # time written without one): said, where only records after *now* were before.
    logs = tmp_path / "logs"
    logs.mkdir()
    now = calendar.timegm((2026, 12, 5, 3, 0, 0))  # 2026-12-05T03:00Z
    (logs / "messages").write_text(
        "Nov  3 09:23:38 veridian automount[7998]: lookup(file): lookup for foobar failed\n"
    )
    last_year = calendar.timegm((2025, 11, 4, 0, 0, 0))  # its last write, the next day
    os.utime(logs / "messages", (last_year, last_year))
    (logs / "app.log").write_text("2026-12-04 18:00:00 ERROR written in +08:00\n")
    written = now - 17 * 3600  # 2026-12-04T10:00Z, when the line (18:00 at +08:00) was written
    os.utime(logs / "app.log", (written, written))
    config = parse_logs_config(
        f'roots = ["{logs}"]\n[topics.SYSTEM_EVENTS]\nbackend = "file"\nformat = "syslog"\n'
        f'paths = ["{logs}/messages"]\n[topics.APPLICATION]\nbackend = "file"\n'
        f'format = "plain"\npaths = ["{logs}/app.log"]\n'
    )
    system, app = sorted(check_logs(config, now), key=lambda t: t.topic, reverse=True)
    (messages,) = system.sources[0].files
    assert messages.first == "2025-11-03T09:23:38.000Z"
    assert system.problems() == []
    assert app.problems() == [
        f"APPLICATION: {logs}/app.log: 1 records dated after the file was last written "
        "(8.0 h after its mtime 2026-12-04T10:00:00.000Z: check timezone)"
    ]


def test_a_folder_named_as_a_path_says_to_name_its_files(tmp_path: Path) -> None:
    # A new user points `paths` at the folder their logs are in: it matched no file and check
    # said only "no file matches", the folder full of logs right there.
    logs = tmp_path / "logs"
    (logs / "app").mkdir(parents=True)
    (logs / "app" / "orders.log").write_text("2026-12-04 19:00:00 INFO x\n")
    for written in (f"{logs}/app", f"{logs}/app/"):
        config = parse_logs_config(
            f'roots = ["{logs}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "plain"\n'
            f'paths = ["{written}"]\n'
        )
        (topic,) = check_logs(config, time.time())
        assert topic.problems() == [
            f"APPLICATION: {written}: no file matches: {written} is a folder; name its files "
            f'with a glob: paths = ["{logs}/app/*.log"] (or "{logs}/app/*")'
        ]


def test_a_live_file_written_in_a_zone_ahead_says_the_offset_too(tmp_path: Path) -> None:
    # Tokyo's local time under a UTC topic: "40 records dated in the future (check timezone)"
    # said what, not to what; its last record is nine hours after its last write.
    logs = tmp_path / "logs"
    logs.mkdir()
    local = datetime.now(UTC) + timedelta(hours=9)
    (logs / "refunds.log").write_text(
        local.strftime("%Y-%m-%d %H:%M:%S,%f")[:-3] + " ERROR [shop.refunds] refund failed\n"
    )
    (app,) = check_logs(plain_config(logs), time.time())
    assert app.problems() == [
        f"APPLICATION: {logs}/refunds.log: 1 records dated in the future (check timezone: "
        'its offset seems to be +09:00: set timezone = "+09:00" (or the host\'s IANA zone) for '
        "this source)"
    ]


def test_a_live_file_written_in_a_zone_behind_the_topics_is_said_with_the_offset(
    tmp_path: Path,
) -> None:
    # Python's logging on a host in America/New_York writes local time without a zone; the
    # topic says UTC, so every record reads five hours old, and a call over the last hour
    # answers "no evidence" while the service logs errors. Found by a new user's on-call
    # pass: `check` said nothing and the worker's start warned only of future records. Its
    # last record lies a whole number of hours (plus the write's own delay) before the
    # file's last write, which a running program's log never shows in its own zone.
    logs = tmp_path / "logs"
    logs.mkdir()
    now = calendar.timegm((2026, 12, 5, 11, 20, 0))  # 2026-12-05T11:20Z
    written = now - 60  # last written a minute ago, at 11:19:00.4Z (06:19:00 in New York)
    (logs / "app.log").write_text(
        "2026-12-05 06:18:59,210 INFO [shop.payments] order o-1000 accepted\n"
        "2026-12-05 06:19:00,120 ERROR [shop.payments] connection pool exhausted\n"
    )
    os.utime(logs / "app.log", (written + 0.4, written + 0.4))
    # A copy of an old log made now (`cp` without -p): its last record is hours before its
    # mtime too, but not by a zone's offset: no problem.
    (logs / "copy.log").write_text("2026-12-05 03:02:17,000 INFO copied\n")
    os.utime(logs / "copy.log", (written, written))
    config = plain_config(logs)
    (app,) = check_logs(config, now)
    assert app.problems() == [
        f"APPLICATION: {logs}/app.log: its last record is 5.0 h before the file was last "
        "written (mtime 2026-12-05T11:19:00.400Z): a program writing it now writes its local "
        'time in another zone than timezone "UTC"; its offset is -05:00: set timezone = '
        '"-05:00" (or the host\'s IANA zone) for this source'
    ]
    # The worker's start says it too, naming the topic and no path.
    (logs / "app.log").write_text(
        (datetime.now(UTC) - timedelta(hours=5)).strftime("%Y-%m-%d %H:%M:%S,000")
        + " ERROR [shop.payments] connection pool exhausted\n"
    )
    (logs / "copy.log").unlink()
    warnings = LogRouter.from_config(config, {}).clock_warnings()
    assert len(warnings) == 1 and "topic APPLICATION" in warnings[0]
    assert "5.0 h before" in warnings[0] and '"-05:00"' in warnings[0]
    assert str(logs) not in warnings[0]


def test_a_file_mostly_not_in_its_format_is_a_problem_though_no_format_reads_it(
    tmp_path: Path,
) -> None:
    # Before, "everything reads well" when 60 of 64 lines were not in the format (a Laravel
    # log's stack traces under `plain`, before that format read them): only a file with no
    # line in its format, or one another format reads better, was said
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log").write_text(
        "2026-12-04 11:00:00 INFO started\n" + "~~ frame of something unknown ~~\n" * 9
    )
    (topic,) = check_logs(plain_config(logs), time.time())
    assert topic.problems() == [
        f"APPLICATION: {logs}/app.log: 9 of 10 lines are not in format plain (the first: "
        "~~ frame of something unknown ~~); they are matched as text only, by words and phrases"
    ]


@pytest.mark.parametrize(("zone", "said"), [("UTC", True), ("America/Chicago", False)])
def test_a_postgresql_zone_of_several_offsets_not_the_topics_is_said(
    tmp_path: Path, zone: str, said: bool
) -> None:
    # `CST` is US Central, China or Cuba: read in the topic's timezone, silently hours off
    # when that is not the server's `log_timezone` (before: "everything reads well")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "pg.log").write_text(
        '2026-12-04 01:46:12.212 CST [12389] ERROR:  relation "t" does not exist\n'
    )
    config = parse_logs_config(
        f'roots = ["{logs}"]\ntimezone = "{zone}"\n[topics.DATABASE_SLOW_QUERY]\n'
        f'backend = "file"\nformat = "postgresql"\npaths = ["{logs}/pg.log"]\n'
    )
    (topic,) = check_logs(config, time.time())
    expected = [
        f"DATABASE_SLOW_QUERY: {logs}/pg.log: times written in zone CST are read in the "
        f"topic's timezone ({zone}), which does not call itself CST: set timezone to the "
        "server's log_timezone (CST names several offsets)"
    ]
    assert topic.problems() == (expected if said else [])


def test_a_glob_over_container_folders_lists_every_container(tmp_path: Path) -> None:
    # Docker's json-file layout, one folder per container id (before: a configuration error,
    # "wildcards only in the file name", exit 2)
    ids = ("4f" * 32, "9a" * 32)
    for cid in ids:
        (tmp_path / cid).mkdir()
        line = {"log": f"started {cid[:4]}\n", "stream": "stdout", "time": "2026-12-04T10:00:00Z"}
        (tmp_path / cid / f"{cid}-json.log").write_text(json.dumps(line) + "\n")
    config = tmp_path / "logs.toml"
    config.write_text(
        f'roots = ["{tmp_path}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "docker"\n'
        f'paths = ["{tmp_path}/*/*-json.log*"]\n'
    )
    done = check(config)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{tmp_path}/*/*-json.log*  format docker: 2 files match" in done.stdout
    for cid in ids:
        assert f"{tmp_path}/{cid}/{cid}-json.log: 1 lines: 1 records" in done.stdout


def regex_config(logs: Path, time_format: str) -> LogsConfig:
    pattern = r"(?P<time>[^|]+) \| (?P<level>\w+) \| (?P<message>.*)"
    return parse_logs_config(
        f'roots = ["{logs}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "regex"\n'
        f"paths = ['{logs}/*.log']\npattern = '{pattern}'\n"
        + (f'time_format = "{time_format}"\n' if time_format else "")
    )


def test_check_says_when_a_regex_matches_but_its_time_does_not_read(tmp_path: Path) -> None:
    # A new user's pattern matched every line, but the time was in another shape than the
    # time_format (or than ISO 8601 without one): check said only "no line is in format regex"
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log").write_text(
        "05.12.2026 08:46:17 | WARN | pool at 90%\n05.12.2026 08:47:17 | ERROR | pool exhausted\n"
    )
    where = f"APPLICATION: {logs}/app.log"
    (topic,) = check_logs(regex_config(logs, "%Y-%m-%d %H:%M:%S"), time.time())
    assert topic.problems() == [
        f"{where}: no line is in format regex",
        f'{where}: the pattern matches, but its time "05.12.2026 08:46:17" does not read with'
        ' time_format "%Y-%m-%d %H:%M:%S"',
    ]
    (topic,) = check_logs(regex_config(logs, ""), time.time())
    assert topic.problems()[1] == (
        f'{where}: the pattern matches, but its time "05.12.2026 08:46:17" is neither ISO 8601'
        " nor an epoch number: set time_format (a strptime format)"
    )
    # a time_format with the space the group captured reads (the text is read stripped)
    for fmt in ("%d.%m.%Y %H:%M:%S", "%d.%m.%Y %H:%M:%S "):
        (topic,) = check_logs(regex_config(logs, fmt), time.time())
        assert topic.problems() == [] and topic.sources[0].files[0].records == 2


def test_a_source_of_more_files_than_it_samples_says_how_many_it_checked(tmp_path: Path) -> None:
    # `check` samples the newest 8 files of a source: with more, the output said only "12
    # files match" and listed 8, as if the others were read and fine
    logs = tmp_path / "logs"
    logs.mkdir()
    for n in range(12):
        path = logs / f"app-{n:02}.log"
        path.write_text(f"2026-12-04 10:00:{n:02} INFO started {n}\n")
        # last written 6 h 7 min after (exactly 6 h read as a writer at -06:00, said)
        os.utime(path, (1_796_400_420 + n, 1_796_400_420 + n))
    config = tmp_path / "logs.toml"
    config.write_text(
        f'roots = ["{logs}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "plain"\n'
        f'paths = ["{logs}/*.log"]\n'
    )
    done = check(config)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "format plain: 12 files match" in done.stdout
    assert "    (the newest 8 of the 12 files are checked; the 4 older ones are not)" in done.stdout
    assert f"{logs}/app-11.log" in done.stdout and f"{logs}/app-03.log" not in done.stdout
    one = json.loads(check(config, "--json").stdout)["topics"][0]["sources"][0]
    assert one["matched"] == 12 and len(one["files"]) == 8 and one["unchecked"] == 4


def test_check_names_the_configuration_digest_a_worker_would_beat(tmp_path: Path) -> None:
    # Day two: logs.toml edited and no worker restarted. `status` compares the live workers'
    # configurations with one another, so it is quiet while all still run the old file; the
    # digest `check` prints for the file on disk is the one to compare its config column with.
    import anyio

    from workers.sources import open_sources
    from workers.sources.identity import configuration_digest

    config = setup(tmp_path, "plain", "nats-server.log")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ACI_")},
           "ACI_LOGS_CONFIG": str(config)}  # fmt: skip

    async def worker_digest() -> str:
        async with open_sources(env) as sources:
            return configuration_digest(sources)

    digest = anyio.run(worker_digest)
    done = check(config)
    assert f"configuration digest {digest[:8]}" in done.stdout, done.stdout
    (body,) = [json.loads(line) for line in check(config, "--json").stdout.splitlines()]
    assert body["config"] == digest
    config.write_text(config.read_text().replace('backend = "mock"', 'backend = "mock"\n# x'))
    assert f"configuration digest {digest[:8]}" in check(config).stdout  # a comment: the same
    config.write_text(config.read_text().replace('format = "plain"', 'format = "syslog"'))
    assert f"configuration digest {digest[:8]}" not in check(config).stdout
