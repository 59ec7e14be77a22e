"""The record owner's builders and decoders, against the Lua they serve (no server needed)."""

from __future__ import annotations

import re

from msgspec import UNSET

from pipeline import admission, record
from pipeline.keys import ADMISSION_GROUP, GROUP, Keys
from pipeline.scripts import ADMIT_LUA, FINISH_LUA, TAKE_LUA


def _highest(lua: str, name: str) -> int:
    return max(int(n) for n in re.findall(rf"{name}\[(\d+)\]", lua))


def test_the_builders_fill_every_key_and_argument_their_script_reads() -> None:
    part = Keys("t").for_session("s")
    keys, args = admission.take_call(
        part, consumer="w", count=8, max_bytes=100, min_idle_ms=5, maxlen=10
    )
    assert (len(keys), len(args)) == (_highest(TAKE_LUA, "KEYS"), _highest(TAKE_LUA, "ARGV"))
    assert keys == [part.requests, part.dead] and args[:2] == [ADMISSION_GROUP, "w"]
    # The admit script's fixed keys and arguments, then 2 keys and 8 arguments per call (the
    # last: '1' for a cancel request, whose mark admit.lua sets) and 4 arguments per refused
    # request.
    one = admission.Admission("1-0", b"{}", "s", "c", "t", "", "k")
    refused = admission.Refusal("2-0", "why")
    keys, args = admission.admit_call(
        part, [one, one], [refused], now_ms=1, maxlen=10, retention_ms=5
    )
    assert len(keys) == _highest(ADMIT_LUA, "KEYS") + 2 * 2
    assert keys[5:7] == [part.call("s", "c"), part.fingerprints("s")]
    assert (
        len(args) == 6 + 8 * 2 + 4 and args[4:6] == [2, 1] and args[-4:] == ["2-0", "why", "", ""]
    )
    assert args[6 + 7] == "" and args[6 + 8 + 7] == ""  # not cancels
    # The finish script's fixed keys and arguments, then 5 keys and 11 arguments per call.
    one_finish = record.ToFinish(
        session_id="s", tool_call_id="c", tool="t", entry_id="1-0", status="READY",
        evidence_status="FOUND", result=b"{}", raw=b"null", model=b"{}", control=b"{}",
        scope_key="",
    )  # fmt: skip
    keys, args = record.finish_calls(
        part, [one_finish, one_finish], now_ms=2, retention_ms=5, maxlen=10
    )
    assert len(keys) == _highest(FINISH_LUA, "KEYS") + 5 * 2
    assert len(args) == _highest(FINISH_LUA, "ARGV") + 11 * 2
    assert keys[:3] == [part.invocations, part.lifecycle, part.dead]
    assert keys[3:8] == [part.call("s", "c"), part.model("s"), part.control("s"),
                         part.result("s", "c"), part.raw("s", "c")]  # fmt: skip
    assert args[:5] == [GROUP, 2, 5, 10, 2] and args[5:8] == ["1-0", "READY", "FOUND"]


def test_the_lua_writes_the_owner_s_field_names() -> None:
    for name in (record.STATUS, record.ENTRY_ID, record.ENVELOPE, record.SCOPE_KEY):
        assert f"'{name}'" in ADMIT_LUA
    assert f"'{record.ENTRY_DATA}'" in TAKE_LUA
    # Each view is kept once, on its stream: the result hash names the entries.
    for name in (record.EVIDENCE, record.RESULT, record.MODEL_ENTRY, record.CONTROL_ENTRY,
                 record.FINISHED_AT):  # fmt: skip
        assert f"'{name}'" in FINISH_LUA
    assert f"'{record.MODEL}'" not in FINISH_LUA and f"'{record.CONTROL}'" not in FINISH_LUA


def test_the_decoders_read_str_and_bytes_field_names() -> None:
    assert record.invocation_entry({"d": b"env", "dup": b""}) == (b"env", UNSET)
    assert record.invocation_entry({b"d": b"env", b"dup": b"c1"}) == (b"env", "c1")
    assert record.view_entry({b"id": b"c1", b"d": b"{}", b"sk": b"k"}) == ("c1", b"{}", b"k")
    assert record.view_entry({"id": b"c1", "d": b"{}"}) == ("c1", b"{}", b"")
    life = record.lifecycle_entry({b"session": b"s", b"id": b"c", b"status": b"PROJECTING"})
    assert (life.session, life.tool_call_id, life.submitted, life.evidence) == (
        "s",
        "c",
        True,
        None,
    )
    assert record.final_row([b"PROJECTING", b"{}", b"{}", None]) is None
    assert record.final_row([b"READY", b"m", b"c", None]) == ("READY", b"m", b"c", "")
    dead = record.dead_letter("1-0", "x" * 400, {"d": b"e" * 70000})
    assert (len(dead["reason"]), len(dead["d"])) == (300, 65536)


def test_a_view_entry_read_in_place_is_the_entry_read_through_its_fields() -> None:
    # The listener reads view entries as Redis sends their fields (`view_entry_flat`): the
    # finish script's layout in place, any other through the mapping `stream_entries`
    # builds; both give what `view_entry` gives of that mapping.
    cases = [
        [b"id", b"c1", b"d", b'{"a":1}', b"sk", b"k" * 32],  # finish.lua's
        [b"id", b"c1", b"d", b"", b"sk", b""],
        [b"id", b"c1", b"d", b"{}"],  # an import's (`view_fields`): no scope key
        [b"sk", b"k", b"d", b"{}", b"id", b"c2"],  # another order
        [b"id", b"c1", b"d", b"{}", b"sk", b"k", b"x", b"y"],  # a field more
        [b"id", b"c1", b"id", b"c3", b"d", b"{}"],  # a name twice: the last wins
        [b"\xff", b"v", b"id", b"c1", b"d", b"{}"],  # a name not UTF-8
        [],
    ]
    for flat in cases:
        fields = {flat[i].decode("utf-8", "replace"): flat[i + 1] for i in range(0, len(flat), 2)}
        assert record.view_entry_flat(flat) == record.view_entry(fields), flat
