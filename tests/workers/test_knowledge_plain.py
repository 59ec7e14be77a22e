"""A plain `.txt` runbook is titled by its first line when that line reads as a title
(docs/knowledge.md "Chunks"): a team's `disk.txt` that opens with `Disk full on /var` and a
blank line was titled `disk` before, in `check`'s listing, every breadcrumb and the words a
lookup weighs twice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.sources.knowledge.analysis import plain_title, split_document
from workers.sources.knowledge.check import check_knowledge


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("Disk full on /var\n\nRun `df -h` and find what grew.\n", "Disk full on /var"),
        ("\ufeff\n\n  Disk full on /var  \n\nRun df -h.\n", "Disk full on /var"),
        ("Disk full on /var\n=================\nRun df -h.\n", "Disk full on /var"),
        ("Disk full on /var\n-----\n\nRun df -h.\n", "Disk full on /var"),
        ("# Disk full on /var\n\nRun df -h.\n", "Disk full on /var"),
        ("Kafka consumer lag (orders)\n\nScale the consumers.\n", "Kafka consumer lag (orders)"),
        ("磁盘已满 /var\n\n清理旧日志。\n", "磁盘已满 /var"),
    ],
)
def test_a_first_line_that_reads_as_a_title_is_the_title(text: str, title: str) -> None:
    assert plain_title(text) == title
    chunks = split_document(text, "ops/disk.txt")
    assert chunks[0].title == title and chunks[0].breadcrumb == title
    assert title in chunks[0].content  # the text is served verbatim, title line and all


@pytest.mark.parametrize(
    "text",
    [
        "The nightly report job did not run.\n\nCheck whether the CronJob is suspended.\n",
        "Disk full on /var\nRun df -h and find what grew.\n",  # a paragraph's first line
        "When the disk fills up:\n\n1. run df -h\n",
        "Is the disk full?\n\nRun df -h.\n",
        "磁盘满了怎么办\uff1f\n\n清理旧日志。\n",
        "- check the disk\n\n- clean the logs\n",
        "$ df -h /var\n\nFilesystem Size Used\n",
        "LOG_DIR=/var/log/app\n\nClean it.\n",
        "See https://wiki.example.com/disk\n\nOr ask #ops.\n",
        "2026-12-05\n\nThe disk filled up.\n",
        "Disk full on /var\n",  # the whole file: nothing to title
        "This runbook covers what to do when the disk of a database host fills up and writes"
        " fail\n\nRun df -h.\n",
    ],
)
def test_a_first_line_that_is_text_leaves_the_file_name(text: str) -> None:
    assert plain_title(text) == ""
    assert split_document(text, "ops/disk.txt")[0].title == "disk"


def test_check_lists_a_txt_runbook_by_its_title(tmp_path: Path) -> None:
    (tmp_path / "disk.txt").write_text("Disk full on /var\n\nRun df -h.\n", encoding="utf-8")
    (tmp_path / "cron.txt").write_text("The job did not run.\n\nResume it.\n", encoding="utf-8")
    check = check_knowledge({"ACI_KNOWLEDGE_DIR": str(tmp_path)})
    titles = {r.source: r.title for r in check.listed}
    assert titles == {"disk.txt": "Disk full on /var", "cron.txt": "cron"}
    assert check.problems() == []
