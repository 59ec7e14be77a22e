"""Worker processes started by the demo and the benchmark run the installed console script."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from app.fleet import CLI


def test_a_users_own_app_package_does_not_shadow_ours(tmp_path: Path) -> None:
    # A user running `aci-evidence demo` inside their own project (a FastAPI `app/`, say):
    # `python -m app.cli` would import their package from the current directory.
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [*CLI, "tools", "--format", "schema"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "lookup_knowledge" in done.stdout
