"""PodTopologySpread: kube-scheduler v1.33's even spreading of pods across topology domains.

This module owns the plugin and what it is made of: label selectors as kube's
``labels.Selector`` reads them (`Selector`), a pod's spread constraints with their
defaults (`SpreadConstraint`: ``minDomains`` 1, ``nodeAffinityPolicy`` Honor,
``nodeTaintsPolicy`` Ignore, ``matchLabelKeys`` values merged into the selector), the
default constraints (``defaultingType: System``: maxSkew 3 on the hostname and 5 on
the zone, ScheduleAnyway, for pods selected by a Service, ReplicaSet, StatefulSet or
ReplicationController of the snapshot: `default_selector`), and
`missing_default_spread_owners`, which names the controllers such a pod refers to
that the snapshot lacks (so its default spreading cannot be modelled).

PreFilter counts, over all nodes, the matching pods of each DoNotSchedule constraint
per topology value, and keeps the two smallest counts of each (`PreFilterState`), so
Filter costs O(1) per node and constraint; AddPod/RemovePod (preemption, nominated
pods) update it. PreScore/Score/NormalizeScore implement the ScheduleAnyway
constraints with v1.33's formula (docs/framework.md, "PodTopologySpread"). A pod
without constraints, and without default constraints that apply to it, costs one
dictionary lookup per extension point: PreFilter and PreScore return Skip.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, PluginContext
from wasm_scheduler.adapters.framework.plugins.matching import (
    first_untolerated,
    labels_match,
    node_selector_matches,
    pod_tolerations,
)
from wasm_scheduler.adapters.framework.pods import KubeObject, PodInfo
from wasm_scheduler.adapters.framework.snapshot import NodeInfo, node_labels
from wasm_scheduler.adapters.framework.workloads import NO_WORKLOADS, Workloads
from wasm_scheduler.framework_api import (
    MAX_NODE_SCORE,
    SUCCESS,
    ActionType,
    ClusterEvent,
    Code,
    NodeScore,
    NormalizeScoreResult,
    PreFilterResult,
    Resource,
    ScoreResult,
    Status,
    node_scores,
)

if TYPE_CHECKING:
    from wasm_scheduler.adapters.framework.cluster import Cluster

NAME = "PodTopologySpread"
REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
REASON_NODE_LABEL_NOT_MATCH = REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"

#: kube-scheduler's systemDefaultConstraints (plugin.go).
SYSTEM_DEFAULT_CONSTRAINTS: tuple[Mapping[str, Any], ...] = (
    {"topologyKey": HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
    {"topologyKey": ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
)

_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME
#: criticalPaths' initial MatchNum (math.MaxInt32).
_MAX_INT32 = 2**31 - 1
#: (core group, v1) ReplicationController; (apps, v1) ReplicaSet and StatefulSet: the
#: controllers helper.DefaultSelector reads, by (apiVersion, kind) of the owner reference.
_CONTROLLER_GVKS = frozenset({("v1", "ReplicationController"), ("apps/v1", "ReplicaSet"),
                              ("apps/v1", "StatefulSet")})


class SpreadError(ValueError):
    """A constraint or selector kube-scheduler would not parse (the plugin answers Error)."""


# --- label selectors ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement of a label selector: In (also ``=``), NotIn, Exists, DoesNotExist."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            value = labels.get(self.key)
            return value is not None and value in self.values
        if op == "NotIn":
            value = labels.get(self.key)
            return value is None or value not in self.values
        if op == "Exists":
            return self.key in labels
        return self.key not in labels  # DoesNotExist


@dataclass(frozen=True, slots=True)
class Selector:
    """kube's labels.Selector: requirements ANDed; `nothing` matches no labels (a nil
    LabelSelector); no requirements match every label set (an empty one)."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False
    #: The requirements that are one equality (``key=value``), tested first and fast.
    equals: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)
    #: The other requirements.
    others: tuple[Requirement, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        equals = [(r.key, next(iter(r.values))) for r in self.requirements
                  if r.operator == "In" and len(r.values) == 1]
        others = tuple(r for r in self.requirements if r.operator != "In" or len(r.values) != 1)
        object.__setattr__(self, "equals", tuple(equals))
        object.__setattr__(self, "others", others)

    @property
    def empty(self) -> bool:
        """labels.Selector.Empty(): no requirements (Nothing is not empty)."""
        return not self.nothing and not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for key, value in self.equals:
            if labels.get(key) != value:
                return False
        return not self.others or all(r.matches(labels) for r in self.others)

    def add(self, requirements: Iterable[Requirement]) -> Selector:
        """labels.Selector.Add: Nothing stays Nothing."""
        if self.nothing:
            return self
        return Selector((*self.requirements, *requirements))


NOTHING = Selector(nothing=True)
EVERYTHING = Selector()


def selector_from_set(labels: Mapping[str, str]) -> Selector:
    """labels.SelectorFromSet / Set.AsSelector: one equality per label (none: Everything)."""
    return Selector(tuple(Requirement(str(k), "In", frozenset((str(v),))) for k, v in sorted(labels.items())))


def label_selector(raw: Any) -> Selector:
    """metav1.LabelSelectorAsSelector: None is Nothing, {} is Everything; SpreadError if malformed."""
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        raise SpreadError(f"labelSelector: expected a mapping, got {type(raw).__name__}")
    match_labels = raw.get("matchLabels") or {}
    expressions = raw.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        raise SpreadError("labelSelector: matchLabels must be a mapping and matchExpressions a list")
    requirements = [Requirement(str(k), "In", frozenset((str(v),))) for k, v in match_labels.items()]
    for expr in expressions:
        if not isinstance(expr, Mapping):
            raise SpreadError("labelSelector.matchExpressions: expected mappings")
        key, op = str(expr.get("key") or ""), expr.get("operator")
        values = [str(v) for v in expr.get("values") or ()]
        if op in ("In", "NotIn"):
            if not values:
                raise SpreadError(f"labelSelector: for 'in', 'notin' operators, values set can't be empty "
                                  f"(key {key!r})")
        elif op in ("Exists", "DoesNotExist"):
            if values:
                raise SpreadError(f"labelSelector: values set must be empty for exists and does not exist "
                                  f"(key {key!r})")
        else:
            raise SpreadError(f"labelSelector: {op!r} is not a valid label selector operator")
        requirements.append(Requirement(key, str(op), frozenset(values)))
    return Selector(tuple(requirements))


def pod_labels(pod: KubeObject) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


def _namespace(pod: KubeObject) -> str:
    return str((pod.get("metadata") or {}).get("namespace") or "default")


def count_matching(pods: Sequence[PodInfo], selector: Selector, namespace: str) -> int:
    """countPodsMatchSelector: pods of `namespace`, not terminating, whose labels match
    (an empty selector counts none)."""
    if selector.nothing or not selector.requirements:
        return 0
    equals, others = selector.equals, selector.others
    count = 0
    for info in pods:
        meta = info.pod.get("metadata") or {}
        if (meta.get("namespace") or "default") != namespace or meta.get("deletionTimestamp"):
            continue
        labels = meta.get("labels") or {}
        for key, value in equals:
            if labels.get(key) != value:
                break
        else:
            if not others or all(r.matches(labels) for r in others):
                count += 1
    return count


# --- constraints ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A parsed topologySpreadConstraint (kube's internal topologySpreadConstraint)."""

    max_skew: int
    topology_key: str
    selector: Selector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


def _int(value: Any, field_name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpreadError(f"{field_name}: expected an integer, got {value!r}")
    return value


def filter_constraints(raw: Iterable[Any], labels: Mapping[str, str], action: str) -> list[SpreadConstraint]:
    """filterTopologySpreadConstraints: the constraints whose whenUnsatisfiable is `action`,
    parsed, with matchLabelKeys' values (from the pod's `labels`) ANDed into the selector."""
    result: list[SpreadConstraint] = []
    for c in raw:
        if not isinstance(c, Mapping):
            raise SpreadError("topologySpreadConstraints: expected mappings")
        if c.get("whenUnsatisfiable") != action:
            continue
        selector = label_selector(c.get("labelSelector"))
        keys = c.get("matchLabelKeys") or ()
        if keys:
            merged = {str(k): labels[k] for k in keys if k in labels}
            if merged and not selector.nothing:  # mergeLabelSetWithSelector: Nothing stays Nothing
                selector = selector_from_set(merged).add(selector.requirements)
        min_domains = c.get("minDomains")
        result.append(SpreadConstraint(
            max_skew=_int(c.get("maxSkew"), "maxSkew"),
            topology_key=str(c.get("topologyKey") or ""),
            selector=selector,
            min_domains=1 if min_domains is None else _int(min_domains, "minDomains"),
            node_affinity_policy=str(c.get("nodeAffinityPolicy") or HONOR),
            node_taints_policy=str(c.get("nodeTaintsPolicy") or IGNORE),
        ))
    return result


def controller_ref(pod: KubeObject) -> Mapping[str, Any] | None:
    """metav1.GetControllerOf: the owner reference with controller: true."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def default_selector(pod: KubeObject, workloads: Workloads) -> Selector:
    """helper.DefaultSelector: the selectors of the Services selecting the pod, and of its
    controller (ReplicationController, ReplicaSet or StatefulSet) when the snapshot has it."""
    namespace = _namespace(pod)
    labels = pod_labels(pod)
    merged: dict[str, str] = {}
    for service in workloads.services_in(namespace):
        chosen = (service.get("spec") or {}).get("selector")
        if chosen is None:  # a nil selector selects nothing, not everything
            continue
        if labels_match(chosen, {"metadata": {"labels": labels}}):
            merged.update({str(k): str(v) for k, v in chosen.items()})
    selector = selector_from_set(merged)
    owner = controller_ref(pod)
    if owner is None:
        return selector
    gvk = (owner.get("apiVersion"), owner.get("kind"))
    if gvk not in _CONTROLLER_GVKS:
        return selector
    kind, name = str(owner.get("kind")), str(owner.get("name") or "")
    controller = workloads.controller(kind, namespace, name)
    if controller is None:
        return selector
    spec_selector = (controller.get("spec") or {}).get("selector")
    if kind == "ReplicationController":
        merged.update({str(k): str(v) for k, v in (spec_selector or {}).items()})
        return selector_from_set(merged)
    try:
        other = label_selector(spec_selector)
    except SpreadError:
        return selector
    return selector if other.nothing else selector.add(other.requirements)


def missing_default_spread_owners(pod: KubeObject, cluster: Cluster | Workloads) -> list[str]:
    """The controller of `pod` that default topology spreading would read and the snapshot
    lacks, as ``["ReplicaSet default/web-7d9f"]``; [] when nothing is missing.

    Only a pod without topologySpreadConstraints of its own gets default constraints, and
    only its controller reference (``controller: true``) to a ``v1`` ReplicationController
    or an ``apps/v1`` ReplicaSet or StatefulSet is read, as kube's helper.DefaultSelector
    does. Such a pod's default spreading cannot be modelled when its controller is missing
    (a ``kubectl get nodes,pods`` snapshot has none): the simulation scores it as if no
    controller selected it. Services are found by their selectors, not by a reference, so
    a missing Service cannot be detected. Whether default constraints apply at all depends
    on the profile (PodTopologySpread enabled, ``defaultingType: System`` or non-empty
    ``defaultConstraints``): the caller decides that.
    """
    if ((pod.get("spec") or {}).get("topologySpreadConstraints")):
        return []
    owner = controller_ref(pod)
    if owner is None or (owner.get("apiVersion"), owner.get("kind")) not in _CONTROLLER_GVKS:
        return []
    workloads = cluster if isinstance(cluster, Workloads) else cluster.workloads
    namespace, kind, name = _namespace(pod), str(owner.get("kind")), str(owner.get("name") or "")
    if workloads.controller(kind, namespace, name) is not None:
        return []
    return [f"{kind} {namespace}/{name}"]


# --- node inclusion -------------------------------------------------------------------


class _NodeInclusion:
    """The incoming pod's required node affinity and tolerations, read once per cycle:
    does a node count for a constraint (nodeAffinityPolicy, nodeTaintsPolicy)."""

    __slots__ = ("node_selector", "required", "tolerations")

    def __init__(self, pod: KubeObject) -> None:
        spec = pod.get("spec") or {}
        self.node_selector: Mapping[str, Any] = spec.get("nodeSelector") or {}
        affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        self.required: Mapping[str, Any] | None = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        self.tolerations = pod_tolerations(pod)

    def affinity_matches(self, node: KubeObject) -> bool:
        """nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)."""
        if self.node_selector and not labels_match(self.node_selector, node):
            return False
        return self.required is None or node_selector_matches(self.required, node)

    def taints_tolerated(self, node: NodeInfo) -> bool:
        """No NoSchedule/NoExecute taint of the node is untolerated."""
        return not node.taints or first_untolerated(node.taints, self.tolerations,
                                                    ("NoSchedule", "NoExecute")) is None

    def includes(self, constraint: SpreadConstraint, node: NodeInfo,
                 cache: dict[str, bool]) -> bool:
        """matchNodeInclusionPolicies; `cache` holds this node's answers across constraints."""
        if constraint.node_affinity_policy == HONOR:
            ok = cache.get("affinity")
            if ok is None:
                ok = cache["affinity"] = self.affinity_matches(node.node)
            if not ok:
                return False
        if constraint.node_taints_policy == HONOR:
            ok = cache.get("taints")
            if ok is None:
                ok = cache["taints"] = self.taints_tolerated(node)
            if not ok:
                return False
        return True


def _has_keys(labels: Mapping[str, str], constraints: Sequence[SpreadConstraint]) -> bool:
    """nodeLabelsMatchSpreadConstraints: every constraint's topology key is a label."""
    return all(c.topology_key in labels for c in constraints)


def _selector_slots(constraints: Sequence[SpreadConstraint]) -> tuple[tuple[int, ...], int]:
    """Each constraint's index among the distinct selectors, and how many there are (a
    node's pods are counted once per distinct selector)."""
    distinct: list[Selector] = []
    slots: list[int] = []
    for c in constraints:
        for j, other in enumerate(distinct):
            if other == c.selector:
                slots.append(j)
                break
        else:
            slots.append(len(distinct))
            distinct.append(c.selector)
    return tuple(slots), len(distinct)


# --- PreFilter state ------------------------------------------------------------------


@dataclass(slots=True)
class CriticalPaths:
    """Two topology values of a constraint with the smallest match counts seen: the first
    always holds the minimum; the second is not guaranteed to be the second smallest."""

    value0: str = ""
    num0: int = _MAX_INT32
    value1: str = ""
    num1: int = _MAX_INT32

    def update(self, value: str, num: int) -> None:
        """criticalPaths.update."""
        if value == self.value0:
            self.num0 = num
        elif value == self.value1:
            self.num1 = num
        else:
            if num < self.num0:
                self.value1, self.num1 = self.value0, self.num0
                self.value0, self.num0 = value, num
            elif num < self.num1:
                self.value1, self.num1 = value, num
            return
        if self.num0 > self.num1:
            self.value0, self.num0, self.value1, self.num1 = self.value1, self.num1, self.value0, self.num0

    def pairs(self) -> tuple[tuple[str, int], tuple[str, int]]:
        return (self.value0, self.num0), (self.value1, self.num1)


@dataclass(slots=True)
class PreFilterState:
    """What PreFilter computed for Filter: per DoNotSchedule constraint, the matching pods
    per topology value (`counts`, kube's TpValueToMatchNum) and the critical paths."""

    constraints: tuple[SpreadConstraint, ...]
    counts: list[dict[str, int]]
    critical_paths: list[CriticalPaths]
    #: 1 where the incoming pod matches the constraint's selector (it counts itself), else 0.
    self_match: tuple[int, ...] = ()
    namespace: str = "default"
    inclusion: _NodeInclusion | None = field(default=None, repr=False)

    def min_match_num(self, i: int) -> int:
        """The global minimum of constraint i; 0 when it has fewer domains than minDomains."""
        if len(self.counts[i]) < self.constraints[i].min_domains:
            return 0
        return self.critical_paths[i].num0

    def clone(self) -> PreFilterState:
        """The constraints are shared; counts and critical paths are copied."""
        return PreFilterState(self.constraints, [dict(c) for c in self.counts],
                              [CriticalPaths(p.value0, p.num0, p.value1, p.num1) for p in self.critical_paths],
                              self.self_match, self.namespace, self.inclusion)


@dataclass(slots=True)
class PreScoreState:
    """What PreScore computed for Score and NormalizeScore."""

    constraints: tuple[SpreadConstraint, ...]
    #: Nodes missing a topology key of the constraints (they score 0).
    ignored: frozenset[str]
    #: Per constraint, matching pods per topology value (empty for the hostname key:
    #: a node's own pods are counted in Score).
    counts: list[dict[str, int]]
    #: Per constraint, log(number of its topology values among the scored nodes + 2).
    weights: list[float]
    namespace: str

    def clone(self) -> PreScoreState:
        return self  # never changed after PreScore, as kube's preScoreState


def round_half_away(value: float) -> int:
    """Go's math.Round for a non-negative value: halves round up."""
    whole = int(value)
    return whole + 1 if value - whole >= 0.5 else whole


# --- args -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SpreadArgs:
    """PodTopologySpreadArgs: the default constraints and whether they are the system's."""

    default_constraints: tuple[Mapping[str, Any], ...] = SYSTEM_DEFAULT_CONSTRAINTS
    system_defaulted: bool = True


def parse_args(ctx: PluginContext | None) -> SpreadArgs:
    """PodTopologySpreadArgs as kube-scheduler defaults and validates them (v1)."""
    if ctx is None or not ctx.args:
        return SpreadArgs()
    args = ctx.args
    known = {"defaultConstraints", "defaultingType", "apiVersion", "kind"}
    unknown = sorted(str(k) for k in set(args) - known)
    if unknown:
        raise ctx.fail(unknown[0], "unknown PodTopologySpread arg; known: defaultConstraints, defaultingType")
    defaulting = args.get("defaultingType") or SYSTEM_DEFAULTING
    if defaulting not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        raise ctx.fail("defaultingType", f"expected System or List, got {defaulting!r}")
    raw = args.get("defaultConstraints") or []
    if not isinstance(raw, list):
        raise ctx.fail("defaultConstraints", f"expected a list, got {type(raw).__name__}")
    if defaulting == SYSTEM_DEFAULTING:
        if raw:
            raise ctx.fail("defaultingType", "System is invalid when .defaultConstraints are not empty "
                           "(use List)")
        return SpreadArgs()
    seen: set[tuple[str, str]] = set()
    for i, c in enumerate(raw):
        at = f"defaultConstraints[{i}]"
        if not isinstance(c, Mapping):
            raise ctx.fail(at, "expected a mapping")
        skew = c.get("maxSkew")
        if isinstance(skew, bool) or not isinstance(skew, int) or skew <= 0:
            raise ctx.fail(f"{at}.maxSkew", f"not in valid range (0, inf): {skew!r}")
        key = c.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise ctx.fail(f"{at}.topologyKey", "required: a label key")
        when = c.get("whenUnsatisfiable")
        if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise ctx.fail(f"{at}.whenUnsatisfiable", f"expected DoNotSchedule or ScheduleAnyway, got {when!r}")
        if c.get("labelSelector") is not None:
            raise ctx.fail(f"{at}.labelSelector", "constraint must not define a selector, as they deduced for "
                           "each pod")
        min_domains = c.get("minDomains")
        if min_domains is not None and (isinstance(min_domains, bool) or not isinstance(min_domains, int)
                                        or min_domains <= 0):
            raise ctx.fail(f"{at}.minDomains", f"expected a positive integer, got {min_domains!r}")
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            if c.get(policy) not in (None, HONOR, IGNORE):
                raise ctx.fail(f"{at}.{policy}", f"expected Honor or Ignore, got {c.get(policy)!r}")
        if (key, when) in seen:
            raise ctx.fail(f"{at}", f"a second constraint with topologyKey {key!r} and whenUnsatisfiable {when}")
        seen.add((key, when))
    return SpreadArgs(tuple(raw), False)


# --- the plugin -----------------------------------------------------------------------


class PodTopologySpread(NativePlugin):
    NAME = NAME

    def __init__(self, ctx: PluginContext | None = None, name: str = "", *,
                 nodes: Sequence[NodeInfo] | None = None, workloads: Workloads | None = None) -> None:
        """`nodes` and `workloads` stand in for the handle's snapshot and workloads (tests)."""
        super().__init__(ctx, name)
        args = parse_args(ctx)
        self.system_defaulted = args.system_defaulted
        self.default_constraints = args.default_constraints
        self._hard_defaults = any(c.get("whenUnsatisfiable") == DO_NOT_SCHEDULE for c in self.default_constraints)
        self._soft_defaults = any(c.get("whenUnsatisfiable") == SCHEDULE_ANYWAY for c in self.default_constraints)
        self._nodes = nodes
        self._workloads = workloads

    # --- what the plugin reads of the cluster -------------------------------------------

    def all_nodes(self) -> Sequence[NodeInfo]:
        """Every node of the cycle's snapshot (kube's sharedLister.NodeInfos().List())."""
        if self._nodes is not None:
            return self._nodes
        assert self.ctx is not None, "PodTopologySpread needs the framework handle or nodes"
        return self.ctx.handle.snapshot.view.node_infos

    def workloads(self) -> Workloads:
        if self._workloads is not None:
            return self._workloads
        return self.ctx.handle.workloads if self.ctx is not None else NO_WORKLOADS

    def constraints(self, pod: KubeObject, action: str) -> list[SpreadConstraint]:
        """The pod's constraints of `action` or, for a pod with none, the default ones
        (with the selector of the workloads that select it); SpreadError if malformed."""
        own = (pod.get("spec") or {}).get("topologySpreadConstraints")
        if own:
            return filter_constraints(own, pod_labels(pod), action)
        if not (self._hard_defaults if action == DO_NOT_SCHEDULE else self._soft_defaults):
            return []
        workloads = self.workloads()
        if not workloads:
            return []
        defaults = filter_constraints(self.default_constraints, pod_labels(pod), action)
        if not defaults:
            return []
        selector = default_selector(pod, workloads)
        if selector.empty:
            return []
        return [SpreadConstraint(c.max_skew, c.topology_key, selector, c.min_domains, c.node_affinity_policy,
                                 c.node_taints_policy) for c in defaults]

    # --- PreFilter, its extensions, Filter ----------------------------------------------

    def pre_filter(self, state: CycleState, pod: KubeObject) -> PreFilterResult:
        spec = pod.get("spec") or {}
        if not spec.get("topologySpreadConstraints") and not self._hard_defaults:
            return PreFilterResult(Status(Code.SKIP, "", self.name))  # the fast path
        try:
            constraints = self.constraints(pod, DO_NOT_SCHEDULE)
        except SpreadError as exc:
            return PreFilterResult(Status(Code.ERROR, f"obtaining pod's hard topology spread constraints: {exc}",
                                          self.name))
        if not constraints:
            return PreFilterResult(Status(Code.SKIP, "", self.name))
        state.write(_PRE_FILTER_KEY, self.pre_filter_state(pod, constraints))
        return PreFilterResult(SUCCESS)

    def pre_filter_state(self, pod: KubeObject, constraints: Sequence[SpreadConstraint]) -> PreFilterState:
        """calPreFilterState over every node of the snapshot."""
        namespace = _namespace(pod)
        inclusion = _NodeInclusion(pod)
        counts: list[dict[str, int]] = [{} for _ in constraints]
        slots, unique = _selector_slots(constraints)
        for node in self.all_nodes():
            labels = node_labels(node.node)
            if not _has_keys(labels, constraints):
                continue
            cache: dict[str, bool] = {}
            matched: list[int | None] = [None] * unique
            for i, c in enumerate(constraints):
                if not inclusion.includes(c, node, cache):
                    continue
                count = matched[slots[i]]
                if count is None:
                    count = matched[slots[i]] = count_matching(node.pods, c.selector, namespace)
                value = labels[c.topology_key]
                counts[i][value] = counts[i].get(value, 0) + count
        paths = []
        for per_value in counts:
            path = CriticalPaths()
            for value, num in per_value.items():
                path.update(value, num)
            paths.append(path)
        labels_of_pod = pod_labels(pod)
        self_match = tuple(1 if c.selector.matches(labels_of_pod) else 0 for c in constraints)
        return PreFilterState(tuple(constraints), counts, paths, self_match, namespace, inclusion)

    def _state(self, state: CycleState, pod: KubeObject) -> PreFilterState | Status:
        """PreFilter's state; computed now (and kept) if PreFilter did not run, which only a
        direct call of the framework does (kube-scheduler answers Error then)."""
        value = state.get(_PRE_FILTER_KEY)
        if isinstance(value, PreFilterState):
            return value
        try:
            constraints = self.constraints(pod, DO_NOT_SCHEDULE)
        except SpreadError as exc:
            return Status(Code.ERROR, f"obtaining pod's hard topology spread constraints: {exc}", self.name)
        computed = self.pre_filter_state(pod, constraints)
        state.write(_PRE_FILTER_KEY, computed)
        return computed

    def add_pod(self, state: CycleState, pod: KubeObject, pod_to_add: KubeObject, node_info: NodeInfo) -> Status:
        return self._update(state, pod, pod_to_add, node_info, 1)

    def remove_pod(self, state: CycleState, pod: KubeObject, pod_to_remove: KubeObject,
                   node_info: NodeInfo) -> Status:
        return self._update(state, pod, pod_to_remove, node_info, -1)

    def _update(self, state: CycleState, pod: KubeObject, changed: KubeObject, node: NodeInfo, delta: int) -> Status:
        """updateWithPod: the changed pod's node counts it (or no longer) where it matches."""
        s = self._state(state, pod)
        if isinstance(s, Status):
            return s
        if not s.constraints or _namespace(changed) != s.namespace:
            return SUCCESS
        labels = node_labels(node.node)
        if not _has_keys(labels, s.constraints):
            return SUCCESS
        inclusion = s.inclusion or _NodeInclusion(pod)
        changed_labels = pod_labels(changed)
        cache: dict[str, bool] = {}
        for i, c in enumerate(s.constraints):
            if not c.selector.matches(changed_labels) or not inclusion.includes(c, node, cache):
                continue
            value = labels[c.topology_key]
            num = s.counts[i].get(value, 0) + delta
            s.counts[i][value] = num
            s.critical_paths[i].update(value, num)
        return SUCCESS

    def filter_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> dict[str, Status]:
        s = self._state(state, pod)
        if isinstance(s, Status):
            return dict.fromkeys([node.name for node in nodes], s)
        if not s.constraints:
            return dict.fromkeys([node.name for node in nodes], SUCCESS)
        missing = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_NODE_LABEL_NOT_MATCH, self.name)
        skewed = Status(Code.UNSCHEDULABLE, REASON_CONSTRAINTS_NOT_MATCH, self.name)
        # Per constraint, once for all nodes: (key, counts, maxSkew + global minimum - self match).
        limits = [(c.topology_key, s.counts[i], c.max_skew + s.min_match_num(i) - s.self_match[i])
                  for i, c in enumerate(s.constraints)]
        statuses: dict[str, Status] = {}
        for node in nodes:
            labels = node_labels(node.node)
            status = SUCCESS
            for key, counts, limit in limits:
                value = labels.get(key)
                if value is None:
                    status = missing
                    break
                # matchNum + selfMatch - minMatch > maxSkew
                if counts.get(value, 0) > limit:
                    status = skewed
                    break
            statuses[node.name] = status
        return statuses

    # --- PreScore, Score, NormalizeScore ------------------------------------------------

    def pre_score(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> Status:
        spec = pod.get("spec") or {}
        own = spec.get("topologySpreadConstraints")
        if not own and not self._soft_defaults:
            return Status(Code.SKIP, "", self.name)  # the fast path
        try:
            constraints = self.constraints(pod, SCHEDULE_ANYWAY)
        except SpreadError as exc:
            return Status(Code.ERROR, f"obtaining pod's soft topology spread constraints: {exc}", self.name)
        if not constraints or not self.all_nodes():
            return Status(Code.SKIP, "", self.name)
        state.write(_PRE_SCORE_KEY, self.pre_score_state(pod, constraints, nodes, bool(own) or not
                                                         self.system_defaulted))
        return SUCCESS

    def pre_score_state(self, pod: KubeObject, constraints: Sequence[SpreadConstraint],
                        filtered: Sequence[NodeInfo], require_all: bool) -> PreScoreState:
        """initPreScoreState over the filtered nodes, then the counts over every node."""
        namespace = _namespace(pod)
        counts: list[dict[str, int]] = [{} for _ in constraints]
        ignored: set[str] = set()
        for node in filtered:
            labels = node_labels(node.node)
            if require_all and not _has_keys(labels, constraints):
                ignored.add(node.name)
                continue
            for i, c in enumerate(constraints):
                if c.topology_key != HOSTNAME:
                    counts[i].setdefault(labels.get(c.topology_key, ""), 0)
        scored = len(filtered) - len(ignored)
        weights = [math.log((scored if c.topology_key == HOSTNAME else len(counts[i])) + 2)
                   for i, c in enumerate(constraints)]
        if any(c.topology_key != HOSTNAME for c in constraints):
            inclusion = _NodeInclusion(pod)
            slots, unique = _selector_slots(constraints)
            for node in self.all_nodes():
                labels = node_labels(node.node)
                if require_all and not _has_keys(labels, constraints):
                    continue
                cache: dict[str, bool] = {}
                matched: list[int | None] = [None] * unique
                for i, c in enumerate(constraints):
                    per_value = counts[i]
                    value = labels.get(c.topology_key, "")
                    if value not in per_value or not inclusion.includes(c, node, cache):
                        continue
                    count = matched[slots[i]]
                    if count is None:
                        count = matched[slots[i]] = count_matching(node.pods, c.selector, namespace)
                    per_value[value] += count
        return PreScoreState(tuple(constraints), frozenset(ignored), counts, weights, namespace)

    def score(self, state: CycleState, pod: KubeObject, node: NodeInfo) -> int | Status:
        s = state.get(_PRE_SCORE_KEY)
        if not isinstance(s, PreScoreState):
            return Status(Code.ERROR, f"reading {_PRE_SCORE_KEY!r} from cycleState: not found", self.name)
        return self._score(s, node)

    def _score(self, s: PreScoreState, node: NodeInfo) -> int:
        if node.name in s.ignored:
            return 0
        labels = node_labels(node.node)
        total = 0.0
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                continue
            if c.topology_key == HOSTNAME:
                count = count_matching(node.pods, c.selector, s.namespace)
            else:
                count = s.counts[i].get(value, 0)
            total += count * s.weights[i] + (c.max_skew - 1)  # scoreForCount
        return round_half_away(total)

    def score_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> ScoreResult:
        s = state.get(_PRE_SCORE_KEY)
        if not isinstance(s, PreScoreState):
            return ScoreResult(Status(Code.ERROR, f"reading {_PRE_SCORE_KEY!r} from cycleState: not found",
                                      self.name))
        return ScoreResult.from_columns(SUCCESS, [node.name for node in nodes], [self._score(s, n) for n in nodes],
                                        copy=False)

    def normalize_score(self, state: CycleState, pod: KubeObject, scores: Sequence[NodeScore]) -> NormalizeScoreResult:
        s = state.get(_PRE_SCORE_KEY)
        if not isinstance(s, PreScoreState):
            return NormalizeScoreResult(Status(Code.ERROR, f"reading {_PRE_SCORE_KEY!r} from cycleState: not "
                                               "found", self.name), ())
        return NormalizeScoreResult(SUCCESS, normalize(scores, s.ignored))

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        return (ClusterEvent(Resource.POD, ActionType.ALL),
                ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL
                             | ActionType.UPDATE_NODE_TAINT))


def normalize(scores: Sequence[NodeScore], ignored: frozenset[str] | set[str] = frozenset()) -> tuple[NodeScore, ...]:
    """PodTopologySpread's NormalizeScore: ignored nodes 0; otherwise, with the smallest
    and largest raw scores `low`, `high`: 100 when `high` is 0, else
    ``100 * (high + low - score) // high`` (fewer matching pods, higher score)."""
    names = [s[0] for s in scores]
    values = [s[1] for s in scores]
    counted = [v for n, v in zip(names, values, strict=True) if n not in ignored]
    if not counted:
        return node_scores(names, [0] * len(names))
    low, high = min(counted), max(counted)
    out = []
    for n, v in zip(names, values, strict=True):
        if n in ignored:
            out.append(0)
        elif high == 0:
            out.append(MAX_NODE_SCORE)
        else:
            out.append(MAX_NODE_SCORE * (high + low - v) // high)
    return node_scores(names, out)
