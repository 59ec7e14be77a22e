"""Runbooks written for a documentation site: MDX (Docusaurus, Nextra) and Hugo shortcodes are
read as the site's reader sees them, not as their source markup."""

from __future__ import annotations

from pathlib import Path

from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge.analysis import split_document
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
