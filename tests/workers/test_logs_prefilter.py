"""The FILE backend's text prefilter only ever over-approximates the matcher: a line whose
numbers are spelled differently (`1e3`, `1000.00`, `1E+3`, `0.00001`), or whose list values
are spaced differently (`[1, 2]`), is still found by every query the in-memory backend
answers from the same records (the conformance test's `in_memory`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from logs_helpers import file_source, project, search

from tests.workers.test_logs_conformance import END_MS, NOW, in_memory
from workers.sources.logs.records import Entry, format_ms

# (spelling in the file, the value the in-memory backend holds)
SPELLINGS: list[tuple[str, Any]] = [
    ("1e3", 1000.0), ("1E3", 1000.0), ("1E+3", 1000.0), ("1.0e3", 1000.0), ("1000.00", 1000.0),
    ("10e2", 1000.0), ("1000.0", 1000.0), ("1000", 1000), ("1e16", 1e16), ("0.00001", 1e-05),
    ("2.50", 2.5), ("-1.5E-7", -1.5e-07), ("[1, 2]", "[1,2]"), ("[1e3, 5]", "[1000.0,5]"),
]  # fmt: skip
QUERIES = [
    "1000", "1000.0", "cost_ms:>=1000", "http_status:1000", "cost_ms:1000", "trace_id:1000.0",
    "e+16", "1e+16", "1e-05", "trace_id:e+16", "2.5", "-1.5e-07", '"[1,2]"', "1,2", "[1000.0",
    "trace_id:[1", "1e3", "5]",
]  # fmt: skip


def entry(i: int, value: Any) -> Entry:
    fields = {"trace_id": value}
    if not isinstance(value, str):
        fields |= {"cost_ms": value, "http_status": value}
    return Entry(END_MS - 1000 * i, "INFO", "svc", f"record {i}", fields)


def line(i: int, spelling: str, value: Any) -> str:
    head = {"timestamp": format_ms(END_MS - 1000 * i), "level": "INFO", "service": "svc"}
    text = json.dumps(head | {"message": f"record {i}"})[:-1]
    names = ("trace_id",) if isinstance(value, str) else ("trace_id", "cost_ms", "http_status")
    return text + "".join(f', "{n}": {spelling}' for n in names) + "}"


def answers(tmp_path: Path, pairs: list[tuple[str, Any]], query: str) -> tuple[Any, Any]:
    (tmp_path / "app.jsonl").write_text(
        "".join(line(i, s, v) + "\n" for i, (s, v) in enumerate(pairs))
    )
    files = file_source(tmp_path, "jsonl", ["app.jsonl"], now=NOW)
    memory = in_memory([entry(i, v) for i, (_, v) in enumerate(pairs)], query)
    return project(search(files, query)), project(memory)


@pytest.mark.parametrize("query", QUERIES)
def test_differently_spelled_numbers_and_lists_are_found(tmp_path: Path, query: str) -> None:
    from_files, memory = answers(tmp_path, SPELLINGS, query)
    assert (from_files.match_count, from_files.events) == (memory.match_count, memory.events)


def test_the_spellings_are_found_at_all(tmp_path: Path) -> None:
    counts = {q: answers(tmp_path, SPELLINGS, q)[1].match_count for q in QUERIES}
    assert counts["1000"] == 9 and counts["1000.0"] == 8 and counts['"[1,2]"'] == 1
    assert counts["cost_ms:>=1000"] == 9 and counts["e+16"] == 1 and counts["1e3"] == 0


def _spellings(value: float) -> st.SearchStrategy[str]:
    """Ways JSON writes a float: repr, exponent forms, trailing zeros, upper case."""
    forms = [repr(value), f"{value:e}", f"{value:E}", f"{value:.17g}", f"{value:.3e}"]
    forms += [f"{value:f}", f"{value}0", repr(value).upper(), f"{value:.0e}".replace("+", "")]
    usable = [f for f in forms if ("." in f or "e" in f.lower()) and math.isfinite(float(f))]
    return st.sampled_from(usable or [repr(value)])


@st.composite
def spelled(draw: st.DrawFn) -> tuple[str, float]:
    value = draw(
        st.one_of(
            st.floats(allow_nan=False, allow_infinity=False, width=64),
            st.integers(-(10**6), 10**6).map(float),
            st.sampled_from([1e3, 1e16, 1e-5, 1e22, 0.1, 2.5, 123456.789]),
        )
    )
    text = draw(_spellings(value))
    return text, float(text)


def _terms(value: float) -> list[str]:
    text = str(value)
    pieces = {text, text[: len(text) // 2], text[len(text) // 2 :], text.split(".")[0]}
    terms = [p for p in pieces if p.strip("-+.") and not p.startswith("-")]
    return terms + [f"trace_id:{t}" for t in terms]


@settings(max_examples=150, deadline=None)
@given(st.lists(spelled(), min_size=1, max_size=4), st.data())
def test_any_spelling_file_equals_memory(
    tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, float]], data: st.DataObject
) -> None:
    folder = tmp_path_factory.mktemp("spellings")
    value = data.draw(st.sampled_from([v for _, v in pairs]))
    bound = f"{value:.17g}"
    queries = [*_terms(value), f"cost_ms:>={bound}", f"cost_ms:<={bound}", f"http_status:{bound}"]
    query = data.draw(st.sampled_from(queries))
    from_files, memory = answers(folder, list(pairs), query)
    assert (from_files.match_count, from_files.events) == (memory.match_count, memory.events)


TRICKY = {
    "jsonl": [
        '{"timestamp": "%s", "level": "straße", "message": "ok", "tags": [ "a" , 1e3 ]}',
        '{"timestamp": "%s", "level": "INFO", "message": 1E2, "deep": {"a": {"b": 0.5E1}}}',
        '{"timestamp": "%s", "level": "warn", "message": "Straße 5", "n": 123456789012345678901}',
    ],
    "logfmt": ['ts=%s level=ﬁx msg="done 1e3" n=1e3 tags=[1,2]'],
}
TRICKY_QUERIES = [
    "strasse", "asse", "1000.0", "100.0", "5.0", "deep:5", "1000.0]", "[", "fix", "1e3", "1000",
    "tags:1000.0", "deep:5.0", "straße", "123456789012345678901", '"[1,2]"', "x\x1fy", "a,1",
]  # fmt: skip


@pytest.mark.parametrize("fmt", sorted(TRICKY))
@pytest.mark.parametrize("query", TRICKY_QUERIES)
def test_the_prefilter_never_drops_what_the_matcher_accepts(
    tmp_path: Path, fmt: str, query: str
) -> None:
    from datetime import UTC

    from workers.sources.logs.formats import make_parser
    from workers.sources.logs.records import entry_matches
    from workers.sources.logs.source import parse_log_query

    lines = [text % format_ms(END_MS - 1000) for text in TRICKY[fmt]]
    (tmp_path / "app.log").write_text("".join(f"{text}\n" for text in lines))
    names = {"tags": "tags", "deep": "deep.a.b"}
    mapping = "fields = {" + ", ".join(f'{k} = "{v}"' for k, v in names.items()) + "}"
    files = file_source(tmp_path, fmt, ["app.log"], now=NOW, extra=mapping)
    parser = make_parser(fmt, names, UTC, "", "auto", END_MS)
    parsed = parse_log_query(query)
    expected = sum(entry_matches(parsed, e) for text in lines for e in parser.feed(text + "\n"))
    assert search(files, query).match_count == expected


_scalars = (
    st.none() | st.booleans() | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
)  # fmt: skip
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner),
    max_leaves=6,
)


def _json_text(value: Any, spaced: bool) -> str:
    """JSON as a producer may write it: spaced or compact, floats as repr or exponent."""
    if isinstance(value, float):
        return f"{value:e}" if spaced else repr(value)
    if isinstance(value, list):
        gap = ", " if spaced else ","
        return "[" + gap.join(_json_text(v, spaced) for v in value) + "]"
    if isinstance(value, dict):
        gap = ", " if spaced else ","
        items = (f"{json.dumps(k)}: {_json_text(v, spaced)}" for k, v in value.items())
        return "{" + gap.join(items) + "}"
    return json.dumps(value, ensure_ascii=False)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["msg", "level", "n", "x", "tags"]), _values, max_size=4),
    st.booleans(),
    st.data(),
)
def test_a_term_from_the_matchers_own_text_is_never_prefiltered_away(
    fields: dict[str, Any], spaced: bool, data: st.DataObject
) -> None:
    from datetime import UTC

    from workers.sources.logs.formats import make_parser
    from workers.sources.logs.prefilter import Prefilter
    from workers.sources.logs.records import SEPARATOR, _lowered, entry_matches
    from workers.sources.logs.source import Clause, ParsedQuery

    record = {"ts": 1_796_000_000.5, **fields}
    line = "{" + ", ".join(f"{json.dumps(k)}: {_json_text(v, spaced)}" for k, v in record.items())
    line += "}\n"
    found = make_parser("jsonl", {}, UTC, "", "auto", END_MS).feed(line)
    if not found:
        return  # not a record (a level or message of an odd type may still parse)
    hay = SEPARATOR.join(_lowered(found[0]).values())
    start = data.draw(st.integers(0, max(len(hay) - 1, 0)))
    end = min(len(hay), start + data.draw(st.integers(1, 12)))
    # a term that starts or ends inside a number matches at its boundary (`terms`): widened
    # to the number's edges, so it is still a term the matcher finds
    while 0 < start < end and hay[start].isdecimal() and hay[start - 1].isdecimal():
        start -= 1
    while start < end < len(hay) and hay[end - 1].isdecimal() and hay[end].isdecimal():
        end += 1
    term = hay[start:end].strip()
    if not term or '"' in term or SEPARATOR in term:
        return
    query = ParsedQuery(clauses=(Clause(value=term),))
    assert entry_matches(query, found[0])
    assert Prefilter(query, "jsonl", "").may_match(line), (line, term)


def test_a_file_whose_records_the_level_prefilter_skipped_is_not_said_to_be_in_no_format(
    tmp_path: Path,
) -> None:
    # MariaDB's error log (Debian 12's 10.11) opens with its `Version:` banner, a line not in
    # the format. `level:error` over it skips every record unbuilt (none says ERROR): the
    # model was told "(1 files had no line in their format)", on every such call over a
    # healthy server's log (found by a new user's on-call pass).
    path = tmp_path / "error.log"
    path.write_text(
        "2026-12-05 11:13:07 0 [Note] Starting MariaDB 10.11.19-MariaDB-0+deb12u1 as process 1\n"
        "2026-12-05 11:13:08 0 [Note] /usr/sbin/mariadbd: ready for connections.\n"
        "Version: '10.11.19-MariaDB-0+deb12u1'  socket: '/run/mysqld/mysqld.sock'  port: 3306\n"
        "2026-12-05 11:21:52 31 [Warning] Access denied for user 'root'@'localhost'\n"
    )
    source = file_source(tmp_path, "plain", ["error.log"], now=1_796_470_000.0)
    found = search(source, "level:error", 1440)
    assert found.match_count == 0 and not found.match_count_lower_bound
    assert found.notes and not any("had no line in their format" in n for n in found.notes)


def test_text_lines_of_a_file_without_records_are_said_to_be_timed_by_its_last_write(
    tmp_path: Path,
) -> None:
    # dpkg's `alternatives.log` under `plain` (its program name comes before its time): each
    # line matched as text is dated by the file's last write, a year-old line read as of the
    # last hour; the note said "timed by the record before them", of which there is none.
    path = tmp_path / "alternatives.log"
    path.write_text(
        "update-alternatives 2025-06-24 14:36:53: run with --install /usr/bin/pager pager\n"
    )
    source = file_source(tmp_path, "plain", ["alternatives.log"], now=path.stat().st_mtime + 60)
    found = search(source, "pager")
    assert found.match_count == 1
    assert found.notes and any("else by its last write" in n for n in found.notes), found.notes
    assert all(len(n) <= 240 for n in found.notes)  # heard whole (`contracts.logs`)


@pytest.mark.parametrize("spaced", [False, True], ids=["compact", "spaced"])
def test_a_journald_message_exported_as_bytes_is_found_however_the_json_is_spaced(
    tmp_path: Path, spaced: bool
) -> None:
    # journald's export (`journalctl -o json`) writes a coloured message as an array of its
    # bytes, which jsonl reads as text. The prefilter parsed such a line only when it held
    # `":[`: written by a JSON writer that spaces its output (`"MESSAGE": [27, 91, ...]`,
    # Python's json.dumps), the empty query showed 'connection timeout' and "timeout" skipped
    # the line unparsed: an exact 0, NO_EVIDENCE.
    record = {
        "__REALTIME_TIMESTAMP": str((END_MS - 1000) * 1000),
        "PRIORITY": "3",
        "MESSAGE": list(b"\x1b[31mconnection timeout\x1b[0m"),
    }
    separators = (", ", ": ") if spaced else (",", ":")
    (tmp_path / "journal.jsonl").write_text(json.dumps(record, separators=separators) + "\n")
    files = file_source(tmp_path, "jsonl", ["journal.jsonl"], now=NOW)
    (shown,) = search(files, "").records
    assert shown.message == "connection timeout"
    assert search(files, "timeout").match_count == 1
    assert search(files, "level:error timeout").match_count == 1


def test_a_text_line_after_a_record_the_prefilter_skipped_is_timed_by_that_record(
    tmp_path: Path,
) -> None:
    # A line that is no record (a raw stderr line in a JSON log) is matched as text, timed by
    # the record before it. The prefilter skipped that record (no term of the query), so the
    # line took the time of the last record parsed, three days older: "refused" answered an
    # exact 0 over the last hour, and 1 with the prefilter off.
    import os

    old, recent = END_MS / 1000 - 3 * 86400, END_MS / 1000 - 600
    lines = [
        json.dumps({"ts": old, "level": "info", "msg": "connection refused earlier"}),
        json.dumps({"ts": recent, "level": "info", "msg": "order ok"}),
        "upstream refused the connection (a raw stderr line)",
    ]
    (tmp_path / "app.jsonl").write_text("".join(line + "\n" for line in lines))
    os.utime(tmp_path / "app.jsonl", (recent + 5, recent + 5))
    files = file_source(tmp_path, "jsonl", ["app.jsonl"], now=END_MS / 1000)
    (found,) = search(files, "refused").records
    assert found.message.startswith("upstream refused")


def test_a_syslog_text_line_after_a_record_the_prefilter_skipped_keeps_that_records_time(
    tmp_path: Path,
) -> None:
    # syslog's file: a record two days old, then a line that is no record ('upstream refused
    # ...', matched as text, timed by the record before it). The prefilter skipped that
    # record, so the line had no time but the file's last write: "refused" over the last hour
    # counted it, exact (1), shown at the mtime; with the prefilter off, 0.
    import os
    import time

    old, recent = END_MS / 1000 - 2 * 86400, END_MS / 1000 - 600
    stamp = time.strftime("%b %d %H:%M:%S", time.gmtime(old))
    later = time.strftime("%b %d %H:%M:%S", time.gmtime(recent))
    (tmp_path / "syslog").write_text(
        f"{stamp} web app[1]: order ok\nupstream refused the connection (a raw line)\n"
        f"{later} web app[1]: order ok\n"
    )
    os.utime(tmp_path / "syslog", (recent + 5, recent + 5))
    files = file_source(tmp_path, "syslog", ["syslog"], now=END_MS / 1000)
    assert search(files, "refused").match_count == 0
    assert search(files, "refused", 60 * 24 * 3).match_count == 1
