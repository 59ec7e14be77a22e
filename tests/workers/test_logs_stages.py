"""Real log backends through the stages: both views say FILE, nothing physical reaches the
model (nor the recorded raw answer), failures are ERRORs, a cut scan is marked in the
Control View."""

from __future__ import annotations

import json
import time
from pathlib import Path

import msgspec

from contracts import EvidenceStatus
from contracts.views import encode_view
from pipeline.settings import Settings
from workers.sources.logs.router import logs_source_from_env
from workers.sources.logs.scenario_files import write_file_scenario
from workers.stage import Outcome, run_stages


async def call(config: Path, arguments: dict[str, object]) -> Outcome:
    source = logs_source_from_env({"ACI_LOGS_CONFIG": str(config)})
    try:
        return await run_stages(
            tool="query_logs", tool_call_id="call_1", arguments=json.dumps(arguments),
            session_id="s", sources={"query_logs": source}, settings=Settings(deadline_s=10.0),
        )  # fmt: skip
    finally:
        await source.aclose()


def physical_names(folder: Path) -> tuple[str, ...]:
    return (str(folder), folder.name, "shop.jsonl", "slow.log", "syslog", "logs.toml")


async def test_a_file_topic_through_the_stages(tmp_path: Path) -> None:
    config = write_file_scenario(tmp_path, time.time())
    for topic, query in (("APPLICATION", "exception:SQLTransientConnectionException"),
                         ("DATABASE_SLOW_QUERY", "duration_ms:>2000"),
                         ("SYSTEM_EVENTS", '"Out of memory"')):  # fmt: skip
        out = await call(config, {"topic": topic, "query": query, "lookback_minutes": 60})
        assert out.result.evidence_status is EvidenceStatus.EVIDENCE_FOUND, (topic, out.result)
        observation = encode_view(out.observation)
        assert b'"source_kind":"FILE"' in observation
        assert (
            out.control.source_kind == "FILE"
            and out.control.match_count_lower_bound is msgspec.UNSET
        )
        for name in physical_names(tmp_path):
            assert name.encode() not in observation and name.encode() not in out.raw


async def test_failures_are_errors_that_name_no_path(tmp_path: Path) -> None:
    config = write_file_scenario(tmp_path, time.time())
    outside = tmp_path.parent / f"{tmp_path.name}-outside.jsonl"
    outside.write_text('{"ts": 1, "msg": "secret"}\n')
    (tmp_path / "app" / "shop.jsonl.9").symlink_to(outside)
    out = await call(config, {"topic": "APPLICATION", "query": "secret"})
    assert out.result.evidence_status is EvidenceStatus.ERROR
    assert out.control.error_code == "AUTHORIZATION"
    observation = encode_view(out.observation)
    for name in (*physical_names(tmp_path), outside.name):
        assert name.encode() not in observation


async def test_an_unconfigured_topic_is_an_error(tmp_path: Path) -> None:
    config = tmp_path / "logs.toml"
    config.write_text('[topics.APPLICATION]\nbackend = "mock"\n')
    out = await call(config, {"topic": "SYSTEM_EVENTS", "query": ""})
    assert out.result.evidence_status is EvidenceStatus.ERROR
    assert out.control.error_code == "UNAVAILABLE"


async def test_a_cut_scan_is_marked_in_the_control_view_only(tmp_path: Path) -> None:
    config = write_file_scenario(tmp_path, time.time())
    text = config.read_text().replace(
        'timezone = "UTC"\n', 'timezone = "UTC"\n[scan]\nmax_bytes = 8000\n', 1
    )
    config.write_text(text)
    out = await call(config, {"topic": "APPLICATION", "query": "", "lookback_minutes": 60})
    assert out.result.evidence_status is EvidenceStatus.EVIDENCE_FOUND
    assert out.control.match_count_lower_bound is True and out.control.truncated is True
    assert b"lower_bound" not in encode_view(out.observation)


async def test_a_mixed_folder_through_the_stages_drops_no_file(tmp_path: Path) -> None:
    """Agent-level: syslog, an Apache error log, a CRLF Java log with a stack trace and a plain
    log in one folder, a source per format; one more Apache log under the syslog glob."""
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    bsd = f"{now:%b} {now.day:2d} {now:%H:%M:%S}"  # syslog pads the day with a space
    iso = now.strftime("%Y-%m-%d %H:%M:%S")
    ctime = now.strftime("%a %b %d %H:%M:%S.000000 %Y")  # never after the call's end
    (tmp_path / "messages").write_text(
        f"{bsd} web1 kernel: Out of memory: Killed process 4242 (java)\n"
        f"{bsd} web1 syslogd 1.4.1: restart.\n"
    )
    apache = f"[{ctime}] [core:error] [pid 7:tid 9] [client 10.0.0.5:5150] AH00128: File does not exist: /srv/x\n"
    (tmp_path / "error_log").write_text(apache)
    (tmp_path / "messages.httpd").write_text(apache)  # another format under the syslog glob
    (tmp_path / "app.log").write_bytes(
        (
            f"{iso},000 ERROR [main] com.shop.Pay - payment error for order o-1\r\n"
            "java.lang.IllegalStateException: charge failed\r\n\tat com.shop.Pay.run(Pay.java:9)\r\n"
        ).encode()
    )
    (tmp_path / "db.err").write_text(f"{iso} 0 [ERROR] InnoDB: error reading page\n")
    config = tmp_path / "logs.toml"
    config.write_text(
        f'roots = ["{tmp_path}"]\n[topics.SYSTEM_EVENTS]\nbackend = "file"\n'
        f'paths = ["{tmp_path}/messages*"]\nformat = "syslog"\n'
        f'[[topics.SYSTEM_EVENTS.sources]]\npaths = ["{tmp_path}/error_log"]\nformat = "apache_error"\n'
        f'[[topics.SYSTEM_EVENTS.sources]]\npaths = ["{tmp_path}/*.log"]\nformat = "log4j"\n'
        f'[[topics.SYSTEM_EVENTS.sources]]\npaths = ["{tmp_path}/*.err"]\nformat = "plain"\n'
    )
    out = await call(config, {"topic": "SYSTEM_EVENTS", "query": "error", "lookback_minutes": 60})
    assert out.result.evidence_status is EvidenceStatus.EVIDENCE_FOUND, out.result
    # Apache's (both copies, one as text), Java's, MariaDB's: no file dropped
    assert out.control.match_count == 4 and out.control.unparsed_lines == 1
    observation = encode_view(out.observation)
    assert b"\\r" not in observation and b"IllegalStateException" in observation
    assert b"1 lines read are not in their log format (1 files had no line" in observation
    for name in (str(tmp_path), "messages.httpd", "error_log", "app.log"):
        assert name.encode() not in observation
    restart = await call(config, {"topic": "SYSTEM_EVENTS", "query": '"syslogd 1.4.1"'})
    assert restart.control.match_count == 1 and restart.control.unparsed_lines is msgspec.UNSET
