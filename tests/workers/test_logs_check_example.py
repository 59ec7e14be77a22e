"""`check`'s example line (the first line not in the format) shows no part of a secret, even
where masking a long secret before it brings a later one, cut short, into the shown part."""

from __future__ import annotations

import base64
import json

from workers.sources.logs.check import EXAMPLE_CHARS, _without_password

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token's shape


def jwt(size: int) -> str:
    head = base64.urlsafe_b64encode(json.dumps({"alg": "RS256"}).encode()).decode().rstrip("=")
    body = base64.urlsafe_b64encode(json.dumps({"sub": "x" * size}).encode()).decode()
    return f"{head}.{body.rstrip('=')}.c2lnbmF0dXJlc2lnbmF0dXJl"


def test_a_token_after_a_long_masked_secret_is_not_shown_in_part() -> None:
    # The line was cut at EXAMPLE_CHARS + 1024 before masking: a 1,100-character JWT masked
    # as *** pulled the text at the cut into the 160 shown, and a token the cut split there
    # no longer had its shape: 'Authorization: Bearer *** from ghp_A1b2C3d4E5f6G7h8'.
    bearer = "Authorization: Bearer "
    secret = jwt(800)
    for shift in range(0, 40, 3):
        pad = EXAMPLE_CHARS + 1024 - len(bearer) - len(secret) - len(" from ") - shift
        line = f"{bearer}{secret}{' ' * max(pad, 0)} from {TOKEN} then more text"
        shown = _without_password(line)[:EXAMPLE_CHARS]
        assert "A1b2C3d4" not in shown, shown
