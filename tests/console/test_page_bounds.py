"""Bounds that hold: a call page however its bodies nest (the JSON tree shows at most
`TREE_VALUES` values of each body, not 200 per level: 199 lists of 199 empty lists, a 119 KB
raw answer, rendered as a 14 MB page that held the event loop for a second), and the
searches running at once (each may SCAN the whole keyspace)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
import redis as redis_sync
from starlette.testclient import TestClient

from app.console import ConsoleConfig, create_app
from app.console.render import TREE_VALUES
from chaos.services import free_port
from pipeline.settings import Settings
from tests.conftest import REDIS_URL
from tests.console.seed import drop_prefix, settings_for

pytestmark = pytest.mark.redis

SESSION = "s-nested"


@pytest.fixture
def nested() -> Iterator[Settings]:
    prefix = f"c{uuid.uuid4().hex[:12]}"
    settings = settings_for(prefix, REDIS_URL)
    keys = settings.keys()
    now = int(time.time() * 1000)
    wide = json.dumps([[[] for _ in range(199)] for _ in range(199)], separators=(",", ":"))
    small = json.dumps({"tool_call_id": "c1", "rows": [[i, f"r{i}"] for i in range(50)]})
    r = redis_sync.Redis.from_url(REDIS_URL)
    try:
        r.zadd(keys.sessions, {SESSION: now})
        r.hset(keys.call(SESSION, "c1"), mapping={"st": "PROJECTING", "t0": str(now)})
        r.hset(keys.result(SESSION, "c1"), mapping={"st": "READY", "t1": str(now + 5),
                                                    "mo": small, "res": small})  # fmt: skip
        r.set(keys.raw(SESSION, "c1"), wide)
        yield settings
    finally:
        r.close()
        drop_prefix(REDIS_URL, prefix)


def test_a_nested_body_shows_a_bounded_number_of_values(nested: Settings) -> None:
    with TestClient(create_app(nested, REDIS_URL)) as client:
        page = client.get(f"/call?session={SESSION}&id=c1").text
    raw = page[page.index('data-testid="raw-answer"') :]
    raw = raw[: raw.index("</details>\n<details")]
    assert raw.count("<li") <= TREE_VALUES + 1
    assert "not shown: the page shows the first" in raw
    assert len(page) < 6_000_000, len(page)
    # A body within the bound is shown whole, with no such note.
    model = page[page.index('data-testid="model-view"') : page.index('data-testid="control-view"')]
    assert '"r49"' in model and "not shown" not in model


def test_searches_at_once_are_bounded(nested: Settings) -> None:
    # A search may walk the whole keyspace (an exact tool call id is looked up by key name,
    # a SCAN): beyond `max_searches` at once, the next is a 503 page, not one more walk.
    app = create_app(nested, REDIS_URL, config=ConsoleConfig(max_searches=1))
    state = app.app.state  # type: ignore[attr-defined]
    with TestClient(app) as client:
        assert client.get("/?q=c1").status_code == 200
        assert state.searches == 0  # its slot is free again
        state.searches = 1  # one search running
        busy = client.get("/?q=c1")
        assert busy.status_code == 503 and "searches are running" in busy.text
        assert busy.headers["retry-after"] == "5"
        assert client.get("/fragments/sessions?q=c1").status_code == 503
        assert client.get("/").status_code == 200  # the listing is not a search
        state.searches = 0
        assert client.get("/?q=c1").status_code == 200


def test_a_failed_search_frees_its_slot() -> None:
    settings = settings_for(f"c{uuid.uuid4().hex[:12]}", REDIS_URL)
    app = create_app(settings, f"redis://127.0.0.1:{free_port()}/0")
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.get("/?q=c1").status_code == 503  # Redis is down
        assert app.app.state.searches == 0  # type: ignore[attr-defined]
