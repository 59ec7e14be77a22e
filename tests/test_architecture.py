"""The allowed arrows between the project's packages (docs/architecture.md), for every module.

`app → hosts → workers → pipeline → contracts`, never back (a layer may also use any layer
below it); the operator tools (`chaos`, `bench`) may use the product's layers; nothing imports
`tests`. Redis is reached through the pipeline: only its modules
(and the peers' benchmark, which measures other queues on raw Redis) import `redis`.

The stored record has one owner, `pipeline/record.py` (with the Lua in `pipeline/lua/`): no
other module of `pipeline`, `workers`, `hosts`, `app` or `chaos` types one of its field names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("contracts", "pipeline", "workers", "hosts", "app", "chaos", "bench", "tests")
ALLOWED: dict[str, set[str]] = {
    "contracts": {"contracts"},
    "pipeline": {"contracts", "pipeline"},
    "workers": {"contracts", "pipeline", "workers"},
    "hosts": {"contracts", "pipeline", "workers", "hosts"},
    "app": {"contracts", "pipeline", "workers", "hosts", "app"},
    "chaos": {"contracts", "pipeline", "workers", "chaos"},
    "bench": {"contracts", "pipeline", "workers", "app", "bench"},
}
# Modules that may import the Redis driver: the pipeline's connection owners, and the peers'
# benchmark (it runs other queues' clients on raw Redis on purpose).
REDIS_IMPORTERS = {"pipeline/redis_io.py", "pipeline/lane.py", "app/bench_peers.py"}
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


# Only the operator's applications parse a command line: the product's layers take typed
# arguments, never an argparse `Namespace` (chaos/ and bench/ are command-line tools too).
PARSERS = {"app", "chaos", "bench"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_only_applications_parse_command_lines(path: Path) -> None:
    relative = path.relative_to(ROOT)
    if relative.parts[0] in PARSERS:
        return
    assert "argparse" not in _imports(path), f"{relative} imports argparse"
    assert "Namespace" not in path.read_text(), f"{relative} names a Namespace"


# Modules over ~400 lines, each with the reason written at the top of its docstring (issue 17):
# a new one is split, or says why not and is added here (and to docs/architecture.md).
LONG_LINES = 420
LONG_MODULES = {
    "workers/sources/mysql/sqlguard.py",
    "pipeline/lane.py",
    "pipeline/client.py",
}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_long_modules_say_why(path: Path) -> None:
    relative = path.relative_to(ROOT).as_posix()
    if relative.startswith(("tests/", "bench/")):
        return
    lines = path.read_text().count("\n")
    if relative in LONG_MODULES:
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert "on purpose" in docstring, f"{relative}: no reason for its length at its top"
    else:
        assert lines <= LONG_LINES, f"{relative} has {lines} lines: split it, or say why at its top"


# -- the stored record's field names ------------------------------------------------------------
RECORD_OWNER = "pipeline/record.py"
# A closed list: the names of the record's fields (call and result hashes) and of the stream
# entries that are specific enough to be checked as string literals. Left off, because they are
# ordinary words used for other things in unrelated code (adapters' `"id"`, metrics' `"tool"`,
# the status command's `"status"`, the demo's rendered rows, replay's export name `"raw"`):
# `id`, `tool`, `status`, `session`, `evidence`, `at`, `reason`, `raw`. Those are still named
# only in the owner where the code reads or writes a record or an entry.
RECORD_FIELDS = frozenset(
    {"st", "eid", "inv", "t0", "t1", "dup", "fp", "sk", "ev", "res", "mo", "cv", "d", "mid", "cid",
     "cx", "tk", "ta"}
)  # fmt: skip
# (module, name) pairs that may type a listed name, and why.
RECORD_FIELD_ALLOWED: dict[tuple[str, str], str] = {
    # The plain-Redis baseline of `bench pipeline` round-trips its own `{id, d}` entries on
    # streams of its own (not the record's): it measures raw Redis, not the pipeline.
    ("app/bench.py", "d"): "the baseline benchmark's own streams",
    # The chaos report's column header for the duplicates count (`Books.duplicates`).
    ("chaos/report.py", "dup"): "a table column label",
}
SCANNED = sorted(
    p
    for pkg in ("pipeline", "workers", "hosts", "app", "chaos")
    for p in (ROOT / pkg).rglob("*.py")
)


def _field_literals(source: str, filename: str = "<test>") -> list[tuple[int, str]]:
    """(line, name) of every string or bytes literal equal to a listed record field name; the
    literal parts of f-strings (`f"d{i}"`) are text, not names, and are skipped."""
    tree = ast.parse(source, filename)
    in_fstrings = {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in node.values
    }
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or id(node) in in_fstrings:
            continue
        value = node.value
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if isinstance(value, str) and value in RECORD_FIELDS:
            found.append((node.lineno, value))
    return found


def test_the_field_check_sees_str_and_bytes_literals() -> None:
    source = """x = f.get("eid"); y = f[b"d"]; z = f"d{i}"; w = {"mo": 1}; v = "id"\n"""
    assert _field_literals(source) == [(1, "eid"), (1, "d"), (1, "mo")]


@pytest.mark.parametrize("path", SCANNED, ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_owner_names_record_fields(path: Path) -> None:
    relative = path.relative_to(ROOT).as_posix()
    if relative == RECORD_OWNER:
        return
    found = [
        f"{relative}:{line}: {name!r}"
        for line, name in _field_literals(path.read_text(), relative)
        if (relative, name) not in RECORD_FIELD_ALLOWED
    ]
    assert not found, f"record field names belong to {RECORD_OWNER}: {found}"
