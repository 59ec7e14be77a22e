"""What a new operator tripped on in the console (issue 35, item 8): the session page says
what each call asked, the Live heading does not stand empty, a compare of two sessions
ignores a log call's clock-resolved window, and MySQL rows show as a table."""

from __future__ import annotations

import msgspec
from starlette.testclient import TestClient

from app.console.render import environment
from app.console.replay_view import _changes
from pipeline.record import CONTROL, MODEL
from tests.console.seed import SESSION


def test_the_session_page_says_what_each_call_asked(client: TestClient) -> None:
    page = client.get(f"/session?id={SESSION}").text
    asked = [part.split("</div>")[0] for part in page.split('data-testid="asked">')[1:]]
    assert asked[:3] == [
        "pool exhausted",  # a question
        "APPLICATION · t · 60 min",  # a topic, its query and lookback
        "orders: SELECT id FROM orders WHERE id = ? · params [1]",  # a data source's SQL
    ]


def test_no_empty_live_heading(client: TestClient) -> None:
    page = client.get("/").text
    section = page.split('data-testid="live-section"')[1].split(">")[0]
    assert "hidden" in section


def test_compare_ignores_a_log_calls_window() -> None:
    def record(start: str) -> dict[str, bytes]:
        scope = {"topic": "APPLICATION", "query": "t", "start_time": start, "end_time": start}
        view = {"tool": "query_logs", "scope": scope, "evidence_status": "NO_EVIDENCE"}
        return {MODEL: msgspec.json.encode(view), CONTROL: msgspec.json.encode(view)}

    assert _changes(record("2026-01-01T00:00:00Z"), record("2026-01-02T00:00:00Z")) == []
    other = record("2026-01-01T00:00:00Z")
    other[MODEL] = other[MODEL].replace(b'"t"', b'"u"')
    assert _changes(record("2026-01-01T00:00:00Z"), other)  # a real change still shows


def test_mysql_rows_show_as_a_table() -> None:
    from app.console.invocation import Body, Invocation

    obs = {"tool_call_id": "m1", "evidence_status": "EVIDENCE_FOUND", "columns": ["id", "note"],
           "rows": [[1, None], [2, "x"]], "truncated": False}  # fmt: skip
    data = msgspec.json.encode(obs)
    inv = Invocation(session="s", tool_call_id="m1", found=True,
                     model=Body(size=len(data), value=obs, is_json=True))  # fmt: skip
    html = environment().get_template("call.html").render(inv=inv, base="", request=None)
    table = html.split('data-testid="mysql-rows"')[1].split("</table>")[0]
    assert "<th>id</th><th>note</th>" in table and "NULL" in table and "<td>x</td>" in table
