"""InterPodAffinity, with cases ported from kube-scheduler's own tests.

Each ported case names its source: the Go file and test function under
pkg/scheduler/framework/plugins/interpodaffinity/ of kubernetes v1.33, and the case's
name there, verbatim. Go's test pods without a namespace are in "" (kube's
defaultNamespace); here that is "default", the namespace the API server (and the cluster
loader) gives them, and "" in a term's namespaces list becomes "default" too. Go's
`st.MakePod().PodAffinityIn(key, topologyKey, values, required)` is `term(key, "In",
values, topology_key)` below.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from tests.framework_support import cluster, config, node, pod, run
from wasm_scheduler.adapters.framework.config import default_config
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.errors import UserError
from wasm_scheduler.adapters.framework.framework import Framework
from wasm_scheduler.adapters.framework.handle import SchedulerHandle
from wasm_scheduler.adapters.framework.plugins import DEFAULT_MULTIPOINT, IN_TREE, UPSTREAM_ONLY
from wasm_scheduler.adapters.framework.plugins.base import PluginContext
from wasm_scheduler.adapters.framework.plugins.inter_pod_affinity import (
    ERR_REASON_AFFINITY,
    ERR_REASON_ANTI_AFFINITY,
    ERR_REASON_EXISTING_ANTI_AFFINITY,
    PRE_FILTER_STATE_KEY,
    InterPodAffinity,
    LabelSelector,
    PreFilterState,
    SelectorError,
    parse_pod_affinity,
)
from wasm_scheduler.adapters.framework.pods import PodInfo
from wasm_scheduler.adapters.framework.results import PodStatus, Preemption
from wasm_scheduler.adapters.framework.simulation import NAMESPACE_LABELS_KIND, pod_unmodelled, simulate
from wasm_scheduler.adapters.framework.snapshot import NodeInfo, Snapshot
from wasm_scheduler.framework_api import SUCCESS, Code, NodeScore, Status

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
#: scoring_test.go's `namespaces` (filtering_test.go's TestRequiredAffinitySingleNode uses them too).
TEAM_NAMESPACES = {"subteam1.team1": {"team": "team1"}, "subteam2.team1": {"team": "team1"},
                   "subteam1.team2": {"team": "team2"}, "subteam2.team2": {"team": "team2"}}
BAD_VALUE_MESSAGE = (
    'values[0][service]: Invalid value: "{{.bad-value.}}": a valid label must be an empty string or consist of '
    "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
    "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


# --- building pods, nodes and the plugin as the Go tests do ------------------------------

def term(key: str, op: str, values: Sequence[str] = (), topology_key: str = "", **extra: Any) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": op}
    if values:
        expression["values"] = list(values)
    return {"labelSelector": {"matchExpressions": [expression]}, "topologyKey": topology_key, **extra}


def weighted(weight: int, affinity_term: Mapping[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": dict(affinity_term)}


def affinity(required: Sequence[Mapping[str, Any]] = (), anti: Sequence[Mapping[str, Any]] = (),
             preferred: Sequence[Mapping[str, Any]] = (),
             preferred_anti: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """A v1.Affinity; like Go's createPodWithAffinityTerms, both parts are set when any term is."""
    result: dict[str, Any] = {}
    if required or preferred:
        result["podAffinity"] = {REQUIRED: list(required), PREFERRED: list(preferred)}
    if anti or preferred_anti:
        result["podAntiAffinity"] = {REQUIRED: list(anti), PREFERRED: list(preferred_anti)}
    return result


_names = iter(range(10**6))


def kpod(labels: Mapping[str, str] | None = None, node_name: str = "", namespace: str = "default",
         spec_affinity: Mapping[str, Any] | None = None, name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause"}]}
    if node_name:
        spec["nodeName"] = node_name
    if spec_affinity:
        spec["affinity"] = dict(spec_affinity)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name or f"pod-{next(_names)}", "namespace": namespace, "labels": dict(labels or {})},
            "spec": spec}


def knode(name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels)},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def setup(pods: Sequence[dict[str, Any]], nodes: Sequence[dict[str, Any]], args: Mapping[str, Any] | None = None,
          namespaces: Mapping[str, Mapping[str, str]] | None = None) -> tuple[InterPodAffinity, dict[str, NodeInfo]]:
    """The plugin over a snapshot of `nodes` running `pods` (plugintesting.SetupPluginWithInformers)."""
    snapshot = cluster(*nodes, *pods).snapshot() if nodes or pods else Snapshot(())
    view = snapshot.update_view()
    handle = SchedulerHandle(snapshot)
    ctx = PluginContext("InterPodAffinity", dict(args or {}), handle, Framework("test", handle))
    return InterPodAffinity(ctx, namespaces=namespaces), {info.name: info for info in view.node_infos}


def filter_statuses(plugin: InterPodAffinity, incoming: dict[str, Any], nodes: Mapping[str, NodeInfo],
                    ) -> tuple[Status, list[Status]]:
    state = CycleState()
    pre = plugin.pre_filter(state, incoming).status
    if not pre.ok:
        return pre, []
    statuses = plugin.filter_nodes(state, incoming, list(nodes.values()))
    return pre, [statuses[name] for name in nodes]


def scores(plugin: InterPodAffinity, incoming: dict[str, Any], nodes: Mapping[str, NodeInfo],
           ) -> tuple[Status, list[int]]:
    state = CycleState()
    status = plugin.pre_score(state, incoming, list(nodes.values()))
    if not status.ok:
        return status, []
    result = plugin.score_nodes(state, incoming, list(nodes.values()))
    assert result.status.ok
    normalized = plugin.normalize_score(state, incoming, result.scores)
    assert normalized.status.ok
    return status, [score for _name, score in normalized.scores]


AFFINITY_FAILED = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_AFFINITY)
ANTI_FAILED = (Code.UNSCHEDULABLE, ERR_REASON_ANTI_AFFINITY)
EXISTING_FAILED = (Code.UNSCHEDULABLE, ERR_REASON_EXISTING_ANTI_AFFINITY)
PASS = (Code.SUCCESS, "")


def shown(statuses: Sequence[Status]) -> list[tuple[Code, str]]:
    return [(s.code, s.reason) for s in statuses]


# --- filtering_test.go: TestRequiredAffinitySingleNode ----------------------------------

POD_LABEL = {"service": "securityscan"}
POD_LABEL2 = {"security": "S1"}
NODE1 = knode("node1", {"region": "r1", "zone": "z11"})


def existing_scan_pod() -> dict[str, Any]:
    return kpod(POD_LABEL, "node1")


SINGLE_NODE_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], Any]] = [
    ("A pod that has no required pod affinity scheduling rules can schedule onto a node with no existing pods",
     kpod(), [], Code.SKIP),
    ("satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that matches "
     "the existing pod",
     kpod(POD_LABEL2, spec_affinity=affinity([term("service", "In", ["securityscan", "value2"], "region")])),
     [existing_scan_pod()], PASS),
    ("satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in operator in "
     "labelSelector that matches the existing pod",
     kpod(POD_LABEL2, spec_affinity=affinity([term("service", "NotIn", ["securityscan3", "value3"], "region")])),
     [existing_scan_pod()], PASS),
    ("Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
     kpod(POD_LABEL2, spec_affinity=affinity([term("service", "In", ["securityscan", "value2"],
                                                   namespaces=["DiffNameSpace"])])),
     [kpod(POD_LABEL, "node1", namespace="ns")], AFFINITY_FAILED),
    ("Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
     kpod(POD_LABEL, spec_affinity=affinity([term("service", "In", ["antivirusscan", "value2"])])),
     [existing_scan_pod()], AFFINITY_FAILED),
    ("satisfies the PodAffinity with different label Operators in multiple RequiredDuringSchedulingIgnoredDuring"
     "Execution ",
     kpod(POD_LABEL2, spec_affinity=affinity([
         {"labelSelector": {"matchExpressions": [{"key": "service", "operator": "Exists"},
                                                 {"key": "wrongkey", "operator": "DoesNotExist"}]},
          "topologyKey": "region"},
         {"labelSelector": {"matchExpressions": [{"key": "service", "operator": "In", "values": ["securityscan"]},
                                                 {"key": "service", "operator": "NotIn", "values": ["WrongValue"]}]},
          "topologyKey": "region"}])),
     [existing_scan_pod()], PASS),
    ("The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the node "
     "because one of the matchExpression item don't match.",
     kpod(POD_LABEL2, spec_affinity=affinity([
         {"labelSelector": {"matchExpressions": [{"key": "service", "operator": "Exists"},
                                                 {"key": "wrongkey", "operator": "DoesNotExist"}]},
          "topologyKey": "region"},
         {"labelSelector": {"matchExpressions": [{"key": "service", "operator": "In", "values": ["securityscan2"]},
                                                 {"key": "service", "operator": "NotIn", "values": ["WrongValue"]}]},
          "topologyKey": "region"}])),
     [existing_scan_pod()], AFFINITY_FAILED),
    ("satisfies the PodAffinity and PodAntiAffinity with the existing pod",
     kpod(POD_LABEL2, spec_affinity=affinity([term("service", "In", ["securityscan", "value2"], "region")],
                                             [term("service", "In", ["antivirusscan", "value2"], "node")])),
     [existing_scan_pod()], PASS),
    ("satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
     kpod(POD_LABEL2, spec_affinity=affinity([term("service", "In", ["securityscan", "value2"], "region")],
                                             [term("service", "In", ["antivirusscan", "value2"], "node")])),
     [kpod(POD_LABEL, "node1", spec_affinity=affinity(anti=[term("service", "In", ["antivirusscan", "value2"],
                                                                  "node")]))], PASS),
    ("satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
     kpod(POD_LABEL2, spec_affinity=affinity([term("service", "In", ["securityscan", "value2"], "region")],
                                             [term("service", "In", ["securityscan", "value2"], "zone")])),
     [existing_scan_pod()], ANTI_FAILED),
    ("satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the existing pod",
     kpod(POD_LABEL, spec_affinity=affinity([term("service", "In", ["securityscan", "value2"], "region")],
                                            [term("service", "In", ["antivirusscan", "value2"], "node")])),
     [kpod(POD_LABEL, "node1", spec_affinity=affinity(anti=[term("service", "In", ["securityscan", "value2"],
                                                                  "zone")]))], EXISTING_FAILED),
    # Go's existing pod runs on "node2", which the snapshot lacks; the loader drops such a pod.
    ("pod matches its own Label in PodAffinity and that matches the existing pod Labels",
     kpod(POD_LABEL, spec_affinity=affinity([term("service", "NotIn", ["securityscan", "value2"], "region")])),
     [kpod({"service": "securityscan"}, "node2")], AFFINITY_FAILED),
    ("verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. doesn't "
     "satisfy PodAntiAffinity symmetry with the existing pod",
     kpod(POD_LABEL),
     [kpod(POD_LABEL, "node1", spec_affinity=affinity(anti=[term("service", "In", ["securityscan", "value2"],
                                                                  "zone")]))], EXISTING_FAILED),
    ("verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. satisfy "
     "PodAntiAffinity symmetry with the existing pod",
     kpod(POD_LABEL),
     [kpod(POD_LABEL, "node1", spec_affinity=affinity(anti=[term("service", "NotIn", ["securityscan", "value2"],
                                                                  "zone")]))], Code.SKIP),
    ("satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with incoming pod",
     kpod(POD_LABEL, spec_affinity=affinity(anti=[term("service", "Exists", topology_key="region"),
                                                  term("security", "Exists", topology_key="region")])),
     [kpod(POD_LABEL2, "node1", spec_affinity=affinity(anti=[term("security", "Exists", topology_key="zone")]))],
     ANTI_FAILED),
    ("PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on AffinityTerms",
     kpod(POD_LABEL, spec_affinity=affinity(anti=[term("service", "Exists", topology_key="zone"),
                                                  term("security", "Exists", topology_key="zone")])),
     [kpod(POD_LABEL2, "node1", spec_affinity=affinity(anti=[term("security", "Exists", topology_key="zone")]))],
     ANTI_FAILED),
    ("PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on AffinityTerms",
     kpod(POD_LABEL2, spec_affinity=affinity(anti=[term("security", "Exists", topology_key="zone")])),
     [kpod(POD_LABEL, "node1", spec_affinity=affinity(anti=[term("service", "Exists", topology_key="zone"),
                                                            term("security", "Exists", topology_key="zone")]))],
     EXISTING_FAILED),
    ("PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on AffinityTerms",
     kpod({"abc": "", "xyz": ""}, spec_affinity=affinity(anti=[term("abc", "Exists", topology_key="zone"),
                                                               term("def", "Exists", topology_key="zone")])),
     [kpod({"def": "", "xyz": ""}, "node1", spec_affinity=affinity(anti=[term("abc", "Exists", topology_key="zone"),
                                                                         term("def", "Exists", topology_key="zone")]))],
     ANTI_FAILED),
    ("PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other on AffinityTerms",
     kpod({"def": "", "xyz": ""}, spec_affinity=affinity(anti=[term("abc", "Exists", topology_key="zone"),
                                                               term("def", "Exists", topology_key="zone")])),
     [kpod({"abc": "", "xyz": ""}, "node1", spec_affinity=affinity(anti=[term("abc", "Exists", topology_key="zone"),
                                                                         term("def", "Exists", topology_key="zone")]))],
     ANTI_FAILED),
    ("PodAffinity fails PreFilter with an invalid affinity label syntax",
     kpod(POD_LABEL, spec_affinity=affinity([term("service", "In", ["{{.bad-value.}}"], "region"),
                                             term("service", "In", ["antivirusscan", "value2"], "node")])),
     [], (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"parsing pod: requiredAffinityTerms: {BAD_VALUE_MESSAGE}")),
    ("PodAntiAffinity fails PreFilter with an invalid antiaffinity label syntax",
     kpod(POD_LABEL, spec_affinity=affinity([term("service", "In", ["foo"], "region"),
                                             term("service", "In", ["{{.bad-value.}}"], "node")])),
     [], (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"parsing pod: requiredAffinityTerms: {BAD_VALUE_MESSAGE}")),
    ("affinity with NamespaceSelector",
     kpod(POD_LABEL2, spec_affinity=affinity([term("service", "In", ["securityscan", "value2"], "region",
                                                   namespaceSelector={"matchExpressions": [
                                                       {"key": "team", "operator": "In", "values": ["team1"]}]})])),
     [kpod(POD_LABEL, "node1", namespace="subteam1.team1")], PASS),
    ("affinity with non-matching NamespaceSelector",
     kpod(POD_LABEL2, spec_affinity=affinity([term("service", "In", ["securityscan", "value2"], "region",
                                                   namespaceSelector={"matchExpressions": [
                                                       {"key": "team", "operator": "In", "values": ["team1"]}]})])),
     [kpod(POD_LABEL, "node1", namespace="subteam1.team2")], AFFINITY_FAILED),
    ("anti-affinity with matching NamespaceSelector",
     kpod(POD_LABEL2, namespace="subteam1.team1", spec_affinity=affinity(anti=[
         term("service", "In", ["securityscan", "value2"], "zone", namespaceSelector={"matchExpressions": [
             {"key": "team", "operator": "In", "values": ["team1"]}]})])),
     [kpod(POD_LABEL, "node1", namespace="subteam2.team1")], ANTI_FAILED),
    ("anti-affinity with matching all NamespaceSelector",
     kpod(POD_LABEL2, namespace="subteam1.team1", spec_affinity=affinity(anti=[
         term("service", "In", ["securityscan", "value2"], "zone", namespaceSelector={})])),
     [kpod(POD_LABEL, "node1", namespace="subteam2.team1")], ANTI_FAILED),
    ("anti-affinity with non-matching NamespaceSelector",
     kpod(POD_LABEL2, namespace="subteam1.team1", spec_affinity=affinity(anti=[
         term("service", "In", ["securityscan", "value2"], "zone", namespaceSelector={"matchExpressions": [
             {"key": "team", "operator": "In", "values": ["team1"]}]})])),
     [kpod(POD_LABEL, "node1", namespace="subteam1.team2")], PASS),
]


@pytest.mark.parametrize(("name", "incoming", "pods", "want"), SINGLE_NODE_CASES,
                         ids=[case[0][:80] for case in SINGLE_NODE_CASES])
def test_required_affinity_single_node(name, incoming, pods, want):
    """filtering_test.go TestRequiredAffinitySingleNode."""
    plugin, nodes = setup(pods, [NODE1], namespaces=TEAM_NAMESPACES)
    pre, statuses = filter_statuses(plugin, incoming, nodes)
    if want == Code.SKIP:
        assert pre.code == Code.SKIP
    elif pre.ok:
        assert shown(statuses) == [want], name
    else:
        assert (pre.code, pre.reason) == want, name


# --- filtering_test.go: TestRequiredAffinityMultipleNodes -------------------------------

RG_CHINA = {"region": "China"}
RG_CHINA_AZ1 = {"region": "China", "az": "az1"}
RG_INDIA = {"region": "India"}


def hosts(*specs: tuple[str, Mapping[str, str]]) -> list[dict[str, Any]]:
    return [knode(name, labels) for name, labels in specs]


def abc_nodes(zones: Sequence[str] = ("z1", "z2")) -> list[dict[str, Any]]:
    return hosts(*((n, {"region": "r1", "zone": z, "hostname": n}) for n, z in zip(("nodeA", "nodeB", "nodeC"), zones,
                                                                                   strict=False)))


MULTI_NODE_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], Any]] = [
    ("A pod can be scheduled onto all the nodes that have the same topology key & label value with one of them has "
     "an existing pod that matches the affinity rules",
     kpod(spec_affinity=affinity([term("foo", "In", ["bar"], "region")])),
     [kpod({"foo": "bar"}, "node1", name="p1")],
     hosts(("node1", RG_CHINA), ("node2", RG_CHINA_AZ1), ("node3", RG_INDIA)), [PASS, PASS, AFFINITY_FAILED]),
    ("The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod of the "
     "collection should not be blocked from being scheduled onto any node, even there's no existing pod that matches "
     "the rule anywhere.",
     kpod({"foo": "bar", "service": "securityscan"}, spec_affinity=affinity([
         term("foo", "In", ["bar"], "zone"), term("service", "In", ["securityscan"], "zone")])),
     [kpod({"foo": "bar"}, "nodeA", name="p1")],
     hosts(("nodeA", {"zone": "az1", "hostname": "h1"}), ("nodeB", {"zone": "az2", "hostname": "h2"})), [PASS, PASS]),
    ("The first pod of the collection can only be scheduled on nodes labelled with the requested topology keys",
     kpod({"foo": "bar", "service": "securityscan"}, spec_affinity=affinity([
         term("foo", "In", ["bar"], "zone"), term("service", "In", ["securityscan"], "zone")])),
     [kpod({"foo": "bar"}, "nodeA", name="p1")],
     hosts(("nodeA", {"zoneLabel": "az1", "hostname": "h1"}), ("nodeB", {"zoneLabel": "az2", "hostname": "h2"})),
     [AFFINITY_FAILED, AFFINITY_FAILED]),
    ("NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod "
     "affinity rule. The pod can not be scheduled onto nodeA and nodeB.",
     kpod(spec_affinity=affinity(anti=[term("foo", "In", ["abc"], "region")])),
     [kpod({"foo": "abc"}, "nodeA")],
     hosts(("nodeA", {"region": "r1", "hostname": "nodeA"}), ("nodeB", {"region": "r1", "hostname": "nodeB"})),
     [ANTI_FAILED, ANTI_FAILED]),
    ("This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches a pod.",
     kpod(spec_affinity=affinity(anti=[term("foo", "In", ["abc"], "region"),
                                       term("service", "In", ["securityscan"], "zone")])),
     [kpod({"foo": "abc", "service": "securityscan"}, "nodeA")],
     hosts(("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
           ("nodeB", {"region": "r1", "zone": "z2", "hostname": "nodeB"})), [ANTI_FAILED, ANTI_FAILED]),
    ("NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod "
     "affinity rule. The pod can not be scheduled onto nodeA and nodeB but can be scheduled onto nodeC",
     kpod(spec_affinity=affinity(anti=[term("foo", "In", ["abc"], "region")])),
     [kpod({"foo": "abc"}, "nodeA")],
     hosts(("nodeA", RG_CHINA), ("nodeB", RG_CHINA_AZ1), ("nodeC", RG_INDIA)), [ANTI_FAILED, ANTI_FAILED, PASS]),
    ("NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod "
     "affinity rule. The pod can not be scheduled onto nodeA, nodeB, but can be scheduled onto nodeC (NodeC has an "
     "existing pod that match the inter pod affinity rule but in different namespace)",
     kpod({"foo": "123"}, namespace="NS1", spec_affinity=affinity(anti=[term("foo", "In", ["bar"], "region")])),
     [kpod({"foo": "bar"}, "nodeA", namespace="NS1"),
      kpod(None, "nodeC", namespace="NS2", spec_affinity=affinity(anti=[term("foo", "In", ["123"], "region")]))],
     hosts(("nodeA", RG_CHINA), ("nodeB", RG_CHINA_AZ1), ("nodeC", RG_INDIA)), [ANTI_FAILED, ANTI_FAILED, PASS]),
    ("Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, labelSelector of the "
     "term is firstly checked, and then topologyKey of the term is also checked",
     kpod({"foo": ""}),
     [kpod(None, "nodeA", spec_affinity=affinity(anti=[term("foo", "Exists", topology_key="invalid-node-label")]))],
     abc_nodes(("z1", "z1")), Code.SKIP),
    ("Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey matches",
     kpod(spec_affinity=affinity(anti=[term("foo", "Exists", topology_key="invalid-node-label")])),
     [kpod({"foo": ""}, "nodeA")], abc_nodes(("z1", "z1")), [PASS, PASS]),
    ("Test existing pod's anti-affinity: incoming pod wouldn't considered as a fit as it violates each existingPod's "
     "terms on all nodes",
     kpod({"foo": "", "bar": ""}),
     [kpod(None, "nodeA", spec_affinity=affinity(anti=[term("foo", "Exists", topology_key="zone")])),
      kpod(None, "nodeA", spec_affinity=affinity(anti=[term("bar", "Exists", topology_key="region")]))],
     abc_nodes(), [EXISTING_FAILED, EXISTING_FAILED]),
    ("Test incoming pod's anti-affinity: incoming pod wouldn't considered as a fit as it at least violates one "
     "anti-affinity rule of existingPod",
     kpod(spec_affinity=affinity(anti=[term("foo", "Exists", topology_key="zone"),
                                       term("bar", "Exists", topology_key="region")])),
     [kpod({"foo": ""}, "nodeA"), kpod({"bar": ""}, "nodeB")], abc_nodes(), [ANTI_FAILED, ANTI_FAILED]),
    ("Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single "
     "term match - case when one term has invalid topologyKey",
     kpod({"foo": "", "bar": ""}),
     [kpod(None, "nodeA", spec_affinity=affinity(anti=[term("foo", "Exists", topology_key="invalid-node-label"),
                                                       term("bar", "Exists", topology_key="zone")]))],
     abc_nodes(), [EXISTING_FAILED, PASS]),
    ("Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single "
     "term match - case when one term has invalid topologyKey",
     kpod(spec_affinity=affinity(anti=[term("foo", "Exists", topology_key="invalid-node-label"),
                                       term("bar", "Exists", topology_key="zone")])),
     [kpod({"foo": "", "bar": ""}, "nodeA", name="podA")], abc_nodes(), [ANTI_FAILED, PASS]),
    ("Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single "
     "term match - case when all terms have valid topologyKey",
     kpod({"foo": "", "bar": ""}),
     [kpod(None, "nodeA", spec_affinity=affinity(anti=[term("foo", "Exists", topology_key="region"),
                                                       term("bar", "Exists", topology_key="zone")]))],
     abc_nodes(), [EXISTING_FAILED, EXISTING_FAILED]),
    ("Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single "
     "term match - case when all terms have valid topologyKey",
     kpod(spec_affinity=affinity(anti=[term("foo", "Exists", topology_key="region"),
                                       term("bar", "Exists", topology_key="zone")])),
     [kpod({"foo": "", "bar": ""}, "nodeA")], abc_nodes(), [ANTI_FAILED, ANTI_FAILED]),
    ("Test existing pod's anti-affinity: existingPod on nodeA and nodeB has at least one anti-affinity term matches "
     "incoming pod, so incoming pod can only be scheduled to nodeC",
     kpod({"foo": "", "bar": ""}),
     [kpod(None, "nodeA", spec_affinity=affinity(anti=[term("foo", "Exists", topology_key="zone"),
                                                       term("labelA", "Exists", topology_key="zone")])),
      kpod(None, "nodeB", spec_affinity=affinity(anti=[term("bar", "Exists", topology_key="zone"),
                                                       term("labelB", "Exists", topology_key="zone")]))],
     abc_nodes(("z1", "z2", "z3")), [EXISTING_FAILED, EXISTING_FAILED, PASS]),
    ("Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys match",
     kpod(spec_affinity=affinity([term("foo", "Exists", topology_key="region"),
                                  term("bar", "Exists", topology_key="zone")])),
     [kpod({"foo": "", "bar": ""}, "nodeA", name="pod1")], abc_nodes(("z1", "z1")), [PASS, PASS]),
    ("Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys "
     "match, and the match logic should be satisfied on the same pod",
     kpod(spec_affinity=affinity([term("foo", "Exists", topology_key="region"),
                                  term("bar", "Exists", topology_key="zone")])),
     [kpod({"foo": ""}, "nodeA", name="pod1"), kpod({"bar": ""}, "nodeB", name="pod2")], abc_nodes(),
     [AFFINITY_FAILED, AFFINITY_FAILED]),
]


@pytest.mark.parametrize(("name", "incoming", "pods", "nodes", "want"), MULTI_NODE_CASES,
                         ids=[case[0][:80] for case in MULTI_NODE_CASES])
def test_required_affinity_multiple_nodes(name, incoming, pods, nodes, want):
    """filtering_test.go TestRequiredAffinityMultipleNodes (Namespace NS1 exists, without labels)."""
    plugin, infos = setup(pods, nodes, namespaces={"NS1": {}})
    pre, statuses = filter_statuses(plugin, incoming, infos)
    if want == Code.SKIP:
        assert pre.code == Code.SKIP, name
    else:
        assert pre.ok, name
        assert shown(statuses) == want, name


def test_pre_filter_disabled():
    """filtering_test.go TestPreFilterDisabled: Filter without PreFilter's state is an Error."""
    plugin, nodes = setup([], [NODE1])
    statuses = plugin.filter_nodes(CycleState(), kpod(), list(nodes.values()))
    assert statuses["node1"].code == Code.ERROR
    assert statuses["node1"].reason == 'error reading "PreFilterInterPodAffinity" from cycleState: not found'


# --- filtering_test.go: TestPreFilterStateAddRemovePod ----------------------------------

ANTI_FOO_BAR = {REQUIRED: [term("foo", "In", ["bar"], "region")]}
ANTI_COMPLEX = {REQUIRED: [term("foo", "In", ["bar", "buzz"], "region"),
                           term("service", "NotIn", ["bar", "security", "test"], "zone")]}
AFFINITY_COMPLEX = {REQUIRED: [term("foo", "In", ["bar", "buzz"], "region"),
                               term("service", "NotIn", ["bar", "security", "test"], "zone")]}
ADD_REMOVE_NODES = hosts(("nodeA", {"region": "r1", "zone": "z11"}), ("nodeB", {"region": "r1", "zone": "z12"}),
                         ("nodeC", {"region": "r2", "zone": "z21"}))
SELECTOR1 = {"foo": "bar"}
ADD_REMOVE_CASES = [
    ("preFilterState anti-affinity terms are updated correctly after adding and removing a pod",
     kpod(SELECTOR1, name="pending", spec_affinity={"podAntiAffinity": ANTI_FOO_BAR}),
     [kpod(SELECTOR1, "nodeA", name="p1"),
      kpod(None, "nodeC", name="p2", spec_affinity={"podAntiAffinity": ANTI_FOO_BAR})],
     kpod(SELECTOR1, "nodeB", name="addedPod", spec_affinity={"podAntiAffinity": ANTI_FOO_BAR}),
     {("region", "r1"): 2}, {}),
    ("preFilterState anti-affinity terms are updated correctly after adding and removing a pod",
     kpod(SELECTOR1, name="pending", spec_affinity={"podAntiAffinity": ANTI_COMPLEX}),
     [kpod(SELECTOR1, "nodeA", name="p1"),
      kpod(None, "nodeC", name="p2", spec_affinity={"podAntiAffinity": ANTI_FOO_BAR})],
     kpod(SELECTOR1, "nodeA", name="addedPod", spec_affinity={"podAntiAffinity": ANTI_COMPLEX}),
     {("region", "r1"): 2, ("zone", "z11"): 2, ("zone", "z21"): 1}, {}),
    ("preFilterState matching pod affinity and anti-affinity are updated correctly after adding and removing a pod",
     kpod(SELECTOR1, name="pending", spec_affinity={"podAffinity": AFFINITY_COMPLEX}),
     [kpod(SELECTOR1, "nodeA", name="p1"),
      kpod(None, "nodeC", name="p2", spec_affinity={"podAntiAffinity": ANTI_FOO_BAR, "podAffinity": AFFINITY_COMPLEX})],
     kpod(SELECTOR1, "nodeA", name="addedPod", spec_affinity={"podAntiAffinity": ANTI_COMPLEX}),
     {}, {("region", "r1"): 2, ("zone", "z11"): 2}),
]


def _counts(s: PreFilterState) -> tuple[dict[Any, int], ...]:
    return s.existing_anti_affinity_counts, s.affinity_counts, s.anti_affinity_counts


@pytest.mark.parametrize(("name", "pending", "existing", "added", "want_anti", "want_affinity"), ADD_REMOVE_CASES)
def test_pre_filter_state_add_remove_pod(name, pending, existing, added, want_anti, want_affinity):
    """filtering_test.go TestPreFilterStateAddRemovePod: AddPod gives the state PreFilter
    gives with the pod there; RemovePod gives back the state without it."""

    def state_of(pods: list[dict[str, Any]]) -> tuple[InterPodAffinity, CycleState, dict[str, NodeInfo]]:
        plugin, nodes = setup(pods, ADD_REMOVE_NODES)
        cycle = CycleState()
        assert plugin.pre_filter(cycle, pending).status.ok
        return plugin, cycle, nodes

    _, all_pods_cycle, _ = state_of([*existing, added])
    plugin, cycle, nodes = state_of(existing)
    original = cycle.read(PRE_FILTER_STATE_KEY).clone()
    node_info = nodes[added["spec"]["nodeName"]]
    assert plugin.add_pod(cycle, pending, added, node_info) is SUCCESS
    state = cycle.read(PRE_FILTER_STATE_KEY)
    assert state.anti_affinity_counts == want_anti
    assert state.affinity_counts == want_affinity
    assert _counts(state) == _counts(all_pods_cycle.read(PRE_FILTER_STATE_KEY))
    assert plugin.remove_pod(cycle, pending, added, node_info) is SUCCESS
    assert _counts(cycle.read(PRE_FILTER_STATE_KEY)) == _counts(original)


def test_pre_filter_state_clone():
    """filtering_test.go TestPreFilterStateClone: a copy, equal, whose counts are its own."""
    source = PreFilterState(parse_pod_affinity(kpod()), "default", {}, {},
                            {("name", "node1"): 1, ("name", "node2"): 1},
                            {("name", "nodeA"): 1, ("name", "nodeC"): 2},
                            {("name", "nodeN"): 3, ("name", "nodeM"): 1})
    clone = source.clone()
    assert clone is not source and _counts(clone) == _counts(source)
    clone.affinity_counts[("name", "nodeA")] = 5
    assert source.affinity_counts[("name", "nodeA")] == 1
    state = CycleState()
    state.write(PRE_FILTER_STATE_KEY, source)
    assert state.clone().read(PRE_FILTER_STATE_KEY) is not source  # CycleState.clone uses it


# --- filtering_test.go: TestGetTPMapMatchingIncomingAffinityAntiAffinity ----------------

NODE_A = knode("nodeA", {"hostname": "nodeA"})


def normal_pod(*labels: str) -> dict[str, Any]:
    return kpod(dict.fromkeys(labels, ""), "nodeA", name="normal")


def exists(*keys: str) -> list[dict[str, Any]]:
    return [term(key, "Exists", topology_key="hostname") for key in keys]


INCOMING_COUNT_CASES = [
    ("nil test", [], kpod(name="aaa-normal"), None, None),
    ("incoming pod without affinity/anti-affinity causes a no-op", [normal_pod("aaa")], kpod(name="aaa-normal"),
     None, None),
    ("no pod has label that violates incoming pod's affinity and anti-affinity", [normal_pod("bbb")],
     kpod(spec_affinity=affinity(exists("aaa"), exists("aaa"))), {}, {}),
    ("existing pod matches incoming pod's affinity and anti-affinity - single term case", [normal_pod("aaa")],
     kpod(spec_affinity=affinity(exists("aaa"), exists("aaa"))), {("hostname", "nodeA"): 1},
     {("hostname", "nodeA"): 1}),
    ("existing pod matches incoming pod's affinity and anti-affinity - multiple terms case", [normal_pod("aaa", "bbb")],
     kpod(spec_affinity=affinity(exists("aaa", "bbb"), exists("aaa"))), {("hostname", "nodeA"): 2},
     {("hostname", "nodeA"): 1}),
    ("existing pod not match incoming pod's affinity but matches anti-affinity", [normal_pod("aaa")],
     kpod(spec_affinity=affinity(exists("aaa", "bbb"), exists("aaa", "bbb"))), {}, {("hostname", "nodeA"): 1}),
    ("incoming pod's anti-affinity has more than one term - existing pod violates partial term - case 1",
     [normal_pod("aaa", "bbb")], kpod(spec_affinity=affinity(exists("aaa", "ccc"), exists("aaa", "ccc"))), {},
     {("hostname", "nodeA"): 1}),
    ("incoming pod's anti-affinity has more than one term - existing pod violates partial term - case 2",
     [normal_pod("bbb")], kpod(spec_affinity=affinity(exists("aaa", "bbb"), exists("aaa", "bbb"))), {},
     {("hostname", "nodeA"): 1}),
]


@pytest.mark.parametrize(("name", "existing", "incoming", "want_affinity", "want_anti"), INCOMING_COUNT_CASES)
def test_incoming_affinity_anti_affinity_counts(name, existing, incoming, want_affinity, want_anti):
    """filtering_test.go TestGetTPMapMatchingIncomingAffinityAntiAffinity, through PreFilter's
    state (a pod without terms: no counts, so PreFilter says Skip)."""
    plugin, _nodes = setup(existing, [NODE_A])
    cycle = CycleState()
    status = plugin.pre_filter(cycle, incoming).status
    if want_affinity is None:
        assert status.code == Code.SKIP
        return
    state = cycle.read(PRE_FILTER_STATE_KEY)
    assert (state.affinity_counts, state.anti_affinity_counts) == (want_affinity, want_anti)


# --- scoring_test.go: TestPreferredAffinity ----------------------------------------------

S1, S2 = {"security": "S1"}, {"security": "S2"}
AZ1, AZ2 = {"az": "az1"}, {"az": "az2"}


def preferred_term(weight: int, key: str, op: str, values: Sequence[str], topology_key: str,
                   **extra: Any) -> dict[str, Any]:
    return weighted(weight, term(key, op, values, topology_key, **extra))


STAY_WITH_S1_IN_REGION = affinity(preferred=[preferred_term(5, "security", "In", ["S1"], "region")])
STAY_WITH_S2_IN_REGION = affinity(preferred=[preferred_term(6, "security", "In", ["S2"], "region")])
AFFINITY3 = affinity(preferred=[
    weighted(8, {"labelSelector": {"matchExpressions": [
        {"key": "security", "operator": "NotIn", "values": ["S1"]},
        {"key": "security", "operator": "In", "values": ["S2"]}]}, "topologyKey": "region"}),
    weighted(2, {"labelSelector": {"matchExpressions": [
        {"key": "security", "operator": "Exists"}, {"key": "wrongkey", "operator": "DoesNotExist"}]},
        "topologyKey": "region"})])
HARD_AFFINITY = affinity([
    term("security", "In", ["S1", "value2"], "region"),
    {"labelSelector": {"matchExpressions": [{"key": "security", "operator": "Exists"},
                                            {"key": "wrongkey", "operator": "DoesNotExist"}]},
     "topologyKey": "region"}])
AWAY_FROM_S1_IN_AZ = affinity(preferred_anti=[preferred_term(5, "security", "In", ["S1"], "az")])
AWAY_FROM_S2_IN_AZ = affinity(preferred_anti=[preferred_term(5, "security", "In", ["S2"], "az")])
STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ = affinity(
    preferred=[preferred_term(8, "security", "In", ["S1"], "region")],
    preferred_anti=[preferred_term(5, "security", "In", ["S2"], "az")])
TEAM1_SELECTOR = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]}
AFFINITY_NAMESPACE_SELECTOR = affinity(preferred=[preferred_term(
    5, "security", "In", ["S1"], "region", namespaces=["subteam2.team2"], namespaceSelector=TEAM1_SELECTOR)])
ANTI_AFFINITY_NAMESPACE_SELECTOR = affinity(preferred_anti=[preferred_term(
    5, "security", "In", ["S1"], "region", namespaces=["subteam2.team2"], namespaceSelector=TEAM1_SELECTOR)])
INVALID_AFFINITY_LABELS = affinity(preferred=[preferred_term(8, "security", "In", ["{{.bad-value.}}"], "region")])
INVALID_ANTI_AFFINITY_LABELS = affinity(preferred_anti=[preferred_term(5, "security", "In", ["{{.bad-value.}}"],
                                                                       "az")])


def on(node_name: str, labels: Mapping[str, str] | None = None, spec_affinity: Mapping[str, Any] | None = None,
       namespace: str = "default") -> dict[str, Any]:
    return kpod(labels, node_name, namespace, spec_affinity)


def nodes_of(*labels: Mapping[str, str]) -> list[dict[str, Any]]:
    return [knode(f"node{i}", node_labels) for i, node_labels in enumerate(labels, 1)]


PREFERRED_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], Any, bool]] = [
    ("all nodes are same priority as Affinity is nil", kpod(S1), [], nodes_of(RG_CHINA, RG_INDIA, AZ1),
     Code.SKIP, False),
    ("Affinity: pod that matches topology key & pods in nodes will get high score comparing to otherswhich doesn't "
     "match either pods in nodes or in topology key",
     kpod(S1, spec_affinity=STAY_WITH_S1_IN_REGION), [on("node1", S1), on("node2", S2), on("node3", S1)],
     nodes_of(RG_CHINA, RG_INDIA, AZ1), [100, 0, 0], False),
    ("All the nodes that have the same topology key & label value with one of them has an existing pod that match "
     "the affinity rules, have the same score",
     kpod(spec_affinity=STAY_WITH_S1_IN_REGION), [on("node1", S1)], nodes_of(RG_CHINA, RG_CHINA_AZ1, RG_INDIA),
     [100, 100, 0], False),
    ("Affinity: nodes in one region has more matching pods comparing to other region, so the region which has more "
     "matches will get high score",
     kpod(S1, spec_affinity=STAY_WITH_S2_IN_REGION),
     [on("node1", S2), on("node1", S2), on("node2", S2), on("node3", S2), on("node4", S2), on("node5", S2)],
     nodes_of(RG_CHINA, RG_INDIA, RG_CHINA, RG_CHINA, RG_INDIA), [100, 0, 100, 100, 0], False),
    ("Affinity: different Label operators and values for pod affinity scheduling preference, including some match "
     "failures ",
     kpod(S1, spec_affinity=AFFINITY3), [on("node1", S1), on("node2", S2), on("node3", S1)],
     nodes_of(RG_CHINA, RG_INDIA, AZ1), [20, 100, 0], False),
    ("Affinity symmetry: considered only the preferredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
     kpod(S2), [on("node1", S1, STAY_WITH_S1_IN_REGION), on("node2", S2, STAY_WITH_S2_IN_REGION)],
     nodes_of(RG_CHINA, RG_INDIA, AZ1), [0, 100, 0], False),
    ("Affinity symmetry with namespace selector",
     kpod(S1, namespace="subteam1.team1"),
     [on("node1", S1, AFFINITY_NAMESPACE_SELECTOR), on("node2", S2, STAY_WITH_S2_IN_REGION)],
     nodes_of(RG_CHINA, RG_INDIA, AZ1), [100, 0, 0], False),
    ("AntiAffinity symmetry with namespace selector",
     kpod(S1, namespace="subteam1.team1"),
     [on("node1", S1, ANTI_AFFINITY_NAMESPACE_SELECTOR), on("node2", S2, STAY_WITH_S2_IN_REGION)],
     nodes_of(RG_CHINA, RG_INDIA, AZ1), [0, 100, 100], False),
    ("Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
     kpod(S1), [on("node1", S1, HARD_AFFINITY), on("node2", S2, HARD_AFFINITY)],
     nodes_of(RG_CHINA, RG_INDIA, AZ1), [100, 100, 0], False),
    ("Anti Affinity: pod that does not match existing pods in node will get high score ",
     kpod(S1, spec_affinity=AWAY_FROM_S1_IN_AZ), [on("node1", S1), on("node2", S2)], nodes_of(AZ1, RG_CHINA),
     [0, 100], False),
    ("Anti Affinity: pod that does not match topology key & match the pods in nodes will get higher score comparing "
     "to others ",
     kpod(S1, spec_affinity=AWAY_FROM_S1_IN_AZ), [on("node1", S1), on("node2", S1)], nodes_of(AZ1, RG_CHINA),
     [0, 100], False),
    ("Anti Affinity: one node has more matching pods comparing to other node, so the node which has more unmatches "
     "will get high score",
     kpod(S1, spec_affinity=AWAY_FROM_S1_IN_AZ), [on("node1", S1), on("node1", S1), on("node2", S2)],
     nodes_of(AZ1, RG_INDIA), [0, 100], False),
    ("Anti Affinity symmetry: the existing pods in node which has anti affinity match will get high score",
     kpod(S2), [on("node1", S1, AWAY_FROM_S2_IN_AZ), on("node2", S2, AWAY_FROM_S1_IN_AZ)], nodes_of(AZ1, AZ2),
     [0, 100], False),
    ("Affinity and Anti Affinity: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod "
     "affinity & anti affinity",
     kpod(S1, spec_affinity=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ), [on("node1", S1), on("node2", S1)],
     nodes_of(RG_CHINA, AZ1), [100, 0], False),
    ("Affinity and Anti Affinity: considering both affinity and anti-affinity, the pod to schedule and existing pods "
     "have the same labels",
     kpod(S1, spec_affinity=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
     [on("node1", S1), on("node1", S1), on("node2", S1), on("node3", S1), on("node3", S1), on("node4", S1),
      on("node5", S1)],
     nodes_of(RG_CHINA_AZ1, RG_INDIA, RG_CHINA, RG_CHINA, RG_INDIA), [100, 0, 100, 100, 0], False),
    ("Affinity and Anti Affinity and symmetry: considered only preferredDuringSchedulingIgnoredDuringExecution in "
     "both pod affinity & anti affinity & symmetry",
     kpod(S1, spec_affinity=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
     [on("node1", S1), on("node2", S2), on("node3", None, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
      on("node4", None, AWAY_FROM_S1_IN_AZ)],
     nodes_of(RG_CHINA, AZ1, RG_INDIA, AZ2), [100, 0, 100, 0], False),
    ("Avoid panic when partial nodes in a topology don't have pods with affinity",
     kpod(S1), [on("node1", S1), on("node2", None, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ)],
     nodes_of(RG_CHINA, RG_CHINA), [0, 0], False),
    ("invalid Affinity fails PreScore", kpod(spec_affinity=INVALID_AFFINITY_LABELS), [], nodes_of(RG_CHINA, RG_CHINA),
     (Code.ERROR, 'Invalid value: "{{.bad-value.}}"'), False),
    ("invalid AntiAffinity fails PreScore", kpod(spec_affinity=INVALID_ANTI_AFFINITY_LABELS), [],
     nodes_of(RG_CHINA, RG_CHINA), (Code.ERROR, 'Invalid value: "{{.bad-value.}}"'), False),
    ("Affinity with pods matching NamespaceSelector",
     kpod(S1, namespace="subteam1.team1", spec_affinity=AFFINITY_NAMESPACE_SELECTOR),
     [on("node1", S1, namespace="subteam1.team1"), on("node1", S1, namespace="subteam1.team1"),
      on("node1", S1, namespace="subteam1.team2"), on("node2", S1, namespace="subteam2.team1")],
     nodes_of(RG_CHINA, RG_INDIA), [100, 0], False),
    ("Affinity with pods matching both NamespaceSelector and Namespaces fields",
     kpod(S1, namespace="subteam1.team1", spec_affinity=AFFINITY_NAMESPACE_SELECTOR),
     [on("node1", S1, namespace="subteam1.team1"), on("node1", S1, namespace="subteam1.team1"),
      on("node1", S1, namespace="subteam2.team2"), on("node2", S1, namespace="subteam2.team1")],
     nodes_of(RG_CHINA, RG_INDIA), [100, 0], False),
    ("Affinity with pods matching NamespaceSelector (anti-affinity)",
     kpod(S1, namespace="subteam1.team1", spec_affinity=ANTI_AFFINITY_NAMESPACE_SELECTOR),
     [on("node1", S1, namespace="subteam1.team1"), on("node1", S1, namespace="subteam1.team1"),
      on("node1", S1, namespace="subteam1.team2"), on("node2", S1, namespace="subteam2.team1")],
     nodes_of(RG_CHINA, RG_INDIA), [0, 100], False),
    ("Affinity with pods matching both NamespaceSelector and Namespaces fields (anti-affinity)",
     kpod(S1, namespace="subteam1.team1", spec_affinity=ANTI_AFFINITY_NAMESPACE_SELECTOR),
     [on("node1", S1, namespace="subteam1.team1"), on("node1", S1, namespace="subteam1.team1"),
      on("node1", S1, namespace="subteam2.team2"), on("node2", S1, namespace="subteam2.team1")],
     nodes_of(RG_CHINA, RG_INDIA), [0, 100], False),
    ("Ignore preferred terms of existing pods",
     kpod(S2), [on("node1", S1, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ), on("node2", S2, STAY_WITH_S2_IN_REGION)],
     nodes_of(RG_CHINA, RG_INDIA), Code.SKIP, True),
    ("Do not ignore preferred terms of existing pods",
     kpod(S2), [on("node1", S1, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ), on("node2", S2, STAY_WITH_S2_IN_REGION)],
     nodes_of(RG_CHINA, RG_INDIA), [0, 100], False),
    ("No nodes to score", kpod(S2), [], [], Code.SKIP, False),
]


@pytest.mark.parametrize(("name", "incoming", "pods", "nodes", "want", "ignore"), PREFERRED_CASES,
                         ids=[case[0][:80] for case in PREFERRED_CASES])
def test_preferred_affinity(name, incoming, pods, nodes, want, ignore):
    """scoring_test.go TestPreferredAffinity (hardPodAffinityWeight 1). Go names two
    anti-affinity cases like the affinity ones before them; "(anti-affinity)" tells them apart."""
    plugin, infos = setup(pods, nodes, {"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": ignore},
                          namespaces=TEAM_NAMESPACES)
    status, got = scores(plugin, incoming, infos)
    if want == Code.SKIP:
        assert status.code == Code.SKIP, name
    elif isinstance(want, tuple):
        assert status.code == want[0] and want[1] in status.reason, name
    else:
        assert status.ok, name
        assert got == want, name


HARD_POD_AFFINITY = affinity([term("service", "In", ["S1"], "region", namespaces=["default", "subteam2.team2"],
                                   namespaceSelector=TEAM1_SELECTOR)])
HARD_WEIGHT_CASES = [
    ("with default weight", "default", 1, [100, 100, 0]),
    ("with zero weight", "default", 0, Code.SKIP),
    ("with no matching namespace", "subteam1.team2", 1, Code.SKIP),
    ("with matching NamespaceSelector", "subteam1.team1", 1, [100, 100, 0]),
    ("with matching Namespaces", "subteam2.team2", 1, [100, 100, 0]),
]


@pytest.mark.parametrize(("name", "namespace", "weight", "want"), HARD_WEIGHT_CASES)
def test_preferred_affinity_with_hard_pod_affinity_symmetric_weight(name, namespace, weight, want):
    """scoring_test.go TestPreferredAffinityWithHardPodAffinitySymmetricWeight."""
    pods = [on("node1", None, HARD_POD_AFFINITY), on("node2", None, HARD_POD_AFFINITY)]
    plugin, infos = setup(pods, nodes_of(RG_CHINA, RG_INDIA, AZ1), {"hardPodAffinityWeight": weight},
                          namespaces=TEAM_NAMESPACES)
    status, got = scores(plugin, kpod({"service": "S1"}, namespace=namespace), infos)
    if want == Code.SKIP:
        assert status.code == Code.SKIP, name
    else:
        assert status.ok and got == want, name


# --- what kube-scheduler's tests leave implicit -------------------------------------------

def test_normalize_spreads_negative_sums_over_0_to_100():
    """NormalizeScore maps min..max to 0..100, truncating, whatever the sign of the sums."""
    plugin, _ = setup([], [NODE1])
    state = CycleState()
    state.write("PreScoreInterPodAffinity", {"zone": {"a": -5}})
    result = plugin.normalize_score(state, kpod(), [NodeScore("a", -5), NodeScore("b", 0), NodeScore("c", -2),
                                                    NodeScore("d", -4)])
    assert [s for _n, s in result.scores] == [0, 100, 60, 20]
    equal = plugin.normalize_score(state, kpod(), [NodeScore("a", 7), NodeScore("b", 7)])
    assert [s for _n, s in equal.scores] == [0, 0]


def test_label_selector_semantics_and_errors():
    assert not LabelSelector.parse(None).matches({})  # nil: nothing
    assert LabelSelector.parse({}).matches({"a": "b"})  # empty: everything
    selector = LabelSelector.parse({"matchLabels": {"app": "web"},
                                    "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]})
    assert selector.matches({"app": "web"}) and not selector.matches({"app": "web", "tier": "db"})
    with pytest.raises(SelectorError, match='"Gt" is not a valid label selector operator'):
        LabelSelector.parse({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})
    with pytest.raises(SelectorError, match="values set can't be empty"):
        LabelSelector.parse({"matchExpressions": [{"key": "a", "operator": "In"}]})


def test_match_label_keys_are_merged_as_the_api_server_does():
    """matchLabelKeys (In) and mismatchLabelKeys (NotIn) with the pod's own values (KEP-3633:
    beta and on by default since 1.31, GA in 1.33); kube-apiserver merges them at creation."""
    raw = term("app", "Exists", topology_key="zone", matchLabelKeys=["rev"], mismatchLabelKeys=["tenant"])
    terms = parse_pod_affinity(kpod({"app": "x", "rev": "2", "tenant": "t1"}, spec_affinity=affinity([raw])))
    (parsed,) = terms.required_affinity
    assert parsed.matches("default", {"app": "y", "rev": "2", "tenant": "t2"}, {})
    assert not parsed.matches("default", {"app": "y", "rev": "1", "tenant": "t2"}, {})
    assert not parsed.matches("default", {"app": "y", "rev": "2", "tenant": "t1"}, {})


def test_namespace_selector_without_namespace_objects_knows_only_the_name_label():
    """A snapshot has no Namespace objects: each namespace carries kubernetes.io/metadata.name."""
    by_name = {"matchLabels": {"kubernetes.io/metadata.name": "other"}}
    incoming = kpod({"app": "web"}, spec_affinity=affinity(anti=[term("app", "In", ["web"], "zone",
                                                                      namespaceSelector=by_name)]))
    nodes = [knode("n1", {"zone": "a"}), knode("n2", {"zone": "b"})]
    plugin, infos = setup([kpod({"app": "web"}, "n1", namespace="other")], nodes)
    _pre, statuses = filter_statuses(plugin, incoming, infos)
    assert shown(statuses) == [ANTI_FAILED, PASS]
    by_team = {"matchLabels": {"team": "a"}}
    labelled = kpod(spec_affinity=affinity(anti=[term("app", "In", ["web"], "zone", namespaceSelector=by_team)]))
    assert [gap.kind for gap in pod_unmodelled(labelled)] == [NAMESPACE_LABELS_KIND]
    assert pod_unmodelled(incoming) == []


def test_the_no_affinity_path_skips_prefilter_and_prescore():
    plugin, infos = setup([kpod({"app": "x"}, "node1")], [NODE1])
    state = CycleState()
    assert plugin.pre_filter(state, kpod({"app": "x"})).status.code == Code.SKIP
    assert plugin.pre_score(state, kpod({"app": "x"}), list(infos.values())).code == Code.SKIP


def test_args_are_checked():
    handle = SchedulerHandle(cluster(NODE1).snapshot())
    ctx = PluginContext("InterPodAffinity", {"hardPodAffinityWeight": 101}, handle, Framework("t", handle), "cfg")
    with pytest.raises(UserError, match=r"hardPodAffinityWeight: not in valid range \[0-100\]"):
        InterPodAffinity(ctx)
    ctx.args = {"hardPodAffinityWeigth": 1}
    with pytest.raises(UserError, match="unknown InterPodAffinity arg"):
        InterPodAffinity(ctx)


def test_registered_in_the_default_profile_after_pod_topology_spread():
    names = [name for name, _ in DEFAULT_MULTIPOINT]
    assert dict(DEFAULT_MULTIPOINT)["InterPodAffinity"] == 2
    assert names.index("PodTopologySpread") < names.index("InterPodAffinity") < names.index("DefaultPreemption")
    assert "InterPodAffinity" in IN_TREE and "InterPodAffinity" not in UPSTREAM_ONLY


def test_hard_pod_affinity_weight_is_read_from_the_profiles_plugin_config(compiler):
    """hardPodAffinityWeight 0 in pluginConfig: an existing pod's required affinity no
    longer draws the pod (PreScore finds nothing to score and says Skip)."""
    drawn = affinity([term("app", "In", ["web"], "kubernetes.io/hostname")])
    cl = cluster(node("n1"), node("n2"), pod("anchor", node_name="n1", affinity=drawn),
                 pod("web", labels={"app": "web"}))
    pulled = run(config(), cl, compiler).outcome("default/web")
    assert pulled.node == "n1" and pulled.scores["InterPodAffinity"] == 200
    cfg = config(plugin_config=[{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 0}}])
    assert "InterPodAffinity" not in run(cfg, cl, compiler).outcome("default/web").scores


# --- through the scheduler ------------------------------------------------------------------

def test_four_pods_with_required_anti_affinity_land_on_four_nodes_of_fifty(compiler):
    """The acceptance check: 50 nodes, 4 pods that repel each other on kubernetes.io/hostname."""
    anti = affinity(anti=[term("app", "In", ["db"], "kubernetes.io/hostname")])
    nodes = [node(f"node-{i:02d}", labels={"topology.kubernetes.io/zone": f"zone-{i % 3}"}) for i in range(50)]
    pods = [pod(f"db-{i}", labels={"app": "db"}, affinity=anti) for i in range(4)]
    report = simulate(default_config(), cluster(*nodes, *pods), compiler=compiler)
    placed = [report.outcome(f"default/db-{i}") for i in range(4)]
    assert all(o.status == PodStatus.SCHEDULED for o in placed), [o.reason for o in placed]
    assert len({o.node for o in placed}) == 4


def test_a_fifth_pod_that_repels_finds_no_node_and_says_why(compiler):
    anti = affinity(anti=[term("app", "In", ["db"], "kubernetes.io/hostname")])
    nodes = [node(f"n{i}") for i in range(4)]
    pods = [pod(f"db-{i}", labels={"app": "db"}, affinity=anti) for i in range(5)]
    report = run(config(), cluster(*nodes, *pods), compiler)
    assert len({report.outcome(f"default/db-{i}").node for i in range(4)}) == 4
    last = report.outcome("default/db-4")
    assert last.status == PodStatus.UNSCHEDULABLE
    assert ("0/4 nodes are available: 4 node(s) didn't match pod anti-affinity rules (InterPodAffinity)."
            in last.reason)


def test_the_first_pod_of_its_kind_schedules_and_the_rest_follow_it(compiler):
    together = affinity([term("app", "In", ["cache"], "topology.kubernetes.io/zone")])
    nodes = [node(f"n{i}", labels={"topology.kubernetes.io/zone": f"z{i % 3}"}) for i in range(6)]
    pods = [pod(f"cache-{i}", labels={"app": "cache"}, affinity=together) for i in range(3)]
    report = run(config(), cluster(*nodes, *pods), compiler)
    zones = {int(report.outcome(f"default/cache-{i}").node[1:]) % 3 for i in range(3)}
    assert len(zones) == 1


def test_preemption_frees_a_node_from_an_anti_affinity_conflict(compiler):
    """A victim whose removal ends the anti-affinity conflict makes the node feasible
    (DefaultPreemption's dry run calls RemovePod/AddPod, which update PreFilter's counts)."""
    anti = affinity(anti=[term("app", "In", ["batch"], "kubernetes.io/hostname")])
    cl = cluster(node("n1"), node("n2"),
                 pod("batch-1", labels={"app": "batch"}, node_name="n1", priority=0),
                 pod("batch-2", labels={"app": "batch"}, node_name="n2", priority=10),
                 pod("urgent", priority=100, affinity=anti))
    report = run(config(), cl, compiler)
    outcome = report.outcome("default/urgent")
    assert outcome.status == PodStatus.SCHEDULED and outcome.node == "n1", outcome.reason
    assert report.preemptions == [Preemption("default/batch-1", "default/urgent", "n1")]


def test_preemption_evicts_an_existing_pod_whose_anti_affinity_rejects_the_pod(compiler):
    repels_web = affinity(anti=[term("app", "In", ["web"], "kubernetes.io/hostname")])
    cl = cluster(node("n1"), pod("loner", node_name="n1", priority=0, affinity=repels_web),
                 pod("web", labels={"app": "web"}, priority=100))
    report = run(config(), cl, compiler)
    assert report.outcome("default/web").node == "n1"
    assert report.preemptions == [Preemption("default/loner", "default/web", "n1")]


def test_remove_pod_then_add_pod_during_the_dry_run_restores_the_conflict():
    """What DefaultPreemption.select_victims does on a node, step by step."""
    anti = affinity(anti=[term("app", "In", ["batch"], "kubernetes.io/hostname")])
    victim = kpod({"app": "batch"}, "n1")
    plugin, infos = setup([victim], [knode("n1", {"kubernetes.io/hostname": "n1"})])
    incoming = kpod(spec_affinity=anti)
    state = CycleState()
    assert plugin.pre_filter(state, incoming).status.ok
    victim_info = next(p for p in infos["n1"].pods if p.key.endswith(victim["metadata"]["name"]))
    assert plugin.filter_nodes(state, incoming, [infos["n1"]])["n1"].reason == ERR_REASON_ANTI_AFFINITY
    dry_run = state.clone()
    without = infos["n1"].without_pod(victim_info.uid)
    assert plugin.remove_pod(dry_run, incoming, victim_info.pod, without).ok
    assert plugin.filter_nodes(dry_run, incoming, [without])["n1"] is SUCCESS
    assert plugin.filter_nodes(state, incoming, [infos["n1"]])["n1"].code == Code.UNSCHEDULABLE  # not shared
    with_again = without.with_pod(PodInfo.of(victim_info.pod))
    assert plugin.add_pod(dry_run, incoming, victim_info.pod, with_again).ok
    assert plugin.filter_nodes(dry_run, incoming, [with_again])["n1"].code == Code.UNSCHEDULABLE


def test_nodes_and_views_list_the_pods_with_affinity():
    anti = affinity(anti=[term("app", "In", ["x"], "zone")])
    preferred = affinity(preferred=[preferred_term(1, "app", "In", ["x"], "zone")])
    snapshot = cluster(knode("a", {}), knode("b", {}), kpod(None, "a", spec_affinity=anti),
                       kpod(None, "b", spec_affinity=preferred), kpod(None, "b")).snapshot()
    view = snapshot.update_view()
    assert [n.name for n in view.nodes_with_pod_affinity()] == ["a", "b"]
    assert [n.name for n in view.nodes_with_required_anti_affinity()] == ["a"]
    b = view.get("b")
    assert b is not None and len(b.pods_with_affinity) == 1 and not b.pods_with_required_anti_affinity
    grown = b.with_pod(PodInfo.of(kpod(None, "b", spec_affinity=anti)))
    assert len(grown.pods_with_affinity) == 2 and len(grown.pods_with_required_anti_affinity) == 1
    assert not grown.without_pod(grown.pods[-1].uid).pods_with_required_anti_affinity


# --- the indexes kept across cycles ---------------------------------------------------------

def test_indexes_kept_across_cycles_match_a_fresh_plugin() -> None:
    """PreFilter's distinct anti-affinity terms and PreScore's scoring terms, kept across
    cycles and updated per changed node, give what a plugin that reads every pod afresh
    gives, as pods are assumed and evicted (replicas sharing a term, terms on hostname and
    zone, required affinity that scores with hardPodAffinityWeight)."""
    nodes = [knode(f"n{i}", {"kubernetes.io/hostname": f"n{i}", "zone": f"z{i % 3}"}) for i in range(6)]
    snapshot = cluster(*nodes).snapshot()
    snapshot.update_view()
    handle = SchedulerHandle(snapshot)

    def plugin() -> InterPodAffinity:
        return InterPodAffinity(PluginContext("InterPodAffinity", {}, handle, Framework("test", handle)))

    kept = plugin()
    anti_host = affinity(anti=[term("app", "In", ["a"], "kubernetes.io/hostname")])
    anti_zone = affinity(anti=[term("app", "In", ["b"], "zone")])
    scoring = affinity(required=[term("app", "In", ["a"], "zone")],
                       preferred_anti=[weighted(5, term("app", "In", ["plain"], "kubernetes.io/hostname"))])
    placed = [(kpod({"app": "a"}, spec_affinity=anti_host), "n0"), (kpod({"app": "a"}, spec_affinity=anti_host), "n1"),
              (kpod({"app": "b"}, spec_affinity=anti_zone), "n2"), (kpod({"app": "c"}, spec_affinity=scoring), "n3"),
              (kpod({"app": "a"}, spec_affinity=anti_host), "n3"), (kpod({"app": "c"}, spec_affinity=scoring), "n4")]
    incoming = [kpod({"app": "a"}), kpod({"app": "b"}), kpod({"app": "plain"}), kpod({"app": "a"}, namespace="other")]
    uids: list[str] = []

    def check() -> None:
        view = snapshot.update_view()
        infos = {info.name: info for info in view.node_infos}
        fresh = plugin()
        for pod_ in incoming:
            assert shown(filter_statuses(kept, pod_, infos)[1]) == shown(filter_statuses(fresh, pod_, infos)[1])
            assert scores(kept, pod_, infos) == scores(fresh, pod_, infos)

    check()
    for pod_, node_name in placed:
        uids.append(snapshot.assume(PodInfo.of(pod_), node_name).uid)
        check()
    for uid in (uids[1], uids[3], uids[0]):
        assert snapshot.evict(uid) is not None
        check()
