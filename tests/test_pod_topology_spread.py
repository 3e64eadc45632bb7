"""PodTopologySpread: cases ported from kube-scheduler v1.33's podtopologyspread tests,
plus the simulator's own (default constraints from the snapshot's workloads, preemption,
arguments, the fast path).

Each ported case names its source file, test function and case name; nodes, pods and
expected values are kube's (``st.MakePod().Label("foo", "")`` is a pod labelled
``foo: ""``, ``fooSelector`` is ``foo Exists``). Critical paths are compared as kube's
tests compare them: two paths with the same count are sorted by topology value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from tests.framework_support import cluster, config, run
from tests.framework_support import pod as make_pod
from wasm_scheduler.adapters.framework.cluster import Cluster, cluster_from_objects
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.errors import UserError
from wasm_scheduler.adapters.framework.framework import Framework
from wasm_scheduler.adapters.framework.handle import SchedulerHandle
from wasm_scheduler.adapters.framework.plugins import DEFAULT_MULTIPOINT, IN_TREE, UPSTREAM_ONLY
from wasm_scheduler.adapters.framework.plugins.base import PluginContext
from wasm_scheduler.adapters.framework.plugins.pod_topology_spread import (
    HOSTNAME,
    REASON_CONSTRAINTS_NOT_MATCH,
    REASON_NODE_LABEL_NOT_MATCH,
    ZONE,
    CriticalPaths,
    PodTopologySpread,
    PreFilterState,
    PreScoreState,
    Selector,
    default_selector,
    label_selector,
    missing_default_spread_owners,
    normalize,
    round_half_away,
)
from wasm_scheduler.adapters.framework.pods import PodInfo
from wasm_scheduler.adapters.framework.results import PodStatus, Preemption
from wasm_scheduler.adapters.framework.simulation import pod_unmodelled
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.adapters.framework.workloads import NO_WORKLOADS, Workloads
from wasm_scheduler.framework_api import Code

FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
#: filtering_test.go's `taints`.
TAINTS = [{"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"}]
MAX_INT32 = 2**31 - 1
DNS, SA = "DoNotSchedule", "ScheduleAnyway"
LIST = {"defaultingType": "List"}
SYSTEM = {"defaultingType": "System"}


# --- builders: kube's st.MakeNode / st.MakePod ------------------------------------------


def kn(name: str, taints: Sequence[Mapping[str, str]] = (), **labels: str) -> dict[str, Any]:
    """A node with exactly these labels (``zone="zone1"``; ``hostname=...`` is kubernetes.io/hostname)."""
    real = {(HOSTNAME if k == "hostname" else ZONE if k == "topology_zone" else k): v for k, v in labels.items()}
    spec: dict[str, Any] = {"taints": [dict(t) for t in taints]} if taints else {}
    allocatable = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": real}, "spec": spec,
            "status": {"allocatable": allocatable, "capacity": dict(allocatable)}}


def kp(name: str, node: str = "", labels: Mapping[str, str] | None = None, ns: str = "default",
       terminating: bool = False, owner: tuple[str, str, str] | None = None, **spec: Any) -> dict[str, Any]:
    p = make_pod(name, node_name=node, namespace=ns, labels=labels, **spec)
    if terminating:
        p["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    if owner is not None:
        api_version, kind, owner_name = owner
        p["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": owner_name,
                                             "uid": f"uid-{owner_name}", "controller": True}]
    return p


def foo(name: str, node: str = "", **kw: Any) -> dict[str, Any]:
    """st.MakePod().Name(name).Node(node).Label("foo", "")."""
    return kp(name, node, {"foo": ""}, **kw)


def sc(skew: int, key: str, when: str, selector: Mapping[str, Any] | None, min_domains: int | None = None,
       affinity: str | None = None, taints: str | None = None, keys: Sequence[str] | None = None) -> dict[str, Any]:
    """st.PodWrapper.SpreadConstraint(maxSkew, key, when, selector, minDomains, affinityPolicy,
    taintsPolicy, matchLabelKeys)."""
    c: dict[str, Any] = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when}
    if selector is not None:
        c["labelSelector"] = dict(selector)
    if min_domains is not None:
        c["minDomains"] = min_domains
    if affinity is not None:
        c["nodeAffinityPolicy"] = affinity
    if taints is not None:
        c["nodeTaintsPolicy"] = taints
    if keys is not None:
        c["matchLabelKeys"] = list(keys)
    return c


def incoming(labels: Mapping[str, str], *constraints: Mapping[str, Any], **spec: Any) -> dict[str, Any]:
    if constraints:
        spec["topologySpreadConstraints"] = list(constraints)
    return kp("p", labels=labels, **spec)


def node_affinity(key: str, operator: str, values: Sequence[str]) -> dict[str, Any]:
    """st.PodWrapper.NodeAffinityIn/NotIn (match expressions)."""
    term = {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def toleration(key: str) -> list[dict[str, str]]:
    """st.PodWrapper.Toleration(key)."""
    return [{"key": key, "operator": "Exists", "effect": "NoSchedule"}]


def four_nodes() -> list[dict[str, Any]]:
    return [kn("node-a", zone="zone1", node="node-a"), kn("node-b", zone="zone1", node="node-b"),
            kn("node-x", zone="zone2", node="node-x"), kn("node-y", zone="zone2", node="node-y")]


class Setup:
    """A plugin over a snapshot of `nodes` and `pods`, made through a PluginContext with `args`."""

    def __init__(self, nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]] = (),
                 args: Mapping[str, Any] | None = None, objs: Sequence[Mapping[str, Any]] = ()) -> None:
        self.cluster: Cluster = cluster(*nodes, *pods, *objs) if nodes or pods else _workloads_only(objs)
        snapshot = self.cluster.snapshot()
        self.handle = SchedulerHandle(snapshot, workloads=self.cluster.workloads)
        ctx = PluginContext("PodTopologySpread", dict(args or {}), self.handle, Framework("t", self.handle))
        self.plugin = PodTopologySpread(ctx)
        self.state = CycleState()

    def node(self, name: str) -> NodeInfo:
        info = self.handle.snapshot.view.get(name)
        assert info is not None
        return info

    def pre_filter(self, pod: Mapping[str, Any]) -> Code:
        return self.plugin.pre_filter(self.state, pod).status.code

    def prefilter_state(self) -> PreFilterState:
        s = self.state.get("PreFilterPodTopologySpread")
        assert isinstance(s, PreFilterState)
        return s

    def filter_codes(self, pod: Mapping[str, Any], names: Sequence[str]) -> dict[str, Code]:
        assert self.pre_filter(pod) == Code.SUCCESS
        statuses = self.plugin.filter_nodes(self.state, pod, [self.node(n) for n in names])
        return {n: statuses[n].code for n in names}

    def scores(self, pod: Mapping[str, Any], names: Sequence[str]) -> list[tuple[str, int]]:
        nodes = [self.node(n) for n in names]
        status = self.plugin.pre_score(self.state, pod, nodes)
        assert status.code == Code.SUCCESS, status
        result = self.plugin.score_nodes(self.state, pod, nodes)
        assert result.status.ok, result.status
        normalized = self.plugin.normalize_score(self.state, pod, result.scores)
        assert normalized.status.ok
        return [(n, s) for n, s in normalized.scores]


def _workloads_only(objs: Sequence[Mapping[str, Any]]) -> Cluster:
    return Cluster("test", (), (), (), Workloads.of(objs))


def service(name: str, selector: Mapping[str, str] | None, ns: str = "default") -> dict[str, Any]:
    spec: dict[str, Any] = {} if selector is None else {"selector": dict(selector)}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def replica_set(name: str, selector: Mapping[str, Any] | None, ns: str = "default",
                kind: str = "ReplicaSet") -> dict[str, Any]:
    spec: dict[str, Any] = {} if selector is None else {"selector": dict(selector)}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": spec}


def rs_owner(name: str) -> tuple[str, str, str]:
    return ("apps/v1", "ReplicaSet", name)


def paths(p: CriticalPaths) -> tuple[tuple[str, int], tuple[str, int]]:
    """kube's criticalPaths.sort() before comparing: equal counts sorted by value."""
    first, second = p.pairs()
    if first[1] == second[1] and first[0] > second[0]:
        first, second = (second[0], first[1]), (first[0], second[1])
    return first, second


def same_selector(a: Selector, b: Selector) -> bool:
    return a.nothing == b.nothing and set(a.requirements) == set(b.requirements)


def check_state(s: PreFilterState, counts: list[dict[str, int]],
                critical: list[tuple[tuple[str, int], tuple[str, int]]]) -> None:
    assert s.counts == counts
    assert [paths(p) for p in s.critical_paths] == [paths(CriticalPaths(a[0], a[1], b[0], b[1]))
                                                    for a, b in critical]


# --- filtering_test.go: TestPreFilterState ---------------------------------------------

PRE_FILTER_STATE: list[Any] = [
    # (case name, pod, nodes, existing pods, counts, critical paths, (key, maxSkew, policies) of each constraint)
    ("clean cluster with one spreadConstraint",
     incoming({"foo": ""}, sc(5, "zone", DNS, {"matchLabels": {"foo": "bar"}})), four_nodes(), [],
     [{"zone1": 0, "zone2": 0}], [(("zone1", 0), ("zone2", 0))], [("zone", 5, "Honor", "Ignore")]),
    ("normal case with one spreadConstraint",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO)), four_nodes(),
     [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-y1", "node-y"),
      foo("p-y2", "node-y")],
     [{"zone1": 3, "zone2": 2}], [(("zone2", 2), ("zone1", 3))], [("zone", 1, "Honor", "Ignore")]),
    ("normal case with null label selector",
     incoming({"foo": ""}, sc(1, "zone", DNS, None)), four_nodes(),
     [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-y1", "node-y"),
      foo("p-y2", "node-y")],
     [{"zone1": 0, "zone2": 0}], [(("zone2", 0), ("zone1", 0))], [("zone", 1, "Honor", "Ignore")]),
    ("normal case with one spreadConstraint, on a 3-zone cluster",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO)),
     [*four_nodes(), kn("node-o", zone="zone3", node="node-o"), kn("node-p", zone="zone3", node="node-p")],
     [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-y1", "node-y"),
      foo("p-y2", "node-y")],
     [{"zone1": 3, "zone2": 2, "zone3": 0}], [(("zone3", 0), ("zone2", 2))], [("zone", 1, "Honor", "Ignore")]),
    ("namespace mismatch doesn't count",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO)), four_nodes(),
     [foo("p-a1", "node-a"), foo("p-a2", "node-a", ns="ns1"), foo("p-b1", "node-b"),
      foo("p-y1", "node-y", ns="ns2"), foo("p-y2", "node-y")],
     [{"zone1": 2, "zone2": 1}], [(("zone2", 1), ("zone1", 2))], [("zone", 1, "Honor", "Ignore")]),
    ("normal case with two spreadConstraints",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO), sc(1, "node", DNS, FOO)), four_nodes(),
     [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-y1", "node-y"),
      foo("p-y2", "node-y"), foo("p-y3", "node-y"), foo("p-y4", "node-y")],
     [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4}],
     [(("zone1", 3), ("zone2", 4)), (("node-x", 0), ("node-b", 1))],
     [("zone", 1, "Honor", "Ignore"), ("node", 1, "Honor", "Ignore")]),
    ("soft spreadConstraints should be bypassed",
     incoming({"foo": ""}, sc(1, "zone", SA, FOO), sc(1, "zone", DNS, FOO), sc(1, "node", SA, FOO),
              sc(1, "node", DNS, FOO)),
     [kn("node-a", zone="zone1", node="node-a"), kn("node-b", zone="zone1", node="node-b"),
      kn("node-y", zone="zone2", node="node-y")],
     [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-y1", "node-y"),
      foo("p-y2", "node-y"), foo("p-y3", "node-y"), foo("p-y4", "node-y")],
     [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}],
     [(("zone1", 3), ("zone2", 4)), (("node-b", 1), ("node-a", 2))],
     [("zone", 1, "Honor", "Ignore"), ("node", 1, "Honor", "Ignore")]),
    ("different labelSelectors - simple version",
     incoming({"foo": "", "bar": ""}, sc(1, "zone", DNS, FOO), sc(1, "node", DNS, BAR)),
     [kn("node-a", zone="zone1", node="node-a"), kn("node-b", zone="zone1", node="node-b"),
      kn("node-y", zone="zone2", node="node-y")],
     [foo("p-a", "node-a"), kp("p-b", "node-b", {"bar": ""})],
     [{"zone1": 1, "zone2": 0}, {"node-a": 0, "node-b": 1, "node-y": 0}],
     [(("zone2", 0), ("zone1", 1)), (("node-a", 0), ("node-y", 0))],
     [("zone", 1, "Honor", "Ignore"), ("node", 1, "Honor", "Ignore")]),
    ("different labelSelectors - complex pods",
     incoming({"foo": "", "bar": ""}, sc(1, "zone", DNS, FOO), sc(1, "node", DNS, BAR)),
     [kn("node-a", zone="zone1", node="node-a"), kn("node-b", zone="zone1", node="node-b"),
      kn("node-y", zone="zone2", node="node-y")],
     [foo("p-a1", "node-a"), kp("p-a2", "node-a", {"foo": "", "bar": ""}), foo("p-b1", "node-b"),
      foo("p-y1", "node-y"), kp("p-y2", "node-y", {"foo": "", "bar": ""}), foo("p-y3", "node-y"),
      kp("p-y4", "node-y", {"foo": "", "bar": ""})],
     [{"zone1": 3, "zone2": 4}, {"node-a": 1, "node-b": 0, "node-y": 2}],
     [(("zone1", 3), ("zone2", 4)), (("node-b", 0), ("node-a", 1))],
     [("zone", 1, "Honor", "Ignore"), ("node", 1, "Honor", "Ignore")]),
    ("two spreadConstraints, and with podAffinity",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO), sc(1, "node", DNS, FOO),
              affinity=node_affinity("node", "NotIn", ["node-x"])), four_nodes(),
     [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-y1", "node-y"),
      foo("p-y2", "node-y"), foo("p-y3", "node-y"), foo("p-y4", "node-y")],
     [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}],
     [(("zone1", 3), ("zone2", 4)), (("node-b", 1), ("node-a", 2))],
     [("zone", 1, "Honor", "Ignore"), ("node", 1, "Honor", "Ignore")]),
    ("NodeAffinityPolicy honored with labelSelectors",
     incoming({"foo": ""}, sc(1, "node", DNS, BAR), nodeSelector={"foo": ""}),
     [kn("node-a", node="node-a", foo=""), kn("node-b", node="node-b", foo=""), kn("node-c", node="node-c", bar="")],
     [kp("p-a", "node-a", {"bar": ""}), kp("p-b", "node-b", {"bar": ""}), kp("p-c", "node-b", {"bar": ""}),
      kp("p-d", "node-c")],
     [{"node-a": 1, "node-b": 2}], [(("node-a", 1), ("node-b", 2))], [("node", 1, "Honor", "Ignore")]),
    ("NodeAffinityPolicy ignored with labelSelectors",
     incoming({"foo": ""}, sc(1, "node", DNS, BAR, affinity="Ignore"), nodeSelector={"foo": ""}),
     [kn("node-a", node="node-a", foo=""), kn("node-b", node="node-b", foo=""), kn("node-c", node="node-c", bar="")],
     [kp("p-a", "node-a", {"bar": ""}), kp("p-b", "node-b", {"bar": ""}), kp("p-c", "node-b", {"bar": ""}),
      kp("p-d", "node-c")],
     [{"node-a": 1, "node-b": 2, "node-c": 0}], [(("node-c", 0), ("node-a", 1))], [("node", 1, "Ignore", "Ignore")]),
    ("NodeAffinityPolicy honored with nodeAffinity",
     incoming({"foo": ""}, sc(1, "node", DNS, BAR), affinity=node_affinity("foo", "In", [""])),
     [kn("node-a", node="node-a", foo=""), kn("node-b", node="node-b", foo=""), kn("node-c", node="node-c", bar="")],
     [kp("p-a", "node-a", {"bar": ""}), kp("p-c", "node-b", {"bar": ""}), kp("p-d", "node-b", {"bar": ""}),
      kp("p-e", "node-c")],
     [{"node-a": 1, "node-b": 2}], [(("node-a", 1), ("node-b", 2))], [("node", 1, "Honor", "Ignore")]),
    ("NodeAffinityPolicy ignored with nodeAffinity",
     incoming({"foo": ""}, sc(1, "node", DNS, BAR, affinity="Ignore"), affinity=node_affinity("foo", "In", [""])),
     [kn("node-a", node="node-a", foo=""), kn("node-b", node="node-b", foo=""), kn("node-c", node="node-c", bar="")],
     [kp("p-a", "node-a", {"bar": ""}), kp("p-b", "node-b", {"bar": ""}), kp("p-c", "node-b", {"bar": ""}),
      kp("p-d", "node-c")],
     [{"node-a": 1, "node-b": 2, "node-c": 0}], [(("node-c", 0), ("node-a", 1))], [("node", 1, "Ignore", "Ignore")]),
    ("NodeTaintsPolicy ignored",
     incoming({"foo": ""}, sc(1, "node", DNS, BAR)),
     [kn("node-a", node="node-a"), kn("node-b", node="node-b"), kn("node-c", TAINTS, node="node-c", bar="")],
     [kp("p-a", "node-a", {"bar": ""}), kp("p-b", "node-b", {"bar": ""}), kp("p-c", "node-b", {"bar": ""}),
      kp("p-d", "node-c")],
     [{"node-a": 1, "node-b": 2, "node-c": 0}], [(("node-c", 0), ("node-a", 1))], [("node", 1, "Honor", "Ignore")]),
    ("NodeTaintsPolicy honored",
     incoming({"foo": ""}, sc(1, "node", DNS, BAR, taints="Honor")),
     [kn("node-a", node="node-a"), kn("node-b", node="node-b"), kn("node-c", TAINTS, node="node-c", bar="")],
     [kp("p-a", "node-a", {"bar": ""}), kp("p-b", "node-b", {"bar": ""}), kp("p-c", "node-b", {"bar": ""}),
      kp("p-d", "node-c")],
     [{"node-a": 1, "node-b": 2}], [(("node-a", 1), ("node-b", 2))], [("node", 1, "Honor", "Honor")]),
    ("NodeTaintsPolicy honored with tolerated taints",
     incoming({"foo": ""}, sc(1, "node", DNS, BAR, taints="Honor"),
              tolerations=toleration("node.kubernetes.io/unschedulable")),
     [kn("node-a", node="node-a"), kn("node-b", node="node-b"), kn("node-c", TAINTS, node="node-c", bar="")],
     [kp("p-a", "node-a", {"bar": ""}), kp("p-b", "node-b", {"bar": ""}), kp("p-c", "node-b", {"bar": ""}),
      kp("p-d", "node-c")],
     [{"node-a": 1, "node-b": 2, "node-c": 0}], [(("node-c", 0), ("node-a", 1))], [("node", 1, "Honor", "Honor")]),
    ("two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO), sc(1, "node", DNS, FOO, affinity="Ignore"),
              nodeSelector={"foo": ""}),
     [kn("node-a", zone="zone1", node="node-a", foo=""), kn("node-b", zone="zone1", node="node-b"),
      kn("node-x", zone="zone2", node="node-x", foo="")],
     [foo("p-b1", "node-b"), foo("p-b2", "node-b"), foo("p-x1", "node-x")],
     [{"zone1": 0, "zone2": 1}, {"node-a": 0, "node-b": 2, "node-x": 1}],
     [(("zone1", 0), ("zone2", 1)), (("node-a", 0), ("node-x", 1))],
     [("zone", 1, "Honor", "Ignore"), ("node", 1, "Ignore", "Ignore")]),
    ("two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO, taints="Honor"), sc(1, "node", DNS, FOO)),
     [kn("node-a", zone="zone1", node="node-a", foo=""), kn("node-b", TAINTS, zone="zone1", node="node-b"),
      kn("node-x", zone="zone2", node="node-x", foo="")],
     [foo("p-b1", "node-b"), foo("p-b2", "node-b"), foo("p-x1", "node-x")],
     [{"zone1": 0, "zone2": 1}, {"node-a": 0, "node-b": 2, "node-x": 1}],
     [(("zone1", 0), ("zone2", 1)), (("node-a", 0), ("node-x", 1))],
     [("zone", 1, "Honor", "Honor"), ("node", 1, "Honor", "Ignore")]),
    ("two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO), sc(1, "node", DNS, FOO), nodeSelector={"foo": ""}),
     [kn("node-a", zone="zone1", node="node-a"), kn("node-b", TAINTS, zone="zone1", node="node-b", foo=""),
      kn("node-x", zone="zone2", node="node-x", foo=""), kn("node-y", zone="zone2", node="node-y")],
     [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-x1", "node-x"), foo("p-y1", "node-y")],
     [{"zone1": 0, "zone2": 1}, {"node-b": 0, "node-x": 1}],
     [(("zone1", 0), ("zone2", 1)), (("node-b", 0), ("node-x", 1))],
     [("zone", 1, "Honor", "Ignore"), ("node", 1, "Honor", "Ignore")]),
    ("two node inclusion Constraints, zone: ignore/ignore, node: honor/honor",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO, affinity="Ignore"), sc(1, "node", DNS, FOO, taints="Honor"),
              nodeSelector={"foo": ""}),
     [kn("node-a", zone="zone1", node="node-a"), kn("node-b", TAINTS, zone="zone1", node="node-b", foo=""),
      kn("node-x", zone="zone2", node="node-x", foo=""), kn("node-y", zone="zone2", node="node-y", foo="")],
     [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-x1", "node-x"), foo("p-x2", "node-x"),
      foo("p-y1", "node-y")],
     [{"zone1": 2, "zone2": 3}, {"node-x": 2, "node-y": 1}],
     [(("zone1", 2), ("zone2", 3)), (("node-y", 1), ("node-x", 2))],
     [("zone", 1, "Ignore", "Ignore"), ("node", 1, "Honor", "Honor")]),
    ("matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
     incoming({"foo": "", "bar": "a"}, sc(1, "zone", DNS, FOO, keys=["bar"])), four_nodes(),
     [foo("p-a1", "node-a"), kp("p-a2", "node-a", {"foo": "", "bar": "a"}), foo("p-b1", "node-b"),
      kp("p-y1", "node-y", {"foo": "", "bar": "a"}), kp("p-y2", "node-y", {"bar": ""})],
     [{"zone1": 1, "zone2": 1}], [(("zone2", 1), ("zone1", 1))], [("zone", 1, "Honor", "Ignore")]),
    ("matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
     incoming({"foo": "a"}, sc(1, "zone", DNS, {}, keys=["foo"])), four_nodes(),
     [kp(n, node, {"foo": "a"}) for n, node in (("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b"),
                                                 ("p-y1", "node-y"), ("p-y2", "node-y"))],
     [{"zone1": 3, "zone2": 2}], [(("zone2", 2), ("zone1", 3))], [("zone", 1, "Honor", "Ignore")]),
    ("key in matchLabelKeys is ignored when LabelSelector is nil when feature gate enabled",
     incoming({"foo": ""}, sc(1, "zone", DNS, None, keys=["bar"])), four_nodes(),
     [kp(n, node, {"foo": "a"}) for n, node in (("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b"),
                                                 ("p-y1", "node-y"), ("p-y2", "node-y"))],
     [{"zone1": 0, "zone2": 0}], [(("zone2", 0), ("zone1", 0))], [("zone", 1, "Honor", "Ignore")]),
    ("key in matchLabelKeys is ignored when it isn't exist in pod.labels",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO, keys=["bar"])), four_nodes(),
     [kp(n, node, {"foo": "a"}) for n, node in (("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b"),
                                                 ("p-y1", "node-y"), ("p-y2", "node-y"))],
     [{"zone1": 3, "zone2": 2}], [(("zone2", 2), ("zone1", 3))], [("zone", 1, "Honor", "Ignore")]),
    ("two spreadConstraints with the same topologyKey",
     incoming({"foo": "", "bar": ""}, sc(1, "zone", DNS, FOO), sc(1, "zone", DNS, BAR)), four_nodes(),
     [kp("p-a1", "node-a", {"foo": "", "bar": ""}), foo("p-b1", "node-b"), kp("p-x1", "node-x", {"bar": ""}),
      kp("p-y1", "node-y", {"foo": "", "bar": ""}), kp("p-y2", "node-y", {"bar": ""})],
     [{"zone1": 2, "zone2": 1}, {"zone1": 1, "zone2": 3}],
     [(("zone2", 1), ("zone1", 2)), (("zone1", 1), ("zone2", 3))],
     [("zone", 1, "Honor", "Ignore"), ("zone", 1, "Honor", "Ignore")]),
]


@pytest.mark.parametrize(("name", "pod", "nodes", "pods", "counts", "critical", "constraints"), PRE_FILTER_STATE,
                         ids=[case[0] for case in PRE_FILTER_STATE])
def test_pre_filter_state(name, pod, nodes, pods, counts, critical, constraints):
    """filtering_test.go, TestPreFilterState: the case named `name` (NodeInclusionPolicy and
    MatchLabelKeys enabled, as in v1.33)."""
    setup = Setup(nodes, pods, LIST)
    assert setup.pre_filter(pod) == Code.SUCCESS
    s = setup.prefilter_state()
    assert [(c.topology_key, c.max_skew, c.node_affinity_policy, c.node_taints_policy) for c in s.constraints] == \
        constraints
    assert all(c.min_domains == 1 for c in s.constraints)
    check_state(s, counts, critical)


def test_pre_filter_state_match_label_keys_selector():
    """filtering_test.go, TestPreFilterState, "matchLabelKeys ANDed with LabelSelector when
    LabelSelector isn't empty": the selector is `foo Exists, bar=a`; "... is empty": `foo=a`;
    "... LabelSelector is nil": Nothing."""
    setup = Setup(four_nodes(), [], LIST)
    setup.pre_filter(incoming({"foo": "", "bar": "a"}, sc(1, "zone", DNS, FOO, keys=["bar"])))
    want = label_selector({"matchLabels": {"bar": "a"}, "matchExpressions": FOO["matchExpressions"]})
    assert same_selector(setup.prefilter_state().constraints[0].selector, want)
    setup.pre_filter(incoming({"foo": "a"}, sc(1, "zone", DNS, {}, keys=["foo"])))
    assert same_selector(setup.prefilter_state().constraints[0].selector, label_selector({"matchLabels": {"foo": "a"}}))
    setup.pre_filter(incoming({"foo": ""}, sc(1, "zone", DNS, None, keys=["bar"])))
    assert setup.prefilter_state().constraints[0].selector.nothing


def test_pre_filter_state_default_constraints_and_a_service():
    """filtering_test.go, TestPreFilterState, "default constraints and a service": with List
    defaults, the DoNotSchedule ones get the Service's selector (no nodes: empty counts)."""
    defaults = [{"maxSkew": 3, "topologyKey": "node", "whenUnsatisfiable": DNS},
                {"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": SA},
                {"maxSkew": 5, "topologyKey": "rack", "whenUnsatisfiable": DNS}]
    setup = Setup([], [], {"defaultingType": "List", "defaultConstraints": defaults},
                  [service("svc", {"foo": "bar"})])
    assert setup.pre_filter(kp("p", labels={"foo": "bar", "baz": "kar"})) == Code.SUCCESS
    s = setup.prefilter_state()
    assert [(c.topology_key, c.max_skew) for c in s.constraints] == [("node", 3), ("rack", 5)]
    for c in s.constraints:
        assert same_selector(c.selector, label_selector({"matchLabels": {"foo": "bar"}}))
    assert s.counts == [{}, {}]
    assert [p.pairs() for p in s.critical_paths] == [(("", MAX_INT32), ("", MAX_INT32))] * 2


@pytest.mark.parametrize(("name", "pod", "defaults", "objs"), [
    ("default constraints and a service that doesn't match", kp("p", labels={"foo": "bar"}),
     [{"maxSkew": 3, "topologyKey": "node", "whenUnsatisfiable": DNS}], [service("svc", {"baz": "kep"})]),
    ("default soft constraints and a service", kp("p", labels={"foo": "bar"}),
     [{"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": SA}], [service("svc", {"foo": "bar"})]),
    ("skip if not specified", kp("p", labels={"foo": ""}), [], []),
])
def test_pre_filter_skips(name, pod, defaults, objs):
    """filtering_test.go, TestPreFilterState: the case named `name` returns Skip."""
    args = {"defaultingType": "List", "defaultConstraints": defaults} if defaults else LIST
    setup = Setup([kn("node-a", zone="zone1", node="node-a")], [], args, objs)
    assert setup.pre_filter(pod) == Code.SKIP


def test_pre_filter_state_default_constraints_and_a_service_but_pod_has_constraints():
    """filtering_test.go, TestPreFilterState, "default constraints and a service, but pod has
    constraints": the pod's own DoNotSchedule constraint only."""
    setup = Setup([], [], {"defaultingType": "List",
                           "defaultConstraints": [{"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": DNS}]},
                  [service("svc", {"foo": "bar"})])
    pod = incoming({"foo": "bar", "baz": "tar"}, sc(1, "zone", DNS, {"matchLabels": {"baz": "tar"}}),
                   sc(2, "planet", SA, {"matchLabels": {"fot": "rok"}}))
    assert setup.pre_filter(pod) == Code.SUCCESS
    s = setup.prefilter_state()
    assert [(c.topology_key, c.max_skew) for c in s.constraints] == [("zone", 1)]
    assert same_selector(s.constraints[0].selector, label_selector({"matchLabels": {"baz": "tar"}}))
    assert s.counts == [{}]


# --- filtering_test.go: TestPreFilterStateAddPod / TestPreFilterStateRemovePod ----------

NODE_AND_ZONE = (sc(1, "zone", DNS, FOO), sc(1, "node", DNS, FOO))
AFFINITY_NODES = [kn("node-a", zone="zone1", node="node-a", foo="bar"),
                  kn("node-b", zone="zone2", node="node-b", foo="")]

ADD_POD: list[Any] = [
    ("node a and b both impact current min match",
     incoming({"foo": ""}, sc(1, "node", DNS, FOO)), foo("p-a1", "node-a"), [], "node-a",
     [kn("node-a", zone="zone1", node="node-a"), kn("node-b", zone="zone1", node="node-b")],
     [{"node-a": 1, "node-b": 0}], [(("node-b", 0), ("node-a", 1))]),
    ("only node a impacts current min match",
     incoming({"foo": ""}, sc(1, "node", DNS, FOO)), foo("p-a1", "node-a"), [foo("p-b1", "node-b")], "node-a",
     [kn("node-a", zone="zone1", node="node-a"), kn("node-b", zone="zone1", node="node-b")],
     [{"node-a": 1, "node-b": 1}], [(("node-a", 1), ("node-b", 1))]),
    ("add a pod in a different namespace doesn't change topologyKeyToMinPodsMap",
     incoming({"foo": ""}, sc(1, "node", DNS, FOO)), foo("p-a1", "node-a", ns="ns1"), [foo("p-b1", "node-b")],
     "node-a", [kn("node-a", zone="zone1", node="node-a"), kn("node-b", zone="zone1", node="node-b")],
     [{"node-a": 0, "node-b": 1}], [(("node-a", 0), ("node-b", 1))]),
    ("add pod on non-critical node won't trigger re-calculation",
     incoming({"foo": ""}, sc(1, "node", DNS, FOO)), foo("p-b2", "node-b"), [foo("p-b1", "node-b")], "node-b",
     [kn("node-a", zone="zone1", node="node-a"), kn("node-b", zone="zone1", node="node-b")],
     [{"node-a": 0, "node-b": 2}], [(("node-a", 0), ("node-b", 2))]),
    ("node a and x both impact topologyKeyToMinPodsMap on zone and node",
     incoming({"foo": ""}, *NODE_AND_ZONE), foo("p-a1", "node-a"), [], "node-a",
     [kn("node-a", zone="zone1", node="node-a"), kn("node-x", zone="zone2", node="node-x")],
     [{"zone1": 1, "zone2": 0}, {"node-a": 1, "node-x": 0}],
     [(("zone2", 0), ("zone1", 1)), (("node-x", 0), ("node-a", 1))]),
    ("only node a impacts topologyKeyToMinPodsMap on zone and node",
     incoming({"foo": ""}, *NODE_AND_ZONE), foo("p-a1", "node-a"), [foo("p-x1", "node-x")], "node-a",
     [kn("node-a", zone="zone1", node="node-a"), kn("node-x", zone="zone2", node="node-x")],
     [{"zone1": 1, "zone2": 1}, {"node-a": 1, "node-x": 1}],
     [(("zone1", 1), ("zone2", 1)), (("node-a", 1), ("node-x", 1))]),
    ("node a impacts topologyKeyToMinPodsMap on node, node x impacts topologyKeyToMinPodsMap on zone",
     incoming({"foo": ""}, *NODE_AND_ZONE), foo("p-a1", "node-a"),
     [foo("p-b1", "node-b"), foo("p-b2", "node-b"), foo("p-x1", "node-x")], "node-a",
     [kn("node-a", zone="zone1", node="node-a"), kn("node-b", zone="zone1", node="node-b"),
      kn("node-x", zone="zone2", node="node-x")],
     [{"zone1": 3, "zone2": 1}, {"node-a": 1, "node-b": 2, "node-x": 1}],
     [(("zone2", 1), ("zone1", 3)), (("node-a", 1), ("node-x", 1))]),
    ("Constraints hold different labelSelectors, node a impacts topologyKeyToMinPodsMap on zone",
     incoming({"foo": "", "bar": ""}, sc(1, "zone", DNS, FOO), sc(1, "node", DNS, BAR)), foo("p-a1", "node-a"),
     [kp("p-b1", "node-b", {"foo": "", "bar": ""}), kp("p-x1", "node-x", {"foo": "", "bar": ""}),
      kp("p-x2", "node-x", {"bar": ""})], "node-a",
     [kn("node-a", zone="zone1", node="node-a"), kn("node-b", zone="zone1", node="node-b"),
      kn("node-x", zone="zone2", node="node-x")],
     [{"zone1": 2, "zone2": 1}, {"node-a": 0, "node-b": 1, "node-x": 2}],
     [(("zone2", 1), ("zone1", 2)), (("node-a", 0), ("node-b", 1))]),
    ("Constraints hold different labelSelectors, node a impacts topologyKeyToMinPodsMap on both zone and node",
     incoming({"foo": "", "bar": ""}, sc(1, "zone", DNS, FOO), sc(1, "node", DNS, BAR)),
     kp("p-a1", "node-a", {"foo": "", "bar": ""}),
     [kp("p-b1", "node-b", {"bar": ""}), kp("p-x1", "node-x", {"foo": "", "bar": ""}),
      kp("p-x2", "node-x", {"bar": ""})], "node-a",
     [kn("node-a", zone="zone1", node="node-a"), kn("node-b", zone="zone1", node="node-b"),
      kn("node-x", zone="zone2", node="node-x")],
     [{"zone1": 1, "zone2": 1}, {"node-a": 1, "node-b": 1, "node-x": 2}],
     [(("zone1", 1), ("zone2", 1)), (("node-a", 1), ("node-b", 1))]),
    ("add a pod when scheduling node affinity unmatched pod with NodeInclusionPolicy enabled",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO), affinity=node_affinity("foo", "NotIn", ["bar"])),
     kp("p-a1", "node-a", {"foo": "", "zone": "zone1"}),
     [kp("p-a2", "node-a", {"foo": "", "zone": "zone1"}), kp("p-b1", "node-b", {"foo": "", "zone": "zone2"})],
     "node-a", AFFINITY_NODES,
     [{"zone2": 1}], [(("zone2", 1), ("", MAX_INT32))]),
    ("add a pod when scheduling node affinity matched pod with NodeInclusionPolicy enabled",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO)), kp("p-b1", "node-b", {"foo": "", "zone": "zone2"}),
     [kp("p-a1", "node-a", {"foo": "", "zone": "zone1"}), kp("p-b2", "node-b", {"foo": "", "zone": "zone2"})],
     "node-b", AFFINITY_NODES,
     [{"zone1": 1, "zone2": 2}], [(("zone1", 1), ("zone2", 2))]),
    ("add a label selector not matched pod when with NodeInclusionPolicy enabled",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO)), kp("p-b1", "node-b", {"zone": "zone2"}),
     [kp("p-a1", "node-a", {"foo": "", "zone": "zone1"}), kp("p-b2", "node-b", {"foo": "", "zone": "zone2"})],
     "node-b", AFFINITY_NODES,
     [{"zone1": 1, "zone2": 1}], [(("zone1", 1), ("zone2", 1))]),
    ("add a pod when scheduling taint tolerated pod with NodeInclusionPolicy enabled",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO), tolerations=toleration("node.kubernetes.io/unschedulable")),
     kp("p-b1", "node-b", {"foo": "", "zone": "zone2"}),
     [kp("p-a1", "node-a", {"foo": "", "zone": "zone1"}), kp("p-b2", "node-b", {"foo": "", "zone": "zone2"})],
     "node-b", [kn("node-a", TAINTS, zone="zone1", node="node-a"), kn("node-b", zone="zone2", node="node-b")],
     [{"zone1": 1, "zone2": 2}], [(("zone1", 1), ("zone2", 2))]),
]


@pytest.mark.parametrize(("name", "preemptor", "added", "pods", "on", "nodes", "counts", "critical"), ADD_POD,
                         ids=[case[0] for case in ADD_POD])
def test_pre_filter_state_add_pod(name, preemptor, added, pods, on, nodes, counts, critical):
    """filtering_test.go, TestPreFilterStateAddPod: the case named `name`."""
    setup = Setup(nodes, pods, LIST)
    assert setup.pre_filter(preemptor) == Code.SUCCESS
    assert setup.plugin.add_pod(setup.state, preemptor, added, setup.node(on)).ok
    check_state(setup.prefilter_state(), counts, critical)


REMOVE_POD: list[Any] = [
    ("one spreadConstraint on zone, topologyKeyToMinPodsMap unchanged",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO)),
     [kn("node-a", zone="zone1", node="node-a"), kn("node-b", zone="zone1", node="node-b"),
      kn("node-x", zone="zone2", node="node-x")],
     [foo("p-a1", "node-a"), foo("p-b1", "node-b"), foo("p-x1", "node-x")], 0, None, "node-a",
     [{"zone1": 1, "zone2": 1}], [(("zone1", 1), ("zone2", 1))]),
    ("one spreadConstraint on node, topologyKeyToMinPodsMap changed",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO)), four_nodes(),
     [foo("p-a1", "node-a"), foo("p-b1", "node-b"), foo("p-x1", "node-x"), foo("p-y1", "node-y")], 0, None, "node-a",
     [{"zone1": 1, "zone2": 2}], [(("zone1", 1), ("zone2", 2))]),
    ("delete an irrelevant pod won't help",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO)), four_nodes(),
     [kp("p-a0", "node-a", {"bar": ""}), foo("p-a1", "node-a"), foo("p-b1", "node-b"), foo("p-x1", "node-x"),
      foo("p-y1", "node-y")], 0, None, "node-a",
     [{"zone1": 2, "zone2": 2}], [(("zone1", 2), ("zone2", 2))]),
    ("delete a non-existing pod won't help",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO)), four_nodes(),
     [foo("p-a1", "node-a"), foo("p-b1", "node-b"), foo("p-x1", "node-x"), foo("p-y1", "node-y")], -1,
     kp("p-a0", "node-a", {"bar": ""}), "node-a",
     [{"zone1": 2, "zone2": 2}], [(("zone1", 2), ("zone2", 2))]),
    ("two spreadConstraints",
     incoming({"foo": ""}, *NODE_AND_ZONE),
     [kn("node-a", zone="zone1", node="node-a"), kn("node-b", zone="zone1", node="node-b"),
      kn("node-x", zone="zone2", node="node-x")],
     [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-x1", "node-x"),
      foo("p-x2", "node-x")], 3, None, "node-x",
     [{"zone1": 3, "zone2": 1}, {"node-a": 2, "node-b": 1, "node-x": 1}],
     [(("zone2", 1), ("zone1", 3)), (("node-b", 1), ("node-x", 1))]),
    ("remove a pod when scheduling node affinity unmatched pod with NodeInclusionPolicy enabled",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO), affinity=node_affinity("foo", "NotIn", ["bar"])),
     [kn("node-a", zone="zone1", node="node-a", foo="bar"), kn("node-b", zone="zone2", node="node-b", foo="")],
     [kp("p-a2", "node-a", {"foo": "", "zone": "zone1"}), kp("p-b1", "node-b", {"foo": "", "zone": "zone2"})],
     -1, kp("p-a1", "node-a", {"foo": "", "zone": "zone1"}), "node-a",
     [{"zone2": 1}], [(("zone2", 1), ("", MAX_INT32))]),
    ("remove a pod when scheduling node affinity matched pod with NodeInclusionPolicy enabled",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO)),
     [kn("node-a", zone="zone1", node="node-a", foo="bar"), kn("node-b", zone="zone2", node="node-b", foo="")],
     [kp("p-a1", "node-a", {"foo": "", "zone": "zone1"}), kp("p-b2", "node-b", {"foo": "", "zone": "zone2"})],
     -1, kp("p-b1", "node-b", {"foo": "", "zone": "zone2"}), "node-b",
     [{"zone1": 1, "zone2": 0}], [(("zone2", 0), ("zone1", 1))]),
]


@pytest.mark.parametrize(("name", "preemptor", "nodes", "pods", "index", "deleted", "on", "counts", "critical"),
                         REMOVE_POD, ids=[case[0] for case in REMOVE_POD])
def test_pre_filter_state_remove_pod(name, preemptor, nodes, pods, index, deleted, on, counts, critical):
    """filtering_test.go, TestPreFilterStateRemovePod: the case named `name`."""
    setup = Setup(nodes, pods, LIST)
    assert setup.pre_filter(preemptor) == Code.SUCCESS
    removed = pods[index] if index >= 0 else deleted
    assert setup.plugin.remove_pod(setup.state, preemptor, removed, setup.node(on)).ok
    check_state(setup.prefilter_state(), counts, critical)


def test_a_cloned_state_changes_alone():
    """PreFilterState.clone (kube's preFilterState.Clone): preemption changes a copy."""
    setup = Setup(four_nodes(), [foo("p-a1", "node-a")], LIST)
    setup.pre_filter(incoming({"foo": ""}, sc(1, "zone", DNS, FOO)))
    clone = setup.state.clone()
    setup.plugin.add_pod(clone, incoming({"foo": ""}), foo("p-x1", "node-x"), setup.node("node-x"))
    assert setup.prefilter_state().counts == [{"zone1": 1, "zone2": 0}]
    assert clone.get("PreFilterPodTopologySpread").counts == [{"zone1": 1, "zone2": 1}]


# --- filtering_test.go: TestSingleConstraint / TestMultipleConstraints ------------------

S, U, UU = Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
SPREAD_2103 = [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-y1", "node-y"),
               foo("p-y2", "node-y"), foo("p-y3", "node-y")]
NODE_ONLY = [kn("node-a", node="node-a"), kn("node-b", node="node-b"), kn("node-c", node="node-c")]
POLICY_NODES = [kn("node-a", node="node-a", foo=""), kn("node-b", node="node-b", foo=""),
                kn("node-x", node="node-x", foo=""), kn("node-y", node="node-y")]
POLICY_PODS = [foo("p-b1", "node-a"), foo("p-b2", "node-b"), foo("p-y1", "node-y")]
TAINTED_Y = [kn("node-a", node="node-a", foo=""), kn("node-b", node="node-b", foo=""),
             kn("node-x", node="node-x", foo=""), kn("node-y", TAINTS, node="node-y")]

SINGLE: list[Any] = [
    ("no existing pods", incoming({"foo": ""}, sc(1, "zone", DNS, FOO)), four_nodes(), [], [S, S, S, S]),
    ("no existing pods, incoming pod doesn't match itself", incoming({"foo": ""}, sc(1, "zone", DNS, BAR)),
     four_nodes(), [], [S, S, S, S]),
    ("existing pods in a different namespace do not count", incoming({"foo": ""}, sc(1, "zone", DNS, FOO)),
     four_nodes(), [foo("p-a1", "node-a", ns="ns1"), foo("p-b1", "node-a", ns="ns2"), foo("p-x1", "node-x"),
                    foo("p-y1", "node-y")], [S, S, U, U]),
    ("existing pods do not match null selector", incoming({"foo": ""}, sc(1, "zone", DNS, None)), four_nodes(),
     [foo("p-x1", "node-x"), foo("p-y1", "node-y")], [S, S, S, S]),
    ("pods spread across zones as 3/3, all nodes fit", incoming({"foo": ""}, sc(1, "zone", DNS, FOO)), four_nodes(),
     SPREAD_2103, [S, S, S, S]),
    ("pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO)),
     [kn("node-a", zone="zone1", node="node-a"), kn("node-b", zon="zone1", node="node-b"),
      kn("node-x", zone="zone2", node="node-x"), kn("node-y", zone="zone2", node="node-y")],
     [foo("p-a1", "node-a"), foo("p-b1", "node-b"), foo("p-x1", "node-x"), foo("p-y1", "node-y")], [S, UU, U, U]),
    ("pods spread across nodes as 2/1/0/3, only node-x fits", incoming({"foo": ""}, sc(1, "node", DNS, FOO)),
     four_nodes(), SPREAD_2103, [U, U, S, U]),
    ("pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
     incoming({"foo": ""}, sc(2, "node", DNS, FOO)), four_nodes(), SPREAD_2103, [U, S, S, U]),
    ("pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
     incoming({"bar": ""}, sc(1, "node", DNS, FOO)), four_nodes(), SPREAD_2103, [U, S, S, U]),
    ("incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
     incoming({"foo": ""}, sc(1, "node", DNS, FOO), affinity=node_affinity("node", "In", ["node-a", "node-y"])),
     four_nodes(), SPREAD_2103, [S, S, S, U]),
    ("incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO), affinity=node_affinity("node", "NotIn", ["node-b"])),
     four_nodes(), [foo("p-b1", "node-b"), foo("p-b2", "node-b"), foo("p-y1", "node-y")], [S, S, U, U]),
    ("pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, then the third "
     "node fits", incoming({"foo": ""}, sc(2, "node", DNS, FOO, min_domains=4)), NODE_ONLY,
     [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-b2", "node-b"),
      foo("p-c1", "node-c")], [U, U, S]),
    ("pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, then the all "
     "nodes fit", incoming({"foo": ""}, sc(2, "node", DNS, FOO, min_domains=2)), NODE_ONLY,
     [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-b2", "node-b"),
      foo("p-c1", "node-c")], [S, S, S]),
    ("pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, then the third and "
     "fourth nodes fit", incoming({"foo": ""}, sc(2, "zone", DNS, FOO, min_domains=3)), four_nodes(),
     [foo("p-b1", "node-a"), foo("p-b2", "node-b"), foo("p-y1", "node-y")], [U, U, S, S]),
    ("pods spread across zone as 2/1, maxSkew is 2 and the number of domains > minDomains, then the all nodes "
     "fit", incoming({"foo": ""}, sc(2, "zone", DNS, FOO, min_domains=1)), four_nodes(),
     [foo("p-b1", "node-a"), foo("p-b2", "node-b"), foo("p-y1", "node-y")], [S, S, S, S]),
    ("NodeAffinityPolicy honored with labelSelectors",
     incoming({"foo": ""}, sc(1, "node", DNS, FOO), nodeSelector={"foo": ""}), POLICY_NODES, POLICY_PODS,
     [U, U, S, S]),
    ("NodeAffinityPolicy ignored with labelSelectors",
     incoming({"foo": ""}, sc(1, "node", DNS, FOO, affinity="Ignore"), nodeSelector={"foo": ""}), POLICY_NODES,
     POLICY_PODS, [U, U, S, U]),
    ("NodeAffinityPolicy honored with nodeAffinity",
     incoming({"foo": ""}, sc(1, "node", DNS, FOO), affinity=node_affinity("foo", "In", [""])), POLICY_NODES,
     POLICY_PODS, [U, U, S, S]),
    ("NodeAffinityPolicy ignored with labelSelectors (the second case of that name: nodeAffinity)",
     incoming({"foo": ""}, sc(1, "node", DNS, FOO, affinity="Ignore"), affinity=node_affinity("foo", "In", [""])),
     POLICY_NODES, POLICY_PODS, [U, U, S, U]),
    ("NodeTaintsPolicy honored", incoming({"foo": ""}, sc(1, "node", DNS, FOO, taints="Honor")), TAINTED_Y,
     POLICY_PODS, [U, U, S, S]),
    ("NodeTaintsPolicy ignored", incoming({"foo": ""}, sc(1, "node", DNS, FOO)), TAINTED_Y, POLICY_PODS,
     [U, U, S, U]),
]


@pytest.mark.parametrize(("name", "pod", "nodes", "pods", "codes"), SINGLE, ids=[case[0] for case in SINGLE])
def test_single_constraint(name, pod, nodes, pods, codes):
    """filtering_test.go, TestSingleConstraint: the case named `name` (each node filtered
    by this plugin alone, as kube's test does)."""
    setup = Setup(nodes, pods, LIST)
    names = [n["metadata"]["name"] for n in nodes]
    assert setup.filter_codes(pod, names) == dict(zip(names, codes, strict=True))


def test_single_constraint_rack_label_missing_everywhere():
    """filtering_test.go, TestSingleConstraint, "pod cannot be scheduled as all nodes don't
    have label 'rack'": every node UnschedulableAndUnresolvable, with kube's reason."""
    setup = Setup([kn("node-a", zone="zone1", node="node-a"), kn("node-x", zone="zone2", node="node-x")], [], LIST)
    pod = incoming({"foo": ""}, sc(1, "rack", DNS, FOO))
    assert setup.pre_filter(pod) == Code.SUCCESS
    statuses = setup.plugin.filter_nodes(setup.state, pod, [setup.node("node-a"), setup.node("node-x")])
    assert {s.code for s in statuses.values()} == {UU}
    assert {s.reason for s in statuses.values()} == {REASON_NODE_LABEL_NOT_MATCH}
    assert REASON_NODE_LABEL_NOT_MATCH == \
        "node(s) didn't match pod topology spread constraints (missing required label)"


def test_single_constraint_terminating_pods_are_excluded():
    """filtering_test.go, TestSingleConstraint, "terminating Pods should be excluded"; the
    skew rejection carries kube's reason."""
    setup = Setup([kn("node-a", node="node-a"), kn("node-b", node="node-b")],
                  [foo("p-a", "node-a", terminating=True), foo("p-b", "node-b")], LIST)
    pod = incoming({"foo": ""}, sc(1, "node", DNS, FOO))
    assert setup.filter_codes(pod, ["node-a", "node-b"]) == {"node-a": S, "node-b": U}
    status = setup.plugin.filter_nodes(setup.state, pod, [setup.node("node-b")])["node-b"]
    assert status.reason == REASON_CONSTRAINTS_NOT_MATCH == "node(s) didn't match pod topology spread constraints"


MULTIPLE: list[Any] = [
    ("two Constraints on zone and node, spreads = [3/3, 2/1/0/3]", incoming({"foo": ""}, *NODE_AND_ZONE),
     four_nodes(), SPREAD_2103, [U, U, S, U]),
    ("two Constraints on zone and node, spreads = [3/4, 2/1/0/4]", incoming({"foo": ""}, *NODE_AND_ZONE),
     four_nodes(), [*SPREAD_2103, foo("p-y4", "node-y")], [U, U, U, U]),
    ("Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
     incoming({"foo": "", "bar": ""}, sc(1, "zone", DNS, FOO), sc(1, "node", DNS, BAR)), four_nodes(),
     [foo("p-a1", "node-a"), kp("p-y1", "node-y", {"bar": ""})], [U, U, S, U]),
    ("two node inclusion Constraints, zone: honor/honor, node: ignore/ignore",
     incoming({"foo": ""}, sc(1, "zone", DNS, FOO, taints="Honor"), sc(1, "node", DNS, FOO, affinity="Ignore"),
              nodeSelector={"foo": ""}),
     [kn("node-a", zone="zone1", node="node-a", foo=""), kn("node-b", zone="zone1", node="node-b"),
      kn("node-x", zone="zone2", node="node-x", foo=""), kn("node-y", TAINTS, zone="zone2", node="node-y", foo="")],
     [foo("p-a1", "node-a"), foo("p-b1", "node-b"), foo("p-y1", "node-y")], [U, U, S, U]),
    ("two Constraints on zone, spreads = [3/3, 2/1]",
     incoming({"foo": "", "bar": ""}, sc(1, "zone", DNS, BAR), sc(1, "zone", DNS, FOO)), four_nodes(),
     [kp("p-a1", "node-a", {"foo": "", "bar": ""}), foo("p-a2", "node-a"), kp("p-b1", "node-b", {"foo": "", "bar": ""}),
      foo("p-y1", "node-y"), kp("p-y2", "node-y", {"foo": "", "bar": ""}), foo("p-y3", "node-y")], [U, U, S, S]),
    ("two Constraints on zone, spreads = [3/4, 2/1]",
     incoming({"foo": "", "bar": ""}, sc(1, "zone", DNS, BAR), sc(1, "zone", DNS, FOO)), four_nodes(),
     [kp("p-a1", "node-a", {"foo": "", "bar": ""}), foo("p-a2", "node-a"), kp("p-b1", "node-b", {"foo": "", "bar": ""}),
      foo("p-y1", "node-y"), kp("p-y2", "node-y", {"foo": "", "bar": ""}), foo("p-y3", "node-y"),
      foo("p-y4", "node-y")], [U, U, U, U]),
]


@pytest.mark.parametrize(("name", "pod", "nodes", "pods", "codes"), MULTIPLE, ids=[case[0] for case in MULTIPLE])
def test_multiple_constraints(name, pod, nodes, pods, codes):
    """filtering_test.go, TestMultipleConstraints: the case named `name`."""
    setup = Setup(nodes, pods, LIST)
    names = [n["metadata"]["name"] for n in nodes]
    assert setup.filter_codes(pod, names) == dict(zip(names, codes, strict=True))


def test_filter_without_pre_filter_state_computes_it():
    """filtering_test.go, TestPreFilterDisabled has kube's Filter answer Error without
    PreFilter's state; only a direct call of the framework does that here, and the plugin
    computes the state instead (as NodePorts reads the pod)."""
    setup = Setup([kn("node-a", zone="z1"), kn("node-b", zone="z2")], [foo("p-a", "node-a")], LIST)
    pod = incoming({"foo": ""}, sc(1, "zone", DNS, FOO))
    statuses = setup.plugin.filter_nodes(CycleState(), pod, [setup.node("node-a"), setup.node("node-b")])
    assert {n: s.code for n, s in statuses.items()} == {"node-a": U, "node-b": S}
    assert setup.plugin.filter_nodes(CycleState(), kp("p"), [setup.node("node-a")])["node-a"].ok
    state = CycleState()
    assert setup.plugin.add_pod(state, pod, foo("p-b", "node-b"), setup.node("node-b")).ok
    assert state.get("PreFilterPodTopologySpread").counts == [{"z1": 1, "z2": 1}]


# --- scoring_test.go --------------------------------------------------------------------


@pytest.mark.parametrize(("name", "pod", "args", "nodes", "objs"), [
    ("the pod doesn't have soft topology spread Constraints", kp("p"), LIST,
     [kn("node-a", hostname="node-a"), kn("node-b", hostname="node-b")], []),
    ("default constraints and a replicaset that doesn't match",
     kp("p", labels={"foo": "bar", "baz": "sup"}, owner=rs_owner("rs2")),
     {"defaultingType": "List", "defaultConstraints": [{"maxSkew": 2, "topologyKey": "planet",
                                                        "whenUnsatisfiable": SA}]},
     [kn("node-a", planet="mars")], [replica_set("rs1", {"matchExpressions": [{"key": "tar", "operator": "Exists"}]})]),
])
def test_pre_score_skip(name, pod, args, nodes, objs):
    """scoring_test.go, TestPreScoreSkip: the case named `name`."""
    setup = Setup(nodes, [], args, objs)
    infos = [setup.node(n["metadata"]["name"]) for n in nodes]
    assert setup.plugin.pre_score(setup.state, pod, infos).code == Code.SKIP


W = math.log


PRE_SCORE_STATE: list[Any] = [
    ("normal case", incoming({"foo": ""}, sc(1, "zone", SA, FOO), sc(1, HOSTNAME, SA, FOO)), LIST,
     [kn("node-a", zone="zone1", hostname="node-a"), kn("node-b", zone="zone1", hostname="node-b"),
      kn("node-x", zone="zone2", hostname="node-x")], [],
     [("zone", 1), (HOSTNAME, 1)], set(), [{"zone1": 0, "zone2": 0}, {}], [W(2 + 2), W(3 + 2)]),
    ("null selector", incoming({"foo": ""}, sc(1, "zone", SA, None)), LIST,
     [kn("node-a", zone="zone1", hostname="node-a"), kn("node-b", zone="zone1", hostname="node-b"),
      kn("node-x", zone="zone2", hostname="node-x")], [],
     [("zone", 1)], set(), [{"zone1": 0, "zone2": 0}], [W(2 + 2)]),
    ("node-x doesn't have label zone", incoming({"foo": ""}, sc(1, "zone", SA, FOO), sc(1, HOSTNAME, SA, BAR)), LIST,
     [kn("node-a", zone="zone1", hostname="node-a"), kn("node-b", zone="zone1", hostname="node-b"),
      kn("node-x", hostname="node-x")], [],
     [("zone", 1), (HOSTNAME, 1)], {"node-x"}, [{"zone1": 0}, {}], [W(1 + 2), W(2 + 2)]),
    ("system default constraints and a replicaset",
     kp("p", labels={"foo": "tar", "baz": "sup"}, owner=rs_owner("rs1")), SYSTEM,
     [kn("node-a", hostname="node-a", topology_zone="mars"), kn("node-b", hostname="node-b", topology_zone="mars"),
      kn("node-c", hostname="node-c"), kn("node-d", hostname="node-d")], [replica_set("rs1", FOO)],
     [(HOSTNAME, 3), (ZONE, 5)], set(), [{}, {"mars": 0, "": 0}], [W(4 + 2), W(2 + 2)]),
    ("default constraints and a replicaset",
     kp("p", labels={"foo": "tar", "baz": "sup"}, owner=rs_owner("rs1")),
     {"defaultingType": "List", "defaultConstraints": [
         {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": SA},
         {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": DNS},
         {"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": SA}]},
     [kn("node-a", rack="rack1", hostname="node-a", planet="mars")], [replica_set("rs1", FOO)],
     [(HOSTNAME, 1), ("planet", 2)], set(), [{}, {"mars": 0}], [W(1 + 2), W(1 + 2)]),
    ("default constraints and a replicaset, but pod has constraints",
     incoming({"foo": "bar", "baz": "sup"}, sc(1, "zone", DNS, BAR),
              sc(2, "planet", SA, {"matchLabels": {"baz": "sup"}}), owner=rs_owner("rs1")),
     {"defaultingType": "List", "defaultConstraints": [{"maxSkew": 2, "topologyKey": "galaxy",
                                                        "whenUnsatisfiable": SA}]},
     [kn("node-a", planet="mars", galaxy="andromeda")], [replica_set("rs1", FOO)],
     [("planet", 2)], set(), [{"mars": 0}], [W(1 + 2)]),
    ("NodeAffinityPolicy honored with labelSelectors",
     incoming({"foo": ""}, sc(1, "zone", SA, BAR), nodeSelector={"foo": ""}), LIST,
     [kn("node-a", zone="zone1", foo="", hostname="node-a"), kn("node-b", zone="zone1", foo="", hostname="node-b"),
      kn("node-x", zone="zone2", hostname="node-x")], [],
     [("zone", 1)], set(), [{"zone1": 0, "zone2": 0}], [W(2 + 2)]),
    ("NodeTaintsPolicy honored", incoming({"foo": ""}, sc(1, "zone", SA, BAR, taints="Honor")), LIST,
     [kn("node-a", zone="zone1", foo="", hostname="node-a"), kn("node-b", zone="zone1", foo="", hostname="node-b"),
      kn("node-x", TAINTS, zone="zone2", hostname="node-x")], [],
     [("zone", 1)], set(), [{"zone1": 0, "zone2": 0}], [W(2 + 2)]),
]


@pytest.mark.parametrize(("name", "pod", "args", "nodes", "objs", "constraints", "ignored", "counts", "weights"),
                         PRE_SCORE_STATE, ids=[case[0] for case in PRE_SCORE_STATE])
def test_pre_score_state(name, pod, args, nodes, objs, constraints, ignored, counts, weights):
    """scoring_test.go, TestPreScoreStateEmptyNodes: the case named `name` (no pods)."""
    setup = Setup(nodes, [], args, objs)
    infos = [setup.node(n["metadata"]["name"]) for n in nodes]
    assert setup.plugin.pre_score(setup.state, pod, infos).code == Code.SUCCESS
    s = setup.state.get("PreScorePodTopologySpread")
    assert isinstance(s, PreScoreState)
    assert [(c.topology_key, c.max_skew) for c in s.constraints] == constraints
    assert s.ignored == ignored
    assert s.counts == counts
    assert s.weights == weights


def test_pre_score_state_replicaset_selector():
    """scoring_test.go, TestPreScoreStateEmptyNodes, "system default constraints and a
    replicaset": both constraints carry the ReplicaSet's selector (`foo Exists`)."""
    setup = Setup([kn("node-a", hostname="node-a")], [], SYSTEM, [replica_set("rs1", FOO)])
    pod = kp("p", labels={"foo": "tar", "baz": "sup"}, owner=rs_owner("rs1"))
    setup.plugin.pre_score(setup.state, pod, [setup.node("node-a")])
    s = setup.state.get("PreScorePodTopologySpread")
    assert all(same_selector(c.selector, label_selector(FOO)) for c in s.constraints)


HOST4 = [kn(f"node-{x}", hostname=f"node-{x}") for x in "abcd"]
SPREAD_4321 = [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-a3", "node-a"), foo("p-a4", "node-a"),
               foo("p-b1", "node-b"), foo("p-b2", "node-b"), foo("p-b3", "node-b"), foo("p-c1", "node-c"),
               foo("p-c2", "node-c"), foo("p-d1", "node-d")]
SPREAD_2103_D = [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-d1", "node-d"),
                 foo("p-d2", "node-d"), foo("p-d3", "node-d")]
SPREAD_4213 = [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-a3", "node-a"), foo("p-a4", "node-a"),
               foo("p-b1", "node-b"), foo("p-b2", "node-b"), foo("p-x1", "node-x"), foo("p-y1", "node-y"),
               foo("p-y2", "node-y"), foo("p-y3", "node-y")]
TWO_SELECTORS = [foo("p-a1", "node-a"), kp("p-b1", "node-b", {"foo": "", "bar": ""}), foo("p-y1", "node-y"),
                 kp("p-y2", "node-y", {"bar": ""})]
ZONE_HOST4 = [kn("node-a", zone="zone1", hostname="node-a"), kn("node-b", zone="zone1", hostname="node-b"),
              kn("node-x", zone="zone2", hostname="node-x"), kn("node-y", zone="zone2", hostname="node-y")]
NODE3 = [kn("node-a", node="node-a", foo=""), kn("node-b", node="node-b", foo=""), kn("node-c", node="node-c")]
NODE3_PODS = [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-c1", "node-c")]
TAINTED3 = [kn("node-a", node="node-a"), kn("node-b", node="node-b"), kn("node-c", TAINTS, node="node-c")]
MLK_NODES = [kn("node-a", zone="zone1", hostname="node-a"), kn("node-b", zone="zone1", hostname="node-b"),
             kn("node-c", zone="zone2", hostname="node-c"), kn("node-d", zone="zone2", hostname="node-d")]

SCORE: list[Any] = [
    # (case name, pod, candidate nodes, other nodes, existing pods, objects, expected scores)
    ("one constraint on node, no existing pods", incoming({"foo": ""}, sc(1, HOSTNAME, SA, FOO)), HOST4[:2], [], [],
     [], [100, 100]),
    ("one constraint on node, only one node is candidate", incoming({"foo": ""}, sc(1, HOSTNAME, SA, FOO)),
     HOST4[:1], HOST4[1:2], [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b")], [], [100]),
    ("one constraint on node, all nodes have the same number of matching pods",
     incoming({"foo": ""}, sc(1, HOSTNAME, SA, FOO)), HOST4[:2], [], [foo("p-a1", "node-a"), foo("p-b1", "node-b")],
     [], [100, 100]),
    ("one constraint on node, all 4 nodes are candidates", incoming({"foo": ""}, sc(1, HOSTNAME, SA, FOO)), HOST4, [],
     SPREAD_2103_D, [], [20, 60, 100, 0]),
    ("one constraint on node, null selector", incoming({"foo": ""}, sc(1, HOSTNAME, SA, None)), HOST4, [],
     SPREAD_2103_D, [], [100, 100, 100, 100]),
    ("one constraint on node, all 4 nodes are candidates, maxSkew=2", incoming({"foo": ""}, sc(2, HOSTNAME, SA, FOO)),
     HOST4, [], SPREAD_2103_D, [], [33, 66, 100, 16]),
    ("one constraint on node, all 4 nodes are candidates, maxSkew=3", incoming({"foo": ""}, sc(3, HOSTNAME, SA, FOO)),
     HOST4, [], SPREAD_4321, [], [44, 66, 77, 100]),
    ("system defaulting, nodes don't have zone, pods match service", kp("p", labels={"foo": ""}), HOST4, [],
     SPREAD_4321, [service("svc", {"foo": ""})], [44, 66, 77, 100]),
    ("one constraint on node, 3 out of 4 nodes are candidates", incoming({"foo": ""}, sc(1, HOSTNAME, SA, FOO)),
     [kn("node-a", hostname="node-a"), kn("node-b", hostname="node-b"), kn("node-x", hostname="node-x")],
     [kn("node-y", hostname="node-y")], SPREAD_4213, [], [33, 83, 100]),
    ("one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
     incoming({"foo": ""}, sc(1, HOSTNAME, SA, FOO)),
     [kn("node-a", hostname="node-a"), kn("node-b", n="node-b"), kn("node-x", hostname="node-x")],
     [kn("node-y", hostname="node-y")], SPREAD_4213, [], [16, 0, 100]),
    ("one constraint on zone, 3 out of 4 nodes are candidates", incoming({"foo": ""}, sc(1, "zone", SA, FOO)),
     ZONE_HOST4[:3], ZONE_HOST4[3:], SPREAD_4213, [], [75, 75, 100]),
    ("two Constraints on zone and node, 2 out of 4 nodes are candidates",
     incoming({"foo": ""}, sc(1, "zone", SA, FOO), sc(1, HOSTNAME, SA, FOO)), [ZONE_HOST4[0], ZONE_HOST4[2]],
     [ZONE_HOST4[1], ZONE_HOST4[3]],
     [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-x1", "node-x"),
      foo("p-x2", "node-x"), foo("p-y1", "node-y"), foo("p-y2", "node-y"), foo("p-y3", "node-y"),
      foo("p-y4", "node-y")], [], [100, 63]),
    ("two Constraints on zone, 2 out of 4 nodes are candidates",
     incoming({"foo": "", "bar": ""}, sc(1, "zone", SA, FOO), sc(1, "zone", SA, BAR)),
     [kn("node-a", zone="zone1"), kn("node-x", zone="zone2")], [kn("node-b", zone="zone1"), kn("node-y", zone="zone2")],
     [kp("p-a1", "node-a", {"foo": "", "bar": ""}), foo("p-a2", "node-a"), kp("p-b1", "node-b", {"foo": "", "bar": ""}),
      foo("p-y1", "node-y"), kp("p-y2", "node-y", {"foo": "", "bar": ""}), foo("p-y3", "node-y")], [], [85, 100]),
    ("two Constraints on zone and node, with different labelSelectors",
     incoming({"foo": "", "bar": ""}, sc(1, "zone", SA, FOO), sc(1, HOSTNAME, SA, BAR)), ZONE_HOST4, [],
     TWO_SELECTORS, [], [60, 20, 100, 60]),
    ("two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
     incoming({"foo": "", "bar": ""}, sc(1, "zone", SA, FOO), sc(1, HOSTNAME, SA, BAR)), ZONE_HOST4, [],
     [kp("p-b1", "node-b", {"bar": ""}), foo("p-x1", "node-x"), kp("p-y1", "node-y", {"foo": "", "bar": ""})], [],
     [100, 60, 40, 0]),
    ("two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
     incoming({"foo": "", "bar": ""}, sc(1, "zone", SA, FOO), sc(1, HOSTNAME, SA, BAR)), ZONE_HOST4[:3],
     ZONE_HOST4[3:], TWO_SELECTORS, [], [50, 25, 100]),
    ("existing pods in a different namespace do not count", incoming({"foo": ""}, sc(1, HOSTNAME, SA, FOO)),
     HOST4[:2], [], [foo("p-a1", "node-a", ns="ns1"), foo("p-a2", "node-a"), foo("p-b1", "node-b"),
                     foo("p-b2", "node-b")], [], [100, 33]),
    ("terminating Pods should be excluded", incoming({"foo": ""}, sc(1, HOSTNAME, SA, FOO)), HOST4[:2], [],
     [foo("p-a", "node-a", terminating=True), foo("p-b", "node-b")], [], [100, 0]),
    ("minDomains has no effect when ScheduleAnyway", incoming({"foo": ""}, sc(2, "node", SA, FOO, min_domains=10)),
     NODE_ONLY, [], [foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-b2", "node-b"),
                     foo("p-c1", "node-c")], [], [75, 75, 100]),
    ("NodeAffinityPolicy honoed with labelSelectors",
     incoming({"foo": ""}, sc(1, "node", SA, FOO), nodeSelector={"foo": ""}), NODE3, [], NODE3_PODS, [], [0, 33, 100]),
    ("NodeAffinityPolicy ignored with labelSelectors",
     incoming({"foo": ""}, sc(1, "node", SA, FOO, affinity="Ignore"), nodeSelector={"foo": ""}), NODE3, [],
     NODE3_PODS, [], [66, 100, 100]),
    ("NodeAffinityPolicy honoed with nodeAffinity",
     incoming({"foo": ""}, sc(1, "node", SA, FOO), affinity=node_affinity("foo", "In", [""])), NODE3, [],
     NODE3_PODS, [], [0, 33, 100]),
    ("NodeAffinityPolicy ignored with nodeAffinity",
     incoming({"foo": ""}, sc(1, "node", SA, FOO, affinity="Ignore"), affinity=node_affinity("foo", "In", [""])),
     NODE3, [], NODE3_PODS, [], [66, 100, 100]),
    ("NodeTaintsPolicy honored", incoming({"foo": ""}, sc(1, "node", SA, FOO, taints="Honor")), TAINTED3, [],
     NODE3_PODS, [], [0, 33, 100]),
    ("NodeTaintsPolicy ignored", incoming({"foo": ""}, sc(1, "node", SA, FOO)), TAINTED3, [], NODE3_PODS, [],
     [66, 100, 100]),
    ("matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
     incoming({"foo": "", "bar": ""}, sc(1, "zone", SA, {}, keys=["foo"]), sc(1, HOSTNAME, SA, {}, keys=["bar"])),
     MLK_NODES, [], [foo("p-a1", "node-a"), kp("p-b1", "node-b", {"foo": "", "bar": ""}), foo("p-y1", "node-c"),
                     kp("p-y2", "node-c", {"bar": ""})], [], [60, 20, 60, 100]),
    ("matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
     incoming({"foo": "", "bar": "", "baz": ""}, sc(1, "zone", SA, FOO), sc(1, HOSTNAME, SA, BAR, keys=["baz"])),
     MLK_NODES, [], [foo("p-a1", "node-a"), kp("p-b1", "node-b", {"foo": "", "bar": "", "baz": ""}),
                     foo("p-c1", "node-c"), kp("p-c2", "node-c", {"bar": ""}),
                     kp("p-d3", "node-c", {"bar": "", "baz": ""})], [], [60, 20, 60, 100]),
]


@pytest.mark.parametrize(("name", "pod", "nodes", "failed", "pods", "objs", "want"), SCORE,
                         ids=[case[0] for case in SCORE])
def test_pod_topology_spread_score(name, pod, nodes, failed, pods, objs, want):
    """scoring_test.go, TestPodTopologySpreadScore: the case named `name` (System defaulting,
    NodeInclusionPolicy and MatchLabelKeys enabled; `failed` nodes are in the snapshot but
    not scored)."""
    setup = Setup([*nodes, *failed], pods, SYSTEM, objs)
    names = [n["metadata"]["name"] for n in nodes]
    assert setup.scores(pod, names) == list(zip(names, want, strict=True))


def test_normalize_and_rounding_follow_go():
    """scoring.go: NormalizeScore is MaxNodeScore * (max + min - s) / max in integers,
    ignored nodes 0, all 100 when max is 0; Score rounds halves away from zero."""
    scores = [("a", 4), ("b", 2), ("c", 0), ("d", 5), ("e", 7)]
    assert normalize(scores, {"e"}) == (("a", 20), ("b", 60), ("c", 100), ("d", 0), ("e", 0))
    assert normalize([("a", 0), ("b", 0)]) == (("a", 100), ("b", 100))
    assert normalize([("a", 3)], {"a"}) == (("a", 0),)
    assert [round_half_away(v) for v in (0.5, 1.5, 2.5, 2.4999, 3.5000001)] == [1, 2, 3, 2, 4]


# --- the default selector and the snapshot's workloads ----------------------------------


def test_default_selector_merges_services_and_the_controller():
    """helper.DefaultSelector: every Service in the pod's namespace whose selector matches its
    labels (a Service without a selector matches none), then its controller's selector."""
    workloads = Workloads.of([
        service("web", {"app": "web"}), service("all-tiers", {"tier": "front"}), service("none", None),
        service("other-ns", {"app": "web"}, ns="elsewhere"), service("mismatch", {"app": "db"}),
        replica_set("web-1", {"matchLabels": {"pod-template-hash": "1"}}),
        {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc", "namespace": "default"},
         "spec": {"selector": {"rc": "yes"}}},
    ])
    labels = {"app": "web", "tier": "front", "pod-template-hash": "1", "rc": "yes"}
    plain = kp("p", labels=labels)
    assert same_selector(default_selector(plain, workloads),
                         label_selector({"matchLabels": {"app": "web", "tier": "front"}}))
    owned = kp("p", labels=labels, owner=rs_owner("web-1"))
    assert same_selector(default_selector(owned, workloads), label_selector(
        {"matchLabels": {"app": "web", "tier": "front", "pod-template-hash": "1"}}))
    by_rc = kp("p", labels=labels, owner=("v1", "ReplicationController", "rc"))
    assert same_selector(default_selector(by_rc, workloads), label_selector(
        {"matchLabels": {"app": "web", "tier": "front", "rc": "yes"}}))
    # An owner of another API version is not one DefaultSelector reads.
    old = kp("p", labels={"pod-template-hash": "1"}, owner=("extensions/v1beta1", "ReplicaSet", "web-1"))
    assert default_selector(old, workloads).empty
    assert default_selector(kp("p"), NO_WORKLOADS).empty


def test_missing_default_spread_owners():
    cl = cluster(kn("n1"), replica_set("present", FOO), kp("p0", labels={"foo": ""}))
    assert len(cl.workloads) == 1
    assert missing_default_spread_owners(kp("a", owner=rs_owner("present")), cl) == []
    assert missing_default_spread_owners(kp("b", owner=rs_owner("gone")), cl) == ["ReplicaSet default/gone"]
    assert missing_default_spread_owners(kp("c", ns="team", owner=("apps/v1", "StatefulSet", "db")), cl) == \
        ["StatefulSet team/db"]
    assert missing_default_spread_owners(kp("d", owner=("v1", "ReplicationController", "rc")), cl.workloads) == \
        ["ReplicationController default/rc"]
    # Its own constraints replace the defaults; a Job or a non-controller reference is not read.
    own = kp("e", owner=rs_owner("gone"), topologySpreadConstraints=[sc(1, "zone", DNS, FOO)])
    assert missing_default_spread_owners(own, cl) == []
    assert missing_default_spread_owners(kp("f", owner=("batch/v1", "Job", "j")), cl) == []
    loose = kp("g", owner=rs_owner("gone"))
    loose["metadata"]["ownerReferences"][0]["controller"] = False
    assert missing_default_spread_owners(loose, cl) == []


def test_the_loader_keeps_workloads_and_checks_them():
    objects = [kn("n1"), service("svc", {"app": "web"}),
               {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "data"},
                "spec": {"selector": {"matchLabels": {"app": "db"}}}}]
    cl = cluster_from_objects([{"apiVersion": "v1", "kind": "List", "items": objects},
                               {"apiVersion": "v1", "kind": "ServiceList",
                                "items": [service("svc2", {"app": "x"}, ns="other")]}])
    assert [s["metadata"]["name"] for s in cl.workloads.services_in("default")] == ["svc"]
    assert [s["metadata"]["name"] for s in cl.workloads.services_in("other")] == ["svc2"]
    assert cl.workloads.controller("StatefulSet", "data", "db") is not None
    with pytest.raises(UserError, match="spec.selector.matchLabels.app: expected a string"):
        cluster(kn("n1"), replica_set("rs", {"matchLabels": {"app": 1}}))
    with pytest.raises(UserError, match="a second Service of that name"):
        cluster(kn("n1"), service("svc", {}), service("svc", {}))


def test_topology_spread_is_no_longer_unmodelled():
    spread = kp("p", topologySpreadConstraints=[sc(1, "zone", DNS, FOO)])
    assert pod_unmodelled(spread) == []


# --- args, registration, the fast path --------------------------------------------------


def test_registered_in_the_default_profile_after_node_resources_fit():
    assert "PodTopologySpread" in IN_TREE and "PodTopologySpread" not in UPSTREAM_ONLY
    names = [name for name, _ in DEFAULT_MULTIPOINT]
    assert dict(DEFAULT_MULTIPOINT)["PodTopologySpread"] == 2
    assert names.index("NodeResourcesFit") < names.index("PodTopologySpread") < names.index("DefaultPreemption")
    if "InterPodAffinity" in names:
        assert names.index("PodTopologySpread") < names.index("InterPodAffinity")


@pytest.mark.parametrize(("args", "message"), [
    ({"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": SA}]},
     "defaultingType: System is invalid when .defaultConstraints are not empty"),
    ({"defaultingType": "Everything"}, "defaultingType: expected System or List"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 0, "topologyKey": "zone",
                                                        "whenUnsatisfiable": SA}]},
     "defaultConstraints[0].maxSkew: not in valid range"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "whenUnsatisfiable": SA}]},
     "defaultConstraints[0].topologyKey: required"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                                        "whenUnsatisfiable": "Maybe"}]},
     "defaultConstraints[0].whenUnsatisfiable: expected DoNotSchedule or ScheduleAnyway"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": SA,
                                                        "labelSelector": {}}]},
     "constraint must not define a selector"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": SA},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": SA}]},
     "defaultConstraints[1]: a second constraint"),
    ({"bogus": 1}, "bogus: unknown PodTopologySpread arg"),
])
def test_args_mistakes_name_the_field(compiler, args, message):
    cfg = config(plugin_config=[{"name": "PodTopologySpread", "args": args}])
    from wasm_scheduler.adapters.framework import Scheduler
    with pytest.raises(UserError) as info:
        Scheduler(cfg, cluster(kn("n1")), compiler)
    assert "pluginConfig[0] (PodTopologySpread): args" in str(info.value)
    assert message in str(info.value)


def test_a_pod_without_constraints_takes_the_fast_path():
    """No constraints and no default constraints that apply: PreFilter and PreScore Skip
    without reading a node."""

    class NoNodes(Sequence[NodeInfo]):
        def __getitem__(self, i):  # type: ignore[override]
            raise AssertionError("the fast path read the nodes")

        def __len__(self) -> int:
            raise AssertionError("the fast path read the nodes")

    plugin = PodTopologySpread(nodes=NoNodes(), workloads=NO_WORKLOADS)
    state = CycleState()
    assert plugin.pre_filter(state, kp("p", labels={"app": "web"})).status.code == Code.SKIP
    # System defaults are soft only; without workloads nothing selects the pod.
    assert plugin.pre_score(state, kp("p", labels={"app": "web"}), []).code == Code.SKIP
    listed = PodTopologySpread(nodes=NoNodes(), workloads=Workloads.of([service("s", {"app": "web"})]))
    assert listed.pre_filter(state, kp("p", labels={"app": "web"})).status.code == Code.SKIP


# --- in the scheduler -------------------------------------------------------------------


def test_hard_constraint_spreads_pods_across_zones(compiler):
    """Three pods with a zone constraint (maxSkew 1) on two zones land 2/1, never 3/0."""
    constraint = [sc(1, "zone", DNS, {"matchLabels": {"app": "web"}})]
    nodes = [kn("a1", zone="z1", hostname="a1"), kn("a2", zone="z1", hostname="a2"),
             kn("b1", zone="z2", hostname="b1")]
    pods = [kp(f"web-{i}", labels={"app": "web"}, topologySpreadConstraints=constraint) for i in range(3)]
    report = run(config(), cluster(*nodes, *pods), compiler)
    zones = {"a1": "z1", "a2": "z1", "b1": "z2"}
    placed = [zones[report.outcome(f"default/web-{i}").node] for i in range(3)]
    assert sorted(placed) == ["z1", "z1", "z2"]


def test_unsatisfiable_constraint_reports_kubes_reasons(compiler):
    constraint = [sc(1, "rack", DNS, {"matchLabels": {"app": "web"}})]
    cl = cluster(kn("n1", hostname="n1"), kn("n2", hostname="n2", rack="r1"),
                 kp("old", "n2", {"app": "web"}), kp("old2", "n2", {"app": "web"}),
                 kp("new", labels={"app": "web"}, topologySpreadConstraints=constraint))
    outcome = run(config(), cl, compiler).outcome("default/new")
    # n2's rack is the only domain: its minimum is itself, so n2 passes (2 + 1 - 2 <= 1).
    assert outcome.status == PodStatus.SCHEDULED and outcome.node == "n2"
    hard = [sc(1, "rack", DNS, {"matchLabels": {"app": "web"}}, min_domains=2)]
    cl = cluster(kn("n1", hostname="n1"), kn("n2", hostname="n2", rack="r1"),
                 kp("old", "n2", {"app": "web"}), kp("old2", "n2", {"app": "web"}),
                 kp("new", labels={"app": "web"}, topologySpreadConstraints=hard))
    outcome = run(config(), cl, compiler).outcome("default/new")
    assert outcome.status == PodStatus.UNSCHEDULABLE
    assert "1 node(s) didn't match pod topology spread constraints (PodTopologySpread)" in outcome.reason
    assert "1 node(s) didn't match pod topology spread constraints (missing required label) (PodTopologySpread)" \
        in outcome.reason


def test_system_defaults_spread_a_replicasets_pods(compiler):
    """System default constraints score a ReplicaSet's pod away from its sibling: hostname
    (maxSkew 3) and zone (maxSkew 5; nodes without a zone are one domain "")."""
    nodes = [kn("n1", hostname="n1"), kn("n2", hostname="n2")]
    rs = replica_set("web-1", {"matchLabels": {"app": "web"}})
    sibling = kp("web-a", "n1", {"app": "web"}, owner=rs_owner("web-1"))
    new = kp("web-b", labels={"app": "web"}, owner=rs_owner("web-1"))
    report = run(config(), cluster(*nodes, rs, sibling, new), compiler, explain=frozenset({"default/web-b"}))
    outcome = report.outcome("default/web-b")
    assert outcome.node == "n2"
    # The zone constraint is kept (nodes without a zone form the domain ""), but Score skips
    # it on a node without the label. Hostname: n1 round(1*log(2+2) + 3-1) = 3, n2 2;
    # normalized 100*(3+2-3)//3 = 66 and 100*(3+2-2)//3 = 100, times the weight 2.
    assert outcome.scores["PodTopologySpread"] == 200
    scores = outcome.traces[-1].nodes["n1"].scores
    assert scores["PodTopologySpread"] == (66, 132)


def test_system_defaults_with_zones():
    """System defaults on zoned nodes (a hand-computed case): hostname weight log(3+2),
    zone weight log(2+2). n1: 1*log(5) + 2 + 1*log(4) + 4 = 8.995 -> 9; n2: 2 + 5.386 -> 7;
    n3: 2 + 4 = 6. Normalized: 100*(9+6-s)//9 = 66, 88, 100."""
    nodes = [kn("n1", hostname="n1", topology_zone="z1"), kn("n2", hostname="n2", topology_zone="z1"),
             kn("n3", hostname="n3", topology_zone="z2")]
    setup = Setup(nodes, [kp("web-a", "n1", {"app": "web"}, owner=rs_owner("web-1"))], SYSTEM,
                  [replica_set("web-1", {"matchLabels": {"app": "web"}})])
    pod = kp("web-b", labels={"app": "web"}, owner=rs_owner("web-1"))
    assert setup.scores(pod, ["n1", "n2", "n3"]) == [("n1", 66), ("n2", 88), ("n3", 100)]


def test_a_victim_whose_removal_satisfies_the_spread_is_preempted(compiler):
    """Preemption calls RemovePod/AddPod on a copy of PreFilter's state: on n1 (2 web pods,
    n2 has 1 and is full) the spread is violated until one low-priority web pod goes."""
    constraint = [sc(1, HOSTNAME, DNS, {"matchLabels": {"app": "web"}})]
    cl = cluster(
        kn("n1", hostname="n1"), kn("n2", hostname="n2"),
        kp("low-1", "n1", {"app": "web"}, cpu="100m", priority=0, start="2024-01-01T00:00:00Z"),
        kp("low-2", "n1", {"app": "web"}, cpu="100m", priority=0, start="2024-01-02T00:00:00Z"),
        kp("high", "n2", {"app": "web"}, cpu="4", priority=1000),
        kp("urgent", labels={"app": "web"}, cpu="1", priority=100, topologySpreadConstraints=constraint))
    report = run(config(), cl, compiler)
    outcome = report.outcome("default/urgent")
    assert outcome.status == PodStatus.SCHEDULED and outcome.node == "n1"
    # Both go, the most important (the one that started first) comes back: one victim.
    assert report.preemptions == [Preemption("default/low-2", "default/urgent", "n1")]


def test_remove_pod_makes_a_node_feasible():
    """The plugin's own RemovePod (what DefaultPreemption calls through the framework)."""
    setup = Setup([kn("n1", hostname="n1"), kn("n2", hostname="n2")],
                  [kp("w1", "n1", {"app": "web"}), kp("w2", "n1", {"app": "web"}), kp("w3", "n2", {"app": "web"})],
                  LIST)
    pod = incoming({"app": "web"}, sc(1, HOSTNAME, DNS, {"matchLabels": {"app": "web"}}))
    assert setup.filter_codes(pod, ["n1"]) == {"n1": Code.UNSCHEDULABLE}
    state = setup.state.clone()
    n1 = setup.node("n1").without_pod(PodInfo.of(kp("w2", "n1", {"app": "web"})).uid)
    assert setup.plugin.remove_pod(state, pod, kp("w2", "n1", {"app": "web"}), n1).ok
    assert setup.plugin.filter_nodes(state, pod, [n1])["n1"].ok
    assert not setup.plugin.filter_nodes(setup.state, pod, [setup.node("n1")])["n1"].ok
