"""The fleet page's dead letters (each with the CLI command that would replay it, never a
button) and a GAVE_UP call on the timeline, on a real Redis."""

from __future__ import annotations

import shlex
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import msgspec
import pytest
import redis as redis_sync
from starlette.testclient import TestClient

from app.console import create_app
from app.console.handlers import replay_command
from pipeline.envelope import Invocation, encode_envelope
from pipeline.inspect import DeadLetter
from pipeline.record import CONTROL, ENTRY_DATA, STATUS, dead_letter, read_records
from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from tests.conftest import REDIS_URL
from tests.console.seed import SESSION, drop_prefix, main_calls, run_calls, settings_for
from workers.replay import import_lines
from workers.replay_diff import Recording

pytestmark = pytest.mark.redis


async def _gave_up(settings: Settings) -> None:
    """A recorded ERROR call re-homed as one that gave up after three deliveries."""
    async with open_redis(REDIS_URL) as redis:
        fields = (await read_records(redis, settings.keys(), [(SESSION, "e1")]))[0]
        control: dict[str, Any] = msgspec.json.decode(fields[CONTROL])
        control.update(error_code="GAVE_UP", attempts=3)
        fields = {**fields, CONTROL: msgspec.json.encode(control), STATUS: b"ERROR"}
        rec = Recording(session=SESSION, tool_call_id="e1", fields=fields)
        await import_lines(redis, settings, [rec], session="sess-gaveup")


@pytest.fixture
def deployment() -> Iterator[Settings]:
    prefix = f"c{uuid.uuid4().hex[:12]}"
    settings = settings_for(prefix, REDIS_URL)
    try:
        anyio.run(run_calls, REDIS_URL, settings, SESSION, main_calls())
        anyio.run(_gave_up, settings)
        envelope = encode_envelope(
            Invocation(
                session_id="sess-dead",
                tool="lookup_knowledge",
                tool_call_id="x'; rm -rf /",
                arguments="{}",
                submitted_at_ms=1,
            )
        )
        admin = redis_sync.Redis.from_url(REDIS_URL)
        dead = settings.keys().dead
        admin.xadd(dead, dead_letter("1-0", "undecodable <b>reason</b>", {ENTRY_DATA: envelope}))
        admin.xadd(dead, dead_letter("2-0", "garbage", {ENTRY_DATA: b"not json"}))
        admin.close()
        yield settings
    finally:
        drop_prefix(REDIS_URL, prefix)


def test_dead_letters_show_the_replay_command(deployment: Settings) -> None:
    with TestClient(create_app(deployment, REDIS_URL)) as client:
        html = client.get("/fleet").text
    table = html.split('data-testid="dead-letters"')[1].split("</table>")[0]
    assert table.count("<tr><td") == 2
    assert "undecodable &lt;b&gt;reason&lt;/b&gt;" in table
    assert "not replayable: the letter names no call" in table
    assert "aci-evidence replay --session sess-dead --id " in table
    assert "<button" not in html.split("</header>")[1]  # no control in the page body


def test_the_replay_command_is_quoted_for_a_shell() -> None:
    letter = DeadLetter(0, "1-0", "1-0", "r", "sess-dead", "x'; rm -rf /", "")
    command = replay_command(letter)
    assert command is not None
    assert shlex.split(command) == [
        "aci-evidence", "replay", "--session", "sess-dead", "--id", "x'; rm -rf /",
        "--into", "sess-dead-replay",
    ]  # fmt: skip
    assert replay_command(letter._replace(session="")) is None


def test_gave_up_is_visible_on_the_timeline(deployment: Settings) -> None:
    with TestClient(create_app(deployment, REDIS_URL)) as client:
        html = client.get("/session?id=sess-gaveup").text
    assert "GAVE_UP after 3 attempts" in html
