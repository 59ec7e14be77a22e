"""`aci-evidence check` on runbook folders as they are checked out: a Hugo site
(prometheus-operator/runbooks: a front-matter-only `_index.md` per section) and a repository
(openshift/runbooks: LICENSE, OWNERS files, .png diagrams, .sh scripts beside the runbooks).

Before, both healthy folders exited 1: every `_index.md` was "holds no text: nothing of it
can be found" (9 problems on prometheus-operator/runbooks) and the LICENSE, OWNERS, images and
scripts were a problem line (30 files on openshift/runbooks). A problem is what an operator
should fix: a runbook that says nothing (a draft), a document the index cannot read (an
AsciiDoc or HTML export). The files written here are of our own, in those shapes.
"""

from __future__ import annotations

from pathlib import Path

from workers.sources.knowledge.check import check_knowledge


def _write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, body in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            path.write_bytes(body)
        else:
            path.write_text(body, encoding="utf-8")


def test_a_hugo_section_page_is_listed_as_one_not_as_a_problem(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "content/runbooks/_index.md": "---\nbookHidden: true\n---\n",
            "content/runbooks/etcd/_index.md": "---\ntitle: etcd\nweight: 10\n---\n",
            "content/runbooks/etcd/etcdNoLeader.md": "# etcdNoLeader\n\n## Meaning\n\nNo leader.\n",
            "content/runbooks/etcd/+toml/_index.md": '+++\ntitle = "etcd (TOML)"\n+++\n',
            "content/drafts/empty.md": "---\ntitle: draft\n---\n",
        },
    )
    check = check_knowledge({"ACI_KNOWLEDGE_DIR": str(tmp_path)})
    assert check.problems() == [
        "knowledge: content/drafts/empty.md: holds no text: nothing of it can be found"
    ]
    pages = {r.source: r for r in check.listed}
    section = pages["content/runbooks/etcd/_index.md"]
    assert (section.title, section.sections, section.problem) == ("etcd", 0, "")
    assert section.note == "a section page (front matter only): not indexed"
    assert pages["content/runbooks/etcd/+toml/_index.md"].title == "etcd (TOML)"
    assert pages["content/runbooks/_index.md"].note
    assert pages["content/runbooks/etcd/etcdNoLeader.md"].note == ""


def test_files_that_are_no_documents_are_noted_documents_are_problems(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "README.md": "# Runbooks\n\nOne per alert.\n",
            "LICENSE": "Apache License\n",
            "alerts/etcd/OWNERS": "approvers:\n- someone\n",
            "alerts/etcd/etcdNoLeader.md": "# etcdNoLeader\n\n## Meaning\n\nNo leader.\n",
            "alerts/etcd/img/leader.png": b"\x89PNG\r\n\x1a\n",
            "alerts/network/hierarchy/alerts.svg": "<svg/>\n",
            "hack/lint.sh": "#!/bin/sh\n",
        },
    )
    check = check_knowledge({"ACI_KNOWLEDGE_DIR": str(tmp_path)})
    assert check.problems() == []  # a checked-out runbook repository reads well
    assert check.others == {"no suffix": 2, ".png": 1, ".svg": 1, ".sh": 1}
    _write(tmp_path, {"old/export.adoc": "= Old runbook\n", "old/page.html": "<h1>x</h1>\n"})
    check = check_knowledge({"ACI_KNOWLEDGE_DIR": str(tmp_path)})
    assert check.problems() == [
        "knowledge: 2 files are not runbooks and are not read (1 .adoc, 1 .html)"
    ]
