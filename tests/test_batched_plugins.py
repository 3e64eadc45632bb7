"""The default plugins' batched Filter and Score, and what the framework does with them.

NodeUnschedulable, NodeName, TaintToleration, NodeResourcesFit and NodeAffinity filter
and score many nodes in one call (`filter_nodes`, `score_nodes`), reading the pod once
and testing each node's common case inline. This module checks them, on random nodes
and pods (hypothesis), against per-node references written here from Kubernetes' rules,
and against each plugin's own per-node `filter`/`score`; it checks that
NodeResourcesFit's fast paths (Filter's inline test, Score's cpu-and-memory shortcut)
agree with its general ones. It also covers `ScoreTable` (a plugin's scores put in the
table's node order, bad columns reported as Error statuses), `Framework.run_score` and a
full scheduling run with a plugin that returns its scores out of node order, and that
`Snapshot.bind` leaves a node's images as its status reports them. NodePorts'
batched Filter, NodeResourcesBalancedAllocation's Score (its cpu-and-memory shortcut and its
general path) and ImageLocality's Score are checked the same way against references written
from kube-scheduler 1.33's source.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from tests.framework_support import cluster, config, node, pod, run
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.framework import Framework, ScoreTable
from wasm_scheduler.adapters.framework.handle import SchedulerHandle
from wasm_scheduler.adapters.framework.plugins import DEFAULT_MULTIPOINT
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, PluginContext
from wasm_scheduler.adapters.framework.plugins.image_locality import ImageLocality
from wasm_scheduler.adapters.framework.plugins.node_affinity import NodeAffinity
from wasm_scheduler.adapters.framework.plugins.node_name import NodeName
from wasm_scheduler.adapters.framework.plugins.node_ports import NodePorts
from wasm_scheduler.adapters.framework.plugins.node_resources_balanced_allocation import (
    NodeResourcesBalancedAllocation,
)
from wasm_scheduler.adapters.framework.plugins.node_resources_fit import NodeResourcesFit, insufficient
from wasm_scheduler.adapters.framework.plugins.node_unschedulable import NodeUnschedulable
from wasm_scheduler.adapters.framework.plugins.taint_toleration import TaintToleration
from wasm_scheduler.adapters.framework.pods import PodInfo
from wasm_scheduler.adapters.framework.resources import CPU, MEMORY, Resources, pod_requests
from wasm_scheduler.adapters.framework.results import PodStatus
from wasm_scheduler.adapters.framework.snapshot import NodeInfo, Snapshot
from wasm_scheduler.framework_api import SUCCESS, Code, NodeScore, NormalizeScoreResult, ScoreResult, Status

KubeObject = Mapping[str, Any]

UNSCHEDULABLE_KEY = "node.kubernetes.io/unschedulable"
EXTENDED = "example.com/foo"
TAINT_KEYS = ("dedicated", "gpu", UNSCHEDULABLE_KEY)
TAINT_VALUES = ("", "a", "b")
EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")
LABEL_KEYS = ("zone", "disk", "rank")
LABEL_VALUES = ("a", "b", "1", "5", "10")
ELSEWHERE = "elsewhere"  # a node name no generated node has (generated names are at most 3 letters)
#: Every score plugin of the default profile (those with a weight).
DEFAULT_SCORE_PLUGINS = tuple(name for name, weight in DEFAULT_MULTIPOINT if weight)

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- building objects ----------------------------------------------------------------------


def info(n: KubeObject, *pods: KubeObject) -> NodeInfo:
    """A NodeInfo of a node dict from `tests.framework_support.node` and the pods on it."""
    return NodeInfo.of(n, Resources.from_list(n["status"]["allocatable"]), [PodInfo.of(p) for p in pods])


def bare_pod(name: str, containers: Sequence[Mapping[str, str]], **spec: Any) -> dict[str, Any]:
    """A pod whose containers request exactly `containers` (an empty mapping: no requests at all)."""
    body: dict[str, Any] = {"containers": [
        {"name": f"c{i}", "image": "app:1", **({"resources": {"requests": dict(r)}} if r else {})}
        for i, r in enumerate(containers)]}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": body}


def plugin_context(name: str, args: Mapping[str, Any]) -> PluginContext:
    # The plugins built here read only their name and args: no handle or framework.
    return PluginContext(name, args, handle=None, framework=None)  # type: ignore[arg-type]


def fit_plugin(strategy: str, resources: Sequence[tuple[str, int]] | None = None) -> NodeResourcesFit:
    scoring: dict[str, Any] = {"type": strategy}
    if resources is not None:
        scoring["resources"] = [{"name": name, "weight": weight} for name, weight in resources]
    return NodeResourcesFit(plugin_context("NodeResourcesFit", {"scoringStrategy": scoring}))


def triple(status: Status) -> tuple[Code, str, str]:
    """What two statuses must share to be the same answer."""
    return status.code, status.reason, status.plugin


# --- strategies ----------------------------------------------------------------------------

taints = st.fixed_dictionaries(
    {"key": st.sampled_from(TAINT_KEYS), "effect": st.sampled_from(EFFECTS)},
    optional={"value": st.sampled_from(TAINT_VALUES)},
)
tolerations = st.fixed_dictionaries({}, optional={
    "key": st.sampled_from(("", *TAINT_KEYS)),
    "operator": st.sampled_from(("", "Equal", "Exists")),
    "value": st.sampled_from(TAINT_VALUES),
    "effect": st.sampled_from(("", *EFFECTS)),
})


def resource_lists(choices: Mapping[str, Sequence[str | None]]) -> st.SearchStrategy[dict[str, str]]:
    """ResourceLists with each resource drawn from its choices (None: the resource absent)."""
    drawn = st.fixed_dictionaries({name: st.sampled_from(values) for name, values in choices.items()})
    return drawn.map(lambda values: {name: value for name, value in values.items() if value is not None})


#: Allocatable resources: roomy nodes mostly, some full or lacking a resource (absent or "0").
allocatables = resource_lists({
    "pods": ("0", "1", "2", "110", "110", "110", "110", "110"),
    "cpu": (None, "0", "500m", "2", "4", "8", "8"),
    "memory": (None, "0", "512Mi", "1Gi", "4Gi", "8Gi", "8Gi"),
    "ephemeral-storage": (None, None, "0", "1Gi", "4Gi"),
    EXTENDED: (None, None, "0", "1", "2", "4"),
})
#: A node with room for any generated pod (unless its placed pods take it).
ROOMY = {"pods": "110", "cpu": "16", "memory": "32Gi", "ephemeral-storage": "16Gi", EXTENDED: "8"}
#: One container's requests: cpu and memory often, storage and the extended resource
#: seldom; any may be absent, or "0".
requests = resource_lists({
    "cpu": (None, "0", "100m", "500m", "1", "3"),
    "memory": (None, "0", "128Mi", "1Gi", "3Gi"),
    "ephemeral-storage": (None, None, None, None, "0", "512Mi", "2Gi"),
    EXTENDED: (None, None, None, None, None, None, "0", "1", "2"),
})
label_sets = st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), max_size=3)
#: Node selector requirements as the API server accepts them (In/NotIn with values,
#: Exists/DoesNotExist without, Gt/Lt with one integer).
expressions = st.one_of(
    st.fixed_dictionaries({"key": st.sampled_from(LABEL_KEYS), "operator": st.sampled_from(("In", "NotIn")),
                           "values": st.lists(st.sampled_from(LABEL_VALUES), min_size=1, max_size=3)}),
    st.fixed_dictionaries({"key": st.sampled_from(LABEL_KEYS),
                           "operator": st.sampled_from(("Exists", "DoesNotExist"))}),
    st.fixed_dictionaries({"key": st.sampled_from(LABEL_KEYS), "operator": st.sampled_from(("Gt", "Lt")),
                           "values": st.lists(st.sampled_from(("0", "1", "5", "7")), min_size=1, max_size=1)}),
)


def node_selector_terms(names: Sequence[str]) -> st.SearchStrategy[dict[str, Any]]:
    fields = st.fixed_dictionaries({
        "key": st.just("metadata.name"), "operator": st.sampled_from(("In", "NotIn")),
        "values": st.lists(st.sampled_from((*names, ELSEWHERE)), min_size=1, max_size=1),
    })
    return st.fixed_dictionaries({}, optional={"matchExpressions": st.lists(expressions, max_size=2),
                                               "matchFields": st.lists(fields, max_size=1)})


@st.composite
def node_infos(draw: st.DrawFn) -> list[NodeInfo]:
    names = draw(st.lists(st.text("abc", min_size=1, max_size=3), max_size=6, unique=True))
    infos = []
    for name in names:
        spec: dict[str, Any] = {}
        node_taints = draw(st.lists(taints, max_size=3))
        if node_taints:
            spec["taints"] = node_taints
        cordoned = draw(st.sampled_from((True, False, None)))  # None: the field absent
        if cordoned is not None:
            spec["unschedulable"] = cordoned
        allocatable = draw(st.one_of(allocatables, st.just(ROOMY)))
        body: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": draw(label_sets)},
            "status": {"allocatable": allocatable},
        }
        shape = draw(st.sampled_from(("dict", "missing", "null"))) if not spec else "dict"
        if shape == "dict":
            body["spec"] = spec
        elif shape == "null":
            body["spec"] = None
        placed = draw(st.lists(st.lists(requests, min_size=1, max_size=2), max_size=3))
        pods = [PodInfo.of(bare_pod(f"{name}-{i}", containers, nodeName=name)) for i, containers in enumerate(placed)]
        infos.append(NodeInfo.of(body, Resources.from_list(allocatable), pods))
    return infos


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[NodeInfo], dict[str, Any]]:
    """Random nodes and a random pod to place on them."""
    nodes = draw(node_infos())
    names = [n.name for n in nodes]
    spec: dict[str, Any] = {}
    pod_tolerations = draw(st.lists(tolerations, max_size=3))
    if draw(st.booleans()):
        pod_tolerations.append({"key": UNSCHEDULABLE_KEY, "operator": draw(st.sampled_from(("Exists", "Equal", ""))),
                                **draw(st.fixed_dictionaries({}, optional={"effect": st.sampled_from(EFFECTS)}))})
    if pod_tolerations:
        spec["tolerations"] = pod_tolerations
    wanted = draw(st.sampled_from(("", ELSEWHERE, *names)))
    if wanted:
        spec["nodeName"] = wanted
    selector = draw(label_sets)
    if selector:
        spec["nodeSelector"] = selector
    node_affinity: dict[str, Any] = {}
    if draw(st.booleans()):
        terms = node_selector_terms(names)
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": draw(st.lists(terms, max_size=3))}
    preferred: list[dict[str, Any]] = draw(st.lists(st.fixed_dictionaries({"weight": st.integers(1, 100),
                                                     "preference": node_selector_terms(names)}), max_size=3))
    if preferred:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    empty_affinity: bool = draw(st.booleans())  # an affinity with no required terms: only the selector counts
    if node_affinity or empty_affinity:
        spec["affinity"] = {"nodeAffinity": node_affinity}
    containers = draw(st.lists(requests, min_size=1, max_size=2))
    return nodes, bare_pod("p", containers, **spec)


# --- references: Kubernetes' rules, node by node -------------------------------------------


def k8s_tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """v1.Toleration.ToleratesTaint."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect", ""):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key", ""):
        return False
    operator = toleration.get("operator") or ""
    if operator in ("", "Equal"):
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return operator == "Exists"


def spec_of(obj: KubeObject) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def ref_node_unschedulable(pod: KubeObject, n: NodeInfo) -> Status:
    if not spec_of(n.node).get("unschedulable"):
        return SUCCESS
    cordon = {"key": UNSCHEDULABLE_KEY, "effect": "NoSchedule"}
    if any(k8s_tolerates(t, cordon) for t in spec_of(pod).get("tolerations") or ()):
        return SUCCESS
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) were unschedulable", "NodeUnschedulable")


def ref_node_name(pod: KubeObject, n: NodeInfo) -> Status:
    wanted = spec_of(pod).get("nodeName") or ""
    if not wanted or wanted == n.node["metadata"]["name"]:
        return SUCCESS
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't match the requested node name", "NodeName")


def ref_taint_toleration(pod: KubeObject, n: NodeInfo) -> Status:
    pod_tolerations = spec_of(pod).get("tolerations") or ()
    for taint in spec_of(n.node).get("taints") or ():
        if taint["effect"] in ("NoSchedule", "NoExecute") and not any(k8s_tolerates(t, taint) for t in pod_tolerations):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                          f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}",
                          "TaintToleration")
    return SUCCESS


def ref_fit_reasons(request: Resources, n: NodeInfo) -> list[str]:
    """kube-scheduler's fitsRequest (no ignored resources), extended resources by name."""
    have, used = n.allocatable, n.requested
    reasons = []
    if len(n.pods) + 1 > have.allowed_pods:
        reasons.append("Too many pods")
    if not (request.milli_cpu or request.memory or request.ephemeral_storage or request.scalar):
        return reasons
    if request.milli_cpu > 0 and request.milli_cpu > have.milli_cpu - used.milli_cpu:
        reasons.append("Insufficient cpu")
    if request.memory > 0 and request.memory > have.memory - used.memory:
        reasons.append("Insufficient memory")
    if request.ephemeral_storage > 0 and request.ephemeral_storage > have.ephemeral_storage - used.ephemeral_storage:
        reasons.append("Insufficient ephemeral-storage")
    for name, amount in sorted(request.scalar.items()):
        if amount != 0 and amount > have.scalar.get(name, 0) - used.scalar.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


def ref_node_resources_fit(pod: KubeObject, n: NodeInfo) -> Status:
    request = pod_requests(pod).requested
    reasons = ref_fit_reasons(request, n)
    # The module's own slow path must say the same (it is what the inline fast path falls back on).
    assert insufficient(request, n, NodeResourcesFit().args) == reasons
    return Status(Code.UNSCHEDULABLE, "; ".join(reasons), "NodeResourcesFit") if reasons else SUCCESS


def ref_requirement(value: str | None, operator: str, values: Sequence[str]) -> bool:
    """labels.Requirement.Matches for the operators a node selector has."""
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if value is None or not value.lstrip("-").isdigit():
        return False
    return int(value) > int(values[0]) if operator == "Gt" else int(value) < int(values[0])


def ref_term(term: Mapping[str, Any], n: NodeInfo) -> bool:
    """A NodeSelectorTerm: all its requirements (an empty term matches no node)."""
    exprs, fields = term.get("matchExpressions") or (), term.get("matchFields") or ()
    if not exprs and not fields:
        return False
    labels = n.node["metadata"].get("labels") or {}
    name = n.node["metadata"]["name"]
    return (all(ref_requirement(labels.get(e["key"]), e["operator"], e.get("values") or ()) for e in exprs)
            and all((name == f["values"][0]) == (f["operator"] == "In") for f in fields))


def ref_node_affinity(pod: KubeObject, n: NodeInfo) -> Status:
    labels = n.node["metadata"].get("labels") or {}
    selector = spec_of(pod).get("nodeSelector") or {}
    fits = all(labels.get(k) == v for k, v in selector.items())
    required = ((spec_of(pod).get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        fits = fits and any(ref_term(term, n) for term in required.get("nodeSelectorTerms") or ())
    if fits:
        return SUCCESS
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't match Pod's node affinity/selector",
                  "NodeAffinity")


FILTERS: dict[str, tuple[Callable[[], NativePlugin], Callable[[KubeObject, NodeInfo], Status]]] = {
    "NodeUnschedulable": (NodeUnschedulable, ref_node_unschedulable),
    "NodeName": (NodeName, ref_node_name),
    "TaintToleration": (TaintToleration, ref_taint_toleration),
    "NodeResourcesFit": (NodeResourcesFit, ref_node_resources_fit),
    "NodeAffinity": (NodeAffinity, ref_node_affinity),
}


def ref_resource_score(strategy: str, resources: Sequence[tuple[str, int]], pod: KubeObject, n: NodeInfo) -> int:
    """kube-scheduler's resourceAllocationScorer with LeastAllocated or MostAllocated."""
    request = pod_requests(pod).non_zero
    total = weights = 0
    for name, weight in resources:
        if name not in (CPU, MEMORY) and request.get(name) == 0:
            continue  # an extended resource the pod does not ask for
        capacity = n.allocatable.get(name)
        if capacity == 0:
            continue
        requested = n.non_zero_requested.get(name) + request.get(name)
        if strategy == "LeastAllocated":
            score = 0 if requested > capacity else (capacity - requested) * 100 // capacity
        else:
            score = min(requested, capacity) * 100 // capacity
        total += score * weight
        weights += weight
    return total // weights if weights else 0


def ref_prefer_no_schedule(pod: KubeObject, n: NodeInfo) -> int:
    prefer = [t for t in spec_of(pod).get("tolerations") or () if (t.get("effect") or "") in ("", "PreferNoSchedule")]
    return sum(1 for taint in spec_of(n.node).get("taints") or ()
               if taint["effect"] == "PreferNoSchedule" and not any(k8s_tolerates(t, taint) for t in prefer))


def ref_preferred_affinity(pod: KubeObject, n: NodeInfo) -> int:
    preferred = ((spec_of(pod).get("affinity") or {}).get("nodeAffinity") or {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution") or ()
    return sum(p["weight"] for p in preferred if ref_term(p["preference"], n))


# --- 1. Filter: batched == per-node reference == per-node filter ---------------------------


@PROPERTY
@given(case=cases())
def test_batched_filter_of_every_default_plugin_matches_a_per_node_kubernetes_reference(case) -> None:
    nodes, p = case
    names = [n.name for n in nodes]
    for plugin_name, (make, reference) in FILTERS.items():
        plugin = make()
        state = CycleState()
        pre = plugin.pre_filter(state, p)
        assert pre.status.code in (Code.SUCCESS, Code.SKIP, Code.UNSCHEDULABLE_AND_UNRESOLVABLE), plugin_name
        batched = plugin.filter_nodes(state, p, nodes)
        assert list(batched) == names, plugin_name
        for n in nodes:
            expected = triple(reference(p, n))
            assert triple(batched[n.name]) == expected, (plugin_name, n.name)
            assert triple(plugin.filter(state, p, n)) == expected, (plugin_name, n.name, "per-node filter")
        answers = {name: triple(status) for name, status in batched.items()}
        # A node's answer does not depend on the other nodes of the batch, nor on their order.
        backward = plugin.filter_nodes(state, p, nodes[::-1])
        assert list(backward) == names[::-1], plugin_name
        assert {name: triple(status) for name, status in backward.items()} == answers, plugin_name
        # Without PreFilter's cycle state (the plugins read the pod instead), the same answers.
        alone = plugin.filter_nodes(CycleState(), p, nodes)
        assert {name: triple(status) for name, status in alone.items()} == answers, plugin_name


@PROPERTY
@given(case=cases())
def test_node_affinity_prefilter_never_drops_a_node_its_filter_would_pass(case) -> None:
    nodes, p = case
    result = NodeAffinity().pre_filter(CycleState(), p)
    feasible = {n.name for n in nodes if ref_node_affinity(p, n).ok}
    if result.status.code == Code.SKIP:
        assert feasible == {n.name for n in nodes}
    elif not result.status.ok:
        assert not feasible  # "pod affinity terms conflict": no node can match
    elif result.node_names is not None:
        assert feasible <= result.node_names


def test_every_batched_filter_of_no_nodes_is_empty() -> None:
    for make, _reference in FILTERS.values():
        assert make().filter_nodes(CycleState(), pod("p", nodeName="x", nodeSelector={"a": "b"}), []) == {}


def test_node_resources_fit_fast_path_boundaries() -> None:
    """Exact fits pass; a node whose pod slots are all taken fails even when the resources fit."""
    plugin, state = NodeResourcesFit(), CycleState()
    p = pod("p", cpu="1", memory="1Gi")
    assert plugin.pre_filter(state, p).status.ok
    nodes = [
        info(node("exact", cpu="2", memory="2Gi"), pod("r", cpu="1", memory="1Gi", node_name="exact")),
        info(node("full", cpu="8", memory="8Gi", pods=1), pod("r", node_name="full")),
        info(node("one-slot-left", cpu="8", memory="8Gi", pods=2), pod("r", node_name="one-slot-left")),
        info(node("short", cpu="1500m", memory="1Gi"), pod("r", cpu="600m", memory="1", node_name="short")),
        info(node("no-slots", cpu="8", memory="8Gi", pods=0)),
    ]
    statuses = {name: triple(s) for name, s in plugin.filter_nodes(state, p, nodes).items()}
    rejected = Code.UNSCHEDULABLE
    assert statuses == {
        "exact": triple(SUCCESS),
        "full": (rejected, "Too many pods", "NodeResourcesFit"),
        "one-slot-left": triple(SUCCESS),
        "short": (rejected, "Insufficient cpu; Insufficient memory", "NodeResourcesFit"),
        "no-slots": (rejected, "Too many pods", "NodeResourcesFit"),
    }
    nothing = bare_pod("nothing", [{}])  # requests nothing: only the pod count can stop it
    assert [triple(s) for s in plugin.filter_nodes(CycleState(), nothing, nodes).values()] == [
        triple(SUCCESS), (rejected, "Too many pods", "NodeResourcesFit"), triple(SUCCESS), triple(SUCCESS),
        (rejected, "Too many pods", "NodeResourcesFit")]


def test_node_resources_fit_decides_a_pod_without_extended_resources_that_fits_without_the_slow_path() -> None:
    """The inline test must pass every node it can (exact fits included): `_fit` is for the rest."""
    slow: list[str] = []

    class CountingFit(NodeResourcesFit):
        def _fit(self, request: Resources, node: NodeInfo) -> Status:
            slow.append(node.name)
            return super()._fit(request, node)

    plugin = CountingFit()
    p = pod("p", cpu="1", memory="1Gi")
    nodes = [info(node("exact", cpu="1", memory="1Gi", pods=1)), info(node("roomy")),
             info(node("tight", cpu="1", memory="1Gi", pods=1), bare_pod("r", [{}], nodeName="tight")),
             info(node("no-memory", cpu="1", memory="0"))]
    statuses = plugin.filter_nodes(CycleState(), p, nodes)
    assert [s.ok for s in statuses.values()] == [True, True, False, False]
    assert slow == ["tight", "no-memory"]
    storage = bare_pod("s", [{"ephemeral-storage": "1Gi"}])
    disks = [info(node("disk", extra={"ephemeral-storage": "1Gi"})),
             info(node("small-disk", extra={"ephemeral-storage": "512Mi"}))]
    statuses = plugin.filter_nodes(CycleState(), storage, disks)
    assert statuses["disk"] is SUCCESS
    assert triple(statuses["small-disk"]) == (Code.UNSCHEDULABLE, "Insufficient ephemeral-storage", "NodeResourcesFit")
    assert slow == ["tight", "no-memory", "small-disk"]


def test_node_resources_fit_extended_resource_request_takes_the_slow_path_and_names_it() -> None:
    p = bare_pod("p", [{"cpu": "100m", EXTENDED: "2"}])
    nodes = [info(node("has", extra={EXTENDED: "2"})), info(node("lacks")),
             info(node("used", extra={EXTENDED: "2"}), bare_pod("r", [{EXTENDED: "1"}], nodeName="used"))]
    statuses = NodeResourcesFit().filter_nodes(CycleState(), p, nodes)
    assert [triple(s) for s in statuses.values()] == [
        triple(SUCCESS),
        (Code.UNSCHEDULABLE, f"Insufficient {EXTENDED}", "NodeResourcesFit"),
        (Code.UNSCHEDULABLE, f"Insufficient {EXTENDED}", "NodeResourcesFit")]


def test_taint_and_cordon_filters_on_nodes_with_and_without_a_spec() -> None:
    bare = NodeInfo.of({"metadata": {"name": "bare"}}, Resources())
    null_spec = NodeInfo.of({"metadata": {"name": "null"}, "spec": None}, Resources())
    cordoned = info(node("cordoned", unschedulable=True, taints=[{"key": "a", "effect": "PreferNoSchedule"}]))
    tainted = info(node("tainted", taints=[{"key": "a", "value": "x", "effect": "PreferNoSchedule"},
                                           {"key": "b", "value": "y", "effect": "NoExecute"}]))
    nodes = [bare, null_spec, cordoned, tainted]
    assert (bare.taints, bare.unschedulable, null_spec.taints, null_spec.unschedulable) == ((), False, (), False)
    assert cordoned.unschedulable and len(tainted.taints) == 2
    p = pod("p")
    cordon = NodeUnschedulable().filter_nodes(CycleState(), p, nodes)
    assert [s.ok for s in cordon.values()] == [True, True, False, True]
    taint = TaintToleration().filter_nodes(CycleState(), p, nodes)
    assert [s.ok for s in taint.values()] == [True, True, True, False]
    assert taint["tainted"].reason == "node(s) had untolerated taint {b: y}"
    tolerant = pod("p", tolerations=[{"key": UNSCHEDULABLE_KEY, "operator": "Exists", "effect": "NoSchedule"},
                                     {"key": "b", "operator": "Exists"}])
    assert all(s is SUCCESS for s in NodeUnschedulable().filter_nodes(CycleState(), tolerant, nodes).values())
    assert all(s.ok for s in TaintToleration().filter_nodes(CycleState(), tolerant, nodes).values())


# --- 2. Score: fast path == generic path == reference ---------------------------------------


@PROPERTY
@given(case=cases(), strategy=st.sampled_from(("LeastAllocated", "MostAllocated")), prefiltered=st.booleans())
def test_node_resources_fit_cpu_and_memory_score_shortcut_equals_the_generic_scorer(case, strategy,
                                                                                     prefiltered) -> None:
    nodes, p = case
    default = fit_plugin(strategy)  # cpu and memory, weight 1 each: the shortcut
    swapped = fit_plugin(strategy, [(MEMORY, 1), (CPU, 1)])  # the same figures, the generic per-node way
    assert default.args.resources == ((CPU, 1), (MEMORY, 1)) and swapped.args.resources == ((MEMORY, 1), (CPU, 1))
    state = CycleState()
    if prefiltered:
        assert default.pre_filter(state, p).status.ok
    fast = default.score_nodes(state, p, nodes)
    generic = swapped.score_nodes(state, p, nodes)
    assert fast.status.ok and generic.status.ok
    expected = [(n.name, ref_resource_score(strategy, ((CPU, 1), (MEMORY, 1)), p, n)) for n in nodes]
    assert list(fast.pairs()) == expected
    assert list(generic.pairs()) == expected
    assert [(n.name, default.score(state, p, n)) for n in nodes] == expected
    assert all(0 <= score <= 100 for _name, score in expected)


@PROPERTY
@given(case=cases(), strategy=st.sampled_from(("LeastAllocated", "MostAllocated")),
       weights=st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 5)))
def test_node_resources_fit_weighted_scoring_with_an_extended_resource_matches_the_reference(case, strategy,
                                                                                             weights) -> None:
    nodes, p = case
    resources = [(CPU, weights[0]), (MEMORY, weights[1]), (EXTENDED, weights[2])]
    plugin = fit_plugin(strategy, resources)
    result = plugin.score_nodes(CycleState(), p, nodes)
    assert list(result.pairs()) == [(n.name, ref_resource_score(strategy, resources, p, n)) for n in nodes]


@PROPERTY
@given(case=cases())
def test_taint_toleration_score_counts_untolerated_prefer_no_schedule_taints_and_normalizes_reversed(case) -> None:
    nodes, p = case
    plugin, state = TaintToleration(), CycleState()
    assert plugin.pre_score(state, p, nodes).ok
    result = plugin.score_nodes(state, p, nodes)
    expected = [ref_prefer_no_schedule(p, n) for n in nodes]
    assert result.status.ok
    assert list(result.pairs()) == list(zip([n.name for n in nodes], expected, strict=True))
    assert [plugin.score(state, p, n) for n in nodes] == expected
    assert list(plugin.score_nodes(CycleState(), p, nodes).pairs()) == list(result.pairs())  # no PreScore state
    normalized = plugin.normalize_score(state, p, result.scores)
    top = max(expected, default=0)
    assert normalized.status.ok
    assert [s.name for s in normalized.scores] == [n.name for n in nodes]
    assert [s.score for s in normalized.scores] == [100 - 100 * s // top if top else 100 for s in expected]


@PROPERTY
@given(case=cases())
def test_node_affinity_score_adds_the_weights_of_matching_preferred_terms(case) -> None:
    nodes, p = case
    plugin, state = NodeAffinity(), CycleState()
    pre = plugin.pre_score(state, p, nodes)
    expected = [ref_preferred_affinity(p, n) for n in nodes]
    if pre.code == Code.SKIP:
        assert not any(expected)
    result = plugin.score_nodes(state, p, nodes)
    assert list(result.pairs()) == list(zip([n.name for n in nodes], expected, strict=True))
    assert [plugin.score(state, p, n) for n in nodes] == expected


# --- 3. ScoreTable -------------------------------------------------------------------------


def test_score_table_takes_a_column_in_its_own_order_as_is() -> None:
    table = ScoreTable(["a", "b", "c"])
    scores = [10, 20, 30]
    column, status = table.column("P", ("a", "b", "c"), scores)
    assert status is SUCCESS and list(column) == [10, 20, 30]


def test_score_table_puts_a_column_in_another_order_in_the_tables_order() -> None:
    table = ScoreTable(["a", "b", "c"])
    column, status = table.column("P", ["c", "a", "b"], [30, 10, 20])
    assert status.ok and list(column) == [10, 20, 30]
    column, status = table.column("P", ["b", "c", "a"], [20, 30, 10])  # the index, built once, reused
    assert status.ok and list(column) == [10, 20, 30]


def test_score_table_reports_an_unknown_node() -> None:
    column, status = ScoreTable(["a", "b"]).column("P", ["a", "zz"], [1, 2])
    assert not column
    assert (status.code, status.plugin) == (Code.ERROR, "P")
    assert "'P'" in status.reason and "unknown node zz" in status.reason


def test_score_table_reports_a_node_left_out_when_another_is_scored_twice() -> None:
    column, status = ScoreTable(["a", "b", "c"]).column("P", ["a", "c", "a"], [1, 2, 3])
    assert not column
    assert (status.code, status.plugin) == (Code.ERROR, "P")
    assert "'P'" in status.reason and "no score for node b" in status.reason


@pytest.mark.parametrize("names", [["a", "b", "c"], ["c", "b", "a"]])
def test_score_table_reports_the_first_score_out_of_range(names: list[str]) -> None:
    column, status = ScoreTable(["a", "b", "c"]).column("P", names, [50, 101, -1])
    assert not column
    assert (status.code, status.plugin) == (Code.ERROR, "P")
    assert "invalid score 101" in status.reason and "[0, 100]" in status.reason
    _column, status = ScoreTable(["a", "b"]).column("P", ["a", "b"], [-1, 100])
    assert "invalid score -1" in status.reason
    column, status = ScoreTable(["a", "b"]).column("P", ["b", "a"], [0, 100])  # the bounds are fine
    assert status.ok and list(column) == [100, 0]


def test_score_table_totals_and_per_node_scores() -> None:
    table = ScoreTable(["a", "b", "c"])
    assert table.totals() == [0, 0, 0]
    table.add("P", [2, 4, 6])
    table.add("Q", [300, 0, 30])
    assert table.totals() == [302, 4, 36]
    assert table.of("a") == {"P": 2, "Q": 300} and table.of("c") == {"P": 6, "Q": 30}
    assert ScoreTable([]).totals() == []


# --- 4. Scores returned out of node order --------------------------------------------------


class FixedScorer(NativePlugin):
    """Scores nodes from a table, returned in node order or reversed, as NodeScores or columns."""

    def __init__(self, ctx: PluginContext | None, scores: Mapping[str, int], reverse: bool, columns: bool,
                 name: str = "") -> None:
        super().__init__(ctx, name)
        self.scores, self.reverse, self.as_columns = dict(scores), reverse, columns

    def score_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> ScoreResult:
        names = [n.name for n in (reversed(nodes) if self.reverse else nodes)]
        if self.as_columns:
            return ScoreResult.from_columns(SUCCESS, names, [self.scores[n] for n in names])
        return ScoreResult(SUCCESS, [NodeScore(n, self.scores[n]) for n in names])


class ReversingNormalizer(FixedScorer):
    """NormalizeScore that halves every score and returns them in reverse."""

    def normalize_score(self, state: CycleState, pod: KubeObject, scores: Sequence[NodeScore]) -> NormalizeScoreResult:
        return NormalizeScoreResult(SUCCESS, tuple(NodeScore(s.name, s.score // 2) for s in reversed(scores)))


@pytest.mark.parametrize("columns", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_run_score_puts_every_plugins_scores_in_node_order_and_weights_them(reverse: bool, columns: bool) -> None:
    nodes = [info(node(name)) for name in ("a", "b", "c")]
    fw = Framework("test", handle=None)  # type: ignore[arg-type]  # run_score does not use the handle
    fixed = FixedScorer(None, {"a": 90, "b": 50, "c": 10}, reverse, columns, name="Fixed")
    halved = ReversingNormalizer(None, {"a": 0, "b": 100, "c": 60}, reverse, columns, name="Halved")
    fw.points["score"] = [fixed, halved]
    fw.score_weights = {"Fixed": 2, "Halved": 1}
    table, status = fw.run_score(CycleState(), pod("p"), nodes)
    assert status.ok
    assert table.names == ["a", "b", "c"]
    assert list(table.columns["Fixed"]) == [180, 100, 20]
    assert list(table.columns["Halved"]) == [0, 50, 30]
    assert table.totals() == [180, 150, 50]


def test_run_score_reports_a_plugin_that_scores_a_node_twice() -> None:
    class Twice(NativePlugin):
        def score_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> ScoreResult:
            return ScoreResult(SUCCESS, [NodeScore(nodes[0].name, 1)] * len(nodes))

    fw = Framework("test", handle=None)  # type: ignore[arg-type]
    fw.points["score"] = [Twice(name="Twice")]
    _table, status = fw.run_score(CycleState(), pod("p"), [info(node("a")), info(node("b"))])
    assert status.code == Code.ERROR and "no score for node b" in status.reason and status.plugin == "Twice"


@pytest.mark.parametrize(("reverse", "columns"), [(False, False), (True, False), (True, True)])
def test_scheduling_lands_on_the_same_node_whatever_order_a_plugin_returns_its_scores(compiler, reverse: bool,
                                                                                      columns: bool) -> None:
    scores = {"a": 10, "b": 90, "c": 50}
    registry = {"Fixed": lambda ctx: FixedScorer(ctx, scores, reverse, columns)}
    plugins = {"score": {"disabled": [{"name": n} for n in DEFAULT_SCORE_PLUGINS]}}
    report = run(config("Fixed", plugins=plugins), cluster(node("a"), node("b"), node("c"), pod("p")), compiler,
                 registry)
    outcome = report.outcome("default/p")
    assert outcome is not None and outcome.status == PodStatus.SCHEDULED
    assert outcome.node == "b" and outcome.scores == {"Fixed": 90}


# --- 5. A bound pod's images -----------------------------------------------------------------


def test_binding_a_pod_leaves_its_nodes_images_as_the_node_reports_them() -> None:
    """kube-scheduler's node images are only the node's status.images (the kubelet reports a
    pulled image later): binding neither adds the pod's images nor replaces the node dict."""
    two_images = bare_pod("p", [{}, {}])
    two_images["spec"]["containers"][0]["image"] = "app:1"
    two_images["spec"]["containers"][1]["image"] = "nobody-has-it"
    cl = cluster(node("n1", images=[("app:1", 1000)]), node("n2", images=[("app:1", 3000)]), node("n3"),
                 two_images, pod("q", image="app:1"))
    snapshot = cl.snapshot()
    p, q = (cl.find_pending(name) for name in ("p", "q"))
    assert p is not None and q is not None
    for pending, name in ((p, "n3"), (q, "n1")):
        snapshot.assume(pending, name)
        before = snapshot.node_info(name)
        assert snapshot.bind(pending.uid, name) == ""
        after = snapshot.node_info(name)
        assert before is not None and after is not None and after.node is before.node
    n3 = snapshot.node_info("n3")
    assert n3 is not None and n3.images() == {}
    view = snapshot.update_view()
    assert view.image_states("n3") == {}
    assert view.image_states("n1") == {"app:1": {"Size": 1000, "NumNodes": 2}}


# --- 6. NodePorts, NodeResourcesBalancedAllocation, ImageLocality ----------------------------
#
# Each batched form against a per-node reference written here from kube-scheduler 1.33's
# source (HostPortInfo.CheckConflict; balancedResourceScorer with useRequested;
# ImageLocality's Score), against the plugin's own per-node answer, and, for the plugins
# that cache per node, with one long-lived plugin across examples (node names recur with
# other pods and images, as a node's NodeInfo does between cycles).

PORT_PROTOCOLS = ("", "TCP", "UDP")
PORT_IPS = ("", "0.0.0.0", "10.0.0.1", "10.0.0.2")
host_port_specs = st.fixed_dictionaries(
    {"containerPort": st.just(80)},
    optional={"hostPort": st.sampled_from((0, 80, 81)), "protocol": st.sampled_from(PORT_PROTOCOLS),
              "hostIP": st.sampled_from(PORT_IPS)})


def ported_pod(name: str, ports: Sequence[Mapping[str, Any]], sidecar: Sequence[Mapping[str, Any]] = (),
               init: Sequence[Mapping[str, Any]] = (), **spec: Any) -> dict[str, Any]:
    body = bare_pod(name, [{}], **spec)
    body["spec"]["containers"][0]["ports"] = list(ports)
    inits = []
    if sidecar:
        inits.append({"name": "side", "image": "side:1", "restartPolicy": "Always", "ports": list(sidecar)})
    if init:
        inits.append({"name": "init", "image": "init:1", "ports": list(init)})
    if inits:
        body["spec"]["initContainers"] = inits
    return body


@st.composite
def port_cases(draw: st.DrawFn) -> tuple[list[NodeInfo], dict[str, Any]]:
    names = draw(st.lists(st.text("abc", min_size=1, max_size=3), max_size=5, unique=True))
    nodes = []
    for name in names:
        placed = [ported_pod(f"{name}-{i}", draw(st.lists(host_port_specs, max_size=3)),
                             draw(st.lists(host_port_specs, max_size=1)), draw(st.lists(host_port_specs, max_size=1)),
                             nodeName=name)
                  for i in range(draw(st.integers(0, 3)))]
        nodes.append(info(node(name), *placed))
    wanted = ported_pod("p", draw(st.lists(host_port_specs, max_size=3)), draw(st.lists(host_port_specs, max_size=1)),
                        draw(st.lists(host_port_specs, max_size=1)))
    return nodes, wanted


def ref_host_ports(pod: KubeObject) -> list[tuple[str, str, int]]:
    """util.GetHostPorts, sanitized as HostPortInfo.Add does."""
    spec = spec_of(pod)
    containers = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    containers += list(spec.get("containers") or ())
    return [(p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", p["hostPort"])
            for c in containers for p in c.get("ports") or () if p.get("hostPort", 0) > 0]


def ref_node_ports(pod: KubeObject, n: NodeInfo) -> Status:
    used: dict[str, set[tuple[str, int]]] = {}
    for placed in n.pods:
        for ip, protocol, port in ref_host_ports(placed.pod):
            used.setdefault(ip, set()).add((protocol, port))
    for ip, protocol, port in ref_host_ports(pod):
        keys = list(used) if ip == "0.0.0.0" else ["0.0.0.0", ip]
        if any((protocol, port) in used.get(key, set()) for key in keys):
            return Status(Code.UNSCHEDULABLE, "node(s) didn't have free ports for the requested pod ports", "NodePorts")
    return SUCCESS


LONG_LIVED_PORTS = NodePorts()


@PROPERTY
@given(case=port_cases())
def test_node_ports_batched_filter_matches_a_per_node_kubernetes_reference(case) -> None:
    nodes, p = case
    plugin, state = NodePorts(), CycleState()
    pre = plugin.pre_filter(state, p)
    assert pre.status.code == (Code.SUCCESS if ref_host_ports(p) else Code.SKIP)
    expected = {n.name: triple(ref_node_ports(p, n)) for n in nodes}
    for candidate in (plugin, LONG_LIVED_PORTS):
        batched = candidate.filter_nodes(state, p, nodes)
        assert list(batched) == [n.name for n in nodes]
        assert {name: triple(s) for name, s in batched.items()} == expected
        assert {n.name: triple(candidate.filter(state, p, n)) for n in nodes} == expected
        alone = candidate.filter_nodes(CycleState(), p, nodes[::-1])  # no PreFilter state: the pod is read
        assert {name: triple(s) for name, s in alone.items()} == expected


def ref_balanced(resources: Sequence[str], pod: KubeObject, n: NodeInfo) -> int:
    """balancedResourceScorer over calculateResourceAllocatableRequest with useRequested."""
    request = pod_requests(pod).requested
    fractions: list[float] = []
    for name in resources:
        wanted = request.get(name)
        if name == CPU:
            alloc, used = n.allocatable.milli_cpu, n.requested.milli_cpu
        elif name == MEMORY:
            alloc, used = n.allocatable.memory, n.requested.memory
        elif wanted == 0:
            continue
        else:
            alloc, used = n.allocatable.scalar.get(name, 0), n.requested.scalar.get(name, 0)
        if alloc:
            fractions.append(min((used + wanted) / alloc, 1.0))
    if len(fractions) == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    elif len(fractions) > 2:
        mean = 0.0
        for f in fractions:
            mean += f
        mean /= len(fractions)
        squares = 0.0
        for f in fractions:
            squares += (f - mean) * (f - mean)
        std = math.sqrt(squares / len(fractions))
    else:
        std = 0.0
    return int((1 - std) * 100)


def balanced(resources: Sequence[str]) -> NodeResourcesBalancedAllocation:
    args = {"resources": [{"name": name, "weight": 1} for name in resources]}
    return NodeResourcesBalancedAllocation(plugin_context("NodeResourcesBalancedAllocation", args))


@PROPERTY
@given(case=cases(), prescored=st.booleans())
def test_balanced_allocation_shortcut_generic_path_and_reference_agree(case, prescored) -> None:
    nodes, p = case
    default, swapped, extended = balanced((CPU, MEMORY)), balanced((MEMORY, CPU)), balanced((CPU, MEMORY, EXTENDED))
    request = pod_requests(p).requested
    best_effort = not (request.milli_cpu or request.memory)
    for plugin, resources in ((default, (CPU, MEMORY)), (swapped, (MEMORY, CPU)), (extended, (CPU, MEMORY, EXTENDED))):
        state = CycleState()
        skipped = False
        if prescored:
            status = plugin.pre_score(state, p, nodes)
            skipped = status.code == Code.SKIP
            assert skipped == (not any(request.get(r) for r in resources))
        if skipped:
            continue  # the framework does not call Score
        nothing = not any(request.get(r) for r in resources)
        expected = [(n.name, 0 if nothing else ref_balanced(resources, p, n)) for n in nodes]
        assert list(plugin.score_nodes(state, p, nodes).pairs()) == expected, resources
        assert [(n.name, plugin.score(state, p, n)) for n in nodes] == expected, resources
        assert all(0 <= score <= 100 for _name, score in expected)
    if not best_effort:
        assert list(default.score_nodes(CycleState(), p, nodes).pairs()) == list(
            swapped.score_nodes(CycleState(), p, nodes).pairs())


IMAGE_NAMES = ("app", "app:latest", "app:1", "reg.io/app:1", "reg.io:5000/app", "other@sha256:ab", "big:2")
IMAGE_SIZES = (0, 10 * 1024**2, 30 * 1024**2, 500 * 1024**2, 1500 * 1024**2)


@st.composite
def image_cases(draw: st.DrawFn) -> tuple[list[NodeInfo], list[int], dict[str, Any]]:
    """Nodes with images (some names normalized, some not), the nodes scored, and a pod."""
    names = draw(st.lists(st.text("abc", min_size=1, max_size=3), min_size=1, max_size=6, unique=True))
    nodes = []
    for name in names:
        images = draw(st.lists(st.tuples(st.sampled_from(IMAGE_NAMES), st.sampled_from(IMAGE_SIZES)), max_size=4))
        nodes.append(info(node(name, images=images)))
    scored = draw(st.lists(st.integers(0, len(nodes) - 1), min_size=1, max_size=len(nodes), unique=True))
    body = bare_pod("p", [{}] * draw(st.integers(1, 3)))
    for container in body["spec"]["containers"]:
        container["image"] = draw(st.sampled_from(IMAGE_NAMES))
    if draw(st.booleans()):
        body["spec"]["initContainers"] = [{"name": "init", "image": draw(st.sampled_from(IMAGE_NAMES))}]
    return nodes, scored, body


def ref_image_locality(pod: KubeObject, n: NodeInfo, all_nodes: Sequence[NodeInfo]) -> int:
    """ImageLocality.Score: sumImageScores, then calculatePriority."""
    def names(m: NodeInfo) -> dict[str, int]:
        return {name: image["sizeBytes"] for image in m.node["status"]["images"] for name in image["names"]}

    spec = spec_of(pod)
    containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    total = 0
    for container in containers:
        image = container["image"]
        if image.rfind(":") <= image.rfind("/"):
            image += ":latest"
        if image in names(n):
            having = sum(1 for m in all_nodes if image in names(m))
            total += int(names(n)[image] * (having / len(all_nodes)))
    low, high = 23 * 1024**2, 1000 * 1024**2 * len(containers)
    total = min(max(total, low), high)
    return 100 * (total - low) // (high - low)


class _Holder:
    """A stand-in for the scheduler's handle: only `snapshot` is read."""

    snapshot: Snapshot | None = None


LONG_LIVED_HANDLE = _Holder()
LONG_LIVED_IMAGES = ImageLocality(PluginContext("ImageLocality", {}, LONG_LIVED_HANDLE, None))  # type: ignore[arg-type]


@PROPERTY
@given(case=image_cases())
def test_image_locality_batched_per_node_and_reference_agree_on_the_snapshots_nodes(case) -> None:
    nodes, scored_at, p = case
    snapshot = Snapshot(nodes)
    snapshot.update_view()
    LONG_LIVED_HANDLE.snapshot = snapshot
    fresh = ImageLocality(PluginContext("ImageLocality", {}, SchedulerHandle(snapshot), None))  # type: ignore[arg-type]
    scored = [nodes[i] for i in scored_at]
    expected = [(n.name, ref_image_locality(p, n, nodes)) for n in scored]
    for plugin in (fresh, LONG_LIVED_IMAGES):
        assert list(plugin.score_nodes(CycleState(), p, scored).pairs()) == expected
        assert [(n.name, plugin.score(CycleState(), p, n)) for n in scored] == expected
    alone = ImageLocality()  # no scheduler: the nodes given are all the nodes
    assert list(alone.score_nodes(CycleState(), p, nodes).pairs()) == [
        (n.name, ref_image_locality(p, n, nodes)) for n in nodes]
