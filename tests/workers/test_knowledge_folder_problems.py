"""A knowledge folder that cannot be read, or a cache folder that cannot be written, is said
once by its own name: the operator is sent to the right variable.

Found by the on-call drill: an unreadable `ACI_KNOWLEDGE_DIR` was logged as "the knowledge
index could not be written to its cache folder (ACI_CACHE_DIR must be writable)", and a
cache folder that could not be written was not logged at all (SQLite's OperationalError is
no OSError): only the warm-up's "the knowledge index could not be read".

Permissions do not stop root, so as root each case runs in a child process without the
capabilities that bypass them (`setpriv`, util-linux).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = "# Disk full\n\nWrites fail with No space left on device.\n"
_CHILD = """
import json, logging, sys
import anyio
from contracts.requests import LookupKnowledgeRequest
from workers.sources import SourceError
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings

lines = []
handler = logging.Handler()
handler.emit = lambda record: lines.append(f"{record.levelname} {record.getMessage()}")
logging.getLogger("aci.knowledge").addHandler(handler)
source = KnowledgeIndexSource(
    KnowledgeSettings(folder=sys.argv[1], cache_dir=sys.argv[2], retrieval="lexical")
)
codes = []
for _ in range(2):  # said once, not per lookup
    try:
        anyio.run(source.fetch, LookupKnowledgeRequest(query="disk full"))
        codes.append("answered")
    except SourceError as exc:
        codes.append(exc.code.value)
print(json.dumps({"lines": lines, "codes": codes}))
"""


def _lookups_without_permission(folder: Path, cache: Path) -> dict[str, list[str]]:
    command = [sys.executable, "-c", _CHILD, str(folder), str(cache)]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv: permissions cannot be taken away")
        caps = "-dac_override,-dac_read_search"
        command = ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", *command]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result: dict[str, list[str]] = json.loads(done.stdout)
    return result


def test_an_unreadable_knowledge_folder_names_aci_knowledge_dir(tmp_path: Path) -> None:
    folder, cache = tmp_path / "kb", tmp_path / "cache"
    folder.mkdir()
    (folder / "disk.md").write_text(RUNBOOK)
    folder.chmod(0)
    try:
        seen = _lookups_without_permission(folder, cache)
    finally:
        folder.chmod(0o755)
    assert seen["codes"] == ["UNAVAILABLE", "UNAVAILABLE"]
    assert seen["lines"] == [
        "ERROR ACI_KNOWLEDGE_DIR does not name a readable folder: lookups are UNAVAILABLE"
    ]


def test_a_cache_folder_that_cannot_be_written_names_aci_cache_dir(tmp_path: Path) -> None:
    folder, cache = tmp_path / "kb", tmp_path / "cache"
    folder.mkdir()
    (folder / "disk.md").write_text(RUNBOOK)
    cache.mkdir()
    cache.chmod(0o555)
    try:
        seen = _lookups_without_permission(folder, cache)
    finally:
        cache.chmod(0o755)
    assert seen["codes"] == ["UNAVAILABLE", "UNAVAILABLE"]
    assert seen["lines"] == [
        "ERROR the knowledge index could not be written to its cache folder (unable to open"
        " database file; ACI_CACHE_DIR must be writable, with room): lookups are UNAVAILABLE"
    ]


async def test_the_warm_up_does_not_say_it_a_second_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The drill's worker start said the folder's ERROR and then the warm-up's generic
    # "warm-up of lookup_knowledge failed (the knowledge index could not be read)".
    from workers.sources import warm_up
    from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings

    settings = KnowledgeSettings(
        folder=str(tmp_path / "missing"), cache_dir=str(tmp_path / "cache"), retrieval="lexical"
    )
    source = KnowledgeIndexSource(settings)
    with caplog.at_level("WARNING"):
        await warm_up({"lookup_knowledge": source}, timeout_s=10)
    await source.aclose()
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("aci.")]
    assert lines == ["ACI_KNOWLEDGE_DIR does not name a readable folder: lookups are UNAVAILABLE"]


def test_a_full_cache_folder_is_said_by_its_errno() -> None:
    # A full disk (day two: the cache's file system filled up) was said as "must be
    # writable" alone, sending the operator to check permissions that were fine.
    import errno
    import sqlite3

    from workers.sources.knowledge.index_file import why_not

    full = OSError(errno.ENOSPC, "No space left on device", "/var/cache/aci/x.sqlite3")
    assert why_not(full) == "ENOSPC, no space left on device"
    assert why_not(sqlite3.OperationalError("database or disk is full")) == (
        "database or disk is full"
    )
    assert why_not(sqlite3.OperationalError("no such table: /etc/x")) == "OperationalError"


async def test_a_relative_folder_that_is_missing_names_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # An MCP client starts its server in a folder of its own choosing: `ACI_KNOWLEDGE_DIR=
    # runbooks` was "does not name a readable folder", with no word of where it was looked for
    # (ACI_MYSQL_CONFIG and ACI_LOGS_CONFIG say it).
    from workers.sources import warm_up
    from workers.sources.knowledge.check import check_knowledge
    from workers.sources.knowledge.index import KnowledgeIndexSource

    monkeypatch.chdir(tmp_path)
    env = {
        "ACI_KNOWLEDGE_DIR": "runbooks",
        "ACI_CACHE_DIR": str(tmp_path / "cache"),
        "ACI_KNOWLEDGE_RETRIEVAL": "lexical",
    }
    with caplog.at_level("WARNING"):
        source = KnowledgeIndexSource.from_env(env)
        await warm_up({"lookup_knowledge": source}, timeout_s=10)
    await source.aclose()
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("aci.")]
    assert lines == [
        "ACI_KNOWLEDGE_DIR does not name a readable folder ('runbooks'; a relative path is read"
        f" from the working folder {tmp_path}): lookups are UNAVAILABLE"
    ]
    assert check_knowledge(env).problem == (
        "ACI_KNOWLEDGE_DIR runbooks is not a readable folder (a relative path is read from the"
        f" working folder {tmp_path}): lookups fail"
    )
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "runbooks" / "disk.md").write_text(RUNBOOK)
    assert check_knowledge(env).problem == ""
