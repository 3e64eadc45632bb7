"""Does `simulate` predict kube-scheduler? The same snapshot through both, pod by pod.

The workload (`fidelity.workload`) is made in the real API server with no scheduler
running, then read back as a user would read it (`kubectl get nodes,pods -o yaml`) into
the snapshot `simulate` is given. Then the real kube-scheduler (its default plugins,
plus the NodeNumber guest through our extender) schedules it. `simulate` runs the
same configuration (NodeNumber in-process, with the weight that makes its scores equal
to the extender's), pod by pod on the cluster kube-scheduler saw: after deciding, it
assumes each pod where kube-scheduler bound it. A pod agrees when kube-scheduler's node
is among simulate's best (kube-scheduler breaks ties at random), or when both left it
pending for the same reasons. Both sides score every node
(`percentageOfNodesToScore: 100`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.cluster import NODENUMBER_WASM, ExtenderEntry, Harness, wasm_plugin_config
from tests.e2e.fidelity import Comparison, Verdict, compare, fit_reasons, workload
from tests.e2e.process import wait_for
from wasm_scheduler.adapters.framework.cluster import load_cluster
from wasm_scheduler.adapters.framework.config import config_from_dict
from wasm_scheduler.adapters.framework.results import PodStatus
from wasm_scheduler.adapters.framework.scheduler import Scheduler, SchedulerOptions
from wasm_scheduler.registry.compiler import GuestCompiler

#: NodeNumber's weight: the extender's 0..10 count ten times their value times the weight,
#: so the extender's 10 (NodeNumber's 100) weighs what the in-process 100 does at this weight.
WEIGHT = 2


def snapshot_as_kubectl_reads_it(harness: Harness, path: Path) -> None:
    """Nodes and pods as the API serves them, written as one List (kubectl get -o yaml)."""
    core = harness.cluster.core
    nodes = json.loads(core.list_node(_preload_content=False).data)["items"]
    pods = json.loads(core.list_namespaced_pod("default", _preload_content=False).data)["items"]
    for item, kind in [(n, "Node") for n in nodes] + [(p, "Pod") for p in pods]:
        item["apiVersion"], item["kind"] = "v1", kind
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes + pods}))


def real_verdicts(harness: Harness, names: Sequence[str]) -> dict[str, Verdict]:
    """Each pod bound by kube-scheduler, or pending with its last FailedScheduling message
    (and the reasons of every attempt, one event each)."""
    placements = harness.cluster.placements()
    messages: dict[str, tuple[str, str]] = {}
    attempts: dict[str, set[frozenset[str]]] = {}
    for event in harness.cluster.events():
        if event.get("reason") == "FailedScheduling":
            name = event["involvedObject"]["name"]
            stamp = str(event.get("lastTimestamp") or event.get("eventTime") or "")
            attempts.setdefault(name, set()).add(fit_reasons(str(event.get("message", ""))))
            if name not in messages or stamp >= messages[name][0]:
                messages[name] = (stamp, str(event.get("message", "")))
    verdicts = {}
    for name in names:
        if name in placements:
            verdicts[name] = Verdict(placements[name])
        else:
            message = messages.get(name, ("", ""))[1]
            verdicts[name] = Verdict(None, fit_reasons(message), message,
                                     attempts=tuple(sorted(attempts.get(name, ()), key=sorted)))
    return verdicts


def simulate_following(snapshot: Path, config: dict[str, Any], real: dict[str, Verdict],
                       top: dict[str, list[str]]) -> dict[str, Verdict]:
    """`simulate` of the snapshot, each pod judged on the cluster kube-scheduler saw: simulate's
    best nodes (all those sharing the top score) are recorded in `top`, and the pod is then
    assumed where kube-scheduler bound it, when simulate found that node feasible."""

    def choose_host(pod_name: str, names: Sequence[str], totals: Sequence[int]) -> str:
        best = max(totals)
        top[pod_name.rpartition("/")[2]] = [n for n, t in zip(names, totals, strict=True) if t == best]
        wanted = real.get(pod_name.rpartition("/")[2])
        if wanted is not None and wanted.node in names:
            return wanted.node
        return top[pod_name.rpartition("/")[2]][0]

    options = SchedulerOptions(choose_host=choose_host)
    with Scheduler(config_from_dict(config, str(snapshot.parent / "simulate-config.yaml")), load_cluster(snapshot),
                   GuestCompiler(), None, options) as scheduler:
        report = scheduler.run()
    verdicts = {}
    for outcome in report.pods:
        if outcome.status == PodStatus.SCHEDULED:
            best = top.get(outcome.name, [outcome.node or ""])
            verdicts[outcome.name] = Verdict(outcome.node, top=frozenset(best))
        else:
            verdicts[outcome.name] = Verdict(None, fit_reasons(outcome.reason), outcome.reason)
    return verdicts


def test_simulate_predicts_kube_scheduler(harness: Harness) -> None:
    cluster = harness.cluster
    made = workload()
    for name, value in made.priority_classes.items():
        cluster.create_priority_class(name, value)
    try:
        cluster.create_nodes(made.nodes)
        cluster.create_pods(made.running)
        cluster.create_pods(made.pending)
        # A pod created with spec.nodeName is bound already: neither scheduler sees it pending.
        names = [p["metadata"]["name"] for p in made.pending if not p["spec"].get("nodeName")]
        snapshot = harness.folder / "snapshot.yaml"
        snapshot_as_kubectl_reads_it(harness, snapshot)

        extender = harness.extender(wasm_plugin_config({"NodeNumber": NODENUMBER_WASM})).start()
        scheduler_profiles = [{"schedulerName": "default-scheduler"}]
        # nodeCacheCapable: with whole nodes, kube-scheduler 1.33 rebuilds each node the extender's
        # filter passed as a NodeInfo without its pods (extender.go, HTTPExtender.Filter), so its
        # own score plugins then see every node empty (docs/extender.md).
        entry = ExtenderEntry(url_prefix=extender.url, weight=WEIGHT, node_cache_capable=True)
        harness.kube_scheduler([entry],
                               profiles=scheduler_profiles, percentage_of_nodes_to_score=100).start()
        settle(harness, names)
        real = real_verdicts(harness, names)

        config = wasm_plugin_config({"NodeNumber": NODENUMBER_WASM}, weights={"NodeNumber": WEIGHT})
        config["percentageOfNodesToScore"] = 100
        top: dict[str, list[str]] = {}
        simulated = simulate_following(snapshot, config, real, top)
        result = compare(real, simulated)
        report(harness.folder, result, top)
        assert not result.differ, f"{result.summary()}:\n" + "\n".join(result.differ[:40])
        assert len(result.same) > len(names) // 2, result.summary()
    finally:
        for name in made.priority_classes:
            cluster.scheduling.delete_priority_class(name)


def settle(harness: Harness, names: Sequence[str], quiet_s: float = 10.0, timeout_s: float = 420.0) -> None:
    """Until every pod is bound or has a FailedScheduling event, and nothing changed for `quiet_s`."""
    wanted = set(names)
    last: list[Any] = [None, time.monotonic()]

    def settled() -> bool:
        bound = set(harness.cluster.placements())
        failed = {e["involvedObject"]["name"] for e in harness.cluster.events()
                  if e.get("reason") == "FailedScheduling"}
        state = (len(bound), len(failed))
        if state != last[0]:
            last[0], last[1] = state, time.monotonic()
            return False
        return wanted <= (bound | failed) and time.monotonic() - last[1] >= quiet_s

    wait_for(settled, timeout_s, "kube-scheduler done with every pod", interval_s=1.0)


def report(folder: Path, result: Comparison, top: dict[str, list[str]]) -> None:
    tied = sum(1 for nodes in top.values() if len(nodes) > 1)
    text = f"{result.summary()}; {tied} pods had tied best nodes\n" + "\n".join(result.differ)
    (folder / "fidelity.txt").write_text(text)
    print(re.sub(r"\n.*", "", text, flags=re.S))
