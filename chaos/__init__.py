"""The fault and abuse suite: scenarios that run a bounded load on private servers, inject
faults (SIGKILL, SIGSTOP, Redis and MariaDB restarts, hanging, garbage and hostile sources,
bursts) and check the books. Run with `python -m chaos`; see docs/reliability.md."""

from __future__ import annotations

from chaos.books import Books, check_books
from chaos.report import run_all
from chaos.scenario import Report, Scale, Spec, run_spec
from chaos.scenarios import SCALES, SPECS

__all__ = [
    "SCALES",
    "SPECS",
    "Books",
    "Report",
    "Scale",
    "Spec",
    "check_books",
    "run_all",
    "run_spec",
]
