"""A team's own runbook folder, as an on-call engineer points `ACI_KNOWLEDGE_DIR` at it:
files saved by Windows editors (UTF-16 with a BOM, Windows-1252/latin-1), a binary file named
`.md`, a runbook or a sub-folder the worker may not read, and a symlink that gives a runbook a
second name inside the folder.

Before (2026-12-05): every file was decoded as UTF-8 with replacement, so a UTF-16 runbook
("TLS certificate expired …") was indexed as NUL-separated letters and "certificate has
expired" answered NO_EVIDENCE; a latin-1 runbook showed `Proc\ufffddure` in its title and
excerpts; a binary `.md` became six sections of noise and `check` listed it as a runbook. A
runbook or folder that could not be read (permission denied) was left out in silence: no log
line, nothing in the Control View, nothing from `check` for a folder. A symlink to a runbook
inside the folder was indexed twice, and every answer that hit the link's copy said
`index_rebuilding: true` (the per-hit check reads a source without following links), forever.
"""

from __future__ import annotations

import codecs
import errno
import logging
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge import files
from workers.sources.knowledge.check import check_knowledge
from workers.sources.knowledge.decoding import Undecodable, decode_runbook
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings
from workers.sources.knowledge.store import IndexFile, build_index

CERT = (
    "# Certificate expiry\n\nTLS certificate expired; clients see x509: certificate has expired.\n"
)
LATIN = "# Procédure de redémarrage\n\nQuand le cache ne répond plus, redémarrer « cache-02 ».\n"


@pytest.mark.parametrize(
    "data",
    [
        codecs.BOM_UTF16_LE + CERT.encode("utf-16-le"),
        codecs.BOM_UTF16_BE + CERT.encode("utf-16-be"),
        codecs.BOM_UTF32_LE + CERT.encode("utf-32-le"),
        CERT.encode("utf-16-le"),  # no BOM: recognised by its NUL bytes
        CERT.encode("utf-16-be"),
        CERT.encode("utf-8"),
    ],
)
def test_unicode_encodings_read_as_their_text(data: bytes) -> None:
    assert decode_runbook(data) == CERT


def test_an_8_bit_file_reads_as_windows_1252() -> None:
    assert decode_runbook(LATIN.encode("latin-1")) == LATIN
    quoted = "# Rollback\n\nRun \u201cdeployctl rollback\u201d \u2013 then watch 5xx.\n"
    assert decode_runbook(quoted.encode("cp1252")) == quoted
    assert (
        decode_runbook(b"# A\n\n\x81 undefined in cp1252\n") == "# A\n\n\x81 undefined in cp1252\n"
    )


def test_chinese_saved_on_windows_reads_as_gbk() -> None:
    # A Chinese team's runbook saved by a Windows editor (GBK, GB18030's subset): before, a
    # run of U+FFFD; decoded as Windows-1252 it would be accented Latin letters (mojibake).
    text = (
        "# MySQL 主从复制延迟\n\n## 现象\n\n从库的 Seconds_Behind_Master 持续增长。\n\n"
        "## 处理\n\n1. 在主库上查找长事务\uff1aSELECT * FROM information_schema.innodb_trx;\n"
    )
    assert decode_runbook(text.encode("gbk")) == text
    assert decode_runbook(text.encode("gb18030")) == text
    assert (
        decode_runbook("# 磁盘满了\n\n清理日志。\n".encode("gbk")) == "# 磁盘满了\n\n清理日志。\n"
    )


def test_utf8_stays_utf8() -> None:
    # A BOM is kept (the Markdown reader strips it, as before); a stray bad byte in a UTF-8
    # file is replaced, the rest not re-read as another encoding.
    assert decode_runbook(b"\xef\xbb\xbf# T\n") == "\ufeff# T\n"
    mixed = "# Redémarrage\n\nétape 1 ".encode() + b"\xe9 fin\n"
    assert decode_runbook(mixed) == "# Redémarrage\n\nétape 1 \ufffd fin\n"


@pytest.mark.parametrize(
    "data",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4,
        (bytes(range(1, 32)) + b"\xfe\xff") * 20,  # control bytes, no NUL, not UTF-8
        codecs.BOM_UTF16_LE + b"\x00\xd8",  # a lone surrogate
    ],
)
def test_what_is_no_text_is_refused(data: bytes) -> None:
    with pytest.raises(Undecodable):
        decode_runbook(data)


def _team_folder(root: Path) -> Path:
    kb = root / "kb"
    (kb / "legacy").mkdir(parents=True)
    (kb / "private").mkdir()
    (kb / "disk.md").write_text("# Disk full\n\nNo space left on device.\n")
    (kb / "legacy" / "cert.md").write_bytes(codecs.BOM_UTF16_LE + CERT.encode("utf-16-le"))
    (kb / "legacy" / "cache.md").write_bytes(LATIN.encode("latin-1"))
    (kb / "blob.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(range(256)))
    (kb / "locked.md").write_text("# Vault unseal\n\nUnseal vault.\n")
    (kb / "private" / "pay.md").write_text("# Payments failover\n\nFail over.\n")
    os.symlink("disk.md", kb / "DiskFullAlert.md")
    (root / "shared.md").write_text("# Shared\n\nAnother team's runbook.\n")
    os.symlink("../../shared.md", kb / "legacy" / "shared.md")  # out of the folder: said
    os.symlink("gone.md", kb / "dangling.md")
    return kb


@pytest.fixture
def locked(monkeypatch: pytest.MonkeyPatch) -> None:
    """`locked.md` and the folder `private` refuse their reader (EACCES), as `chmod 000` does
    for a worker that is not root (tests run as root here, which chmod does not stop)."""
    real_open, real_scandir = os.open, os.scandir

    def refusing_open(path: Any, flags: int, *args: Any, **kw: Any) -> int:
        if str(path) == "locked.md":
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, flags, *args, **kw)

    def refusing_scandir(path: Any) -> Any:
        if Path(path).name == "private":
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_scandir(path)

    monkeypatch.setattr(files.os, "open", refusing_open)
    monkeypatch.setattr(files.os, "scandir", refusing_scandir)


@pytest.mark.usefixtures("locked")
def test_the_build_says_what_it_could_not_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kb = _team_folder(tmp_path)
    target = tmp_path / "index.sqlite3"
    with caplog.at_level(logging.WARNING, logger="aci.knowledge"):
        build_index(kb, target)
    index = IndexFile(target)
    try:
        rows = index.conn.execute("SELECT source, title, content FROM chunks").fetchall()
        reasons = index.conn.execute("SELECT source, reason FROM skipped ORDER BY 1").fetchall()
    finally:
        index.conn.close()
    assert {r[0] for r in rows} == {"disk.md", "legacy/cache.md", "legacy/cert.md"}
    titles = {r[0]: r[1] for r in rows}
    assert titles["legacy/cert.md"] == "Certificate expiry"
    assert titles["legacy/cache.md"] == "Procédure de redémarrage"
    assert not any("\ufffd" in r[2] or "\x00" in r[2] for r in rows)
    assert reasons == [
        ("blob.md", "binary"), ("dangling.md", "refused"), ("legacy/shared.md", "refused"),
        ("locked.md", "unreadable"), ("private/", "refused"),
    ]  # fmt: skip
    said = [r.getMessage() for r in caplog.records]
    assert "knowledge runbook blob.md not indexed: binary data, not text" in said
    assert "knowledge runbook locked.md not indexed: cannot be read (permission denied)" in said
    assert "knowledge: private/ not indexed: a folder that cannot be listed" in said
    assert "knowledge: dangling.md not indexed: a symlink to nothing" in said
    out = "a symlink out of the folder (only files inside it are read)"
    assert f"knowledge: legacy/shared.md not indexed: {out}" in said


@pytest.mark.usefixtures("locked")
def test_check_names_each_file_it_could_not_read(tmp_path: Path) -> None:
    kb = _team_folder(tmp_path)
    check = check_knowledge({"ACI_KNOWLEDGE_DIR": str(kb)})
    assert check.problems() == [
        "knowledge: blob.md: binary data, not text: not indexed",
        "knowledge: locked.md: cannot be read (permission denied): not indexed",
        "knowledge: dangling.md: a symlink to nothing: not indexed",
        "knowledge: legacy/shared.md: a symlink out of the folder (only files inside it are"
        " read): not indexed",
        "knowledge: private/: a folder that cannot be listed: not indexed",
    ]
    titles = {r.source: r.title for r in check.listed}
    assert titles["legacy/cert.md"] == "Certificate expiry"
    assert titles["legacy/cache.md"] == "Procédure de redémarrage"
    assert "DiskFullAlert.md" not in titles  # the link is disk.md, listed once


def test_a_symlink_inside_the_folder_is_its_target_once(tmp_path: Path) -> None:
    kb = _team_folder(tmp_path)
    assert [rel for rel, _ in files.runbook_files(kb)] == [
        "blob.md", "disk.md", "legacy/cache.md", "legacy/cert.md", "locked.md", "private/pay.md"
    ]  # fmt: skip


async def test_answers_from_a_team_folder(tmp_path: Path) -> None:
    kb = _team_folder(tmp_path)
    settings = KnowledgeSettings(
        folder=str(kb), cache_dir=str(tmp_path / "c"), retrieval="lexical", max_hits=10
    )
    source = KnowledgeIndexSource(settings)
    try:
        with anyio.fail_after(30):
            cert = await source.fetch(LookupKnowledgeRequest(query="certificate has expired"))
            disk = await source.fetch(LookupKnowledgeRequest(query="no space left on device"))
    finally:
        await source.aclose()
    assert [h["source"] for h in cert["contextPack"]["hits"]] == ["legacy/cert.md"]
    # One hit for the runbook and its link, and no rebuild said (before: always, for the link).
    assert [h["source"] for h in disk["contextPack"]["hits"]] == ["disk.md"]
    assert "indexRebuilding" not in disk["contextPack"]
    skipped = ["blob.md", "dangling.md", "legacy/shared.md"]
    assert disk["contextPack"]["skippedSources"] == skipped


def test_a_suffix_in_capitals_is_a_runbook(tmp_path: Path) -> None:
    # Before: `MEMCACHED.MD` (a Windows export) was not read, and check said so as "(1 other
    # file is not read (1 .md))" beside "everything reads well"; "memcached evictions" was
    # answered LOW by the Redis runbook.
    (tmp_path / "MEMCACHED.MD").write_text("# Memcached eviction storm\n\nThe slab is full.\n")
    (tmp_path / "DNS.TXT").write_text("DNS failures\n============\n\nCoreDNS crashloops.\n")
    (tmp_path / "Intro.Mdx").write_text("import X from 'x'\n\n# Intro\n\n<X>Read me.</X>\n")
    check = check_knowledge({"ACI_KNOWLEDGE_DIR": str(tmp_path)})
    assert check.problems() == [] and check.others == {}
    titles = {r.source: r.title for r in check.listed}
    assert titles == {
        "DNS.TXT": "DNS failures",
        "Intro.Mdx": "Intro",
        "MEMCACHED.MD": "Memcached eviction storm",
    }
    target = tmp_path.parent / f"{tmp_path.name}.sqlite3"
    build_index(tmp_path, target)
    index = IndexFile(target)
    try:
        rows = dict(index.conn.execute("SELECT source, content FROM chunks").fetchall())
    finally:
        index.conn.close()
    assert rows["Intro.Mdx"] == "# Intro\n\nRead me."  # read as MDX: the import and tags out


def test_a_runbook_made_unreadable_changes_the_fingerprint(tmp_path: Path) -> None:
    # Before: `chmod 000` left size and mtime alone, so no rebuild came; each hit of the
    # runbook failed the per-hit check and every such answer said `index_rebuilding: true`
    # while nothing was rebuilt, the runbook never named as unreadable.
    kb = _team_folder(tmp_path)
    before = files.files_fingerprint(kb, "salt")
    (kb / "disk.md").chmod(0)
    unreadable = files.files_fingerprint(kb, "salt")
    (kb / "disk.md").chmod(0o644)
    assert len({before, unreadable, files.files_fingerprint(kb, "salt")}) == 2
    assert files.files_fingerprint(kb, "salt") == before


def test_installed_packages_are_no_runbooks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A docs site's checkout after `npm install`: before, every library's README.md and
    # CHANGELOG.md under node_modules was indexed as a runbook ("how to restart" -> a
    # package's README), and the build embedded thousands of them.
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "restart.md").write_text("# Restart the API\n\nsystemctl restart api\n")
    for package in ("lodash", "@docusaurus/core"):
        folder = tmp_path / "node_modules" / package
        folder.mkdir(parents=True)
        (folder / "README.md").write_text(f"# {package}\n\nHow to restart the watcher.\n")
    (tmp_path / "website" / "bower_components" / "x").mkdir(parents=True)
    (tmp_path / "website" / "bower_components" / "x" / "README.md").write_text("# x\n\ntext\n")
    with caplog.at_level(logging.WARNING, logger="aci.knowledge"):
        found = [rel for rel, _ in files.runbook_files(tmp_path)]
    assert found == ["docs/restart.md"]
    assert "skipping knowledge folders named node_modules (packages)" in caplog.text


async def test_a_link_named_after_an_alert_names_its_runbook(tmp_path: Path) -> None:
    # A team links each alert's name to a shared runbook. The link is not a second copy of
    # the runbook, but its name still names it: the pasted alert is answered HIGH by it.
    kb = tmp_path / "kb"
    (kb / "alerts").mkdir(parents=True)
    (kb / "db").mkdir()
    (kb / "db" / "replication-lag.md").write_text(
        "# Replication lag\n\n## Mitigation\n\nFind the long transaction on the primary.\n"
    )
    (kb / "db" / "disk.md").write_text("# Disk\n\nThe primary's disk is full.\n")
    os.symlink("../db/replication-lag.md", kb / "alerts" / "MySQLReplicationLagHigh.md")
    before = files.files_fingerprint(kb, "salt")
    os.symlink("../db/disk.md", kb / "alerts" / "MySQLDiskFull.md")
    assert files.files_fingerprint(kb, "salt") != before  # an alias added is a change
    settings = KnowledgeSettings(folder=str(kb), cache_dir=str(tmp_path / "c"))
    source = KnowledgeIndexSource(settings)
    try:
        with anyio.fail_after(60):
            answer = await source.fetch(LookupKnowledgeRequest(query="MySQLReplicationLagHigh"))
    finally:
        await source.aclose()
    pack = answer["contextPack"]
    assert [h["source"] for h in pack["hits"]][:1] == ["db/replication-lag.md"]
    assert pack["relevanceLevel"] == "high" and "indexRebuilding" not in pack
