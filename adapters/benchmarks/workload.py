"""The scheduler_perf-like workload of `wasm-scheduler bench`.

This module owns the objects one benchmark round schedules, shaped like the SIG
project's scheduler_perf ``SchedulingBasic/500Nodes`` case: ``nodes`` nodes made from
scheduler_perf's default node template (4 cpu, 32Gi, 110 pods, Ready), ``init_pods``
pods from its default pod template (one ``pause`` container requesting 100m cpu and
500Mi) already bound round-robin to the nodes, and ``pods`` pending pods of the same
template to be scheduled and timed. Every name ends in digits, so the NodeNumber
plugin has something to favour. The objects are the dicts
`adapters.framework.cluster.cluster_from_objects` accepts (what ``kubectl get
nodes,pods -o yaml`` prints), the same on every call.

See `docs/performance.md` ("How to measure").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: scheduler_perf's config/templates/node-default.yaml capacity.
NODE_CPU = "4"
NODE_MEMORY = "32Gi"
NODE_PODS = "110"
#: scheduler_perf's config/templates/pod-default.yaml requests (and limits).
POD_CPU = "100m"
POD_MEMORY = "500Mi"
POD_IMAGE = "registry.k8s.io/pause:3.10"
NAMESPACE = "sched-perf"
#: Rounds of every variant a bench runs, unless told (--rounds); the best counts.
DEFAULT_ROUNDS = 3


@dataclass(frozen=True)
class Workload:
    """How big one round is (scheduler_perf's initNodes, initPods, measurePods)."""

    nodes: int = 500
    init_pods: int = 500
    pods: int = 1000

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.init_pods < 0 or self.pods < 1:
            raise ValueError("a workload needs at least one node and one measured pod")


def _digits(count: int) -> int:
    return max(4, len(str(max(count - 1, 0))))


def node(index: int, width: int = 4) -> dict[str, Any]:
    name = f"node-{index:0{width}d}"
    capacity = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": NODE_PODS}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "capacity": dict(capacity),
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True"}],
            "phase": "Running",
        },
    }


def pod(name: str, node_name: str = "") -> dict[str, Any]:
    resources = {"cpu": POD_CPU, "memory": POD_MEMORY}
    spec: dict[str, Any] = {
        "containers": [{
            "name": "pause",
            "image": POD_IMAGE,
            "ports": [{"containerPort": 80}],
            "resources": {"requests": dict(resources), "limits": dict(resources)},
        }],
        "schedulerName": "default-scheduler",
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def objects(workload: Workload) -> list[dict[str, Any]]:
    """Nodes, then the bound init pods, then the pending measured pods (in queue order)."""
    width = _digits(max(workload.nodes, workload.init_pods, workload.pods))
    nodes = [node(i, width) for i in range(workload.nodes)]
    init = [pod(f"init-pod-{i:0{width}d}", nodes[i % workload.nodes]["metadata"]["name"])
            for i in range(workload.init_pods)]
    measured = [pod(f"pod-{i:0{width}d}") for i in range(workload.pods)]
    return [*nodes, *init, *measured]


def documents(workload: Workload) -> list[dict[str, Any]]:
    """The workload as one ``v1 List`` document (the shape `cluster_from_objects` reads)."""
    return [{"apiVersion": "v1", "kind": "List", "items": objects(workload)}]
