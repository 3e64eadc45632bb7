"""NodeResourcesBalancedAllocation, as kube-scheduler 1.33 scores."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from tests.framework_support import cluster, config, node, pod, run
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.errors import UserError
from wasm_scheduler.adapters.framework.plugins.base import PluginContext
from wasm_scheduler.adapters.framework.plugins.node_resources_balanced_allocation import (
    NodeResourcesBalancedAllocation,
    balanced_resource_score,
)
from wasm_scheduler.adapters.framework.pods import PodInfo
from wasm_scheduler.adapters.framework.resources import Resources
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import Code

GPU = "nvidia.com/gpu"
DEFAULT = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
WITH_GPU = [*DEFAULT, {"name": GPU, "weight": 1}]


def spec_pod(name: str, containers: Sequence[Mapping[str, str]], node_name: str = "") -> dict[str, Any]:
    """A pod whose containers request exactly `containers` (balanced_allocation_test.go's PodSpecs)."""
    spec: dict[str, Any] = {"containers": [
        {"name": f"c{i}", "image": "x", **({"resources": {"requests": dict(r)}} if r else {})}
        for i, r in enumerate(containers)]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


# The PodSpecs of balanced_allocation_test.go (memory in bytes).
CPU_ONLY = [{"cpu": "1000m", "memory": "0"}, {"cpu": "2000m", "memory": "0"}]
CPU_AND_MEMORY = [{"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"}]
CPU_AND_MEMORY_AND_GPU = [{"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000", GPU: "3"}]


def make_node(name: str, milli_cpu: int, memory: int, gpus: int | None = None) -> dict[str, Any]:
    """noderesources' makeNode: allocatable cpu (millicores) and memory (bytes), an extended resource."""
    return node(name, cpu=f"{milli_cpu}m", memory=str(memory), extra={GPU: str(gpus)} if gpus is not None else None)


def infos(nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]]) -> list[NodeInfo]:
    """cache.NewSnapshot(pods, nodes): each pod on the node its spec names."""
    return [NodeInfo.of(n, Resources.from_list(n["status"]["allocatable"]),
                        [PodInfo.of(p) for p in pods if p["spec"].get("nodeName") == n["metadata"]["name"]])
            for n in nodes]


def plugin(resources: list[dict[str, Any]] | None = None) -> NodeResourcesBalancedAllocation:
    args = {"resources": resources} if resources is not None else {}
    ctx = PluginContext("NodeResourcesBalancedAllocation", args, handle=None, framework=None)  # type: ignore[arg-type]
    return NodeResourcesBalancedAllocation(ctx)


# balanced_allocation_test.go, TestNodeResourcesBalancedAllocation (the cases without DRA):
# (name, the pod's containers, nodes, running pods, resources, run PreScore, expected scores).
CASES: list[tuple[str, Any, Any, Any, Any, bool, list[int]]] = [
    ("nothing scheduled, resources requested, differently sized nodes", CPU_AND_MEMORY,
     [("node1", 4000, 10000, None), ("node2", 6000, 10000, None)], [], DEFAULT, True, [87, 100]),
    ("resources requested, pods scheduled with resources", CPU_AND_MEMORY,
     [("node1", 10000, 20000, None), ("node2", 10000, 20000, None)],
     [(CPU_ONLY, "node1"), (CPU_AND_MEMORY, "node2")], DEFAULT, True, [82, 95]),
    ("resources requested, pods scheduled with resources, differently sized nodes", CPU_AND_MEMORY,
     [("node1", 10000, 20000, None), ("node2", 10000, 50000, None)],
     [(CPU_ONLY, "node1"), (CPU_AND_MEMORY, "node2")], DEFAULT, True, [82, 80]),
    ("requested resources at node capacity", CPU_ONLY,
     [("node1", 6000, 10000, None), ("node2", 6000, 10000, None)],
     [(CPU_ONLY, "node1"), (CPU_AND_MEMORY, "node2")], DEFAULT, True, [50, 75]),
    ("include scalar resource on a node for balanced resource allocation", [{"memory": "0", GPU: "1"}],
     [("node1", 3500, 40000, 8), ("node2", 3500, 40000, 8)],
     [(CPU_AND_MEMORY, "node2"), (CPU_AND_MEMORY_AND_GPU, "node1")], WITH_GPU, True, [70, 65]),
    ("node without the scalar resource should skip the scalar resource", CPU_AND_MEMORY,
     [("node1", 3500, 40000, 8), ("node2", 3500, 40000, None)], [], WITH_GPU, True, [63, 63]),
    ("resources requested, pods scheduled with resources if PreScore not called", CPU_AND_MEMORY,
     [("node1", 10000, 20000, None), ("node2", 10000, 20000, None)],
     [(CPU_ONLY, "node1"), (CPU_AND_MEMORY, "node2")], DEFAULT, False, [82, 95]),
]


@pytest.mark.parametrize(("name", "containers", "nodes", "running", "resources", "pre_score", "expected"), CASES,
                         ids=[c[0] for c in CASES])
def test_node_resources_balanced_allocation(name, containers, nodes, running, resources, pre_score, expected):
    """balanced_allocation_test.go, TestNodeResourcesBalancedAllocation (the expected scores are the
    Go test's; the running pods' node is the one their PodSpec names there)."""
    nodes_ = [make_node(*n) for n in nodes]
    pods = [spec_pod(f"r{i}", spec, node_name) for i, (spec, node_name) in enumerate(running)]
    node_infos = infos(nodes_, pods)
    ba, state = plugin(resources), CycleState()
    p = spec_pod("p", containers)
    if pre_score:
        assert ba.pre_score(state, p, node_infos).ok
    assert [ba.score(state, p, n) for n in node_infos] == expected
    assert list(ba.score_nodes(state, p, node_infos).pairs()) == list(zip([n.name for n in node_infos], expected,
                                                                         strict=True))


def test_best_effort_pod_is_skipped_in_pre_score():
    """balanced_allocation_test.go: "nothing scheduled, nothing requested, skip in PreScore"."""
    node_infos = infos([make_node("node1", 4000, 10000), make_node("node2", 4000, 10000)], [])
    ba = plugin(DEFAULT)
    best_effort = spec_pod("p", [{}])
    assert ba.pre_score(CycleState(), best_effort, node_infos).code == Code.SKIP
    assert [ba.score(CycleState(), best_effort, n) for n in node_infos] == [0, 0]  # Score without PreScore: 0


def test_requests_are_counted_as_asked_not_with_non_zero_defaults():
    """useRequested: a container that requests nothing adds nothing (NodeResourcesFit's score
    would count 100m and 200Mi). Node 4 cpu / 8Gi, a pod of 1 cpu and nothing else running:
    fractions 0.25 and 0 -> std 0.125 -> 87 (computed from the formula)."""
    node_infos = infos([make_node("n", 4000, 8 * 1024**3)], [spec_pod("idle", [{}], "n")])
    ba = plugin()
    p = spec_pod("p", [{"cpu": "1"}])
    state = CycleState()
    assert ba.pre_score(state, p, node_infos).ok
    assert ba.score(state, p, node_infos[0]) == 87


def test_scorer_formula():
    """balancedResourceScorer: two fractions |f1-f2|/2, more the population deviation, one none.
    Values computed from the formula: (0.5, 0.25) -> 87; (1, 0.5, 0) -> std 0.408 -> 59."""
    assert balanced_resource_score([2, 1], [4, 4]) == 87
    assert balanced_resource_score([4, 2, 0], [4, 4, 4]) == 59
    assert balanced_resource_score([9, 0], [4, 0]) == 100  # one fraction (capped at 1): std 0
    assert balanced_resource_score([8, 0], [4, 4]) == 50  # capped at 1: |1 - 0| / 2


@pytest.mark.parametrize(("args", "message"), [
    ({"resources": [{"name": "cpu", "weight": 2}]}, "resources[0].weight: must be 1"),
    ({"resources": [{"name": "cpu"}, {"name": "cpu"}]}, "resources[1].name: duplicate"),
    ({"resources": [{"weight": 1}]}, "resources[0].name: expected a resource name"),
    ({"scoringStrategy": {}}, "scoringStrategy: unknown NodeResourcesBalancedAllocation arg"),
])
def test_args_are_validated_as_kube_scheduler_does(args, message):
    ctx = PluginContext("NodeResourcesBalancedAllocation", args, handle=None, framework=None,  # type: ignore[arg-type]
                        source="sched.yaml: args")
    with pytest.raises(UserError) as info:
        NodeResourcesBalancedAllocation(ctx)
    assert message in str(info.value)


def test_weight_zero_means_one():
    assert plugin([{"name": "cpu", "weight": 0}, {"name": "memory"}]).args.resources == ("cpu", "memory")


def test_simulate_prefers_the_node_the_pod_balances(compiler):
    """Two equal nodes but for what runs there: a memory-heavy pod on n1, a cpu-heavy one on n2.
    A cpu-heavy pending pod balances n1 (fractions 0.5/0.5 -> 100) and unbalances n2 (0.75/0.0 ->
    62), which outweighs NodeResourcesFit's LeastAllocated preferring n2 (50 against 62): figures
    computed from the formulas."""
    n1, n2 = node("n1", cpu="4", memory="8Gi"), node("n2", cpu="4", memory="8Gi")
    mem_heavy = pod("mem", cpu="1", memory="4Gi", node_name="n1")
    cpu_heavy = pod("cpu", cpu="2", memory="0", node_name="n2")
    pending = pod("p", cpu="1", memory="0")
    report = run(config(), cluster(n1, n2, mem_heavy, cpu_heavy, pending), compiler)
    outcome = report.outcome("default/p")
    assert outcome is not None and outcome.node == "n1"
    assert outcome.scores["NodeResourcesBalancedAllocation"] == 100
