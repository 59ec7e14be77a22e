"""A session listener's waiters (`pipeline.listener._Listener`; no server needed)."""

from __future__ import annotations

from pipeline.listener import _Listener


def test_a_wait_leaving_removes_its_own_waiters_only() -> None:
    # `_Listener.remove`: each wait's waiters go, another wait's on the same id stay, an id
    # is forgotten with its last waiter, and removing again changes nothing.
    listener = _Listener("s", "m", "c")
    first = listener.add(["a", "b"])
    second = listener.add(["b", "c"])
    listener.remove(first)
    assert sorted(listener.waiters) == ["b", "c"]
    assert listener.waiters["b"] == [second["b"]]
    listener.remove(first)  # again: nothing of it is left to remove
    assert listener.waiters["b"] == [second["b"]]
    third = listener.add(["b"])
    listener.remove(second)
    assert listener.waiters == {"b": [third["b"]]}
    listener.remove(third)
    assert listener.waiters == {}
