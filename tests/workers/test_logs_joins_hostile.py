"""Joins of lines into one record read by hostile or unlucky files: a join never makes real
records disappear from a count or from a query by level (RabbitMQ's lines of one event, a
Python exception's message), and a join past its bound leaves every record it did not take
a record of its own or a counted line."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from logs_helpers import search_written

NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC).timestamp()


def test_rabbitmq_events_stamped_to_the_millisecond_are_never_joined(tmp_path: Path) -> None:
    # RabbitMQ 3.8 (lager) stamps to the millisecond and writes one line an event: a queue
    # process that logs 1,500 errors in one millisecond wrote 1,500 records, not one of 1,001
    # lines (and 499 lines counted as no record's, which `level:error` never sees)
    text = "".join(
        f"2026-12-05 08:46:08.459 [error] <0.705.0> Discarding message {i}\n" for i in range(1500)
    )
    found = search_written(tmp_path, "plain", text, "level:error", now=NOW)
    assert found.match_count == 1500 and not found.unparsed_lines
    assert found.records[0].message.startswith("Discarding message")
    assert "\n" not in found.records[0].message


def test_a_rabbitmq_event_past_the_join_bound_goes_on_as_records(tmp_path: Path) -> None:
    # 3.9+ stamps to the microsecond: one event's lines share stamp, level and pid. Past the
    # bound of a joined record (1,000 lines) its lines were each no record's: `level:error`
    # missed them; now they start a record of their own (an event of 1,500 lines: two)
    stamp = "2026-12-05 08:46:08.459123+00:00 [error] <0.705.0> "
    text = stamp + "crash report\n" + "".join(f"{stamp}    line {i}\n" for i in range(1500))
    found = search_written(tmp_path, "plain", text, "level:error", now=NOW)
    assert not found.unparsed_lines
    assert found.match_count == 2
    late = search_written(tmp_path, "plain", text, '"line 1400"', now=NOW)
    assert late.match_count == 1 and late.records[0].level == "ERROR"


FAKE_AND_REAL = {  # a user's text logged as it came (a traceback and an exception), then
    # 1,200 real records of the format, each an error, with lines of no record between them
    "plain": (
        "2026-12-05 08:40:00 INFO user said: Traceback (most recent call last):\nValueError: x\n",
        "2026-12-05 08:50:00 ERROR real failure {i}\nunstamped line {i}\n",
    ),
    "log4j": (
        "2026-12-05 08:40:00,000 INFO [main] app - user said:\n"
        "Traceback (most recent call last):\nValueError: x\n",
        "2026-12-05 08:50:00,000 ERROR [main] app - real failure {i}\nunstamped line {i}\n",
    ),
    "syslog": (
        "<14>Dec  5 08:40:00 web app[1]: user said: Traceback (most recent call last):\n"
        "ValueError: x\n",
        "<11>Dec  5 08:50:00 web app[1]: real failure {i}\n",
    ),
}


@pytest.mark.parametrize("fmt", sorted(FAKE_AND_REAL))
def test_a_fake_exception_takes_no_real_record_into_its_message(tmp_path: Path, fmt: str) -> None:
    fake, real = FAKE_AND_REAL[fmt]
    text = fake + "".join(real.format(i=i) for i in range(1200))
    found = search_written(tmp_path, fmt, text, "level:error failure", now=NOW)
    assert found.match_count == 1200
    assert all(r.message.startswith("real failure") for r in found.records)
