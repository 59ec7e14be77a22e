"""The allowed arrows between the project's packages (docs/architecture.md), for every module.

`workers → pipeline → contracts`, never back; the operator tools (`chaos`, `bench`) may use
all three; nothing imports `tests`. Redis is reached through the pipeline: only its modules
(and the peers' benchmark, which measures other queues on raw Redis) import `redis`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("contracts", "pipeline", "workers", "chaos", "bench", "tests")
ALLOWED: dict[str, set[str]] = {
    "contracts": {"contracts"},
    "pipeline": {"contracts", "pipeline"},
    "workers": {"contracts", "pipeline", "workers"},
    "chaos": {"contracts", "pipeline", "workers", "chaos"},
    "bench": {"contracts", "pipeline", "workers", "bench"},
}
# Modules that may import the Redis driver: the pipeline's connection owners, and the peers'
# benchmark (it runs other queues' clients on raw Redis on purpose).
REDIS_IMPORTERS = {"pipeline/redis_io.py", "pipeline/lane.py", "workers/bench_peers.py"}
MODULES = sorted(p for pkg in ALLOWED for p in (ROOT / pkg).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_every_package_is_scanned() -> None:
    found = {p.relative_to(ROOT).parts[0] for p in MODULES}
    assert found == set(ALLOWED)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_arrows(path: Path) -> None:
    relative = path.relative_to(ROOT)
    package = relative.parts[0]
    for name in _imports(path):
        top = name.split(".")[0]
        if top in PROJECT:
            assert top in ALLOWED[package], f"{relative} imports {name}"
        if top == "redis":
            assert relative.as_posix() in REDIS_IMPORTERS, f"{relative} imports {name}"
