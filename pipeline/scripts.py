"""The Lua text of the record's scripts, `pipeline/lua/take.lua`, `admit.lua` (admission, run
by workers), `finish.lua` and `requeue.lua` (a worker's fair share), read once at import (they
ship in the wheel as package data).

A leaf module, so `pipeline.redis_io` (which loads them into Redis) and `pipeline.record` (which
builds their keys and arguments, and names the fields they write) can both use it without
importing each other. Each file's header documents its KEYS, ARGV and replies.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Final

__all__ = [
    "ADMIT_LUA",
    "BACKFILL_CALLS_LUA",
    "CANCEL_LUA",
    "FINISH_LUA",
    "MARK_LUA",
    "PRUNE_CALLS_LUA",
    "REQUEUE_LUA",
    "TAKE_LUA",
]


def _read(name: str) -> str:
    return files("pipeline").joinpath("lua", name).read_text(encoding="utf-8")


TAKE_LUA: Final = _read("take.lua")
ADMIT_LUA: Final = _read("admit.lua")
REQUEUE_LUA: Final = _read("requeue.lua")
FINISH_LUA: Final = _read("finish.lua")
# A session's call index (pipeline.call_index): the janitor's trim and `reindex`'s backfill.
PRUNE_CALLS_LUA: Final = _read("prune_calls.lua")
BACKFILL_CALLS_LUA: Final = _read("backfill_calls.lua")
# Issue 32: a cancel admitted (`cancel.lua`, run by admission) and a call taken (`mark.lua`).
CANCEL_LUA: Final = _read("cancel.lua")
MARK_LUA: Final = _read("mark.lua")
