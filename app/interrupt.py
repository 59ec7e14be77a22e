"""Ctrl-C for every `aci-evidence` command, whenever it comes: exit 130, quietly, promptly.

`ctrl_c()` is entered first thing in `app.cli.main`, before anything heavy is imported, and
owns SIGINT for the whole run:

- SIGINT is handled even when the parent left it ignored (a shell's `cmd &`, some CI runners)
  or blocked: `views --follow`, `status --watch` and `demo --keep-running` run "until Ctrl-C",
  and a command nobody can stop is worse than one that stops.
- The first Ctrl-C cancels the command's main task (`arm`), so its `finally` blocks and
  context exits run (workers stopped, the embedded Redis stopped, its folder removed), and
  the run ends as `KeyboardInterrupt` (130, quietly). The cleanup has `GRACE` seconds; then
  the process exits 130 anyway. Before the task runs (importing, parsing), or after it, there
  is nothing to clean up: the process exits 130 at once.
- A second Ctrl-C exits 130 at once. The children of the demo and the benchmarks do not
  outlive this process (`pipeline.embedded.die_with_parent`).

Commands that wait for a signal themselves (`open_signal_receiver`) take SIGTERM only: a
receiver, when it closes, would put back Python's default SIGINT handler and lose the above.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import asyncio

__all__ = ["EXIT_ABORTED", "GRACE", "CtrlC", "ctrl_c"]

EXIT_ABORTED: Final = 130  # app.errors.EXIT_ABORTED, without importing it this early
GRACE: Final = 10.0


class CtrlC:
    """The SIGINT handler of one run: counts presses, cancels the armed task. It never raises
    `KeyboardInterrupt` itself: raised at an arbitrary bytecode, that lands in importlib's
    weakref callbacks, `__del__` methods or asyncio's internals, where it is printed as
    "Exception ignored" and lost, or kills the interpreter by SIGINT."""

    def __init__(self) -> None:
        self.presses = 0
        self._task: asyncio.Task[object] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pressed = threading.Event()
        self._done = threading.Event()

    def arm(self) -> None:
        """From the command's main task: the first Ctrl-C cancels this task from now on."""
        import asyncio  # loaded by now; not at import time (see `app.cli`)

        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        # Started now, not from the handler (which may run inside `threading`'s own locks).
        threading.Thread(target=self._watchdog, name="ctrl-c-grace", daemon=True).start()

    def disarm(self) -> None:
        self._task = self._loop = None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        self.presses += 1
        task, loop = self._task, self._loop
        if self.presses > 1 or task is None or loop is None or task.done():
            # A second Ctrl-C; or one while nothing runs yet (importing, parsing: nothing to
            # clean up) or any more (the command is done): exit now.
            os._exit(EXIT_ABORTED)
        self._pressed.set()
        task.cancel()  # as asyncio.Runner does: the task unwinds, the loop stays sound
        loop.call_soon_threadsafe(lambda: None)  # wake a loop blocked in select()

    def _watchdog(self) -> None:
        self._pressed.wait()
        if not self._done.wait(GRACE):
            os._exit(EXIT_ABORTED)  # the cleanup did not finish in time

    def finish(self) -> None:
        self._done.set()
        self._pressed.set()  # lets the watchdog thread end


@contextlib.contextmanager
def ctrl_c() -> Iterator[CtrlC]:
    """Own SIGINT for the block (main thread only; elsewhere a no-op handle); put back the
    previous handler and signal mask afterwards (main() also runs in-process, in tests),
    unless a Ctrl-C ends the run: then a next one still exits 130 at once."""
    ctrl = CtrlC()
    if threading.current_thread() is not threading.main_thread():
        try:
            yield ctrl
        finally:
            ctrl.finish()
        return
    previous = signal.signal(signal.SIGINT, ctrl.handler)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield ctrl
    finally:
        ctrl.finish()
        ctrl.disarm()
        # Ending on a Ctrl-C, the handler stays: one more while the interpreter exits is 130.
        if not ctrl.presses:
            if signal.SIGINT in blocked:
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
