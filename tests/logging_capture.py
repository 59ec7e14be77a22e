"""The worker's own logging, captured in a test: the root logger put back afterwards."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def root_restored() -> Iterator[io.StringIO]:
    """A buffer to pass as `configure_logging(..., stream=buffer)` (once or more) inside the
    block; the root logger's handlers and level are what they were before, after it."""
    buffer, root = io.StringIO(), logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield buffer
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
