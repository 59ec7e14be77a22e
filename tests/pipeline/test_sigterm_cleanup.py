"""`sigterm_runs_cleanup`: SIGTERM unwinds as Ctrl-C does, and its handler never raises. A
KeyboardInterrupt raised from a handler lands at whatever bytecode runs, also halfway
through the cleanup it was meant to start (the reason `app.interrupt.CtrlC` never raises)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import FrameType

import pytest

from pipeline.embedded import sigterm_runs_cleanup

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def test_a_sigterm_mid_cleanup_is_handed_to_the_ctrl_c_owner_and_the_cleanup_goes_on() -> None:
    pressed: list[int] = []

    def owner(signum: int, frame: FrameType | None) -> None:  # as CtrlC: cancels, never raises
        pressed.append(signum)

    previous = signal.signal(signal.SIGINT, owner)
    steps: list[str] = []
    try:
        with sigterm_runs_cleanup():
            try:
                steps.append("work")
            finally:
                steps.append("terminate")
                os.kill(os.getpid(), signal.SIGTERM)  # its handler runs before kill returns
                steps.append("wait")
                assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # a second: at once
    finally:
        signal.signal(signal.SIGINT, previous)
    assert steps == ["work", "terminate", "wait"]
    assert pressed == [signal.SIGINT]


def _child(body: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    code = "import os, signal, sys, time\nfrom pipeline.embedded import sigterm_runs_cleanup\n"
    return subprocess.run(
        [sys.executable, "-c", code + textwrap.dedent(body)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_under_asyncio_the_main_task_unwinds_after_the_cleanup_and_ends_as_ctrl_c() -> None:
    done = _child("""
        import asyncio
        async def main():
            with sigterm_runs_cleanup():
                try:
                    await asyncio.sleep(0)
                finally:
                    os.kill(os.getpid(), signal.SIGTERM)
                    print("cleanup finished", flush=True)
        try:
            asyncio.run(main())  # asyncio.Runner owns SIGINT: it cancels the main task
        except KeyboardInterrupt:
            print("ended as Ctrl-C", flush=True)
            sys.exit(130)
    """)
    assert (done.returncode, done.stdout) == (130, "cleanup finished\nended as Ctrl-C\n")
    assert "Traceback" not in done.stderr, done.stderr


def test_without_a_ctrl_c_owner_sigterm_does_what_it_does_by_default() -> None:
    # Plain Python: Ctrl-C would raise KeyboardInterrupt wherever the main thread is; SIGTERM
    # ends the process instead (its children go with it: `die_with_parent`).
    done = _child("""
        with sigterm_runs_cleanup():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
            print("not reached", flush=True)
    """)
    assert done.returncode == -signal.SIGTERM, (done.returncode, done.stderr)
    assert done.stdout == "" and "Traceback" not in done.stderr, done.stderr


# A redis-server that is slow to stop: it makes its socket path, says its pid, ignores SIGTERM.
_SLOW_SERVER = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(sys.argv[sys.argv.index("--unixsocket") + 1], "w").close()
with open(os.environ["FAKE_PID"], "w") as out:
    out.write(str(os.getpid()))
time.sleep(30)
"""


def test_a_sigterm_while_the_embedded_redis_stops_still_stops_it_and_removes_its_folder(
    tmp_path: Path,
) -> None:
    # Before: the SIGTERM cancelled the main task at the cleanup's next await (the wait for
    # redis-server to stop), so the rest of the cleanup never ran: the server still running
    # (until the parent's death killed it) and its folder, with the aclfile, left behind.
    binary = tmp_path / "bin" / "redis-server"
    binary.parent.mkdir()
    binary.write_text(f"#!{sys.executable}\n{_SLOW_SERVER}")
    binary.chmod(0o755)
    temp, pid_file = tmp_path / "tmp", tmp_path / "fake.pid"
    temp.mkdir()
    env = dict(os.environ, PATH=f"{binary.parent}:{os.environ['PATH']}", TMPDIR=str(temp),
               FAKE_PID=str(pid_file))  # fmt: skip
    done = _child(
        """
        import asyncio, threading
        from pipeline.embedded import embedded_redis
        async def main():
            async with embedded_redis():
                threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM)).start()
        try:
            asyncio.run(main())
        except KeyboardInterrupt:
            try:
                os.kill(int(open(os.environ["FAKE_PID"]).read()), 0)
                print("server left running", flush=True)
            except ProcessLookupError:
                print("server stopped", flush=True)
            sys.exit(130)
        """,
        env,
    )
    assert (done.returncode, done.stdout) == (130, "server stopped\n"), done.stderr
    assert list(temp.glob("aci-redis-*")) == []
