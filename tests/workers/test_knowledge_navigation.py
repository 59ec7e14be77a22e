"""Lists of links are navigation, not runbook text: gitlab-com/runbooks gives every service a
README whose "Troubleshooting Pointers" and "Logging" sections list only links to the other
pages (their targets are indexed themselves). Those lists took 16 of 126 hits of the on-call
questions, usually the second place ("gitaly is down" -> web/README.md's pointers, a list that
does not answer it). A list whose every item is only a link is left out of the index; a list
item that says something beside its link is text. The files are written here in that shape.
"""

from __future__ import annotations

from pathlib import Path

from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge.analysis import split_markdown
from workers.sources.knowledge.check import check_knowledge
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings

SERVICE_README = (
    "<!-- MARKER: do not edit this section directly. -->\n\n[[_TOC_]]\n\n#  Web Service\n"
    "* [Service Overview](https://dashboards.example/d/web-main)\n"
    "* **Alerts**: https://alerts.example/#/alerts?filter=web\n\n"
    "## Logging\n\n* [nginx](https://log.example/goto/1)\n* [system](https://log.example/goto/2)\n\n"
    "## Troubleshooting Pointers\n\n* [../gitaly/gitaly-down.md](../gitaly/gitaly-down.md)\n"
    "* [HAProxy management](../frontend/haproxy.md)\n"
    "1. [Deploying a change to gitlab.rb](../git/deploy-gitlab-rb-change.md)\n\n"
    "## Summary\n\nThe web fleet serves the Rails application behind HAProxy.\n\n"
    "## Backups\n\n* [Backups](backups.md): restore from the latest disk snapshot first.\n"
)
GITALY_DOWN = (
    "# Gitaly is down\n\n## Symptoms\n\nGit operations fail with `GRPC::Unavailable`; the"
    " gitaly service does not answer on its port.\n\n## Mitigation\n\nRestart gitaly on the"
    " storage node and check its disk.\n"
)
ONLY_LINKS = "# Runbooks\n\n- [Gitaly is down](gitaly/gitaly-down.md)\n- [Web](web/README.md)\n"


def test_link_only_lists_are_not_indexed_lists_that_say_something_are() -> None:
    chunks = split_markdown(SERVICE_README, "web/README.md")
    crumbs = [c.breadcrumb for c in chunks]
    assert "Web Service > Troubleshooting Pointers" not in crumbs
    assert "Web Service > Logging" not in crumbs
    assert "Web Service > Summary" in crumbs
    (backups,) = [c for c in chunks if c.breadcrumb == "Web Service > Backups"]
    assert "restore from the latest disk snapshot" in backups.content
    (top,) = [c for c in chunks if c.breadcrumb == "Web Service"]  # no chunk of "[[_TOC_]]"
    assert "**Alerts**" in top.content and "Service Overview" in top.content  # a mixed list
    assert all("_TOC_" not in c.content for c in chunks)


def test_a_page_of_links_only_is_said_by_check_not_a_problem(tmp_path: Path) -> None:
    (tmp_path / "gitaly").mkdir()
    (tmp_path / "gitaly" / "gitaly-down.md").write_text(GITALY_DOWN, encoding="utf-8")
    (tmp_path / "README.md").write_text(ONLY_LINKS, encoding="utf-8")
    (tmp_path / "nfs").mkdir()  # gitlab's nfs/README.md: no title, one list of pointers
    (tmp_path / "nfs" / "README.md").write_text(
        "## Troubleshooting Pointers\n\n* [inodes](../monitoring/inodes.md)\n", encoding="utf-8"
    )
    check = check_knowledge({"ACI_KNOWLEDGE_DIR": str(tmp_path)})
    assert check.problems() == []
    pages = {r.source: r for r in check.listed}
    assert (pages["README.md"].title, pages["README.md"].sections) == ("Runbooks", 0)
    assert pages["README.md"].note == "only links to other pages: not indexed"
    assert (pages["nfs/README.md"].title, pages["nfs/README.md"].note[:10]) == (
        "README",
        "only links",
    )


async def test_the_pointers_of_a_service_readme_are_no_answer(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    for name, text in {
        "gitaly/gitaly-down.md": GITALY_DOWN,
        "web/README.md": SERVICE_README,
        "README.md": ONLY_LINKS,
    }.items():
        (kb / name).parent.mkdir(parents=True, exist_ok=True)
        (kb / name).write_text(text, encoding="utf-8")
    source = KnowledgeIndexSource(KnowledgeSettings(folder=str(kb), cache_dir=str(tmp_path / "c")))
    try:
        answer = await source.fetch(LookupKnowledgeRequest(query="gitaly is down"))
    finally:
        await source.aclose()
    hits = answer["contextPack"]["hits"]
    assert hits[0]["source"] == "gitaly/gitaly-down.md"
    assert "README.md" not in [h["source"] for h in hits]
    assert all("Pointers" not in h["breadcrumb"] for h in hits)


def test_a_paragraph_that_only_points_to_another_page_is_navigation() -> None:
    # linkerd/website's docs: tasks/install.md ends with "## Uninstalling the control plane"
    # and "See [Uninstalling Linkerd](uninstall/)."; "how to uninstall linkerd" got that
    # pointer as its top answer, above the page it points to (indexed itself).
    page = (
        "# Installing Linkerd\n\n## Step 1\n\nRun `linkerd install | kubectl apply -f -`.\n\n"
        "## Uninstalling the control plane\n\nSee [Uninstalling Linkerd](uninstall/).\n\n"
        "## More\n\nFor more details, see also [the CLI reference](../cli/) and"
        " [the FAQ](../faq/).\n\n"
        "## Upgrading\n\nSee [Upgrading](upgrade/) before you run `linkerd upgrade`: the"
        " proxies restart.\n"
    )
    crumbs = [c.breadcrumb for c in split_markdown(page, "tasks/install.md")]
    assert crumbs == ["Installing Linkerd > Step 1", "Installing Linkerd > Upgrading"]
