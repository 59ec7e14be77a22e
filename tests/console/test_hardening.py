"""The console under attack and at 3 a.m.: malformed stream entries (non-UTF-8, missing
fields, digits `int()` refuses) never break a page, Redis down gives a clear 503 page, the
`?token=` redirect stays on this site and never leaves the token in a page, pages past the
end are clamped (not an empty "no session" page that costs a huge ZRANGE), search results are
not re-run by live refreshes, SSE streams are capped, and large JSON objects are bounded."""

from __future__ import annotations

import contextlib
import json
import shlex
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import quote, urlencode

import anyio
import httpx
import pytest
import redis as redis_sync
import uvicorn
from hypothesis import given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from app import cli
from app.console import ConsoleConfig, create_app
from app.console.handlers import replay_command, until_redis_fails
from app.console.live import lifecycle_events
from app.console.serve import _root_path, console_config
from chaos.services import free_port
from pipeline.inspect import (
    DeadLetter,
    _lifecycle,
    call_controls,
    call_rows,
    recent_sessions,
)
from pipeline.record import lifecycle_entry
from pipeline.redis_io import open_redis
from pipeline.settings import Settings, SettingsError
from tests.conftest import REDIS_URL
from tests.console.seed import drop_prefix, settings_for

pytestmark = pytest.mark.redis

BAD = "s-bad"


@pytest.fixture
def raw() -> Iterator[Settings]:
    """A deployment whose keys were written by hand, malformed on purpose."""
    prefix = f"c{uuid.uuid4().hex[:12]}"
    settings = settings_for(prefix, REDIS_URL)
    keys = settings.keys()
    now = int(time.time() * 1000)
    r = redis_sync.Redis.from_url(REDIS_URL)
    try:
        r.zadd(keys.sessions, {BAD: now})
        # A superscript two passes str.isdigit() and fails int().
        r.xadd(keys.lifecycle, {"session": BAD, "id": "c1", "tool": "lookup_knowledge",
                                "status": "PROJECTING", "at": "\u00b2"})  # fmt: skip
        r.xadd(keys.lifecycle, {"session": BAD, "id": b"\xff\xfe", "status": "READY",
                                "evidence": "NO_EVIDENCE", "at": b"\xc3"})  # fmt: skip
        r.xadd(keys.lifecycle, {"junk": "no fields of ours"})
        r.hset(keys.call(BAD, "c1"), mapping={"st": "PROJECTING", "t0": "\u00b2",
                                              "tool": "lookup_knowledge", "eid": b"\xff-1"})  # fmt: skip
        big = {f"k{i}": i for i in range(1000)}
        r.hset(keys.result(BAD, "c1"), mapping={"st": "READY", "t1": "\u00b3", "mo": json.dumps(big),
                                                "cv": b"\xff{not json"})  # fmt: skip
        deep = b"[" * 5000 + b"]" * 5000  # valid JSON past any recursion limit
        r.hset(keys.call(BAD, "c2"), mapping={"st": "PROJECTING", "t0": str(now), "inv": deep})
        r.hset(keys.result(BAD, "c2"), mapping={"st": "READY", "t1": str(now), "mo": deep,
                                                "cv": deep, "res": deep})  # fmt: skip
        r.set(keys.raw(BAD, "c2"), deep)
        r.xadd(keys.model(BAD), {"id": b"\xff\xfe", "d": json.dumps({"text": "needle here"})})
        r.xadd(keys.model(BAD), {"id": "c2", "d": deep})
        r.xadd(keys.model(BAD), {"d": b"\xff needle \xfe"})
        r.xadd(keys.dead, {"reason": b"\xff", "d": b"\xff\xfe not an envelope"})
        r.xadd(keys.dead, {"session": BAD, "id": "-rf", "reason": "poison"})
        yield settings
    finally:
        r.close()
        drop_prefix(REDIS_URL, prefix)


MALFORMED_PAGES = [
    "/",
    "/?page=\u00b2",
    "/?page=99999999999999999999",
    f"/session?id={BAD}",
    f"/session?id={BAD}&page=\u00b3",
    f"/fragments/timeline?id={BAD}",
    "/?q=c1",
    "/?q=zzz-nothing",
    "/?text=needle",
    f"/call?session={BAD}&id=c1",
    f"/call?session={BAD}&id=c2",
    "/fleet",
    f"/replay?session={BAD}",
    f"/replay?a={BAD}&b={BAD}",
]


@pytest.mark.parametrize("path", MALFORMED_PAGES)
def test_malformed_entries_never_break_a_page(raw: Settings, path: str) -> None:
    with TestClient(create_app(raw, REDIS_URL), raise_server_exceptions=False) as client:
        response = client.get(path)
    assert response.status_code == 200, response.text[:500]


def test_text_search_reads_observations_with_non_utf8_ids(raw: Settings) -> None:
    with TestClient(create_app(raw, REDIS_URL)) as client:
        page = client.get("/?text=needle").text
    assert "needle here" in page and "no call matches" not in page


def test_a_large_json_object_is_bounded_on_the_page(raw: Settings) -> None:
    with TestClient(create_app(raw, REDIS_URL)) as client:
        page = client.get(f"/call?session={BAD}&id=c1").text
    assert "k199" in page and "k999" not in page
    assert "800 more keys" in page


def test_redis_down_is_a_clear_page_not_a_traceback() -> None:
    settings = settings_for("cdown", REDIS_URL)
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    app = create_app(settings, url)
    with TestClient(app, raise_server_exceptions=False) as client:
        for path in ("/", f"/session?id={BAD}", "/fleet", f"/call?session={BAD}&id=x"):
            response = client.get(path)
            assert response.status_code == 503, (path, response.status_code)
            assert "Redis is unreachable" in response.text
            for leak in ("127.0.0.1", "hunter2", "Traceback", ".py", "redis://"):
                assert leak not in response.text
            assert response.headers["content-security-policy"].startswith("default-src 'none'")
        assert client.get("/fragments/sessions").status_code == 503
        assert client.get("/healthz").status_code == 200


async def _asgi_get(app: Any, path: str, query: bytes, headers: list[tuple[bytes, bytes]]) -> Any:
    """One raw ASGI GET (a path an HTTP client would read as a host): status, headers."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": query,
        "root_path": "", "headers": headers, "client": ("127.0.0.1", 1), "server": ("t", 80),
    }  # fmt: skip
    await app(scope, receive, send)
    start = sent[0]
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}


@pytest.mark.parametrize("path", ["//evil.example/x", "/\\evil.example", "///evil.example"])
def test_the_token_redirect_stays_on_this_site(raw: Settings, path: str) -> None:
    app = create_app(raw, REDIS_URL, config=ConsoleConfig(token="s3cret"))
    status, headers = anyio.run(_asgi_get, app, path, b"token=s3cret&q=1", [])
    assert status == 303
    location = headers["location"]
    assert location.startswith("/") and not location.startswith(("//", "/\\"))


def test_a_token_in_the_url_is_stripped_even_with_the_cookie(raw: Settings) -> None:
    with TestClient(create_app(raw, REDIS_URL, config=ConsoleConfig(token="s3cret"))) as client:
        first = client.get("/?token=s3cret", follow_redirects=False)
        assert first.status_code == 303 and "aci_console_token" in first.headers["set-cookie"]
        # Already signed in (the cookie), a link still holding the token: it must not stay
        # in the URL, nor be copied into the page's pager and fragment links.
        again = client.get("/?token=s3cret&q=c1", follow_redirects=False)
        assert again.status_code == 303 and again.headers["location"] == "/?q=c1"
        assert "s3cret" not in client.get("/?q=c1").text


def test_the_cookie_is_secure_over_https(raw: Settings) -> None:
    app = create_app(raw, REDIS_URL, config=ConsoleConfig(token="s3cret"))
    with TestClient(app, base_url="https://console.example") as client:
        cookie = client.get("/?token=s3cret", follow_redirects=False).headers["set-cookie"]
    assert "secure" in cookie.lower() and "httponly" in cookie.lower()


def test_a_page_past_the_end_is_clamped_not_empty(raw: Settings) -> None:
    with TestClient(create_app(raw, REDIS_URL)) as client:
        page = client.get("/?page=100000").text
    assert BAD in page and "no session" not in page


def test_search_results_are_not_rerun_by_live_refreshes(raw: Settings) -> None:
    with TestClient(create_app(raw, REDIS_URL)) as client:
        assert "data-live-fragment" in client.get("/").text
        searched = client.get("/?text=needle").text
    assert "data-live-fragment" not in searched and "live-feed" in searched


def test_the_root_page_explains_itself_and_its_empty_state() -> None:
    settings = settings_for(f"c{uuid.uuid4().hex[:12]}", REDIS_URL)
    with TestClient(create_app(settings, REDIS_URL)) as client:
        page = client.get("/").text
    assert "read-only" in page and "Model Observation" in page
    assert "No session is recorded yet" in page and settings.prefix in page


def test_a_replay_command_never_reads_an_id_as_a_flag() -> None:
    letter = DeadLetter(0, "1-0", "1-0", "poison", BAD, "-rf", "")
    command = replay_command(letter)
    assert command is not None and "--id=-rf" in command
    args = cli._parser().parse_args(shlex.split(command)[1:])
    assert (args.session, args.id, args.into) == (BAD, "-rf", f"{BAD}-replay")
    hidden = DeadLetter(0, "1-0", "1-0", "poison", BAD, "a\x1bb", "")
    assert replay_command(hidden) is None  # a terminal would not run what the page shows


@contextlib.asynccontextmanager
async def _serving(app: Any) -> AsyncIterator[str]:
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        for _ in range(500):  # uvicorn says it has started by a flag only
            if server.started:
                break
            await anyio.sleep(0.02)
        assert server.started, "uvicorn did not start"
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


async def test_live_streams_are_capped(raw: Settings) -> None:
    app = create_app(raw, REDIS_URL, config=ConsoleConfig(max_streams=1))
    with anyio.fail_after(20):
        async with _serving(app) as base, httpx.AsyncClient(timeout=10) as http:
            async with http.stream("GET", f"{base}/events") as first:
                assert first.status_code == 200
                second = await http.get(f"{base}/events")
                assert second.status_code == 503 and "live streams" in second.text
                assert (await http.get(f"{base}/")).status_code == 200
            # The first one closed: its slot is free again.
            for _ in range(100):
                async with http.stream("GET", f"{base}/events") as third:
                    if third.status_code == 200:
                        break
                await anyio.sleep(0.05)
            assert third.status_code == 200


async def test_a_listing_reads_no_bodies_only_its_page_does(redis: Any, raw: Settings) -> None:
    keys = raw.keys()
    rows = await call_rows(redis, keys, BAD, ["c1"])
    assert rows[0].status == "READY" and rows[0].control is None
    (shown,) = await call_controls(redis, keys, rows)
    assert shown.control == b"\xff{not json"


@given(
    st.dictionaries(
        st.sampled_from(["session", "id", "tool", "status", "evidence", "at", "eid", "other"]),
        st.binary(max_size=8),
    ),
    st.booleans(),
)
def test_the_lean_lifecycle_decode_is_lifecycle_entry(
    fields: dict[str, bytes], raw_keys: bool
) -> None:
    given_fields: dict[Any, bytes] = (
        {k.encode(): v for k, v in fields.items()} if raw_keys else fields
    )
    assert _lifecycle(given_fields) == lifecycle_entry(given_fields)


def test_a_text_search_reads_a_bounded_number_of_observations(raw: Settings) -> None:
    with TestClient(create_app(raw, REDIS_URL, config=ConsoleConfig(text_budget=1))) as client:
        page = client.get("/?text=needle").text
    # The first observation (the one holding "needle here") fits the budget; the second one
    # ("\xff needle \xfe") is never read.
    assert "needle here" in page and "up to 1 Model Observations" in page
    assert "1 matching call" in page


async def test_a_live_stream_ends_with_one_event_when_redis_fails(raw: Settings) -> None:
    async with open_redis(f"redis://127.0.0.1:{free_port()}/0") as dead:
        stream = lifecycle_events(dead, raw, last_event_id=None)
        with anyio.fail_after(20):
            events = [e async for e in until_redis_fails(stream)]
    assert events == [{"event": "unavailable", "data": "redis", "retry": 5000}]


EVIL = "\"'><img src=x onerror=alert(1)><script>alert(1)</script>"
XSS = "s-xss"


def test_hostile_text_in_every_field_is_escaped(raw: Settings) -> None:
    keys = raw.keys()
    r = redis_sync.Redis.from_url(REDIS_URL)
    now = int(time.time() * 1000)
    r.zadd(keys.sessions, {XSS: now + 1})
    r.xadd(keys.lifecycle, {"session": XSS, "id": EVIL, "tool": EVIL, "status": EVIL,
                            "evidence": EVIL, "at": str(now)})  # fmt: skip
    r.hset(keys.call(XSS, EVIL), mapping={"st": EVIL, "t0": str(now), "tool": EVIL,
                                          "dup": EVIL, "inv": EVIL})  # fmt: skip
    cv = {"error_code": EVIL, EVIL: EVIL, "timings": {"queue_ms": 1}}
    r.hset(keys.result(XSS, EVIL), mapping={"st": "ERROR", "ev": EVIL, "t1": str(now + 5),
                                            "cv": json.dumps(cv), "mo": json.dumps({EVIL: [EVIL]}),
                                            "res": EVIL})  # fmt: skip
    r.xadd(keys.model(XSS), {"id": EVIL, "d": json.dumps({"text": EVIL})})
    r.xadd(keys.dead, {"session": XSS, "id": EVIL, "reason": EVIL, "eid": EVIL})
    r.close()
    q = {"q": EVIL}
    pages = [
        "/", "/fleet", f"/session?id={XSS}", f"/replay?session={XSS}", f"/replay?a={XSS}&b={BAD}",
        "/?" + urlencode(q), "/?" + urlencode({"text": "onerror"}), "/?" + urlencode({"tool": EVIL}),
        "/?" + urlencode({"q": "img", "page": EVIL}), "/call?" + urlencode({"session": XSS, "id": EVIL}),
        "/replay?" + urlencode({"session": EVIL}), "/session?" + urlencode({"id": EVIL}),
        "/fragments/sessions?" + urlencode(q),
    ]  # fmt: skip
    with TestClient(create_app(raw, REDIS_URL)) as client:
        for path in pages:
            html = client.get(path).text
            assert "<img" not in html and "<script>alert" not in html, path
            shown = "&lt;img src=x onerror=alert(1)&gt;" in html
            assert shown or (path not in pages[:3] and "/call" not in path), path


@pytest.mark.parametrize("bad", ["//evil.example", "//evil.example/aci", "/a\tb", "/a\x00"])
def test_a_root_path_never_names_another_site(bad: str) -> None:
    with pytest.raises(SettingsError):
        _root_path(bad)
    assert _root_path("/aci//x/") == "/aci//x"


@pytest.mark.parametrize("token", ["plain-token", 'with space;and,comma"quote'])
def test_the_token_signs_in_by_cookie_and_by_any_case_of_bearer(raw: Settings, token: str) -> None:
    with TestClient(create_app(raw, REDIS_URL, config=ConsoleConfig(token=token))) as client:
        assert client.get("/").status_code == 401
        assert client.get("/", headers={"authorization": f"bearer {token}"}).status_code == 200
        assert client.get("/", headers={"authorization": "bearer wrong"}).status_code == 401
        signed = client.get("/?" + urlencode({"token": token, "q": "c1"}))
        assert signed.status_code == 200 and str(signed.url).endswith("/?q=c1")
        assert client.get("/fleet").status_code == 200  # the cookie, from now on


def test_a_search_page_past_the_end_is_clamped(raw: Settings) -> None:
    with TestClient(create_app(raw, REDIS_URL)) as client:
        page = client.get("/?q=c1&page=500").text
    assert "no call matches" not in page and "1 matching call" in page


def test_the_401_says_how_to_sign_in_without_echoing_anything(raw: Settings) -> None:
    with TestClient(create_app(raw, REDIS_URL, config=ConsoleConfig(token="s3cret"))) as client:
        refused = client.get("/?token=wrong-guess")
    assert refused.status_code == 401 and "?token=<token>" in refused.text
    assert "wrong-guess" not in refused.text and "s3cret" not in refused.text


def test_on_loopback_without_a_token_a_rebound_name_is_refused(raw: Settings) -> None:
    config = console_config("127.0.0.1", None)
    with TestClient(create_app(raw, REDIS_URL, config=config)) as client:
        for host in ("evil.example", "evil.example:8765", "127.0.0.1.evil.example"):
            refused = client.get("/", headers={"host": host})
            assert refused.status_code == 421, host
            assert BAD not in refused.text
        for host in ("127.0.0.1:8765", "localhost", "[::1]:8765", "LOCALHOST:1"):
            assert client.get("/", headers={"host": host}).status_code == 200, host
    # With a token, the token guards it under any name (behind a proxy).
    assert console_config("0.0.0.0", "t").allowed_hosts is None


async def test_a_page_of_sessions_is_the_same_read_directly(redis: Any, raw: Settings) -> None:
    keys = raw.keys()
    await redis.zadd(keys.sessions, {f"s{i:03}": 1000 + i for i in range(60)})
    everyone = [(BAD, -1), *((f"s{i:03}", 1000 + i) for i in reversed(range(60)))]
    for offset, limit in ((0, 25), (25, 25), (50, 25), (60, 1), (61, 25), (0, 0)):
        got = await recent_sessions(redis, keys, offset=offset, limit=limit)
        assert [name for name, _ in got] == [name for name, _ in everyone][offset : offset + limit]


@pytest.mark.parametrize("token", ["plain-token", 'with space;and,comma"quote'])
def test_the_cookie_never_holds_the_token(raw: Settings, token: str) -> None:
    # Issue 35, item 10: cookies ignore ports, so every HTTP service on the same host name
    # received ACI_CONSOLE_TOKEN itself. The cookie holds a value derived for it only.
    from app.console.app import COOKIE, cookie_value

    with TestClient(create_app(raw, REDIS_URL, config=ConsoleConfig(token=token))) as client:
        once = client.get("/?" + urlencode({"token": token}), follow_redirects=False)
        header = once.headers["set-cookie"]
        assert cookie_value(token) in header
        assert token not in header and quote(token) not in header
        assert client.get("/fleet").status_code == 200  # the derived value signs in
    with TestClient(create_app(raw, REDIS_URL, config=ConsoleConfig(token=token))) as client:
        client.cookies.set(COOKIE, token)  # the raw token as a cookie is no longer accepted
        assert client.get("/fleet").status_code == 401
    assert cookie_value(token) != cookie_value(token + "x") and len(cookie_value(token)) == 64
