"""README.md says what works (issue 35, items 3 and 9): its install lines work from a clone
(the package is on no index), and its Python example runs as written against a worker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import anyio
import pytest

from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from tests.conftest import REDIS_URL
from tests.console.seed import drop_prefix
from tests.pipeline.helpers import running_worker
from workers.sources.instant import InstantSource

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_no_install_line_names_a_package_index() -> None:
    for doc in DOCS:
        for line in doc.read_text().splitlines():
            if "pip install" in line:
                assert "aci-evidence[" not in line, f"{doc.name}: {line}"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


@pytest.mark.redis
def test_the_readme_python_example_runs_as_written() -> None:
    (script,) = _python_blocks()
    prefix = f"r{uuid.uuid4().hex[:12]}"
    settings = Settings(prefix=prefix, redis_url=REDIS_URL)
    env = {**os.environ, "ACI_REDIS_URL": REDIS_URL, "ACI_PREFIX": prefix}
    out: list[subprocess.CompletedProcess[str]] = []

    async def run() -> None:
        async with (
            open_redis(REDIS_URL) as redis,
            running_worker(redis, settings, {"lookup_knowledge": InstantSource()}),
        ):
            out.append(
                await anyio.to_thread.run_sync(
                    lambda: subprocess.run(
                        [sys.executable, "-c", script], env=env, capture_output=True,
                        text=True, timeout=60, check=False,
                    )
                )
            )  # fmt: skip

    try:
        anyio.run(run)
    finally:
        drop_prefix(REDIS_URL, prefix)
    assert out[0].returncode == 0, out[0].stderr
    assert out[0].stdout.split() == ["READY", "EVIDENCE_FOUND", "READY"]
