"""Does `simulate` predict kube-scheduler? The workload and the per-pod comparison.

`workload()` makes a seeded cluster shaped like a real one: nodes of three sizes in
three zones, some tainted, some labelled, some cordoned, some holding an image; running
pods; and pending pods with resource requests, tolerations, node selectors, required
and preferred node affinity, nodeName, pod anti-affinity, topology spread and
priorities (a few must preempt). `compare()` lines up, pod by pod, what the real
kube-scheduler did (bound where, or pending with which FailedScheduling message) with
what `simulate` said, given kube-scheduler's own tie-breaks (`tie_breaks`): the same
node, or unschedulable in both with the same reasons.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.e2e.cluster import KubeObject, node_object, pod_object

ZONES = ("zone-a", "zone-b", "zone-c")
APP_IMAGE = "registry.example/app:1.0"


@dataclass
class Workload:
    nodes: list[KubeObject]
    running: list[KubeObject]
    pending: list[KubeObject]
    priority_classes: dict[str, int] = field(default_factory=dict)


def workload(seed: int = 7, nodes: int = 60, running: int = 120, pending: int = 1000) -> Workload:
    rng = random.Random(seed)
    made_nodes: list[KubeObject] = []
    for i in range(nodes):
        size = rng.choice((("4", "16Gi"), ("8", "32Gi"), ("16", "64Gi")))
        labels = {"topology.kubernetes.io/zone": ZONES[i % 3]}
        if rng.random() < 0.3:
            labels["disk"] = "ssd"
        taints = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}] if rng.random() < 0.1 else []
        images = [(APP_IMAGE, 400 * 1024 * 1024)] if rng.random() < 0.3 else []
        node = node_object(f"node-{i:02d}", cpu=size[0], memory=size[1], labels=labels, taints=taints,
                           images=images)
        if i % 29 == 28:
            node["spec"]["unschedulable"] = True
        made_nodes.append(node)
    schedulable = [n["metadata"]["name"] for n in made_nodes
                   if not n["spec"].get("unschedulable") and not n["spec"].get("taints")]
    made_running = [
        pod_object(f"run-{i:03d}", cpu=f"{rng.randrange(2, 12) * 100}m", memory=f"{rng.randrange(1, 8) * 256}Mi",
                   node_name=rng.choice(schedulable), priority_class="fidelity-low",
                   labels={"app": rng.choice(("db", "cache", "batch"))})
        for i in range(running)
    ]
    made_pending = [_pending_pod(rng, i, made_nodes) for i in range(pending)]
    return Workload(made_nodes, made_running, made_pending,
                    {"fidelity-low": 0, "fidelity-mid": 100, "fidelity-high": 10000})


def _pending_pod(rng: random.Random, i: int, nodes: Sequence[KubeObject]) -> KubeObject:
    name = f"pod-{i:04d}"
    app = rng.choice(("web", "api", "worker"))
    spec: dict[str, Any] = {}
    roll = rng.random()
    if roll < 0.15:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    if rng.random() < 0.15:
        spec["nodeSelector"] = {"disk": "ssd"}
    affinity: dict[str, Any] = {}
    if rng.random() < 0.10:
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In",
                                   "values": ["zone-a", "zone-b"]}]}]}}
    elif rng.random() < 0.15:
        affinity["nodeAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-c"]}]}}]}
    if rng.random() < 0.05:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"spread": "hostname"}}, "topologyKey": "kubernetes.io/hostname"}]}
        labels = {"app": app, "spread": "hostname"}
    else:
        labels = {"app": app}
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.05:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": {"app": app}}}]
    if rng.random() < 0.02:
        spec["nodeName"] = rng.choice(nodes)["metadata"]["name"]
    priority = "fidelity-high" if rng.random() < 0.01 else ("fidelity-mid" if rng.random() < 0.1 else "fidelity-low")
    cpu = "3500m" if priority == "fidelity-high" else f"{rng.randrange(1, 16) * 100}m"
    image = APP_IMAGE if rng.random() < 0.3 else "registry.k8s.io/pause:3.10"
    return pod_object(name, cpu=cpu, memory=f"{rng.randrange(1, 9) * 128}Mi", priority_class=priority,
                      labels=labels, image=image, extra_spec=spec)


# ---- what kube-scheduler did, what simulate said -------------------------------------------

@dataclass(frozen=True)
class Verdict:
    """One pod's result: bound to `node`, or pending with `reasons` (kube-scheduler's FitError
    reasons, counts dropped: "Insufficient cpu", "node(s) had untolerated taint ...")."""

    node: str | None
    reasons: frozenset[str] = frozenset()
    message: str = ""
    #: simulate's nodes sharing the best score (empty for kube-scheduler's verdicts).
    top: frozenset[str] = frozenset()
    #: kube-scheduler's reasons at each attempt of a pending pod: it retries an unschedulable
    #: pod when the cluster changes, and a later attempt may find a node failing an earlier
    #: filter (full by then) where simulate, which tries each pod once, saw the first attempt's.
    attempts: tuple[frozenset[str], ...] = ()


_COUNTED = re.compile(r"^\d+ ")
#: simulate names the plugin after each reason ("Insufficient cpu (NodeResourcesFit)").
_PLUGIN = re.compile(r" \([A-Za-z]+\)$")


def fit_reasons(message: str) -> frozenset[str]:
    """The reasons of a FitError message: '0/60 nodes are available: 3 Insufficient cpu, 2 node(s)
    had ... . preemption: ...' -> {'Insufficient cpu', 'node(s) had ...'}."""
    head = message.split(". preemption:", 1)[0]
    _, _, listed = head.partition("nodes are available: ")
    reasons = set()
    for part in listed.rstrip(".").split(", "):
        part = _PLUGIN.sub("", _COUNTED.sub("", part.strip()))
        if part:
            reasons.add(part)
    return frozenset(reasons)


@dataclass
class Comparison:
    same: list[str] = field(default_factory=list)
    both_unschedulable: list[str] = field(default_factory=list)
    differ: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.same) + len(self.both_unschedulable) + len(self.differ)

    def summary(self) -> str:
        return (f"{self.total} pods: {len(self.same)} on the same node (or one of equal best score), "
                f"{len(self.both_unschedulable)} "
                f"unschedulable in both for the same reasons, {len(self.differ)} differ")


def compare(real: Mapping[str, Verdict], simulated: Mapping[str, Verdict]) -> Comparison:
    result = Comparison()
    for pod in sorted(real):
        mine, theirs = simulated.get(pod), real[pod]
        if mine is None:
            result.differ.append(f"{pod}: kube-scheduler {_show(theirs)}; simulate has no result")
        elif theirs.node is not None and theirs.node in (mine.top or {mine.node}):
            # `top`, not `node`: a replay assumes each pod where kube-scheduler bound it.
            result.same.append(pod)
        elif theirs.node is None and mine.node is None and (
                mine.reasons == theirs.reasons or mine.reasons in theirs.attempts):
            result.both_unschedulable.append(pod)
        else:
            result.differ.append(f"{pod}: kube-scheduler {_show(theirs)}; simulate {_show(mine)}")
    return result


def _show(verdict: Verdict) -> str:
    if verdict.node:
        best = f" (best: {', '.join(sorted(verdict.top))})" if verdict.top else ""
        return f"bound to {verdict.node}{best}"
    return f"pending: {verdict.message or sorted(verdict.reasons)}"
