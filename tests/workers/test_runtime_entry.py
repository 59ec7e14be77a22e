"""The worker runtime reads an entry once: the envelope decoded once (or why not), and the
scope key a finish is checked with computed from the request the stages decoded, equal to the
one `pipeline.envelope.scope_key` gives (what the submit recorded) for every kind of call."""

from __future__ import annotations

import msgspec
import pytest
from msgspec import UNSET

from pipeline.envelope import Invocation, encode_envelope, scope_key
from pipeline.record import ENTRY_DATA, ENTRY_DUPLICATE_OF
from pipeline.settings import Settings
from workers.runtime.entry import finished_scope, read_entry, stage_run
from workers.runtime.state import WorkerState

CALLS = {  # name: (tool, tool call id, arguments)
    "request": ("lookup_knowledge", "call-1", '{"query": "pool exhausted"}'),
    "spacing and order": ("query_logs", "call-2", '{ "query":"x","topic":"APPLICATION" }'),
    "schema error": ("lookup_knowledge", "call-3", '{"query": " "}'),
    "unknown field": ("lookup_knowledge", "call-4", '{"query": "q", "tool_call_id": "x"}'),
    "not json": ("query_mysql", "call-5", "{not json"),
    "invalid call id": ("lookup_knowledge", "bad id", '{"query": "q"}'),
    "unknown tool": ("no_such_tool", "call-6", "{}"),
}


def invocation(tool: str, tool_call_id: str, arguments: str) -> Invocation:
    return Invocation(
        session_id="s1",
        tool=tool,
        tool_call_id=tool_call_id,
        arguments=arguments,
        submitted_at_ms=0,
    )


@pytest.mark.parametrize("name", sorted(CALLS))
def test_finished_scope_is_the_submitted_scope_key(name: str) -> None:
    tool, tool_call_id, arguments = CALLS[name]
    state = WorkerState(None, Settings(), {}, concurrency=1, consumer="c")
    inv = invocation(tool, tool_call_id, arguments)
    run = stage_run(state, inv, UNSET, attempts=1)
    run.run_now({})  # no source: an ERROR at once, after the arguments were decoded
    assert run.decoded is not None
    assert finished_scope(inv, run) == scope_key(tool, tool_call_id, arguments)


def test_read_entry_decodes_the_envelope_and_names_the_duplicate() -> None:
    inv = invocation("lookup_knowledge", "call-1", '{"query": "q"}')
    entry = read_entry({ENTRY_DATA: encode_envelope(inv), ENTRY_DUPLICATE_OF: b"call-0"})
    assert entry.invocation == inv and entry.duplicate_of == "call-0" and not entry.problem


def test_read_entry_says_why_an_envelope_does_not_decode() -> None:
    data = msgspec.json.encode({"v": 999, "session_id": "s1"})
    entry = read_entry({ENTRY_DATA: data})
    assert entry.invocation is None and entry.data == data and entry.duplicate_of is UNSET
    assert entry.problem.startswith("not an invocation envelope")


@pytest.mark.parametrize("name", [n for n in CALLS if n != "invalid call id"])
def test_what_admission_decoded_runs_as_decoding_it_again_would(name: str) -> None:
    # A worker's admission hands its own reader what it decoded (`Admission`); the run and the
    # scope are those of decoding the entry again. Another entry's admission (ids repeat
    # across partitions' streams) is never used: the envelope must be the same bytes.
    from pipeline.admission import Admission, judge
    from pipeline.keys import Keys

    tool, tool_call_id, arguments = CALLS[name]
    data = encode_envelope(invocation(tool, tool_call_id, arguments))
    keys = Keys("t")
    handed = judge(keys, keys.parts[0], "1-0", data, argument_max_bytes=65536, default_lookback=60)
    assert isinstance(handed, Admission)
    state = WorkerState(None, Settings(), {}, concurrency=1, consumer="c")
    # The entry holds the envelope admission recorded (a log call's carries its window end).
    fields = {ENTRY_DATA: handed.envelope, ENTRY_DUPLICATE_OF: b""}
    fresh, reused = read_entry(fields), read_entry(fields, handed)
    assert reused.handed is handed and reused.invocation == fresh.invocation
    assert fresh.invocation is not None
    runs = [stage_run(state, fresh.invocation, UNSET, 1),
            stage_run(state, fresh.invocation, UNSET, 1, handed)]  # fmt: skip
    outcomes = [run.run_now({}) for run in runs]
    assert msgspec.json.encode(outcomes[0].observation) == msgspec.json.encode(
        outcomes[1].observation
    )
    assert outcomes[0].control.scope_fingerprint == outcomes[1].control.scope_fingerprint
    other = encode_envelope(invocation(tool, tool_call_id, '{"query": "another"}'))
    assert read_entry({ENTRY_DATA: other, ENTRY_DUPLICATE_OF: b""}, handed).handed is None
