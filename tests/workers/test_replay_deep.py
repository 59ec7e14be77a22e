"""Replay of recordings nested far too deep to decode recursively (10,000 levels): each such
entry is a typed `failed` verdict ("nests deeper than ..."), and the others replay as usual."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.cli import _parser
from app.replay import run_export, run_import
from tests.workers.test_replay import GOLDEN, SESSION, record, replay, settings_for
from workers.json_depth import MAX_DEPTH, nesting_depth, too_deep, top_level_members
from workers.replay import load_file

DEPTH = 10_000
DEEP_OBJECT = '{"a":' * DEPTH + "1" + "}" * DEPTH
DEEP_ARRAY = "[" * DEPTH + "]" * DEPTH
PLACEHOLDER = '"@@deep@@"'


def deepen(lines: list[str], bodies: dict[str, tuple[str, str]]) -> str:
    """Export lines with some bodies (tool call id -> (body name, deep JSON)) made deep."""
    out = []
    for text in lines:
        line = json.loads(text)
        body = bodies.get(line["tool_call_id"])
        if body is None:
            out.append(text)
            continue
        line[body[0]] = "@@deep@@"
        out.append(json.dumps(line).replace(PLACEHOLDER, body[1]))
    return "\n".join(out) + "\n"


DEEP_BODIES = {
    "k1": ("raw", DEEP_OBJECT),
    "l1": ("result", DEEP_ARRAY),
    "m1": ("envelope", DEEP_OBJECT),
    "e1": ("control", DEEP_ARRAY),
}


def expect_deep_failures(lines: list[Any]) -> None:
    verdicts = {v["tool_call_id"]: v for v in lines[:-1]}
    what = {"k1": "raw answer", "l1": "result", "m1": "envelope", "e1": "control"}
    for call, name in what.items():
        assert verdicts[call]["outcome"] == "failed", verdicts[call]
        assert verdicts[call]["reason"] == (
            f"undecodable recording: the recorded {name} nests deeper than {MAX_DEPTH} levels"
        )
    assert set(verdicts) == set(what)  # the identical ones are not listed
    assert lines[-1]["replayed"] == 6
    assert (lines[-1]["failed"], lines[-1]["identical"]) == (4, 2)


async def test_a_deep_export_file_replays_the_others(
    capsys: Any, prefix: str, tmp_path: Path
) -> None:
    path = tmp_path / "deep.jsonl"
    golden = (GOLDEN / "session.jsonl").read_text().splitlines()
    path.write_text(deepen(golden, DEEP_BODIES))
    code, lines = await replay(capsys, settings_for(prefix), "--file", str(path))
    expect_deep_failures(lines)
    assert code == 1


@pytest.mark.redis
async def test_deep_recordings_in_redis_import_replay_export_and_reinject(
    redis: Any, prefix: str, capsys: Any, tmp_path: Path
) -> None:
    settings = settings_for(prefix)
    await record(redis, settings)
    exported = tmp_path / "export.jsonl"
    argv = ["export", "--session", SESSION, "--file", str(exported)]
    assert await run_export(_parser().parse_args(argv), settings) == 0
    deep = tmp_path / "deep.jsonl"
    deep.write_text(deepen(exported.read_text().splitlines(), DEEP_BODIES))
    capsys.readouterr()
    argv = ["import", "--file", str(deep), "--session", "deep"]
    assert await run_import(_parser().parse_args(argv), settings) == 0
    assert json.loads(capsys.readouterr().out)["imported"] == 6
    code, lines = await replay(capsys, settings, "--session", "deep")
    expect_deep_failures(lines)
    assert code == 1
    # Export keeps a deep body as its text; the export replays the same way.
    again = tmp_path / "again.jsonl"
    argv = ["export", "--session", "deep", "--file", str(again)]
    assert await run_export(_parser().parse_args(argv), settings) == 0
    capsys.readouterr()
    by_id = {r.tool_call_id: r for r in load_file(str(again))}
    assert by_id["k1"].fields["raw"] == DEEP_OBJECT.encode()
    code, lines = await replay(capsys, settings, "--file", str(again))
    expect_deep_failures(lines)
    # Re-injection reports the deep envelope and submits the others.
    code, lines = await replay(capsys, settings, "--session", "deep", "--into", "deeper")
    verdicts = {v["tool_call_id"]: v["outcome"] for v in lines[:-1]}
    assert verdicts["m1"] == "failed"
    assert lines[-1]["submitted"] == 5


def test_depth_is_measured_without_recursion() -> None:
    assert nesting_depth(DEEP_OBJECT.encode()) == DEPTH
    assert nesting_depth(b'["[[[[", {"a": [1]}, "\\"]]"]') == 3
    assert not too_deep(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)
    assert too_deep(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))
    members = top_level_members(b' {"x" : "s\\"}", "d": ' + DEEP_ARRAY.encode() + b', "n": -1e3}')
    assert members == [(b'"x"', b'"s\\"}"'), (b'"d"', DEEP_ARRAY.encode()), (b'"n"', b"-1e3")]
    for bad in (b"[1]", b'{"a": 1', b'{"a" 1}', b'{"a": 1} x', b'{"a": [1}'):
        assert top_level_members(bad) is None, bad
    assert top_level_members(b" {} ") == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab,:'),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=20,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


@given(json_values)
def test_depth_and_members_agree_with_a_decoder(value: Any) -> None:
    text = json.dumps(value).encode()
    assert nesting_depth(text) == _depth(value)
    members = top_level_members(text)
    if isinstance(value, dict):
        assert members is not None
        assert {json.loads(k): json.loads(v) for k, v in members} == value
    else:
        assert members is None
