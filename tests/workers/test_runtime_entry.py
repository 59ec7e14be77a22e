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
