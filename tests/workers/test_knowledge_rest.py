"""A reStructuredText runbook (Sphinx-built internal docs) is read by its sections.

Before (2026-12-05): `.rst` was plain text. A Sphinx page with an overlined title was titled
by its file name (`kafka`), cut into 700-character pieces across sections, every breadcrumb
the bare title; "under replicated partitions mitigation" got the page's start (the title and
its `.. contents::` table of contents) as its excerpt, and "kafka consumer lag" the
Mitigation section of another part of the page.
"""

from __future__ import annotations

from workers.sources.knowledge.analysis import split_document
from workers.sources.knowledge.restructured import read_rest

SPHINX = """\
=============================
Kafka broker operations guide
=============================

.. contents:: Table of Contents
   :depth: 2

.. _kafka-overview:

Overview
========

The three-node Kafka cluster of the orders platform.

Under-replicated partitions
===========================

Symptoms
--------

``UnderReplicatedPartitions`` is above zero for five minutes.

Mitigation
----------

1. Restart the broker that is down: ``systemctl restart kafka``.

.. This comment is for the docs' maintainers.
   It spans two lines.

2. Trigger a preferred leader election.

Consumer lag
============

Scale the orders-consumer deployment.

.. note::

   Never reset offsets without the payments team.
"""


def test_sections_by_adornment_under_the_document_title() -> None:
    chunks = split_document(SPHINX, "kafka.rst")
    assert {c.title for c in chunks} == {"Kafka broker operations guide"}
    crumbs = [c.breadcrumb.removeprefix("Kafka broker operations guide > ") for c in chunks]
    assert crumbs == [
        "Overview",
        "Under-replicated partitions > Symptoms",
        "Under-replicated partitions > Mitigation",
        "Consumer lag",
    ]  # the title alone and the heading-only "Under-replicated partitions" are no chunk
    by = {c.breadcrumb.rsplit(" > ", 1)[-1]: c.content for c in chunks}
    assert (
        by["Overview"]
        == "Overview\n========\n\nThe three-node Kafka cluster of the orders platform."
    )
    # Comments, targets and the table of contents are not shown; a note is.
    assert "maintainers" not in by["Mitigation"] and by["Mitigation"].endswith("election.")
    assert not any("contents::" in c or "_kafka-overview" in c for c in by.values())
    assert by["Consumer lag"].endswith(
        ".. note::\n\n   Never reset offsets without the payments team."
    )


def test_without_a_document_title_the_first_section_names_the_runbook() -> None:
    text = "Disk full\n=========\n\nThe disk is full.\n\nCauses\n======\n\nLogs grow.\n"
    chunks = split_document(text, "ops/disk.rst")
    assert [(c.title, c.breadcrumb) for c in chunks] == [
        ("Disk full", "Disk full"),
        ("Disk full", "Disk full > Causes"),
    ]
    assert split_document("Title only\n==========\n", "t.rst") == []
    (plain,) = split_document("no title here\nat all\n", "n.rst")
    assert (plain.title, plain.content) == ("n", "no title here\nat all")


def test_what_is_no_title() -> None:
    # An underline shorter than its text, a transition (a line of dashes between blank
    # lines), an indented literal block's ==== line: text, not titles.
    text = "Long title text\n===\n\nPara.\n\n----------\n\nMore.\n\n::\n\n    a\n    ====\n"
    page = read_rest(text)
    assert page.title == "" and [s.path for s in page.sections] == [[]]
