"""Runbooks read as a Markdown reader sees them: front matter, setext headings, comments,
link definitions, admonitions, and bounded chunks of oversized sections."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge.analysis import MAX_CHUNK_CHARS, split_markdown
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings
from workers.sources.knowledge.markdown import MAX_FRONT_MATTER_CHARS, front_matter

YAML_PAGE = """---
title: Redis out of memory
description: What to do when Redis hits maxmemory and starts evicting keys
tags: [redis, cache, eviction]
aliases:
  - /runbooks/redis-oom/
owner: platform-team
weight: 20
---

# RedisOutOfMemory

## Meaning
Redis used memory reached maxmemory.

## Mitigation
Raise maxmemory or fix the key TTLs.
"""

TOML_PAGE = """+++
title = "Disk almost full"
tags = ["disk", "node"]
draft = false
+++

## Diagnosis
Check df -h on the node.
"""


def test_yaml_front_matter_titles_the_runbook_and_is_never_a_chunk() -> None:
    chunks = split_markdown(YAML_PAGE, "redis-oom.md")
    assert [c.breadcrumb for c in chunks] == [
        "Redis out of memory > Meaning",
        "Redis out of memory > Mitigation",
    ]  # the first heading repeats the title ("RedisOutOfMemory"): not a level of its own
    assert {c.title for c in chunks} == {"Redis out of memory"}
    assert not any("platform-team" in c.content or "title:" in c.content for c in chunks)
    assert all("maxmemory and starts evicting" in c.meta for c in chunks)
    assert all("eviction" in c.meta and "/runbooks/redis-oom/" in c.meta for c in chunks)
    assert all(c.content in YAML_PAGE for c in chunks)


def test_toml_front_matter_titles_the_runbook() -> None:
    (chunk,) = split_markdown(TOML_PAGE, "disk.md")
    assert chunk.title == "Disk almost full"
    assert chunk.breadcrumb == "Disk almost full > Diagnosis"
    assert chunk.content == "## Diagnosis\nCheck df -h on the node."
    assert "disk" in chunk.meta and "draft" not in chunk.content


@pytest.mark.parametrize(
    "page",
    [
        "---\nweight: 3\ntags: [x]\n---\n# Node down\nBody text.\n",
        "+++\nweight = 3\n+++\n# Node down\nBody text.\n",
    ],
)
def test_front_matter_without_title_leaves_the_first_heading_as_title(page: str) -> None:
    (chunk,) = split_markdown(page, "node.md")
    assert chunk.title == "Node down" and "weight" not in chunk.content


def test_front_matter_without_any_heading_titles_by_file_name() -> None:
    (chunk,) = split_markdown("---\ntags: [a]\n---\nJust text.\n", "ops/plain-notes.md")
    assert chunk.title == "plain-notes" and chunk.content == "Just text."


def test_hostile_or_oversized_front_matter_is_dropped_never_executed_nor_indexed() -> None:
    hostile = "---\ntitle: !!python/object/apply:os.system ['touch /tmp/pwned']\n---\nText.\n"
    meta, rest = front_matter(hostile)
    assert meta == {} and rest == "Text.\n"
    (chunk,) = split_markdown(hostile, "x.md")
    assert chunk.title == "x" and "python" not in chunk.content
    bombs = "---\na: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\ntitle: Bomb\n---\nBody.\n"
    assert split_markdown(bombs, "b.md")[0].title == "Bomb"
    deep = "---\ntitle: " + "[" * 5000 + "\n---\nBody.\n"
    assert split_markdown(deep, "d.md")[0].content == "Body."
    huge = "---\ntitle: Big\nx: '" + "y" * (MAX_FRONT_MATTER_CHARS + 10) + "'\n---\nBody.\n"
    (chunk,) = split_markdown(huge, "h.md")
    assert chunk.title == "h" and chunk.content == "Body."
    unclosed = "---\nnot front matter, a thematic break\n"
    assert front_matter(unclosed) == ({}, unclosed)


def test_setext_headings_are_headings() -> None:
    page = "Disk full\n=========\n\nIntro.\n\nCauses\n------\nLogs grow.\n"
    chunks = split_markdown(page, "d.md")
    assert [c.breadcrumb for c in chunks] == ["Disk full", "Disk full > Causes"]
    assert chunks[1].content == "## Causes\nLogs grow."


def test_comments_link_definitions_and_admonitions_read_as_a_reader_sees_them() -> None:
    page = (
        "# Pager\n\n<!-- TODO: internal note, secret-ish -->\n\n"
        "Call the on-call <!-- not this --> engineer.\n\n"
        "[runbook]: https://wiki.example/internal\n\n"
        '!!! warning "Data loss"\n\n    Never drop the volume before a backup.\n'
    )
    (chunk,) = split_markdown(page, "p.md")
    assert "TODO" not in chunk.content and "not this" not in chunk.content
    assert "wiki.example" not in chunk.content
    assert "Call the on-call  engineer." in chunk.content
    assert "Never drop the volume before a backup." in chunk.content
    assert "    Never drop" not in chunk.content  # an admonition body, not a code block


def test_oversized_sections_and_long_lists_are_cut_into_bounded_chunks() -> None:
    items = "\n".join(f"- `ENV_VAR_{i}`: what variable number {i} sets" for i in range(600))
    table = "| code | meaning |\n|---|---|\n" + "\n".join(
        f"| {i} | exit code {i} |" for i in range(300)
    )
    one_line = "x" * (3 * MAX_CHUNK_CHARS)
    page = f"# Service\n\n## Settings\n\n### Variables\n{items}\n\n## Exit codes\n{table}\n\n{one_line}\n"
    chunks = split_markdown(page, "svc.md")
    assert all(len(c.content) <= MAX_CHUNK_CHARS for c in chunks)
    variables = [c for c in chunks if c.breadcrumb == "Service > Settings > Variables"]
    assert len(variables) >= 20 and all(c.content in page for c in variables)
    assert not any(c.content.endswith("what variable") for c in variables)  # cut at items
    codes = [c for c in chunks if c.breadcrumb == "Service > Exit codes"]
    assert len(codes) >= 10 and all(c.content in page for c in codes)


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet="ab \n#-=`*>|<!~+:[]", max_size=4000))
def test_any_text_gives_bounded_chunks_with_a_title(text: str) -> None:
    for chunk in split_markdown(text, "f.md"):
        assert chunk.content.strip() and len(chunk.content) <= MAX_CHUNK_CHARS
        assert chunk.title and chunk.breadcrumb.startswith(chunk.title)


async def test_front_matter_tags_and_description_are_searchable(tmp_path: Path) -> None:
    folder = tmp_path / "runbooks"
    folder.mkdir()
    (folder / "redis-oom.md").write_text(YAML_PAGE, encoding="utf-8")
    (folder / "other.md").write_text("# Kafka lag\n\nConsumers fall behind.\n", encoding="utf-8")
    source = KnowledgeIndexSource(
        KnowledgeSettings(folder=str(folder), cache_dir=str(tmp_path / "c"), retrieval="lexical")
    )
    try:
        answer = await source.fetch(LookupKnowledgeRequest(query="eviction"))
    finally:
        await source.aclose()
    hits = answer["contextPack"]["hits"]
    assert hits and hits[0]["title"] == "Redis out of memory"
    assert all("platform-team" not in h["content"] for h in hits)


def test_a_yaml_alias_bomb_in_front_matter_is_read_at_once() -> None:
    # Review: a 1 KiB header whose `tags` nests a 32-item list in itself 8 times (YAML
    # anchors, "billion laughs") was walked item by item: 667 bytes took 24 s, 1 KiB years.
    import time

    from workers.sources.knowledge.markdown import read_markdown

    lines = ["---", "l0: &l0 [" + ",".join(["x"] * 32) + "]"]
    lines += [f"l{d}: &l{d} [" + ",".join([f"*l{d - 1}"] * 32) + "]" for d in range(1, 8)]
    lines += ["tags: *l7", "aliases: [a, *l7, b]", "title: Bomb", "---", "# Body", "text"]
    started = time.perf_counter()
    page = read_markdown("\n".join(lines))
    assert time.perf_counter() - started < 2.0
    assert page.title == "Bomb" and page.meta == "a · b"


def test_a_line_longer_than_a_chunk_is_cut_between_words_and_loses_no_text() -> None:
    # A runbook pasted as one 10,000-character paragraph (a wiki export, a log line quoted
    # whole): before, it was cut every MAX_CHUNK_CHARS characters, mid-word, so a word at
    # each cut ("kubectl" -> "kub" + "ectl") was in no chunk and no search found it there.
    words = [f"kubectl{i}" for i in range(1100)]
    line = " ".join(words)
    chunks = split_markdown(f"# Long\n\n{line}\n", "long.md")
    assert all(len(c.content) <= MAX_CHUNK_CHARS for c in chunks)
    found = {w for c in chunks for w in c.content.split()} - {"#", "Long"}
    assert found == set(words)
    joined = "".join(c.content for c in chunks)
    assert re.sub(r"\s", "", joined) == re.sub(r"\s", "", f"# Long{line}")
    # Text without spaces (CJK, a base64 blob) is still cut at the bound, nothing lost.
    cjk = "服务不可用请检查数据库连接" * 300
    pieces = split_markdown(f"# 标题\n\n{cjk}\n", "zh.md")
    assert all(len(c.content) <= MAX_CHUNK_CHARS for c in pieces)
    assert re.sub(r"\s", "", "".join(c.content for c in pieces)) == f"#标题{cjk}"


def test_an_html_block_reads_as_its_text_not_its_tags() -> None:
    # PagerDuty's incident-response-docs write their severity table as HTML inside Markdown:
    # its chunks were tags and class names ("<td class=\"sev-1\">"), which crowded the
    # excerpt's 700 characters, the embedded text and the terms; a reader sees the text.
    page = (
        "# Severity Levels\n\nClassify incidents by severity.\n\n"
        '<table class="custom-table">\n  <thead>\n    <tr>\n      <th class="sev">Severity</th>\n'
        "      <th>Description</th>\n    </tr>\n  </thead>\n  <tbody>\n    <tr>\n"
        '      <td class="sev-1">SEV-1</td>\n      <td>\n'
        '        <p class="intent">Critical issue that warrants public notification &amp;'
        " liaison with executive teams.</p>\n        <ul>\n"
        "          <li>The system is in a critical state.</li>\n"
        '          <li>Page an IC in Slack <code>!ic page</code>, see <a href="/during">During'
        " an Incident</a>.</li>\n        </ul>\n      </td>\n    </tr>\n  </tbody>\n</table>\n"
    )
    (chunk,) = split_markdown(page, "before/severity_levels.md")
    assert "<" not in chunk.content and "class=" not in chunk.content
    assert "SEV-1\nCritical issue that warrants public notification & liaison" in chunk.content
    assert "Page an IC in Slack !ic page, see During an Incident." in chunk.content
    assert "Severity\nDescription\nSEV-1" in chunk.content  # no blank line per closing tag
