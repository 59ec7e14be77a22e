"""Runtime adapters: golden wire shapes (no server) and each adapter end to end on Redis.

Regenerate the golden replies with `UPDATE_GOLDEN=1 pytest tests/hosts/test_adapters.py`,
then review the diff of tests/golden/adapters/.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import msgspec
import pytest

import hosts as adapters
from contracts import LifecycleStatus, Request
from hosts import (
    AdapterError,
    anthropic,
    langchain,
    openai_chat,
    openai_responses,
    turn,
)
from pipeline.client import CallResult, EvidenceClient, ToolCall
from pipeline.settings import Settings
from tests.pipeline.helpers import running_worker
from tests.pipeline.sources import FailingSource, InstantSource

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
UPDATE_GOLDEN = os.environ.get("UPDATE_GOLDEN") == "1"

# One assistant turn of six parallel calls: (id, tool, arguments, contract golden case or None
# for a call still running at the adapter's timeout).
TURN: list[tuple[str, str, dict[str, Any], str | None]] = [
    (
        "call_rag_1",
        "lookup_knowledge",
        {"query": "HikariPool connection timeout after deploy"},
        "rag_found",
    ),
    (
        "call_logs_2",
        "query_logs",
        {"topic": "APPLICATION", "query": "timeout -healthcheck", "lookback_minutes": 30},
        "logs_no_evidence",
    ),
    ("call_err_1", "query_logs", {"topic": "APPLICATION", "query": 5}, "error_schema"),
    ("call_err_4", "query_metrics", {"name": "cpu"}, "error_unknown_tool"),
    ("", "lookup_knowledge", {"query": "pool"}, "error_invalid_tool_call_id"),
    ("call_mysql_9", "query_mysql", {"data_source": "shop", "sql": "SELECT 1", "params": []}, None),
]
# Control-view words that must never reach a model-facing text.
CONTROL_ONLY = ("scope_fingerprint", "timings", "attempts", "duplicate_of", "session_id",
                "queue_ms", "match_count", "returned_count", '"status"')  # fmt: skip


def compact(path: Path) -> bytes:
    return msgspec.json.encode(json.loads(path.read_text(encoding="utf-8")))


def contract_result(case: str | None) -> CallResult | None:
    """A final `CallResult` made of the contract's golden views (None: still running)."""
    if case is None:
        return None
    folder = GOLDEN / "contracts"
    control = json.loads((folder / f"{case}.control.json").read_text(encoding="utf-8"))
    return CallResult(
        tool_call_id=control.get("tool_call_id", msgspec.UNSET),
        lifecycle=LifecycleStatus(control["status"]),
        model=msgspec.Raw(compact(folder / f"{case}.observation.json")),
        control=msgspec.Raw(compact(folder / f"{case}.control.json")),
    )


def check_golden(name: str, value: Any) -> None:
    """Compare `value` with tests/golden/adapters/<name>.json byte for byte (indented JSON)."""
    path = GOLDEN / "adapters" / f"{name}.json"
    text = json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    if UPDATE_GOLDEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"missing golden file {path.name}; run with UPDATE_GOLDEN=1 to create it")
    assert path.read_text(encoding="utf-8") == text, f"{path.name} differs from the current output"


# Native assistant turns, exactly as each runtime sends them.
Spec = list[tuple[str, str, dict[str, Any]]]


def chat_message(spec: Spec) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": t, "arguments": json.dumps(a)}}
            for i, t, a in spec
        ],
    }


def responses_output(spec: Spec) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"type": "reasoning", "id": "rs_1", "summary": []}]
    for n, (i, t, a) in enumerate(spec):
        item = {"type": "function_call", "id": f"fc_{n}", "call_id": i, "name": t}
        out.append({**item, "arguments": json.dumps(a), "status": "completed"})
    return out


def anthropic_message(spec: Spec) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": "Checking three sources."}]
    content += [{"type": "tool_use", "id": i, "name": t, "input": a} for i, t, a in spec]
    return {"role": "assistant", "content": content, "stop_reason": "tool_use"}


def langchain_calls(spec: Spec) -> dict[str, Any]:
    calls = [{"name": t, "args": a, "id": i, "type": "tool_call"} for i, t, a in spec]
    return {"type": "ai", "content": "", "tool_calls": calls}


def golden_turn() -> tuple[Spec, list[CallResult | None]]:
    return [(i, t, a) for i, t, a, _ in TURN], [contract_result(c) for *_, c in TURN]


def model_texts(runtime: str, reply: Any) -> list[str]:
    """Every text of a reply that the model reads."""
    if runtime == "openai_chat":
        return [m["content"] for m in reply]
    if runtime == "openai_responses":
        return [m["output"] for m in reply]
    if runtime == "anthropic":
        return [b["text"] for r in reply["content"] for b in r["content"]]
    return [m["content"] for m in reply]


# --- golden wire shapes (pure, no server) ---------------------------------------------------


def test_openai_chat_golden() -> None:
    spec, results = golden_turn()
    calls = openai_chat.read_tool_calls(chat_message(spec))
    assert [c.tool_call_id for c in calls] == [i for i, *_ in spec]
    reply = [openai_chat.format_result(c, r) for c, r in zip(calls, results, strict=True)]
    check_golden("openai_chat", reply)
    assert [m["tool_call_id"] for m in reply] == [i for i, *_ in spec]
    assert all(m.keys() == {"role", "tool_call_id", "content"} for m in reply)


def test_openai_responses_golden_pairs_on_call_id() -> None:
    spec, results = golden_turn()
    calls = openai_responses.read_tool_calls({"id": "resp_1", "output": responses_output(spec)})
    assert [c.tool_call_id for c in calls] == [i for i, *_ in spec]  # call_id, not fc_ ids
    reply = [openai_responses.format_result(c, r) for c, r in zip(calls, results, strict=True)]
    check_golden("openai_responses", reply)
    assert all(m["type"] == "function_call_output" for m in reply)


def test_anthropic_golden_one_user_message() -> None:
    spec, results = golden_turn()
    calls = anthropic.read_tool_calls(anthropic_message(spec))
    reply = anthropic.user_message(
        [anthropic.format_result(c, r) for c, r in zip(calls, results, strict=True)]
    )
    check_golden("anthropic", reply)
    assert reply["role"] == "user"
    assert [b["type"] for b in reply["content"]] == ["tool_result"] * len(spec)
    assert [b["tool_use_id"] for b in reply["content"]] == [i for i, *_ in spec]
    errors = [b["is_error"] for b in reply["content"]]
    assert errors == [False, False, True, True, True, False]  # only ERROR, never NO_EVIDENCE
    for block in reply["content"]:
        assert block["content"] and all(part["text"] for part in block["content"])
    no_evidence = reply["content"][1]["content"]
    assert json.loads(no_evidence[0]["text"])["evidence_status"] == "NO_EVIDENCE"
    assert no_evidence[1]["text"] == turn.NO_EVIDENCE_NOTE
    assert all(len(b["content"]) == 1 for i, b in enumerate(reply["content"]) if i != 1)


def test_langchain_golden_fields() -> None:
    spec, results = golden_turn()
    calls = langchain.read_tool_calls(langchain_calls(spec))
    fields = [langchain.tool_message_fields(c, r) for c, r in zip(calls, results, strict=True)]
    check_golden("langchain", fields)
    assert [f["status"] for f in fields] == [
        "success",
        "success",
        "error",
        "error",
        "error",
        "success",
    ]
    assert fields[1]["artifact"]["scope_fingerprint"]  # the control view is the artifact
    assert fields[5]["artifact"] == {
        "tool": "query_mysql",
        "tool_call_id": "call_mysql_9",
        "status": "PROJECTING",
    }


def test_langchain_builds_tool_messages() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, ToolMessage

    spec, results = golden_turn()
    message = AIMessage(
        content="", tool_calls=[c for c in langchain_calls(spec)["tool_calls"] if c["id"]]
    )
    calls = langchain.read_tool_calls(message)
    assert [c.tool_call_id for c in calls] == [i for i, *_ in spec if i]
    pairs = [
        (c, r)
        for c, r in zip(
            calls, [r for (i, *_), r in zip(spec, results, strict=True) if i], strict=True
        )
    ]
    for call, result in pairs:
        message_out = langchain.format_result(call, result)
        assert isinstance(message_out, ToolMessage)
        expected = langchain.tool_message_fields(call, result)
        assert message_out.content == expected["content"]
        assert message_out.artifact == expected["artifact"]
        assert message_out.status == expected["status"]
        assert message_out.tool_call_id == call.tool_call_id and message_out.name == call.tool


@pytest.mark.parametrize("runtime", ["openai_chat", "openai_responses", "anthropic", "langchain"])
def test_model_texts_are_the_observation_and_never_the_control_view(runtime: str) -> None:
    _, results = golden_turn()
    reply = json.loads((GOLDEN / "adapters" / f"{runtime}.json").read_text(encoding="utf-8"))
    texts = model_texts(runtime, reply)
    observations = [t for t in texts if t != turn.NO_EVIDENCE_NOTE]
    for text, result in zip(observations, results, strict=True):
        if result is not None:  # final: exactly the published observation
            assert text == bytes(result.model).decode()
        assert not any(word in text for word in CONTROL_ONLY), text
    pending = json.loads(observations[-1])
    assert pending == turn.pending_observation(
        ToolCall(tool="query_mysql", tool_call_id="call_mysql_9", arguments={})
    )
    assert "evidence_status" not in pending  # pending is never NO_EVIDENCE


def test_pending_message_promises_only_what_is_true() -> None:
    # The model has no tool to fetch a result and cannot choose its call id, so the pending
    # answer may say only that the query is still running and what calling again does.
    message = turn.PENDING_MESSAGE.casefold()
    for promise in ("fetch", "later", "tool_call_id", "kept", "retriev"):
        assert promise not in message, promise
    assert "still running" in message and "not a finding" in message
    assert "calling the tool again runs the query again" in message


def test_sdk_objects_are_read_by_attribute() -> None:
    function = SimpleNamespace(name="lookup_knowledge", arguments='{"query": "x"}')
    message = SimpleNamespace(
        role="assistant", tool_calls=[SimpleNamespace(id="c1", type="function", function=function)]
    )
    [call] = openai_chat.read_tool_calls(message)
    assert (call.tool, call.tool_call_id, call.arguments) == (
        "lookup_knowledge",
        "c1",
        '{"query": "x"}',
    )
    block = SimpleNamespace(
        type="tool_use",
        id="toolu_1",
        name="query_logs",
        input={"topic": "APPLICATION", "query": ""},
    )
    [call] = anthropic.read_tool_calls(
        SimpleNamespace(content=[SimpleNamespace(type="text", text="hi"), block])
    )
    assert call.tool_call_id == "toolu_1" and call.arguments == {
        "topic": "APPLICATION",
        "query": "",
    }


@pytest.mark.parametrize(
    ("reader", "bad", "path"),
    [
        (openai_chat.read_tool_calls, "hello", "message"),
        (openai_chat.read_tool_calls, {"tool_calls": "x"}, "message.tool_calls"),
        (openai_chat.read_tool_calls, {"tool_calls": [7]}, "message.tool_calls[0]"),
        (
            openai_responses.read_tool_calls,
            {"output": {"type": "function_call"}},
            "response.output",
        ),
        (openai_responses.read_tool_calls, [None], "response.output[0]"),
        (anthropic.read_tool_calls, {"content": [1]}, "message.content[0]"),
        (langchain.read_tool_calls, {"tool_calls": 3}, "message.tool_calls"),
    ],
)
def test_malformed_runtime_objects_raise_adapter_error(
    reader: Callable[[Any], Any], bad: Any, path: str
) -> None:
    with pytest.raises(AdapterError, match=path.replace("[", r"\[").replace("]", r"\]")):
        reader(bad)


def test_a_call_missing_its_parts_is_still_answered_as_an_error() -> None:
    [call] = openai_chat.read_tool_calls({"tool_calls": [{"id": "c1"}]})
    assert call.tool == "" and call.arguments is None  # the worker answers UNKNOWN_TOOL
    assert anthropic.read_tool_calls({"role": "user", "content": "just text"}) == []


async def test_a_turn_without_calls_needs_no_server() -> None:
    client: Any = None  # never touched
    assert await openai_chat.answer_tool_calls({"tool_calls": []}, client, "s") == []
    assert (
        await openai_responses.answer_tool_calls({"output": [{"type": "message"}]}, client, "s")
        == []
    )
    assert (
        await anthropic.answer_tool_calls(
            {"content": [{"type": "text", "text": "done"}]}, client, "s"
        )
        is None
    )
    assert await langchain.answer_tool_calls([], client, "s") == []


def test_package_exports() -> None:
    assert sorted(adapters.__all__, key=lambda n: (not n.isupper(), n)) == adapters.__all__
    for name in adapters.__all__:
        assert hasattr(adapters, name), name
    for module in (turn, openai_chat, openai_responses, anthropic, langchain):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


# --- end to end through the real Redis ------------------------------------------------------


class GatedSource(InstantSource):
    """Knowledge: 'nothing' finds nothing; 'later' waits for the gate; anything else is found."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = anyio.Event()

    async def fetch(self, request: Request) -> Any:
        if getattr(request, "query", "") == "later":
            await self.gate.wait()
        return await super().fetch(request)


E2E: Spec = [
    ("call_found", "lookup_knowledge", {"query": "pool exhausted"}),
    ("call_empty", "lookup_knowledge", {"query": "nothing"}),
    ("call_failed", "query_logs", {"topic": "APPLICATION", "query": "timeout"}),
    ("call_later", "lookup_knowledge", {"query": "later"}),
]
E2E_STATUS = ["EVIDENCE_FOUND", "NO_EVIDENCE", "ERROR", None]


async def run_turn(runtime: str, client: EvidenceClient, session: str) -> Any:
    if runtime == "openai_chat":
        return await openai_chat.answer_tool_calls(chat_message(E2E), client, session, timeout=1.0)
    if runtime == "openai_responses":
        return await openai_responses.answer_tool_calls(
            {"output": responses_output(E2E)}, client, session, timeout=1.0
        )
    if runtime == "anthropic":
        return await anthropic.answer_tool_calls(
            anthropic_message(E2E), client, session, timeout=1.0
        )
    reply = await langchain.answer_tool_calls(langchain_calls(E2E), client, session, timeout=1.0)
    return [
        {
            "content": m.content,
            "status": m.status,
            "artifact": m.artifact,
            "tool_call_id": m.tool_call_id,
        }
        for m in reply
    ]


@pytest.mark.serial
@pytest.mark.redis
@pytest.mark.parametrize("runtime", ["openai_chat", "openai_responses", "anthropic", "langchain"])
async def test_adapter_end_to_end_with_a_mix_and_a_timeout(
    redis: Any, prefix: str, runtime: str
) -> None:
    if runtime == "langchain":
        pytest.importorskip("langchain_core")
    settings = Settings(prefix=prefix, visibility_timeout_s=10.0, deadline_s=5.0)
    knowledge = GatedSource()
    sources = {"lookup_knowledge": knowledge, "query_logs": FailingSource()}
    session = f"adapters-{runtime.replace('_', '-')}"
    async with EvidenceClient(redis, settings) as client, running_worker(redis, settings, sources):
        started = anyio.current_time()
        reply = await run_turn(runtime, client, session)
        elapsed = anyio.current_time() - started
        knowledge.gate.set()
        later = await client.wait(session, ["call_later"], 10.0)
        # The harness answers the same turn again: same ids, so every call is idempotent and
        # the one that was pending now has its finished result.
        again = await run_turn(runtime, client, session)
    assert elapsed < 3.0  # the turn waits once for all calls, not once per call
    texts = [t for t in model_texts(runtime, reply) if t != turn.NO_EVIDENCE_NOTE]
    observations = [json.loads(t) for t in texts]
    assert [o.get("evidence_status") for o in observations] == E2E_STATUS
    assert [o["tool_call_id"] for o in observations] == [i for i, *_ in E2E]
    assert observations[2]["error"]["code"] == "UNAVAILABLE"
    assert observations[3]["pending"] is True and observations[3]["message"] == turn.PENDING_MESSAGE
    for text in texts:
        assert not any(word in text for word in CONTROL_ONLY), text
    # The pending call was not lost: its final result is readable afterwards.
    final = json.loads(bytes(later["call_later"].model))
    assert final["evidence_status"] == "EVIDENCE_FOUND"
    texts_again = [t for t in model_texts(runtime, again) if t != turn.NO_EVIDENCE_NOTE]
    assert texts_again[:3] == texts[:3]
    assert json.loads(texts_again[3]) == final
    if runtime == "anthropic":
        blocks = reply["content"]
        assert [b["is_error"] for b in blocks] == [False, False, True, False]
        assert blocks[1]["content"][1]["text"] == turn.NO_EVIDENCE_NOTE
    if runtime == "langchain":
        assert [m["status"] for m in reply] == ["success", "success", "error", "success"]
        assert reply[0]["artifact"]["session_id"] == session
        assert reply[3]["artifact"]["status"] == "PROJECTING"
