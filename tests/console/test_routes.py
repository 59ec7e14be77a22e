"""The console's pages on a real Redis, through Starlette's TestClient: every page renders
the recorded calls, search and filters live in the URL, pages are bounded, every string is
escaped, links follow the root path, the token guards, and nothing but GET is served."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from starlette.testclient import TestClient

from app.console.handlers import ROUTES
from pipeline.settings import Settings
from tests.console.conftest import make_client
from tests.console.seed import HOSTILE, HOSTILE_ID, LARGE, SESSION

pytestmark = pytest.mark.redis

PAGES = [
    "/",
    "/?q=k1",
    f"/session?id={SESSION}",
    f"/call?session={SESSION}&id=k1",
    "/fleet",
    "/replay",
    f"/replay?session={SESSION}",
    f"/replay?a={SESSION}&b={HOSTILE}",
    "/fragments/sessions",
    f"/fragments/timeline?id={SESSION}",
    "/fragments/fleet",
]


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, str | None]] = []
        self.links: list[str] = []
        self.scripts: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self.forms.append(found)
        if tag == "a" and found.get("href"):
            self.links.append(found["href"] or "")
        if tag in ("link", "script"):
            self.links.append(found.get("href") or found.get("src") or "")
        if tag == "script":
            self.scripts.append(found)


def _parse(html: str) -> _Forms:
    parser = _Forms()
    parser.feed(html)
    return parser


@pytest.mark.parametrize("path", PAGES)
def test_every_page_renders_and_has_no_form_that_writes(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200, response.text[:500]
    parsed = _parse(response.text)
    assert all((f.get("method") or "get").lower() == "get" for f in parsed.forms)
    # No inline script: only the vendored file, from this console.
    assert all(s.get("src", "").endswith("/static/console.js") for s in parsed.scripts)  # type: ignore[union-attr]
    assert "content-security-policy" in response.headers


def test_only_get_is_served(client: TestClient) -> None:
    for path, _endpoint in ROUTES:
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            assert client.request(method, path).status_code == 405, (method, path)
    assert client.post("/static/console.js").status_code == 405


def test_sessions_newest_first_with_counts(client: TestClient) -> None:
    html = client.get("/").text
    assert html.index(LARGE) < html.index(HOSTILE) < html.index(SESSION)
    row = re.search(rf"{SESSION}</a></td>(.*?)</tr>", html, re.S)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    # last submit, submitted, in flight, ready, errors
    assert cells[1:5] == ["6", "0", "4", "2"]
    assert "EVIDENCE_FOUND" in row.group(1) and "ERROR 2" in row.group(1)


def test_sessions_are_paginated(recorded: Settings) -> None:
    with make_client(recorded, sessions_per_page=1) as small:
        first = small.get("/").text
        second = small.get("/?page=2").text
        assert LARGE in first and HOSTILE not in first
        assert HOSTILE in second and "page 2 of 3" in second
        assert 'href="/?page=3"' in second


def test_search_by_call_id_tool_status_evidence_and_text(client: TestClient) -> None:
    hits = client.get("/?q=m1").text
    assert "1 matching call" in hits and "query_mysql" in hits
    by_tool = client.get("/?tool=query_logs").text
    assert "l1</a>" in by_tool and "k1</a>" not in by_tool
    errors = client.get(f"/?q={SESSION}&status=ERROR").text
    assert "e1</a>" in errors and "e2</a>" in errors and "k1</a>" not in errors
    found = client.get("/?evidence=EVIDENCE_FOUND&tool=lookup_knowledge").text
    assert "k1</a>" in found and "e1</a>" not in found
    text = client.get("/?text=not+available").text  # InstantSource's excerpt
    assert "k1</a>" in text and "connection not available" in text
    # The filters stay in the form (and so in the URL).
    assert 'value="query_logs" selected' in by_tool


def test_a_call_id_is_found_by_key_name_too(client: TestClient) -> None:
    html = client.get("/?q=d1&tool=lookup_knowledge").text
    assert "d1</a>" in html


def test_timeline_shows_bars_duplicates_and_errors(client: TestClient) -> None:
    html = client.get(f"/session?id={SESSION}").text
    assert html.count('class="row') == 6
    assert "duplicate_of k1" in html
    assert "INVALID_ARGUMENT" in html or "UNKNOWN_TOOL" in html
    assert re.search(r'data-left="[\d.]+" data-width="[\d.]+"', html)


def test_invocation_shows_both_views_side_by_side(client: TestClient) -> None:
    html = client.get(f"/call?session={SESSION}&id=k1").text
    assert 'data-testid="model-view"' in html and 'data-testid="control-view"' in html
    model = html.split('data-testid="model-view"')[1].split('data-testid="control-view"')[0]
    assert "connection not available" in model  # evidence is in the observation
    control = html.split('data-testid="control-view"')[1].split('data-testid="raw-answer"')[0]
    assert "scope_fingerprint" in control and "connection not available" not in control
    raw = html.split('data-testid="raw-answer"')[1]
    assert "rerank" in raw  # the upstream's scores: the raw answer, for the auditor only
    assert f'href="/call?session={SESSION}&amp;id=k1"' in html  # the permalink


def test_unknown_call_and_bad_ids(client: TestClient) -> None:
    assert client.get(f"/call?session={SESSION}&id=nope").status_code == 404
    assert client.get("/session?id=bad%20id").status_code == 400
    assert client.get("/call?session=..%2F&id=").status_code == 400


def test_hostile_payload_is_shown_as_text(client: TestClient) -> None:
    search = client.get("/", params={"q": HOSTILE_ID}).text
    assert "<script>alert" not in search and "&lt;script&gt;alert(&#39;id&#39;)" in search
    html = client.get("/call", params={"session": HOSTILE, "id": HOSTILE_ID}).text
    assert "<script>alert" not in html and "<b>bold</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "\x1b" not in html and "\u202e" not in html
    assert "\\x1b[31mRED" in html and "\\u202egnp.exe" in html
    timeline = client.get(f"/session?id={HOSTILE}").text
    assert "<script>alert" not in timeline


def test_a_64_kb_observation_renders_bounded(client: TestClient) -> None:
    html = client.get(f"/call?session={LARGE}&id=big").text
    model = html.split('data-testid="model-view"')[1].split('data-testid="control-view"')[0]
    size = re.search(r"(\d+\.\d) KiB", model)
    assert size is not None and float(size.group(1)) >= 64
    assert model.count("doc-") >= 80  # every hit the model saw is there, collapsible
    assert "<details" in model
    # The budget dropped hits between the canonical result and the observation: said, counted.
    cuts = html.split('data-testid="cuts"')[1].split("</section>")[0]
    assert re.search(r"evidence: \d+ of 100 shown to the model", cuts)


def test_links_follow_the_root_path(recorded: Settings) -> None:
    from app.console import create_app
    from tests.conftest import REDIS_URL

    with TestClient(create_app(recorded, REDIS_URL), root_path="/aci") as prefixed:
        for path in ("/", f"/session?id={SESSION}", f"/call?session={SESSION}&id=k1", "/fleet"):
            response = prefixed.get("/aci" + path)
            assert response.status_code == 200, path
            links = _parse(response.text).links
            assert links and all(link.startswith("/aci/") for link in links), (path, links)
            assert 'data-live-fragment="/aci/fragments/' in response.text or path.startswith(
                "/call"
            )
        assert prefixed.get("/aci/static/console.js").status_code == 200


def test_a_token_guards_every_route(recorded: Settings) -> None:
    with make_client(recorded, token="s3cret-token") as guarded:
        assert guarded.get("/").status_code == 401
        assert guarded.get("/events").status_code == 401
        assert guarded.get("/static/console.js").status_code == 401
        assert guarded.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
        ok = guarded.get("/", headers={"Authorization": "Bearer s3cret-token"})
        assert ok.status_code == 200
        once = guarded.get("/fleet?token=s3cret-token", follow_redirects=False)
        assert once.status_code == 303 and once.headers["location"] == "/fleet"
        assert "httponly" in once.headers["set-cookie"].lower()
        assert guarded.get("/fleet").status_code == 200  # the cookie now
        assert "s3cret-token" not in guarded.get("/fleet").text


def test_fleet_shows_the_status_figures(client: TestClient) -> None:
    html = client.get("/fleet").text
    for testid in ("workers", "partitions", "streams", "dead-letters"):
        assert f'data-testid="{testid}"' in html
    assert "no dead letters" in html


def test_a_session_older_than_the_window_is_counted_from_its_control_views(
    recorded: Settings,
) -> None:
    with make_client(recorded, window=1) as narrow:
        html = narrow.get("/").text
    row = re.search(rf"{SESSION}</a></td>(.*?)</tr>", html, re.S)
    assert row is not None and "(finished)" in row.group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    assert cells[2:5] == ["?", "4", "2"]  # in flight unknown there; 4 READY, 2 ERROR
