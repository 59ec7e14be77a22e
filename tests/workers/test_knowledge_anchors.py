"""A question that pastes a link to a section (`#anchor`) is answered by that section.

`linkerd check` ends each failed check with "see https://linkerd.io/2.19/checks/#<id> for
hints", and linkerd's troubleshooting page gives each check's heading that id
(`### √ issuer cert is within its validity period {#l5d-identity-issuer-cert-is-time-valid}`).
Pasted, it was answered by a neighbouring check (`l5d-identity-trustAnchors-are-time-valid`,
whose words are nearly the same). The page here is written in that shape.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings

_CHECK = """### √ {title} {{#{anchor}}}

Example failure:

```text
\u00d7 {title}
    {detail}
```

{advice}
"""

TROUBLESHOOTING = (
    '# Troubleshooting\n\n## The "linkerd-identity" checks {#l5d-identity}\n\n'
    + (
        "\n".join(
            _CHECK.format(title=t, anchor=a, detail=d, advice=v)
            for t, a, d, v in [
                (
                    "trust roots are within their validity period",
                    "l5d-identity-trustAnchors-are-time-valid",
                    "Invalid roots: * 1 identity.linkerd.cluster.local not valid anymore. Expired on 2019-05-28",
                    "Ensure the trust roots are not expired: replace the trust anchor.",
                ),
                (
                    "issuer cert is within its validity period",
                    "l5d-identity-issuer-cert-is-time-valid",
                    "issuer certificate is not valid anymore. Expired on 2019-05-28",
                    "Ensure the issuer certificate is valid: rotate the issuer.",
                ),
                (
                    "trust roots are valid for at least 60 days",
                    "l5d-identity-trustAnchors-not-expiring-soon",
                    "Roots expiring soon: * 1 identity.linkerd.cluster.local will expire on 2019-05-28",
                    "Rotate the trust anchors before they expire.",
                ),
            ]
        )
    )
    + "\n## Replacing expired certificates\n\nGenerate a new issuer with step.\n"
)


async def _ask(tmp_path: Path, query: str) -> dict[str, Any]:
    folder = tmp_path / "docs"
    (folder / "tasks").mkdir(parents=True, exist_ok=True)
    (folder / "tasks" / "troubleshooting.md").write_text(TROUBLESHOOTING)
    (folder / "tasks" / "upgrade.md").write_text("# Upgrade\n\n## Steps\n\nRun linkerd upgrade.\n")
    source = KnowledgeIndexSource(
        KnowledgeSettings(folder=str(folder), cache_dir=str(tmp_path / "c"))
    )
    try:
        answer: dict[str, Any] = await source.fetch(LookupKnowledgeRequest(query=query))
    finally:
        await source.aclose()
    return answer


@pytest.mark.parametrize(
    ("query", "heading"),
    [
        ("see https://linkerd.io/2.19/checks/#l5d-identity-issuer-cert-is-time-valid for hints",
         "\u221a issuer cert is within its validity period"),
        ("\u00d7 trust roots are valid for at least 60 days\n    see https://linkerd.io/2/checks/"
         "#l5d-identity-trustAnchors-not-expiring-soon for hints",
         "\u221a trust roots are valid for at least 60 days"),
        ("https://docs.example/tasks/troubleshooting/#replacing-expired-certificates",
         "Replacing expired certificates"),
    ],
)  # fmt: skip
async def test_a_pasted_link_to_a_section_is_answered_by_that_section(
    tmp_path: Path, query: str, heading: str
) -> None:
    answer = await _ask(tmp_path, query)
    top = answer["contextPack"]["hits"][0]
    # The heading as the site shows it: its `{#id}` names the section, never shown.
    assert top["breadcrumb"].split(" > ")[-1] == heading, top
    assert "{#" not in top["breadcrumb"] + top["content"], top
    assert answer["contextPack"]["relevanceLevel"] == "high"


async def test_a_fragment_that_names_no_section_changes_nothing(tmp_path: Path) -> None:
    answer = await _ask(tmp_path, "issuer certificate expired, see issue #4711")
    assert answer["contextPack"]["hits"][0]["source"] == "tasks/troubleshooting.md"
