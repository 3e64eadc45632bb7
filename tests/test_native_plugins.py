"""The native plugins, one by one, on hand-made nodes and pods."""

from __future__ import annotations

import pytest

from tests.framework_support import node, pod
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, default_normalize
from wasm_scheduler.adapters.framework.plugins.default_preemption import Candidate, pick_one
from wasm_scheduler.adapters.framework.plugins.node_affinity import NodeAffinity
from wasm_scheduler.adapters.framework.plugins.node_name import NodeName
from wasm_scheduler.adapters.framework.plugins.node_resources_fit import NodeResourcesFit
from wasm_scheduler.adapters.framework.plugins.node_unschedulable import NodeUnschedulable
from wasm_scheduler.adapters.framework.plugins.priority_sort import PrioritySort
from wasm_scheduler.adapters.framework.plugins.taint_toleration import TaintToleration
from wasm_scheduler.adapters.framework.pods import PodInfo
from wasm_scheduler.adapters.framework.queue import QueuedPod
from wasm_scheduler.adapters.framework.resources import Resources
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import Code, NodeScore

NO_SCHEDULE = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def info(n: dict, *pods: dict) -> NodeInfo:
    allocatable = Resources.from_list(n["status"]["allocatable"])
    return NodeInfo.of(n, allocatable, [PodInfo.of(p) for p in pods])


def test_implements_reflects_what_a_plugin_overrides():
    assert TaintToleration().implements("filter") and TaintToleration().implements("score")
    assert not TaintToleration().implements("pre_filter")
    assert PrioritySort().implements("queue_sort") and not PrioritySort().implements("filter")
    assert not NativePlugin().implements("bind")


def test_priority_sort():
    high, low = PodInfo.of(pod("h", priority=10)), PodInfo.of(pod("l", priority=1))
    sort = PrioritySort()
    assert sort.less(QueuedPod(high, timestamp=5), QueuedPod(low, timestamp=1))
    assert sort.less(QueuedPod(low, timestamp=1), QueuedPod(PodInfo.of(pod("l2", priority=1)), timestamp=2))


def test_node_name():
    plugin = NodeName()
    assert plugin.filter(CycleState(), pod("p", nodeName="n1"), info(node("n1"))).ok
    status = plugin.filter(CycleState(), pod("p", nodeName="n1"), info(node("n2")))
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert plugin.filter(CycleState(), pod("p"), info(node("n2"))).ok


def test_node_unschedulable():
    cordoned = info(node("n1", unschedulable=True))
    plugin = NodeUnschedulable()
    assert plugin.filter(CycleState(), pod("p"), cordoned).reason == "node(s) were unschedulable"
    tolerant = pod("p", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    assert plugin.filter(CycleState(), tolerant, cordoned).ok


@pytest.mark.parametrize(("toleration", "tolerated"), [
    ({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}, True),
    ({"key": "dedicated", "value": "gpu"}, True),
    ({"key": "dedicated", "operator": "Exists"}, True),
    ({"operator": "Exists"}, True),
    ({"key": "dedicated", "value": "cpu"}, False),
    ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
])
def test_taint_toleration_filter(toleration, tolerated):
    status = TaintToleration().filter(CycleState(), pod("p", tolerations=[toleration]),
                                      info(node("n1", taints=[NO_SCHEDULE])))
    assert status.ok == tolerated
    if not tolerated:
        assert status.reason == "node(s) had untolerated taint {dedicated: gpu}"


def test_taint_toleration_prefers_nodes_with_fewer_intolerable_prefer_no_schedule_taints():
    prefer = [{"key": "a", "effect": "PreferNoSchedule"}, {"key": "b", "effect": "PreferNoSchedule"}]
    nodes = [info(node("clean")), info(node("one", taints=prefer[:1])), info(node("two", taints=prefer))]
    plugin, state, p = TaintToleration(), CycleState(), pod("p", tolerations=[{"key": "b", "operator": "Exists"}])
    assert plugin.pre_score(state, p, nodes).ok
    raw = plugin.score_nodes(state, p, nodes).scores
    assert [s.score for s in raw] == [0, 1, 1]
    assert [s.score for s in plugin.normalize_score(state, p, raw).scores] == [100, 0, 0]


def test_node_affinity_selector_and_required_terms():
    zone_b = info(node("n1", labels={"zone": "b", "size": "8"}))
    plugin = NodeAffinity()
    assert plugin.filter(CycleState(), pod("p", nodeSelector={"zone": "b"}), zone_b).ok
    assert plugin.filter(CycleState(), pod("p", nodeSelector={"zone": "a"}), zone_b).reason == \
        "node(s) didn't match Pod's node affinity/selector"

    def required(*terms: dict) -> dict:
        return pod("p", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": list(terms)}}})

    def expr(key: str, op: str, *values: str) -> dict:
        return {"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}

    assert plugin.filter(CycleState(), required(expr("zone", "In", "a", "b")), zone_b).ok
    assert not plugin.filter(CycleState(), required(expr("zone", "NotIn", "b")), zone_b).ok
    assert plugin.filter(CycleState(), required(expr("zone", "NotIn", "b"), expr("size", "Gt", "4")), zone_b).ok
    assert not plugin.filter(CycleState(), required(expr("size", "Lt", "4")), zone_b).ok
    assert plugin.filter(CycleState(), required({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}),
                         zone_b).ok
    assert not plugin.filter(CycleState(), required({}), zone_b).ok  # an empty term matches nothing


def test_node_affinity_prefilter_skips_narrows_and_conflicts():
    plugin = NodeAffinity()
    assert plugin.pre_filter(CycleState(), pod("p")).status.code == Code.SKIP

    def by_name(*terms: list[str]) -> dict:
        return pod("p", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": names}]}
                                  for names in terms]}}})

    assert plugin.pre_filter(CycleState(), by_name(["a", "b"], ["c"])).node_names == {"a", "b", "c"}
    assert plugin.pre_filter(CycleState(), by_name([])).status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_node_affinity_scores_preferred_terms():
    p = pod("p", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}},
        {"weight": 30, "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]}},
    ]}})
    nodes = [info(node("a", labels={"zone": "a"})), info(node("ssd", labels={"ssd": "yes"})),
             info(node("both", labels={"zone": "a", "ssd": "yes"})), info(node("none"))]
    plugin, state = NodeAffinity(), CycleState()
    assert plugin.pre_score(state, p, nodes).ok
    raw = plugin.score_nodes(state, p, nodes).scores
    assert [s.score for s in raw] == [10, 30, 40, 0]
    assert [s.score for s in plugin.normalize_score(state, p, raw).scores] == [25, 75, 100, 0]
    assert plugin.pre_score(CycleState(), pod("q"), nodes).code == Code.SKIP


def test_node_resources_fit_filter_names_every_short_resource():
    n = info(node("n1", cpu="2", memory="1Gi", pods=2, extra={"nvidia.com/gpu": "1"}), pod("r", cpu="1500m"))
    plugin = NodeResourcesFit()
    state = CycleState()
    big = pod("p", cpu="1", memory="2Gi")
    big["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "2"
    assert plugin.pre_filter(state, big).status.ok
    status = plugin.filter(state, big, n)
    assert status.code == Code.UNSCHEDULABLE
    assert status.reason == "Insufficient cpu; Insufficient memory; Insufficient nvidia.com/gpu"
    full = info(node("n2", pods=1), pod("r", node_name="n2"))
    assert plugin.filter(CycleState(), pod("p"), full).reason == "Too many pods"
    assert plugin.filter(CycleState(), pod("p", cpu="400m"), n).ok


def test_node_resources_fit_least_allocated_score():
    plugin = NodeResourcesFit()
    empty = info(node("empty", cpu="4", memory="4Gi"))
    half = info(node("half", cpu="4", memory="4Gi"), pod("r", cpu="2", memory="2Gi"))
    p = pod("p", cpu="1", memory="1Gi")
    # (4-1)/4 -> 75 for cpu and memory; (4-3)/4 -> 25.
    assert [s.score for s in plugin.score_nodes(CycleState(), p, [empty, half]).scores] == [75, 25]


def test_default_normalize():
    scores = [NodeScore("a", 0), NodeScore("b", 5), NodeScore("c", 10)]
    assert [s.score for s in default_normalize(scores)] == [0, 50, 100]
    assert [s.score for s in default_normalize(scores, reverse=True)] == [100, 50, 0]
    assert [s.score for s in default_normalize([NodeScore("a", 0)], reverse=True)] == [100]


def test_pick_one_node_for_preemption():
    def victims(*priorities: int, start: str = "") -> tuple[PodInfo, ...]:
        return tuple(PodInfo.of(pod(f"v{i}", priority=p, start=start)) for i, p in enumerate(priorities))

    assert pick_one([Candidate("a", victims(10)), Candidate("b", victims(5, 5))]).node == "b"  # lowest top priority
    assert pick_one([Candidate("a", victims(5, 5)), Candidate("b", victims(5, 1))]).node == "b"  # lowest sum
    # The sum counts each victim with an offset of 2^31, so fewer victims win it.
    assert pick_one([Candidate("a", victims(5, 0, 0)), Candidate("b", victims(5, 0))]).node == "b"
    assert pick_one([Candidate("a", victims(5)), Candidate("b", ())]).node == "b"  # nothing to evict
    late = Candidate("late", victims(5, start="2024-02-01T00:00:00Z"))
    early = Candidate("early", victims(5, start="2024-01-01T00:00:00Z"))
    assert pick_one([early, late]).node == "late"  # the most recently started victims
