"""Hostile text from every upstream, through the real pipeline, on every page that shows it:
runbook titles, sources and excerpts; log levels, services and messages; SQL column names and
cells (also in the rows table); the arguments an agent chose (the session page's "asked").
Nothing is markup, no link is a `javascript:` URL, and no page holds a raw control, bidi
or zero-width character (they are spelled out)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlencode

import anyio
import pytest
from starlette.testclient import TestClient

from app.console import create_app
from contracts import (
    LogRecord,
    LogScope,
    LogsUpstream,
    LookupKnowledgeRequest,
    MysqlUpstream,
    QueryLogsRequest,
    Request,
)
from pipeline.client import ToolCall
from pipeline.settings import Settings
from tests.conftest import REDIS_URL
from tests.console.seed import drop_prefix, run_calls, settings_for

pytestmark = pytest.mark.redis

PAYLOADS = (
    '"><svg/onload=alert(1)>', "'><img src=x onerror=alert(2)>",
    "</script><script>alert(3)</script>", "javascript:alert(4)",
    "\u202egnp.exe\u200b\u2066x\u2069", "</textarea></title><iframe src=javascript:alert(5)>",
    "\x1b[31mRED\x1b[0m\x07",
)  # fmt: skip
EVIL = " | ".join(PAYLOADS)
SESSION = "s-hostile-sources"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


class Hostile:
    """Every upstream answering with the payloads in every field it has."""

    async def fetch(self, request: Request) -> Any:
        if isinstance(request, LookupKnowledgeRequest):
            hits = [{"documentId": p, "source": p, "title": p, "breadcrumb": p,
                     "content": p + " " + EVIL} for p in PAYLOADS]  # fmt: skip
            return {"contextPack": {"relevanceLevel": "high", "hits": hits}}
        if isinstance(request, QueryLogsRequest):
            scope = LogScope(topic=request.topic, query=request.query, lookback_minutes=60,
                             start_time="2026-03-14T09:10:00+08:00",
                             end_time="2026-03-14T10:10:00+08:00")  # fmt: skip
            records = [LogRecord(timestamp="2026-03-14T09:55:02.113+08:00", level=p[:20],
                                 service=p, message=p + EVIL) for p in PAYLOADS]  # fmt: skip
            return LogsUpstream(source_kind="MOCK", scope=scope, match_count=7, records=records)
        return MysqlUpstream(columns=[p[:40] for p in PAYLOADS], rows=[list(PAYLOADS)])

    async def aclose(self) -> None:
        return None


CALLS = (
    ToolCall(tool="lookup_knowledge", tool_call_id='"><svg/onload=alert(1)>',
             arguments={"query": EVIL}),
    ToolCall(tool="query_logs", tool_call_id="javascript:alert(4)",
             arguments={"topic": "APPLICATION", "query": EVIL}),
    ToolCall(tool="query_mysql", tool_call_id="a:b:*:{x}",
             arguments={"data_source": "orders", "sql": "SELECT ? -- " + EVIL, "params": [EVIL]}),
)  # fmt: skip


@pytest.fixture(scope="module")
def hostile() -> Iterator[Settings]:
    settings = settings_for(f"c{uuid.uuid4().hex[:12]}", REDIS_URL)
    source = Hostile()
    sources = dict.fromkeys(("lookup_knowledge", "query_logs", "query_mysql"), source)
    try:
        anyio.run(run_calls, REDIS_URL, settings, SESSION, list(CALLS), sources)
        yield settings
    finally:
        drop_prefix(REDIS_URL, settings.prefix)


# Attributes holding a URL the browser or console.js follows or fetches.
_URL_ATTRIBUTES = ("href", "src", "action", "formaction", "data-live-fragment", "data-live-events")


class _Attributes(HTMLParser):
    """Attributes that would run script: on* handlers, javascript: URLs, unknown tags."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("svg", "img", "iframe", "object", "embed"):
            self.found.append((tag, "", None))
        for name, value in attrs:
            url = (value or "").strip().lower()
            scheme = url.startswith(("javascript:", "data:", "vbscript:"))
            if name.startswith("on") or (name in _URL_ATTRIBUTES and (scheme or "//" in url[:2])):
                self.found.append((tag, name, value))


def _pages() -> list[str]:
    calls = [f"/call?{urlencode({'session': SESSION, 'id': c.tool_call_id})}" for c in CALLS]
    return [f"/session?id={SESSION}", f"/replay?session={SESSION}", "/?text=onerror", *calls]


@pytest.mark.parametrize("path", _pages())
def test_hostile_upstream_text_is_only_text(hostile: Settings, path: str) -> None:
    with TestClient(create_app(hostile, REDIS_URL)) as client:
        page = client.get(path)
    assert page.status_code == 200
    html = page.text
    for tag in ("<svg", "<img", "<iframe", "<script>alert", "</textarea>"):
        assert tag not in html, (path, tag)
    attributes = _Attributes()
    attributes.feed(html)
    assert attributes.found == [], path
    assert not RAW.search(html), (path, RAW.search(html))
    assert "&lt;svg/onload=alert(1)&gt;" in html, path
    if path.startswith("/call") and "a%3Ab" in path:
        assert 'data-testid="mysql-rows"' in html and "\\u202egnp.exe" in html
