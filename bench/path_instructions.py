"""The per-call Python paths of the client and the worker, in process, for instruction counts.

    PYTHONPATH=<tree> valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        .venv/bin/python bench/path_instructions.py PATH ROUNDS

Runs against the tree on PYTHONPATH (no Redis needed). Each round is 256 calls (8 batches of
32, as `bench/cpu_bench.py --mode tput` submits them, one query per batch). Every round's
input is built before the first is run, so the instructions of a path per call are
(count with ROUNDS=5 - count with ROUNDS=1) / 1024: valgrind prints the count ("Collected").
Unlike CPU time, the count does not depend on the machine's load: compare trees with it, then
confirm in `bench/cpu_bench.py` pairs. PATH is one of:

- `client`: `prepare`, the judge of a client that admits itself, `admit_call`, hiredis's
  packing of the admit script call (the client's submit, `pipeline.admit_here`);
- `worker`: an invocation entry read (`read_entry`), run inline (the reader's `_run_now`:
  decode, instant source, projection, both views), finished (`_finish_calls`) and packed;
- `listener`: the hand-over of a control and a model view stream reply to the waiters;
- `waiters`: a call_many's waiters added to and removed from its session's listener.

For Redis's side, a `redis-server` of its own under `valgrind --tool=callgrind` with
`callgrind_control -z` / `-d` around the commands measures the scripts the same way.
"""

from __future__ import annotations

import argparse
import gc
from typing import Any

from pipeline.admission import Admission, admit_call, judge
from pipeline.client import ToolCall
from pipeline.lane import _pack
from pipeline.settings import Settings
from pipeline.submitter import prepare

_SESSION = "bench-x"
_BATCHES = 8
_BATCH = 32
_SK = b"ee78cdfaa6eac92e70373be9e7b3986a"


def _calls(round_no: int, batch: int) -> list[ToolCall]:
    return [
        ToolCall(tool="lookup_knowledge", tool_call_id=f"b{batch}_{round_no}_{i}",
                 arguments={"query": f"connection pool exhausted {batch}"})
        for i in range(_BATCH)
    ]  # fmt: skip


def _judged(settings: Settings, calls: list[ToolCall]) -> tuple[Any, list[Admission]]:
    keys = settings.keys()
    part = keys.for_session(_SESSION)
    prepared = prepare(
        part, _SESSION, calls, bounds=settings.bounds,
        argument_max_bytes=settings.argument_max_bytes, traceparent=None,
    )  # fmt: skip
    admitted = []
    for n, envelope in enumerate(prepared.envelopes):
        verdict = judge(
            keys, part, "", envelope, argument_max_bytes=settings.argument_max_bytes,
            default_lookback=settings.default_lookback, mine=prepared.decoded[n],
        )  # fmt: skip
        assert isinstance(verdict, Admission)
        admitted.append(verdict)
    return part, admitted


def client(settings: Settings, rounds: int) -> None:
    inputs = [[_calls(r, b) for b in range(_BATCHES)] for r in range(5)][:rounds]
    gc.freeze()
    for batches in inputs:
        for calls in batches:
            part, admitted = _judged(settings, calls)
            keys, args = admit_call(
                part, admitted, [], now_ms=1, maxlen=settings.stream_maxlen,
                retention_ms=settings.retention_s * 1000,
            )  # fmt: skip
            _pack([("EVALSHA", "0" * 40, len(keys), *keys, *args)])


def worker(settings: Settings, rounds: int) -> None:
    from workers.runtime.entry import read_entry
    from workers.runtime.finisher import _by_partition, _finish_calls
    from workers.runtime.reader import _run_now
    from workers.runtime.state import WorkerState
    from workers.sources.instant import InstantSource

    state = WorkerState(
        None,  # type: ignore[arg-type]  # nothing here talks to Redis
        settings, dict.fromkeys(["lookup_knowledge", "query_logs", "query_mysql"],
                                InstantSource()),
        concurrency=256, consumer="c",
    )  # fmt: skip
    inputs = []
    for r in range(5):
        entries = []
        for b in range(_BATCHES):
            part, admitted = _judged(settings, _calls(r, b))
            entries += [
                (part, f"1796462601530-{r * 256 + b * _BATCH + n}",
                 {"d": a.envelope, "dup": b"", "sk": a.scope_key.encode()})
                for n, a in enumerate(admitted)
            ]  # fmt: skip
        inputs.append(entries)
    inputs = inputs[:rounds]
    gc.freeze()
    for entries in inputs:
        done = []
        for part, entry_id, fields in entries:
            item = _run_now(state, part, entry_id, read_entry(fields))
            assert item is not None
            done.append(item)
        calls = [_finish_calls(state, group) for group in _by_partition(done)]
        _pack([("EVALSHA", "0" * 40, len(k), *k, *a) for k, a in calls])


def _replies(round_no: int) -> tuple[list[Any], list[Any]]:
    from pipeline.listener import _Listener

    control = b'{"status":"READY","evidence_status":"EVIDENCE_FOUND"}' + b" " * 300
    model = b'{"evidence_status":"EVIDENCE_FOUND"}' + b" " * 400
    followed: list[Any] = []
    controls: list[Any] = []
    models: list[Any] = []
    for b in range(_BATCHES):
        listener = _Listener(f"s{b}", f"{{p}}:model:s{b}", f"{{p}}:control:s{b}")
        listener.cursors = {listener.model: b"0-0", listener.control: b"0-0"}
        ids = [f"b{b}_{round_no}_{i}" for i in range(_BATCH)]
        listener.add(ids, dict.fromkeys(ids, _SK))
        followed.append(listener)
        for stream, data, into in ((listener.control, control, controls),
                                   (listener.model, model, models)):  # fmt: skip
            into.append([stream.encode(), [
                (f"1796462900000-{n}".encode(), [b"id", i.encode(), b"d", data, b"sk", _SK])
                for n, i in enumerate(ids)
            ]])  # fmt: skip
    return followed, [controls, models]


def listener(settings: Settings, rounds: int) -> None:
    from pipeline.listener import _Hub

    inputs = [_replies(r) for r in range(5)][:rounds]
    gc.freeze()
    for followed, replies in inputs:
        offered, _full = _Hub._hand_over(None, followed, replies)  # type: ignore[arg-type]
        assert offered


def waiters(settings: Settings, rounds: int) -> None:
    from pipeline.listener import _Listener

    listeners = [_Listener(f"s{b}", "m", "c") for b in range(_BATCHES)]
    ids = [[f"b{b}_{i}" for i in range(_BATCH)] for b in range(_BATCHES)]
    expects = [dict.fromkeys(i, _SK) for i in ids]
    gc.freeze()
    for _ in range(rounds):
        for one, its_ids, its_expects in zip(listeners, ids, expects, strict=True):
            one.remove(one.add(its_ids, its_expects))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", choices=["client", "worker", "listener", "waiters"])
    parser.add_argument("rounds", type=int, choices=range(1, 6), metavar="ROUNDS (1-5)")
    args = parser.parse_args()
    globals()[args.path](Settings(prefix="perf"), args.rounds)
