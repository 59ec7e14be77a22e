"""The top-level handler (issue 24): Redis named by its endpoint, never by its credentials."""

from __future__ import annotations

from typing import Any

import pytest

from app.errors import EXIT_ABORTED, endpoint_of, guarded
from pipeline.redis_io import RedisProtocolError, RedisUnavailable


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://user:hunter2@redis.internal:6380/2?password=x", "redis.internal:6380/2"),
        ("rediss://:hunter2@10.0.0.5/0", "10.0.0.5:6379"),
        ("redis://[::1]:7000", "[::1]:7000"),
        (
            "unix://submitter:hunter2@/tmp/aci-redis-x/redis.sock",
            "unix:///tmp/aci-redis-x/redis.sock",
        ),
        (None, "(no ACI_REDIS_URL)"),
    ],
)
def test_the_endpoint_never_carries_credentials(url: str | None, shown: str) -> None:
    assert endpoint_of(url) == shown


def _fail(exc: BaseException) -> Any:
    def run() -> int:
        raise exc

    return run


def test_redis_down_and_refusals_are_one_line_naming_the_endpoint_on_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "redis://worker:hunter2@redis.internal:6380/0"
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    assert guarded(_fail(RedisUnavailable("redis is unavailable")), lambda: url) == 1
    assert guarded(_fail(RedisProtocolError("NOAUTH")), lambda: url) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "pipeline error: RedisUnavailable: no Redis answers at redis.internal:6380"
    assert err[1].startswith("pipeline error: RedisProtocolError: NOAUTH from Redis at redis.")
    assert "hunter2" not in "".join(err) and len(err) == 2


def test_ctrl_c_and_groups_of_failures(capsys: pytest.CaptureFixture[str]) -> None:
    assert guarded(_fail(KeyboardInterrupt()), lambda: None) == EXIT_ABORTED
    group = BaseExceptionGroup("tg", [RedisUnavailable("x"), KeyboardInterrupt()])
    assert guarded(_fail(group), lambda: None) == EXIT_ABORTED
    assert capsys.readouterr().err == ""
    with pytest.raises(ZeroDivisionError):  # a bug keeps its traceback
        guarded(_fail(ZeroDivisionError()), lambda: None)
