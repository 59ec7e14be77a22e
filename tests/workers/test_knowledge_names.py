"""A question that names a runbook by its alert name: the on-call engineer pastes the alert.

Runbook collections name each runbook after the alert it answers (openshift/runbooks:
`alerts/<operator>/etcdNoLeader.md` under `# etcdNoLeader`; prometheus-operator/runbooks:
`KubePodCrashLooping.md` titled `Kube Pod Crash Looping` in its front matter). A question that
is that name, or holds it as a camelCase word, or spells it in words, names the runbook: it is
the first hit and the answer is HIGH. Before, the pasted name `etcdNoLeader` was a LOW answer
(cosine 0.20) and `cluster version operator down` put ClusterOperatorDown first. The files
are written here in the collections' shapes, text of our own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings
from workers.sources.knowledge.names import named_sources, runbook_names


def _openshift(name: str, meaning: str, impact: str) -> str:
    return (
        f"# {name}\n\n## Meaning\n\n{meaning}\n\n## Impact\n\n{impact}\n\n## Diagnosis\n\n"
        "Check the logs of the operator:\n\n```shell\n$ oc -n openshift-etcd logs -l app=etcd\n```\n"
    )


RUNBOOKS = {
    "alerts/cluster-etcd-operator/etcdNoLeader.md": _openshift(
        "etcdNoLeader",
        "The alert fires when the etcd cluster has had no leader for more than a minute.",
        "Without a leader the API cannot read or write; writes queue until an election.",
    ),
    "alerts/cluster-etcd-operator/etcdGRPCRequestsSlow.md": _openshift(
        "etcdGRPCRequestsSlow",
        "The alert fires when gRPC requests to etcd are slow at the 99th percentile.",
        "Slow requests lead to leader election failures, frequent leader elections and a"
        " cluster with no leader for a while.",
    ),
    "alerts/cluster-etcd-operator/etcdHighFsyncDurations.md": _openshift(
        "etcdHighFsyncDurations",
        "The alert fires when the WAL fsync of etcd is slow: the disk is too slow.",
        "Leader election failures and no leader for short periods, slow reads and writes.",
    ),
    "alerts/cluster-monitoring-operator/ClusterOperatorDown.md": _openshift(
        "ClusterOperatorDown",
        "The alert fires when a cluster operator has not been available for ten minutes.",
        "The component the operator manages may be down; upgrades are blocked.",
    ),
    "alerts/cluster-version-operator/ClusterVersionOperatorDown.md": _openshift(
        "ClusterVersionOperatorDown",
        "The alert fires when the cluster-version-operator cannot be scraped by Prometheus.",
        "Without it the cluster does not reconcile its payload and cannot be updated.",
    ),
    "content/runbooks/kubernetes/KubePodCrashLooping.md": (
        "---\ntitle: Kube Pod Crash Looping\nweight: 20\n---\n\n# KubePodCrashLooping\n\n"
        "## Meaning\n\nA container of the pod keeps restarting: it is in CrashLoopBackOff.\n\n"
        "## Mitigation\n\nRead the previous container's logs with `kubectl logs --previous`.\n"
    ),
    "content/_index.md": "---\ntitle: Introduction\n---\n\n# Introduction\n\nThese pages hold"
    " the runbooks of the alerts of the cluster, one page per alert.\n",
    # gitlab-com/runbooks: a page titled by the product it is about, not by an alert
    "docs/kube/k8s-operations.md": "# GitLab\n\n## Restarting\n\nRestart the GitLab"
    " deployments with `kubectl rollout restart`.\n",
    "docs/pages/gitlab-pages.md": "# GitLab Pages returning 404\n\n## Symptoms\n\nEvery"
    " Pages site answers 404 Not Found.\n",
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("names")
    for name, text in RUNBOOKS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


async def _ask(folder: Path, cache: Path, query: str) -> dict[str, Any]:
    source = KnowledgeIndexSource(KnowledgeSettings(folder=str(folder), cache_dir=str(cache)))
    try:
        answer: dict[str, Any] = await source.fetch(LookupKnowledgeRequest(query=query))
    finally:
        await source.aclose()
    return answer


@pytest.mark.parametrize(
    ("query", "top"),
    [
        ("etcdNoLeader", "alerts/cluster-etcd-operator/etcdNoLeader.md"),
        ("etcdnoleader", "alerts/cluster-etcd-operator/etcdNoLeader.md"),
        ("etcdNoLeader firing on the prod cluster", "alerts/cluster-etcd-operator/etcdNoLeader.md"),
        ("KubePodCrashLooping what to do", "content/runbooks/kubernetes/KubePodCrashLooping.md"),
        (
            "[FIRING:1] KubePodCrashLooping (openshift-monitoring/alertmanager-main-0)",
            "content/runbooks/kubernetes/KubePodCrashLooping.md",
        ),
        (
            "alertname=etcdNoLeader severity=critical",
            "alerts/cluster-etcd-operator/etcdNoLeader.md",
        ),
        ("open etcdNoLeader.md", "alerts/cluster-etcd-operator/etcdNoLeader.md"),
        ("Kube Pod Crash Looping", "content/runbooks/kubernetes/KubePodCrashLooping.md"),
        (
            "cluster version operator down",
            "alerts/cluster-version-operator/ClusterVersionOperatorDown.md",
        ),
    ],
)
async def test_a_question_that_names_a_runbook_gets_it_first_and_high(
    folder: Path, tmp_path: Path, query: str, top: str
) -> None:
    pack = (await _ask(folder, tmp_path / "c", query))["contextPack"]
    hits = pack["hits"]
    assert isinstance(hits, list) and hits, query
    assert hits[0]["source"] == top, (query, [h["source"] for h in hits])
    assert pack.get("relevanceLevel") == "high", (query, pack.get("relevanceLevel"))


@pytest.mark.parametrize(
    ("query", "not_top"),
    [
        # a plain word that is a title names nothing, nor alone: a one-word title is no name
        ("introduction to kafka partitions", "content/_index.md"),
        ("Introduction", ""),
        # words of a name, not all of them: ranked as before
        ("etcd has no leader", ""),
        # a product in camelCase titles a page (gitlab-com/runbooks): it names no alert; before,
        # k8s-operations.md (`# GitLab`) was the HIGH answer to this question
        ("GitLab pages returns 404", "docs/kube/k8s-operations.md"),
        ("GitLab", ""),
    ],
)
async def test_words_that_are_not_an_alert_name_name_nothing(
    folder: Path, tmp_path: Path, query: str, not_top: str
) -> None:
    answer = await _ask(folder, tmp_path / "c", query)
    assert not any(step.get("step") == "named" for step in answer["retrievalTrace"])
    hits = answer["contextPack"]["hits"]
    assert not hits or hits[0]["source"] != not_top, query


async def test_a_named_runbook_is_served_whole_best_section_first(
    folder: Path, tmp_path: Path
) -> None:
    # One chunk per runbook leaves room for other runbooks; a named answer has none to make
    # room for, and "KubePodCrashLooping what to do" answered only its Meaning section
    # ("A container of the pod keeps restarting"), not what to do.
    pack = (await _ask(folder, tmp_path / "c", "KubePodCrashLooping what to do"))["contextPack"]
    crumbs = {h["breadcrumb"] for h in pack["hits"]}
    assert crumbs == {"Kube Pod Crash Looping > Meaning", "Kube Pod Crash Looping > Mitigation"}
    pack = (await _ask(folder, tmp_path / "c", "etcdNoLeader"))["contextPack"]
    sources = [h["source"] for h in pack["hits"]]
    assert sources == ["alerts/cluster-etcd-operator/etcdNoLeader.md"] * 3  # Meaning, Impact,
    assert len({h["breadcrumb"] for h in pack["hits"]}) == 3  # Diagnosis
    two = "is etcdNoLeader caused by etcdHighFsyncDurations"
    pack = (await _ask(folder, tmp_path / "c", two))["contextPack"]
    sources = [h["source"] for h in pack["hits"]]
    assert sources[:2] == [  # each named runbook's best section first, then the others
        "alerts/cluster-etcd-operator/etcdNoLeader.md",
        "alerts/cluster-etcd-operator/etcdHighFsyncDurations.md",
    ]
    assert len(sources) == 5 and set(sources) == set(sources[:2])  # max_hits


# Kebab- and snake_case file names (the shipped runbooks, gitlab-com/runbooks' docs/) pasted
# as written: `high-cpu.md` was a LOW answer (the whole question is `highcpumd`, no camelCase
# word), as was `alertname=ci_pending_builds`, while `etcdNoLeader.md` was HIGH. A word that
# is a file name (with its suffix or path) or a snake_case identifier names the runbook; a
# hyphenated phrase in prose (`out-of-memory`) stays a phrase.
KEBAB = {
    "high-cpu.md": "# High CPU\n\n## Diagnosis\n\nFind the hot thread with `top -H`.\n",
    "out-of-memory.md": "# Out of memory\n\n## Diagnosis\n\nRead the kernel log for oom-kill.\n",
    "docs/ci-runners/ci_pending_builds.md": "# CI pending builds\n\n## Symptoms\n\nJobs wait"
    " in the pending queue longer than five minutes.\n",
    "disk-full.md": "# Disk full\n\n## Mitigation\n\nDelete old logs under /var/log.\n",
}


@pytest.mark.parametrize(
    ("query", "top", "level"),
    [
        ("high-cpu.md", "high-cpu.md", "high"),
        ("open runbooks/high-cpu.md please", "high-cpu.md", "high"),
        ("alertname=ci_pending_builds env=gprd", "docs/ci-runners/ci_pending_builds.md", "high"),
        ("docs/ci-runners/ci_pending_builds.md", "docs/ci-runners/ci_pending_builds.md", "high"),
    ],
)
async def test_a_kebab_or_snake_file_name_pasted_names_its_runbook(
    tmp_path: Path, query: str, top: str, level: str
) -> None:
    for name, text in KEBAB.items():
        (tmp_path / "kb" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "kb" / name).write_text(text, encoding="utf-8")
    pack = (await _ask(tmp_path / "kb", tmp_path / "c", query))["contextPack"]
    assert [h["source"] for h in pack["hits"]][:1] == [top], query
    assert pack.get("relevanceLevel") == level, (query, pack.get("relevanceLevel"))


def test_a_hyphenated_phrase_in_prose_names_nothing() -> None:
    names = runbook_names(KEBAB)
    assert named_sources("pod killed with an out-of-memory error after deploy", names) == []
    assert named_sources("the disk-full alert and high-cpu both fire", names) == []


def test_a_path_pasted_names_that_runbook_not_its_namesakes() -> None:
    # Two operators' runbooks for one alert name (openshift/runbooks keeps one folder per
    # operator): the stem names both, a path names the one it spells. Before, the question
    # `alerts/b/TargetDown.md` put alerts/a/TargetDown.md first, HIGH.
    names = runbook_names(["alerts/a/TargetDown.md", "alerts/b/TargetDown.md"])
    both = ["alerts/a/TargetDown.md", "alerts/b/TargetDown.md"]
    assert named_sources("TargetDown", names) == both
    assert named_sources("alerts/b/TargetDown.md", names) == ["alerts/b/TargetDown.md"]
    assert named_sources("see ./b/targetdown.md, firing", names) == ["alerts/b/TargetDown.md"]
    assert named_sources("c/TargetDown.md", names) == both  # no such path: the stem names
