"""The adversarial SQL corpus (tests/workers/sql_corpus.py) through the whole pipeline: submit ->
worker -> views, against the demo shop database, which must be unchanged afterwards."""

from __future__ import annotations

import json
from typing import Any

import pymysql
import pytest

from pipeline.client import EvidenceClient, ToolCall
from pipeline.settings import Settings
from tests.pipeline.helpers import assert_exactly_once, books, loads, running_worker
from tests.workers.sql_corpus import CORPUS
from workers.sources.mysql.shop import TABLES, ensure_demo_shop
from workers.sources.mysql.source import MysqlSource
from workers.sources.mysql.sqlguard import guard_sql

pytestmark = [pytest.mark.redis, pytest.mark.mariadb, pytest.mark.slow]
# The contract layer refuses some cases before the source's guard sees them.
DECODED_FIRST = {"empty": "SCHEMA"}  # blank SQL: `$.sql` must not be blank
SECRETS = ("aci-demo-reader", "aci_reader", "127.0.0.1", "3306", "Traceback")


class RecordingSource(MysqlSource):
    """Records every driver text that reaches the server (after the guard)."""

    sent: list[str]

    async def _run(self, pool: Any, text: str, *args: Any) -> Any:
        self.sent.append(text)
        return await super()._run(pool, text, *args)


def checksum() -> list[Any]:
    conn = pymysql.connect(host="127.0.0.1", port=3306, user="root", charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            cur.execute("CHECKSUM TABLE " + ", ".join(f"`shop`.`{t}`" for t in TABLES))
            return list(cur.fetchall())
    finally:
        conn.close()


async def test_sql_corpus_through_the_pipeline(redis: Any, prefix: str) -> None:
    url = await ensure_demo_shop()
    before = checksum()
    settings = Settings(prefix=prefix, visibility_timeout_s=10.0, deadline_s=5.0)
    source = RecordingSource.from_env(
        {"ACI_MYSQL_SHOP_URL": url, "ACI_MYSQL_STATEMENT_TIMEOUT_MS": "1000"}
    )
    assert isinstance(source, RecordingSource)
    source.sent = []
    calls = [
        ToolCall(
            tool="query_mysql",
            tool_call_id=f"sql_{name}",
            arguments=json.dumps({"data_source": "shop", "sql": sql, "params": params}),
        )
        for name, sql, params, _ in CORPUS
    ]
    try:
        async with EvidenceClient(redis, settings) as client:
            async with running_worker(redis, settings, {"query_mysql": source}, concurrency=8):
                results = await client.call_many("corpus", calls, timeout=90)
    finally:
        await source.aclose()
    wrong = {}
    for (name, _sql, _params, listed), result in zip(CORPUS, results, strict=True):
        expected = DECODED_FIRST.get(name, listed)
        assert result is not None, name
        model = loads(result.model)
        control = loads(result.control)
        assert model["tool_call_id"] == f"sql_{name}"
        assert len(result.model) <= settings.bounds.observation_max_bytes
        if expected == "ok":
            got = "ok" if model["evidence_status"] in ("EVIDENCE_FOUND", "NO_EVIDENCE") else model
            assert result.lifecycle == "READY" or got != "ok"
        else:
            got = model.get("error", {}).get("code", model["evidence_status"])
            assert result.lifecycle == "ERROR" or got != expected
            assert control["error_code"] == got
            message = model["error"]["message"]
            assert not [s for s in SECRETS if s in message], (name, message)
        if got != expected:
            wrong[name] = got
    assert wrong == {}
    # A refused query never reaches the server: only the server-side cases' texts were sent.
    server_side = {
        guard_sql(sql, params, schema="shop").text
        for name, sql, params, expected in CORPUS
        if DECODED_FIRST.get(name, expected) in ("ok", "EXECUTION", "TIMEOUT")
    }
    assert source.sent and set(source.sent) <= server_side
    assert_exactly_once(await books(redis, prefix, "corpus"), [c.tool_call_id for c in calls])
    assert checksum() == before
