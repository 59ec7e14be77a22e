"""Whether each data source answers, said in the worker's log once per change of state.

A data source that stops answering (or refuses the worker's account) is one WARNING, by its
logical name and what its error number means (`errors.Unavailable.cause`), and one INFO line
when it answers again (at WARNING too, so a log read at the default level sees the outage
end), never a line per call: its calls answer ERROR/UNAVAILABLE meanwhile,
which the agent hears. The warm-up says nothing more (the error is marked `logged`). Used from
the event loop only, so no lock.
"""

from __future__ import annotations

import logging

from workers.sources.mysql.errors import Unavailable

__all__ = ["Reachability"]

log = logging.getLogger("aci.sources.mysql")


class Reachability:
    """The last failure said per data source, until it answers again."""

    def __init__(self) -> None:
        self._down: dict[str, str] = {}  # data source → the state said

    def down(self, name: str, error: Unavailable) -> None:
        """`name` failed with `error`: say so unless that state is already said. Unreachable is
        one state whatever its errno (a pooled connection cut, 2013, then no server, 2003); a
        server that comes back refusing the account is another."""
        error.logged = True
        what = error.state
        if self._down.get(name) == what:
            return
        self._down[name] = what
        log.warning(
            "query_mysql: data source %s %s (%s); its calls answer ERROR/UNAVAILABLE until it "
            "answers",
            name, what, error.cause,
        )  # fmt: skip

    def up(self, name: str) -> None:
        """`name` answered: say so once if it was down."""
        if self._down.pop(name, None) is not None:
            log.warning("query_mysql: data source %s answers again", name)
