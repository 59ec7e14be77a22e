"""Big5 (traditional Chinese) and Shift-JIS (Japanese) runbooks, as a Taipei or Tokyo team's
Windows editors saved them, read as their text; `check` says what a runbook that is not UTF-8
was read as (docs/knowledge.md "A team's own folder").

Before (2026-12-05): both were read as Windows-1252, so `# 磁碟已滿` was the title
`# ºÏºÐ¤wº¡` and no question in Chinese or Japanese found a word of them; and `check` said
nothing of it ("everything reads well"). The heuristics must not take latin-1/cp1252 prose,
GBK or UTF-8 for them: each encoding's bytes decode as the others' too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.sources.knowledge.check import check_knowledge
from workers.sources.knowledge.decoding import decode_runbook, decode_runbook_as

TRADITIONAL = (
    "# MySQL 主從複製延遲\n\n## 現象\n\n從庫的 Seconds_Behind_Master 持續增長\uff0c應用讀到舊資料。\n\n"
    "## 處理\n\n1. 在主庫上查找長事務\uff1aSELECT * FROM information_schema.innodb_trx;\n"
    "2. 確認磁碟空間是否已滿\uff0c清理舊的日誌檔案。\n"
)
JAPANESE = (
    "# ディスク容量不足 (/var)\n\n## 症状\n\nアプリケーションのログに「No space left on device」"
    "と出力され、書き込みが失敗します。\n\n## 対応\n\n1. df -h で使用率を確認する。\n"
    "2. 古いログファイルを削除してください。\n"
)
SIMPLIFIED = (
    "# MySQL 主从复制延迟\n\n## 现象\n\n从库的 Seconds_Behind_Master 持续增长。\n\n"
    "## 处理\n\n1. 在主库上查找长事务\uff1aSELECT * FROM information_schema.innodb_trx;\n"
)
BIG5 = "Big5 (traditional Chinese)"
SJIS = "Shift-JIS (Japanese)"
GBK = "GBK/GB18030 (simplified Chinese)"


@pytest.mark.parametrize(
    ("text", "codec", "name"),
    [
        (TRADITIONAL, "big5", BIG5),
        (TRADITIONAL, "cp950", BIG5),  # Windows' Big5
        ("# 磁碟已滿\n\n清理日誌。\n", "big5", BIG5),  # a short one
        ("使用MySQL的主從複製\uff0c檢查Seconds_Behind_Master值。\n", "big5", BIG5),  # no spaces
        (JAPANESE, "shift_jis", SJIS),
        (JAPANESE, "cp932", SJIS),  # Windows' Shift-JIS
        ("# 障害対応\n\n再起動する。\n", "cp932", SJIS),
        ("MySQLのレプリケーションが遅延しています。\n", "cp932", SJIS),
        (SIMPLIFIED, "gbk", GBK),  # as before
        ("# 磁盘满了\n\n清理日志。\n", "gbk", GBK),
    ],
)
def test_chinese_and_japanese_saved_on_windows_read_as_their_text(
    text: str, codec: str, name: str
) -> None:
    assert decode_runbook_as(text.encode(codec)) == (text, name)


@pytest.mark.parametrize(
    "text",
    [
        "# Procédure de redémarrage\n\nQuand le cache ne répond plus, redémarrer « cache-02 ».\n",
        # accented letters side by side, or before a letter: each pair is a CJK character in
        # one of the three encodings (`Größe` is GB2312's, `Ärger` Big5's)
        "Größe\n",
        "the logs créée\n",
        "Ärger\n",
        "run the df Größe server disk ação\n",
        "Größe is créée then ação Ärger\n",
        "cache clean disk Ärger full then full run\n",
        "¿Qué hacer? Ánimo: el disco está lleno. 50°C ±5\n",
        "Run \u201cdeployctl rollback\u201d \u2013 then watch 5xx \u2026 \u20ac5\n",
    ],
)
def test_latin_prose_is_still_windows_1252(text: str) -> None:
    data = text.encode("cp1252")
    assert decode_runbook_as(data) == (text, "Windows-1252")


def test_utf8_is_not_named_and_a_stray_byte_is() -> None:
    for text in (TRADITIONAL, JAPANESE, SIMPLIFIED, "plain ASCII\n"):
        assert decode_runbook_as(text.encode("utf-8")) == (text, "")
    stray = "# 磁碟已滿\n\n清理日誌。\n".encode() + b"\xff\n"
    assert decode_runbook_as(stray)[1] == "UTF-8, 1 invalid sequence replaced"
    assert decode_runbook(stray).startswith("# 磁碟已滿")


def test_check_says_what_a_runbook_that_is_not_utf8_was_read_as(tmp_path: Path) -> None:
    (tmp_path / "zh-tw").mkdir()
    (tmp_path / "zh-tw" / "replication.md").write_bytes(TRADITIONAL.encode("cp950"))
    (tmp_path / "disk.txt").write_bytes(JAPANESE.encode("cp932"))
    (tmp_path / "cache.md").write_bytes("# Procédure\n\nRedémarrer.\n".encode("latin-1"))
    (tmp_path / "plain.md").write_text("# Plain\n\nText.\n", encoding="utf-8")
    check = check_knowledge({"ACI_KNOWLEDGE_DIR": str(tmp_path)})
    assert check.problems() == []  # a note, not a problem
    read = {r.source: (r.title, r.encoding) for r in check.listed}
    assert read == {
        "zh-tw/replication.md": ("MySQL 主從複製延遲", BIG5),
        "disk.txt": ("ディスク容量不足 (/var)", SJIS),
        "cache.md": ("Procédure", "Windows-1252"),
        "plain.md": ("Plain", ""),
    }
