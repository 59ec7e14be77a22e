"""A Redis URL's query options are the operator's input: an unknown or bad one is a typed
configuration error (one line, never the URL or its password), not a driver traceback at the
first connection."""

from __future__ import annotations

import pytest

from pipeline.redis_io import RedisConfigError, open_redis

PASSWORD = "Sekret-url-pw-47k"


@pytest.mark.parametrize(
    "url",
    [
        f"redis://u:{PASSWORD}@127.0.0.1:1/0?foo=bar",
        f"redis://u:{PASSWORD}@127.0.0.1:1/0?ssl=true",
        f"redis://u:{PASSWORD}@127.0.0.1:1/0?ssl_keyfile=/x",
        f"rediss://u:{PASSWORD}@127.0.0.1:1/0?ssl_cert_reqs=bogus",
    ],
)
async def test_a_bad_redis_url_option_is_a_config_error_without_the_password(url: str) -> None:
    with pytest.raises(RedisConfigError) as caught:
        async with open_redis(url) as redis:
            await redis.ping()
    assert PASSWORD not in str(caught.value) and caught.value.__cause__ is None
