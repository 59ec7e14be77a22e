"""Another site's page cannot make the operator's browser use the console.

On loopback without a token (the default) a page on any other site could have the browser
send the console GETs it cannot read but the console still serves: `<img src=
"http://127.0.0.1:8765/?q=x1">` in a loop makes every search SCAN the production Redis's
whole keyspace (20 s a search at a million retained calls), and `<iframe>` or `fetch(no-cors)`
time which sessions and calls exist. The browser says who asked (Fetch Metadata,
`Sec-Fetch-Site`): the console refuses another site's subresource and frame requests with a
403 before it reads anything, and still opens a page the user reaches by a link.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from starlette.testclient import TestClient

from app.console import create_app
from app.console.serve import console_config
from chaos.services import free_port
from tests.conftest import REDIS_URL
from tests.console.seed import settings_for

pytestmark = pytest.mark.redis

CHROMIUM = "/usr/bin/chromium"

# What Chromium sends (checked against a real one): another site's image, no-cors fetch,
# EventSource and iframe, and a link the user follows.
IMAGE = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors", "sec-fetch-dest": "image"}
FETCH = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors", "sec-fetch-dest": "empty"}
STREAM = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "cors", "sec-fetch-dest": "empty"}
FRAME = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "iframe"}
LINK = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "document"}
SAME_SITE = {"sec-fetch-site": "same-site", "sec-fetch-mode": "no-cors", "sec-fetch-dest": "script"}
OWN = {"sec-fetch-site": "same-origin", "sec-fetch-mode": "cors", "sec-fetch-dest": "empty"}
TYPED = {"sec-fetch-site": "none", "sec-fetch-mode": "navigate", "sec-fetch-dest": "document"}


@pytest.fixture
def down() -> Iterator[TestClient]:
    """A console over a Redis that is not there: a request that reads anything is a 503."""
    settings = settings_for(f"c{uuid.uuid4().hex[:12]}", REDIS_URL)
    app = create_app(settings, f"redis://127.0.0.1:{free_port()}/0")
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.mark.parametrize("headers", [IMAGE, FETCH, STREAM, FRAME, SAME_SITE])
@pytest.mark.parametrize("path", ["/?q=x1", "/events", "/call?session=s&id=c", "/fleet"])
def test_another_sites_requests_are_refused_before_any_read(
    down: TestClient, headers: dict[str, str], path: str
) -> None:
    refused = down.get(path, headers=headers)
    assert refused.status_code == 403, refused.text[:200]
    assert "another site" in refused.text
    assert refused.headers["content-security-policy"].startswith("default-src 'none'")


@pytest.mark.parametrize("headers", [LINK, OWN, TYPED, {}])
def test_the_users_own_requests_and_links_reach_the_console(
    down: TestClient, headers: dict[str, str]
) -> None:
    # 503: it went on to read Redis (down here), as any page of its own does.
    assert down.get("/?q=x1", headers=headers).status_code == 503


def test_isolation_headers(down: TestClient) -> None:
    headers = down.get("/healthz").headers
    assert headers["cross-origin-resource-policy"] == "same-origin"
    assert headers["cross-origin-opener-policy"] == "same-origin"


class _Recorder:
    """The status of every request that reached the console."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[tuple[str, int]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def note(message: Any) -> None:
            if message["type"] == "http.response.start":
                self.seen.append((scope["path"] + "?" + scope["query_string"].decode(),
                                  message["status"]))  # fmt: skip
            await send(message)

        await self.app(scope, receive, note)


def _attacker(target: str) -> Any:
    page = (
        "<!doctype html><title>cats</title><a id=go href='" + target + "/?q=linked'>x</a>"
        "<script>for (let i = 0; i < 8; i++) { new Image().src = '" + target + "/?q=img' + i; }"
        "fetch('" + target + "/?q=fetch', {mode: 'no-cors'});"
        "const f = document.createElement('iframe'); f.src = '" + target + "/?q=frame';"
        "document.body.appendChild(f);</script>"
    ).encode()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/html")]})  # fmt: skip
        await send({"type": "http.response.body", "body": page})

    return app


def _serve(app: Any, port: int) -> uvicorn.Server:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    for _ in range(500):
        if server.started:
            return server
        time.sleep(0.02)
    raise AssertionError("uvicorn did not start")


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no {CHROMIUM}")
def test_a_page_on_another_site_cannot_run_searches_in_a_real_browser() -> None:
    from playwright.sync_api import sync_playwright

    settings = settings_for(f"c{uuid.uuid4().hex[:12]}", REDIS_URL)
    console_port, evil_port = free_port(), free_port()
    # The console as `aci-evidence console` serves it on loopback without a token.
    console = _Recorder(create_app(settings, REDIS_URL, config=console_config("127.0.0.1", None)))
    target = f"http://127.0.0.1:{console_port}"
    servers = [_serve(console, console_port), _serve(_attacker(target), evil_port)]
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM, headless=True,
                args=["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
            )  # fmt: skip
            page = browser.new_page()
            # `localhost` is another site than `127.0.0.1` to the browser.
            page.goto(f"http://localhost:{evil_port}/")
            deadline = time.monotonic() + 10
            while len(console.seen) < 10 and time.monotonic() < deadline:
                page.wait_for_timeout(100)
            page.click("#go")  # the user follows a link: that page opens
            page.wait_for_url(f"{target}/?q=linked")
            assert "Sessions" in page.content()
            browser.close()
    finally:
        for server in servers:
            server.should_exit = True
    statuses = {path: status for path, status in console.seen if path.startswith("/?q=")}
    assert statuses.pop("/?q=linked") == 200
    assert len(statuses) == 10 and set(statuses.values()) == {403}, console.seen
