"""The benchmark's own arithmetic (no server; the bench itself is smoke-tested in
`tests/app/test_cli.py`)."""

from __future__ import annotations

from app.bench import steal_pct


def test_steal_is_the_share_of_ticks_the_host_took() -> None:
    assert steal_pct((1000, 10), (1200, 40)) == 15.0
    assert steal_pct(None, (1200, 40)) is None
    assert steal_pct((1000, 10), (1000, 10)) is None  # no time passed: no figure
