"""NodeResourcesFit: does the pod's request fit the node, and how full would the node be.

PreFilter computes the pod's request once (cycle state); Filter compares it with what
the node has left (pods count, cpu, memory, ephemeral storage, extended resources) and
names every resource that is short ("Insufficient cpu"). Score uses the configured
strategy on the scoring resources, as kube-scheduler does: LeastAllocated (the
default: emptier nodes score higher) or MostAllocated, counting pods that request
nothing with kube-scheduler's non-zero defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.framework import REASON_SEPARATOR
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, PluginContext
from wasm_scheduler.adapters.framework.pods import KubeObject
from wasm_scheduler.adapters.framework.resources import CPU, MEMORY, PodRequests, QuantityError, Resources, pod_requests
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import (
    MAX_NODE_SCORE,
    SUCCESS,
    ActionType,
    ClusterEvent,
    Code,
    PreFilterResult,
    Resource,
    ScoreResult,
    Status,
)

_STATE_KEY = "PreFilterNodeResourcesFit"
#: The default scoring resources, which `NodeResourcesFit.score_nodes` has a short way for.
_CPU_AND_MEMORY = ((CPU, 1), (MEMORY, 1))


def least_requested(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


STRATEGIES: dict[str, Callable[[int, int], int]] = {
    "LeastAllocated": least_requested,
    "MostAllocated": most_requested,
}


@dataclass(frozen=True)
class FitArgs:
    strategy: str = "LeastAllocated"
    resources: tuple[tuple[str, int], ...] = ((CPU, 1), (MEMORY, 1))
    ignored_resources: frozenset[str] = frozenset()
    ignored_groups: frozenset[str] = frozenset()


def parse_args(ctx: PluginContext | None) -> FitArgs:
    if ctx is None or not ctx.args:
        return FitArgs()
    args = ctx.args
    known = {"scoringStrategy", "ignoredResources", "ignoredResourceGroups"}
    unknown = sorted(set(args) - known)
    if unknown:
        raise ctx.fail(unknown[0], f"unknown NodeResourcesFit arg; known: {', '.join(sorted(known))}")
    strategy = args.get("scoringStrategy") or {}
    kind = strategy.get("type", "LeastAllocated")
    if kind not in STRATEGIES:
        raise ctx.fail("scoringStrategy.type", f"{kind!r} is not supported here "
                       f"(supported: {', '.join(STRATEGIES)})")
    resources = []
    for i, spec in enumerate(strategy.get("resources") or ({"name": CPU, "weight": 1}, {"name": MEMORY, "weight": 1})):
        name, weight = spec.get("name"), spec.get("weight", 1)
        if not isinstance(name, str) or not name:
            raise ctx.fail(f"scoringStrategy.resources[{i}].name", "expected a resource name")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise ctx.fail(f"scoringStrategy.resources[{i}].weight", f"expected 1..100, got {weight!r}")
        resources.append((name, weight))
    return FitArgs(kind, tuple(resources), frozenset(args.get("ignoredResources") or ()),
                   frozenset(args.get("ignoredResourceGroups") or ()))


def insufficient(request: Resources, node: NodeInfo, args: FitArgs) -> list[str]:
    """Why the request does not fit the node, in kube-scheduler's words ([] if it fits)."""
    reasons = []
    have, used = node.allocatable, node.requested
    if len(node.pods) + 1 > have.allowed_pods:
        reasons.append("Too many pods")
    if request.is_zero:
        return reasons
    if request.milli_cpu > 0 and request.milli_cpu > have.milli_cpu - used.milli_cpu:
        reasons.append("Insufficient cpu")
    if request.memory > 0 and request.memory > have.memory - used.memory:
        reasons.append("Insufficient memory")
    if request.ephemeral_storage > 0 and request.ephemeral_storage > have.ephemeral_storage - used.ephemeral_storage:
        reasons.append("Insufficient ephemeral-storage")
    for name, amount in sorted(request.scalar.items()):
        if name in args.ignored_resources or name.split("/", 1)[0] in args.ignored_groups:
            continue
        if amount > have.scalar.get(name, 0) - used.scalar.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


class NodeResourcesFit(NativePlugin):
    NAME = "NodeResourcesFit"

    def __init__(self, ctx: PluginContext | None = None, name: str = "") -> None:
        super().__init__(ctx, name)
        self.args = parse_args(ctx)
        self._scorer = STRATEGIES[self.args.strategy]

    def _requests(self, state: CycleState, pod: KubeObject) -> PodRequests:
        cached = state.get(_STATE_KEY)
        return cached if cached is not None else pod_requests(pod)

    def pre_filter(self, state: CycleState, pod: KubeObject) -> PreFilterResult:
        try:
            state.write(_STATE_KEY, pod_requests(pod))
        except QuantityError as exc:
            return PreFilterResult(Status(Code.ERROR, f"pod requests: {exc}", self.name))
        return PreFilterResult(SUCCESS)

    def filter(self, state: CycleState, pod: KubeObject, node: NodeInfo) -> Status:
        return self._fit(self._requests(state, pod).requested, node)

    def filter_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> dict[str, Status]:
        request = self._requests(state, pod).requested  # read the cycle state once, not per node
        fit = self._fit
        if request.scalar:  # extended resources (and the ignored ones) take `_fit` on every node
            return {node.name: fit(request, node) for node in nodes}
        cpu, memory, storage = request.milli_cpu, request.memory, request.ephemeral_storage
        statuses: dict[str, Status] = {}
        for node in nodes:
            # The common case tested inline: room for one more pod, and for each of the
            # pod's requests; a node short of anything takes `_fit`, which names it.
            have, used = node.allocatable, node.requested
            if (len(node.pods) < have.allowed_pods
                    and (cpu <= 0 or cpu <= have.milli_cpu - used.milli_cpu)
                    and (memory <= 0 or memory <= have.memory - used.memory)
                    and (storage <= 0 or storage <= have.ephemeral_storage - used.ephemeral_storage)):
                statuses[node.name] = SUCCESS
            else:
                statuses[node.name] = fit(request, node)
        return statuses

    def _fit(self, request: Resources, node: NodeInfo) -> Status:
        reasons = insufficient(request, node, self.args)
        if not reasons:
            return SUCCESS
        return Status(Code.UNSCHEDULABLE, REASON_SEPARATOR.join(reasons), self.name)

    def score(self, state: CycleState, pod: KubeObject, node: NodeInfo) -> int | Status:
        return self._score(self._requests(state, pod).non_zero, node)

    def score_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> ScoreResult:
        request = self._requests(state, pod).non_zero
        names = [node.name for node in nodes]
        if self.args.resources == _CPU_AND_MEMORY:
            scores = self._score_cpu_and_memory(request, nodes)
        else:
            scores = [self._score(request, node) for node in nodes]
        return ScoreResult.from_columns(SUCCESS, names, scores, copy=False)

    def _score_cpu_and_memory(self, request: Resources, nodes: Sequence[NodeInfo]) -> list[int]:
        """`_score` for the default scoring resources (cpu and memory, weight 1 each), with
        the resources read as attributes: the same figures, computed the same way."""
        scorer = self._scorer
        cpu, memory = request.milli_cpu, request.memory
        scores = []
        for node in nodes:
            have, used = node.allocatable, node.non_zero_requested
            total = weights = 0
            if have.milli_cpu:
                total += scorer(used.milli_cpu + cpu, have.milli_cpu)
                weights += 1
            if have.memory:
                total += scorer(used.memory + memory, have.memory)
                weights += 1
            scores.append(total // weights if weights else 0)
        return scores

    def _score(self, request: Resources, node: NodeInfo) -> int:
        total = weights = 0
        for name, weight in self.args.resources:
            pod_amount = request.get(name)
            if pod_amount == 0 and name not in (CPU, MEMORY):
                continue  # an extended resource the pod does not ask for
            capacity = node.allocatable.get(name)
            if capacity == 0:
                continue
            total += self._scorer(node.non_zero_requested.get(name) + pod_amount, capacity) * weight
            weights += weight
        return total // weights if weights else 0

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        return (ClusterEvent(Resource.POD, ActionType.DELETE),
                ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE))
