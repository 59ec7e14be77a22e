"""Large raw answers and canonical results are stored zlib-compressed behind a marker; every
reader (`read_records`: replay, export, the chaos books) sees the JSON as it was."""

from __future__ import annotations

import random
import zlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.client import EvidenceClient, ToolCall
from pipeline.record import PACKED, pack, read_records, unpack
from pipeline.settings import Settings
from tests.pipeline.helpers import loads, running_worker
from tests.pipeline.sources import InstantSource, answer
from workers.replay import Selection, load_redis
from workers.replay_diff import reproject


@given(st.binary(max_size=5000))
def test_pack_round_trips(data: bytes) -> None:
    assert unpack(pack(data)) == data


def test_only_large_compressible_records_are_packed() -> None:
    small = b'{"a": 1}'
    assert pack(small) == small
    large = b'{"events": [' + b'{"msg": "timeout on pool"},' * 200 + b"{}]}"
    packed = pack(large)
    assert packed.startswith(PACKED) and len(packed) < len(large) // 5
    noise = b'"' + random.Random(1).randbytes(2048) + b'"'  # incompressible: kept as is
    assert pack(noise) == noise


def test_a_damaged_or_oversized_packed_record_is_returned_as_stored() -> None:
    damaged = PACKED + b"not zlib"
    assert unpack(damaged) == damaged  # replay then reports it as undecodable
    bomb = PACKED + zlib.compress(b" " * (65 * 1024 * 1024))
    assert unpack(bomb) == bomb


class ManyHits(InstantSource):
    """Eight hits quoting the query: a raw answer and a result of a few KiB."""

    async def fetch(self, request: Any) -> Any:
        body = answer(request.query)
        if not body["contextPack"]["hits"]:
            return body
        hit = body["contextPack"]["hits"][0]
        body["contextPack"]["hits"] = [{**hit, "documentId": f"doc-{i}"} for i in range(8)]
        return body


@pytest.mark.redis
async def test_a_large_raw_answer_is_stored_compressed_and_replays(redis: Any, prefix: str) -> None:
    settings = Settings(prefix=prefix, visibility_timeout_s=2.0, deadline_s=1.0)
    keys = settings.keys()
    query = "pool exhausted " + " ".join(f"w{i}" for i in range(200))
    calls = [ToolCall(tool="lookup_knowledge", tool_call_id="big", arguments={"query": query}),
             ToolCall(tool="lookup_knowledge", tool_call_id="small", arguments={"query": "nothing"})]  # fmt: skip
    async with (
        running_worker(redis, settings, {"lookup_knowledge": ManyHits()}),
        EvidenceClient(redis, settings) as client,
    ):
        big, small = await client.call_many("s", calls, timeout=10)
    assert big is not None and small is not None
    stored = await redis.get(keys.raw("s", "big"))
    assert stored.startswith(PACKED)
    stored_result = await redis.hget(keys.result("s", "big"), "res")
    assert stored_result.startswith(PACKED)
    assert not (await redis.get(keys.raw("s", "small"))).startswith(PACKED)
    # What the client reads is untouched JSON.
    assert loads(big.model)["evidence_status"] == "EVIDENCE_FOUND"
    [record] = await read_records(redis, keys, [("s", "big")])
    assert loads(record["raw"])["contextPack"]["hits"][0]["content"].endswith(query)
    assert loads(record["res"])["tool_call_id"] == "big"
    records = await load_redis(redis, settings, Selection(session="s"))
    assert [reproject(r, settings).outcome for r in records] == ["identical", "identical"]
