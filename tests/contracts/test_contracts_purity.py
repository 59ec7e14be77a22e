"""contracts/ stands alone: no pipeline, workers, Redis, async runtime or network import."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted((ROOT / "contracts").glob("*.py"))
FORBIDDEN = ("pipeline", "workers", "redis", "anyio", "asyncio", "socket", "httpx", "pymysql")
# What contracts/ may import at all: the standard library, msgspec, and sqlglot (lazily).
ALLOWED_THIRD_PARTY = {"msgspec", "sqlglot"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "__import__":
            pytest.fail(f"{path.name}: dynamic import")
    return names


def test_every_contract_module_is_scanned() -> None:
    assert {p.stem for p in MODULES} >= {
        "__init__", "bounds", "fingerprint", "logs", "mysql", "projection", "rag", "requests",
        "results", "status", "text", "tools", "views",
    }  # fmt: skip


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_module_imports_only_stdlib_msgspec_and_sqlglot(path: Path) -> None:
    for name in _imports(path):
        top = name.split(".")[0]
        assert top not in FORBIDDEN, f"{path.name} imports {name}"
        assert top in sys.stdlib_module_names or top in ALLOWED_THIRD_PARTY or top == "contracts", (
            f"{path.name} imports {name}"
        )
        assert top not in {"importlib", "os", "io", "pathlib", "subprocess"}, f"{path.name}: I/O"


def test_importing_contracts_loads_no_forbidden_module() -> None:
    code = (
        "import sys, json, contracts\n"
        "contracts.export_tools('openai')\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    loaded = json.loads(out.stdout)
    for module in loaded:
        assert module.split(".")[0] not in FORBIDDEN, module
    assert "sqlglot" not in loaded  # only imported when SQL is normalised
