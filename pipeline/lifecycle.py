"""The lifecycle rule: `PROJECTING` → exactly one of `READY` | `ERROR`; final states never change.

The same rule is enforced inside Redis by the finish script (`pipeline/lua/finish.lua`); this
pure function is the reference the worker checks against. `final_status` (the state a result
puts its invocation in) is pure and owned by `contracts`; it is re-exported here.
"""

from __future__ import annotations

from contracts.invocation import final_status
from contracts.status import LifecycleStatus

__all__ = ["LifecycleError", "final_status", "transition"]


class LifecycleError(Exception):
    """A transition the lifecycle does not allow (a second final transition, or a regression)."""


def transition(current: LifecycleStatus | None, new: LifecycleStatus) -> LifecycleStatus:
    """Check one transition; `None` means not yet accepted."""
    if current is None:
        if new is LifecycleStatus.PROJECTING:
            return new
        raise LifecycleError(f"an invocation starts at PROJECTING, not {new}")
    if current.is_final:
        raise LifecycleError(f"final state {current} never changes (asked: {new})")
    if not new.is_final:
        raise LifecycleError(f"{current} can only move to READY or ERROR")
    return new
