"""The worker runtime: one worker process as small loops in one task group (readers, the
work of each entry, a batched finisher, a janitor), and the bootstrap of a worker process.

`run_worker` runs the loops until `stop` is set; `consumer_name` names this process in the
consumer group; `serve_worker` is a whole worker process (signals, sources, Redis, drain).
"""

from __future__ import annotations

from workers.runtime.bootstrap import serve_worker
from workers.runtime.worker import consumer_name, run_worker

__all__ = ["consumer_name", "run_worker", "serve_worker"]
