"""Hostile tool calls through the real pipeline (EvidenceClient + an in-process worker).

Invalid tool call ids are answered at once with INVALID_TOOL_CALL_ID, carry no id, and leave
nothing in Redis (nothing minted). Bad arguments with a valid id become one ERROR result that
carries exactly that id.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline.client import EvidenceClient, ToolCall
from pipeline.settings import Settings
from tests.pipeline.helpers import assert_exactly_once, books, loads, running_worker
from tests.pipeline.sources import InstantSource

pytestmark = pytest.mark.redis

GOOD_ARGS = json.dumps({"query": "pool exhausted"})
BAD_IDS: list[Any] = [
    None, "", " ", "\t", "   \n", " call_1", "call_1 ", "call 1", "x" * 10_240, "x" * 257,
    "call\x00", "call\x1b[31m", "call\r\n", "call\x7f", "调用_1", "call_é", "call_\u200b",
    "\ud800", 12345, 1.5, True, ["call_1"], {"id": "call_1"}, b"call_1",
]  # fmt: skip
BAD_ARGS: list[tuple[str, str, Any, str]] = [
    ("id_in_args", "lookup_knowledge", {"query": "q", "tool_call_id": "call_x"}, "SCHEMA"),
    ("malformed", "lookup_knowledge", '{"query": "q"', "SCHEMA"),
    ("not_object", "lookup_knowledge", "[1, 2]", "SCHEMA"),
    ("json_null", "lookup_knowledge", "null", "SCHEMA"),
    ("empty_text", "lookup_knowledge", "", "SCHEMA"),
    ("blank_query", "lookup_knowledge", {"query": "   "}, "SCHEMA"),
    ("unknown_field", "query_logs", {"topic": "APPLICATION", "query": "", "limit": 5}, "SCHEMA"),
    ("bad_topic", "query_logs", {"topic": "ALL", "query": "x"}, "SCHEMA"),
    ("wrong_type", "query_logs", {"topic": "APPLICATION", "query": 5}, "SCHEMA"),
    (
        "lookback_range",
        "query_logs",
        {"topic": "APPLICATION", "query": "", "lookback_minutes": 10**9},
        "SCHEMA",
    ),
    (
        "bool_as_int",
        "query_logs",
        {"topic": "APPLICATION", "query": "", "lookback_minutes": True},
        "SCHEMA",
    ),
    (
        "params_object",
        "query_mysql",
        {"data_source": "shop", "sql": "SELECT ?", "params": [{"a": 1}]},
        "SCHEMA",
    ),
    (
        "dsn_in_args",
        "query_mysql",
        {"data_source": "mysql://root@db/x", "sql": "SELECT 1"},
        "SCHEMA",
    ),
    ("huge_query", "lookup_knowledge", {"query": "x" * 50_000}, "SCHEMA"),
    (
        "huge_arguments",
        "lookup_knowledge",
        json.dumps({"query": "q", "pad": "x" * 100_000}),
        "SCHEMA",
    ),
    ("deep_nesting", "lookup_knowledge", "[" * 5000 + "]" * 5000, "SCHEMA"),
    ("unknown_tool", "drop_database", {"query": "q"}, "UNKNOWN_TOOL"),
    ("tool_case", "Lookup_Knowledge", {"query": "q"}, "UNKNOWN_TOOL"),
    ("empty_tool", "", {"query": "q"}, "UNKNOWN_TOOL"),
    ("set_args", "lookup_knowledge", {1, 2}, "SCHEMA"),
]


def settings_for(prefix: str) -> Settings:
    return Settings(prefix=prefix, visibility_timeout_s=2.0, deadline_s=1.0)


async def test_invalid_tool_call_ids_are_rejected_and_nothing_is_minted(
    redis: Any, prefix: str
) -> None:
    settings = settings_for(prefix)
    async with EvidenceClient(redis, settings) as client:
        calls = [
            ToolCall(tool="lookup_knowledge", tool_call_id=i, arguments=GOOD_ARGS) for i in BAD_IDS
        ]
        results = await client.call_many("ids", calls, timeout=5)
    for bad, result in zip(BAD_IDS, results, strict=True):
        assert result is not None, repr(bad)[:40]
        model = loads(result.model)
        control = loads(result.control)
        assert model == {
            "evidence_status": "ERROR",
            "error": {"code": "INVALID_TOOL_CALL_ID", "message": model["error"]["message"]},
        }, repr(bad)[:40]
        assert "tool_call_id" not in control and control["error_code"] == "INVALID_TOOL_CALL_ID"
        assert len(result.model) < 400
    assert [k async for k in redis.scan_iter(match=f"{{{prefix}}}:*")] == []


async def test_bad_arguments_are_one_typed_error_with_the_id(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix)
    source = InstantSource()
    sources = dict.fromkeys(("lookup_knowledge", "query_logs", "query_mysql"), source)
    calls = [
        ToolCall(tool=tool, tool_call_id=f"call_{name}", arguments=args)
        for name, tool, args, _ in BAD_ARGS
    ]
    async with EvidenceClient(redis, settings) as client:
        async with running_worker(redis, settings, sources):
            results = await client.call_many("args", calls, timeout=20)
    for (name, _tool, _args, code), result in zip(BAD_ARGS, results, strict=True):
        assert result is not None, name
        model = loads(result.model)
        assert model["tool_call_id"] == f"call_{name}", name
        assert model["evidence_status"] == "ERROR" and model["error"]["code"] == code, (name, model)
        assert (
            len(model["error"]["message"]) <= 600 and "Traceback" not in model["error"]["message"]
        )
        assert len(result.model) <= settings.bounds.observation_max_bytes
    assert source.calls == 0  # nothing reached a source
    # Arguments over ACI_ARGUMENT_MAX_BYTES are refused before anything is written.
    stored = [c.tool_call_id for c in calls if c.tool_call_id != "call_huge_arguments"]
    assert_exactly_once(await books(redis, prefix, "args"), stored)


async def test_ids_are_kept_verbatim_at_the_edges(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix)
    ids = ["a", "x" * 256, "!#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "CALL_Mixed_Case", "toolu_01A09q90"]
    calls = [ToolCall(tool="lookup_knowledge", tool_call_id=i, arguments=GOOD_ARGS) for i in ids]
    async with EvidenceClient(redis, settings) as client:
        async with running_worker(redis, settings, {"lookup_knowledge": InstantSource()}):
            results = await client.call_many("edge", calls, timeout=10)
    assert [loads(r.model)["tool_call_id"] for r in results if r] == ids
    assert_exactly_once(await books(redis, prefix, "edge"), ids)


async def test_resubmitting_an_id_with_other_arguments_is_a_conflict_not_the_first_result(
    redis: Any, prefix: str
) -> None:
    # The contract: one (session, id) names one call. Another tool or scope under a used id
    # is an ERROR for that call alone, never the first call's evidence (nothing minted).
    settings = settings_for(prefix)
    first = ToolCall(tool="lookup_knowledge", tool_call_id="same", arguments=GOOD_ARGS)
    again = ToolCall(tool="query_logs", tool_call_id="same", arguments="{broken")
    async with EvidenceClient(redis, settings) as client:
        async with running_worker(redis, settings, {"lookup_knowledge": InstantSource()}):
            [one] = await client.call_many("re", [first], timeout=10)
            [two] = await client.call_many("re", [again], timeout=10)
            [three] = await client.call_many("re", [first], timeout=10)
    assert one is not None and two is not None and three is not None
    assert loads(one.model)["evidence_status"] == "EVIDENCE_FOUND"
    assert loads(two.model) == {
        "tool_call_id": "same",
        "evidence_status": "ERROR",
        "error": {
            "code": "DUPLICATE_TOOL_CALL_ID",
            "message": "this tool call id was already used in this session for a different call",
        },
    }
    assert three.model == one.model  # the same call again: idempotent
    assert_exactly_once(await books(redis, prefix, "re"), ["same"])
