"""The worker runtime: one worker process as small loops in one task group (readers, the
work of each entry, a batched finisher, a janitor), and the bootstrap of a worker process.

`run_worker` runs the loops until `stop` is set; `consumer_name` names this process in the
consumer group.
"""

from __future__ import annotations

from workers.runtime.worker import consumer_name, run_worker

__all__ = ["consumer_name", "run_worker"]
