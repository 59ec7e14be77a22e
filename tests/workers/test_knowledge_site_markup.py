"""Runbooks written for a documentation site: MDX (Docusaurus, Nextra) and Hugo shortcodes are
read as the site's reader sees them, not as their source markup."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge.analysis import MAX_CHUNK_CHARS, split_document
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings

# Written here in the shape of a Docusaurus docs page.
MDX_PAGE = """---
id: database-failover
title: Database failover
sidebar_position: 3
description: Promote the replica when the primary is lost
---

import Tabs from '@theme/Tabs';
import TabItem from '@theme/TabItem';
import {
  Highlight,
  Owner,
} from '../src/components';

export const owner = {
  team: 'dba-team',
  pager: 'dba-oncall',
};

# Database failover

```mdx-code-block
import Admonition from '@theme/Admonition';
<Tabs>
<TabItem value="primary" label="Primary">
```

The primary's volume must be detached first.

```mdx-code-block
</TabItem>
</Tabs>
```

:::warning Data loss
Never promote a replica that is more than 30 seconds behind.
:::

## Steps

<Tabs groupId="platform">
  <TabItem value="k8s" label="Kubernetes">

Run `kubectl exec` into the operator pod and call `promote`.

  </TabItem>
  <TabItem
    value="vm"
    label="VMs">

Run `pg_ctl promote` on the replica host.

  </TabItem>
</Tabs>

<Highlight color="red">Check replication lag first.</Highlight> Then page <Owner />.

{/* internal: ticket OPS-1234 */}

```jsx
import Tabs from '@theme/Tabs';
<Tabs>kept as written in code</Tabs>
```
"""

# Written here in the shape of a Hugo site's runbook.
HUGO_PAGE = """---
title: KubeletDown
---

{{< note >}}
This alert fires for every node whose kubelet stops answering.
{{< /note >}}

## Mitigation

See {{< ref "node-not-ready.md" >}} and [the restart guide]({{< relref "/docs/kubelet/restart.md#steps" >}}).

{{% include "snippets/contact.md" %}}
{{< docs/production-note >}}

{{< warning title="Careful" >}}Do not restart every kubelet at once.{{< /warning >}}

```bash
export LINKERD_VERSION={{< edge-version >}}
kubectl get pods -n '{{.Namespace}}'
```

Write `{{</* note */>}}` to open a note.
"""


def test_mdx_is_read_as_markdown_without_its_imports_exports_and_component_tags() -> None:
    chunks = split_document(MDX_PAGE, "db/failover.mdx")
    assert chunks, "an .mdx page gave no chunk"
    text = "\n".join(c.content for c in chunks)
    prose = text.split("```jsx")[0]
    assert {c.title for c in chunks} == {"Database failover"}
    for gone in ("import Highlight", "from '@theme", "export const", "dba-team", "<TabItem",
                 "</Tabs>", 'label="VMs"', "mdx-code-block", "Admonition", ":::", "OPS-1234", "{/*", "<Highlight", "<Owner"):  # fmt: skip
        assert gone not in prose, gone
    for kept in ("Never promote a replica that is more than 30 seconds behind.",
                 "Run `kubectl exec` into the operator pod", "Run `pg_ctl promote` on the replica",
                 "Check replication lag first. Then page .", "Data loss",
                 "The primary's volume must be detached first."):  # fmt: skip
        assert kept in text, kept
    # Code is code: what a fence holds is shown as written.
    assert "<Tabs>kept as written in code</Tabs>" in text
    assert "import Tabs from '@theme/Tabs';\n<Tabs>" in text
    assert all("Steps" in c.breadcrumb for c in chunks if "pg_ctl" in c.content)


def test_hugo_shortcodes_are_rendered_as_their_text_or_dropped() -> None:
    chunks = split_document(HUGO_PAGE, "content/kubelet-down.md")
    text = "\n".join(c.content for c in chunks)
    assert "This alert fires for every node whose kubelet stops answering." in text
    assert "See node-not-ready and [the restart guide](restart)." in text
    assert "Do not restart every kubelet at once." in text
    assert "snippets/contact" not in text and "include" not in text
    assert "production-note" not in text
    # Hugo renders shortcodes in code blocks too; a Go template there is the page's text.
    assert "export LINKERD_VERSION=\n" in text and "'{{.Namespace}}'" in text
    assert "Write `{{< note >}}` to open a note." in text  # escaped: shown as Hugo shows it
    assert "{{<" not in text.replace("`{{< note >}}`", "")


async def test_a_folder_of_mdx_pages_answers_with_evidence(tmp_path: Path) -> None:
    # Before: .mdx was "not a runbook" and a Docusaurus docs folder answered UNAVAILABLE
    # (no indexable runbook), its pages never searched.
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "failover.mdx").write_text(MDX_PAGE, encoding="utf-8")
    (folder / "disk.mdx").write_text("# Disk full\n\nFree space on the node.\n", encoding="utf-8")
    source = KnowledgeIndexSource(
        KnowledgeSettings(folder=str(folder), cache_dir=str(tmp_path / "c"), retrieval="lexical")
    )
    try:
        answer = await source.fetch(LookupKnowledgeRequest(query="promote the replica pg_ctl"))
    finally:
        await source.aclose()
    hits = answer["contextPack"]["hits"]
    assert hits and hits[0]["source"] == "failover.mdx"
    assert "pg_ctl promote" in hits[0]["content"]


def _seconds(text: str, source: str) -> float:
    import time

    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        split_document(text, source)
        best = min(best, time.perf_counter() - started)
    return best


_HOSTILE = {
    "a shortcode never closed": lambda n: "{{< note" + " " * n + "x",
    "a tag never closed": lambda n: "<Note" + " " * n + "x",
    "a tag's attributes never closed": lambda n: "<A " + "b=c " * (n // 4),
    "a component never closed in text": lambda n: "text <A" + " b" * (n // 2),
    "JSX comments never closed": lambda n: "{/*" * (n // 3),
    "escaped shortcodes never closed": lambda n: "*/>}} " + "{{</*" * (n // 5),
    "brackets of a pointer never closed": lambda n: "[a](b) " + "[" * n,
    "a heading of spaces and an id never closed": lambda n: "## x" + " " * n + "{#",
    "a heading of many attributes": lambda n: "## x {" + "#a .b c='d' " * (n // 12) + "}",
    "a heading of attribute blocks": lambda n: "## x" + " {#a}" * (n // 5),
    "a fence's info of braces": lambda n: "```" + "{" * n,
}


@pytest.mark.parametrize("make", list(_HOSTILE.values()), ids=list(_HOSTILE))
def test_a_hostile_line_is_read_in_linear_time(make: Callable[[int], str]) -> None:
    # Review: the markup patterns backtracked: a shortcode or a tag left open over spaces
    # took quadratic time (1.3 s at 8,000 characters, minutes at 64 KB), an open JSX comment
    # or escaped shortcode repeated was quadratic in its repeats.
    for suffix in (".mdx", ".md"):
        small = _seconds(make(4_000) + "\n", f"p{suffix}")
        large = _seconds(make(16_000) + "\n", f"p{suffix}")
        assert large < max(8 * small, 0.05), (suffix, small, large)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(["import x from 'y';", "export const a = {", "}", "<Tabs>", "</Tabs>",
                         "<A b=\"c\"", ">", "{/* c */}", "{{< note >}}", "{{< /note >}}",
                         "{{</* ref */>}}", ":::tip T", ":::", "```", "```mdx-code-block",
                         "# T", "## S", "text", "", "<details>", "- [a](b)", "See [a](b).",
                         "## S {#s .c}", "```bash {class=x}", "```{.py}", "T {#t}", "==="]),
        max_size=40,
    ),
    st.sampled_from(["p.mdx", "p.md"]),
)  # fmt: skip
def test_any_site_markup_gives_bounded_chunks_with_a_title(lines: list[str], name: str) -> None:
    for chunk in split_document("\n".join(lines), name):
        assert chunk.content.strip() and len(chunk.content) <= MAX_CHUNK_CHARS
        assert chunk.title and chunk.breadcrumb.startswith(chunk.title)


# Written here in the shape of a Hugo / kramdown / Pandoc page (linkerd's checks page gives
# each heading an id; Hugo's docs give fences `{class=…}` and `{linenos=…}`).
ATTRIBUTE_PAGE = """# Certificates {#certs .wide}

## Certificate expired {#l5d-identity-issuer}

Rotate the issuer.

```bash {class=disable-copy}
step certificate create issuer.linkerd.cluster.local ca.crt ca.key
```

### Check the dates {.note #dates}

```yaml {linenos=table,hl_lines=[8,"15-17"]}
validity: 8760h
```

```{.python .numberLines}
print("not expired")
```

Renewal window {#window}
--------------

Renew 30 days before. Set ${VAR} {when} you want.

## Keep ${HOME} {braces}

Text.
"""


def test_heading_and_fence_attributes_are_rendered_as_the_site_shows_them() -> None:
    # Before: `{#l5d-identity-issuer}` was in the breadcrumb the model read and every
    # excerpt that held the heading, `{class=disable-copy}` on the code's first line.
    chunks = split_document(ATTRIBUTE_PAGE, "tasks/certs.md")
    crumbs = [c.breadcrumb for c in chunks]
    assert {c.title for c in chunks} == {"Certificates"}
    assert crumbs == [
        "Certificates > Certificate expired",
        "Certificates > Certificate expired > Check the dates",
        "Certificates > Renewal window",  # setext `---`: level 2
        "Certificates > Keep ${HOME} {braces}",  # braces that are no attributes stay
    ]
    assert [c.anchor for c in chunks] == ["l5d-identity-issuer", "dates", "window", ""]
    text = "\n".join(c.content for c in chunks)
    assert "## Certificate expired\n\nRotate the issuer.\n\n```bash\nstep certificate" in text
    assert "### Check the dates\n\n```yaml\nvalidity: 8760h\n```" in text
    assert '```python\nprint("not expired")' in text
    assert "## Renewal window\n\nRenew 30 days before. Set ${VAR} {when} you want." in text
    assert "{#" not in text and "{." not in text and "linenos" not in text
