"""NodeResourcesBalancedAllocation: favour nodes whose resources would be used evenly.

This module owns kube-scheduler's plugin of that name (v1.33, ``balanced_allocation.go``
with ``resource_allocation.go``). For each configured resource (cpu and memory by
default, every weight 1: the weights are not used) it takes the fraction of the
node's allocatable that the pods on the node and this pod request, capped at 1, and
scores ``int((1 - std) * 100)``: std is ``|f1 - f2| / 2`` for two fractions, the
population standard deviation for more, 0 for fewer. Requests are counted as asked
(``useRequested``: no non-zero defaults for containers that request nothing, unlike
NodeResourcesFit's scoring), on the node's requested sum. A resource the node does
not offer (allocatable 0) is left out, and so is an extended resource the pod does
not request. A pod that requests none of the resources (best effort) is not scored
at all: PreScore answers Skip. Its weight in the default profile is 1.

See `docs/framework.md` ("NodeResourcesBalancedAllocation").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, PluginContext
from wasm_scheduler.adapters.framework.pods import KubeObject
from wasm_scheduler.adapters.framework.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    QuantityError,
    pod_requests,
)
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import MAX_NODE_SCORE, SUCCESS, Code, ScoreResult, Status

_STATE_KEY = "PreScoreNodeResourcesBalancedAllocation"
DEFAULT_RESOURCES = (CPU, MEMORY)


@dataclass(frozen=True)
class BalancedAllocationArgs:
    #: The resources whose fractions are compared, in order (weights must be 1: not kept).
    resources: tuple[str, ...] = DEFAULT_RESOURCES


def parse_args(ctx: PluginContext | None) -> BalancedAllocationArgs:
    """NodeResourcesBalancedAllocationArgs as kube-scheduler defaults and validates them."""
    if ctx is None or not ctx.args:
        return BalancedAllocationArgs()
    unknown = sorted(set(ctx.args) - {"resources"})
    if unknown:
        raise ctx.fail(unknown[0], "unknown NodeResourcesBalancedAllocation arg; known: resources")
    specs = ctx.args.get("resources") or ()
    if not isinstance(specs, list):
        raise ctx.fail("resources", "expected a list of {name, weight}")
    names: list[str] = []
    for i, spec in enumerate(specs):
        name = spec.get("name") if isinstance(spec, dict) else None
        if not isinstance(name, str) or not name:
            raise ctx.fail(f"resources[{i}].name", "expected a resource name")
        if name in names:
            raise ctx.fail(f"resources[{i}].name", f"duplicate value {name!r}")
        weight = spec.get("weight", 0)
        if weight not in (0, 1) or isinstance(weight, bool):  # 0 (unset) defaults to 1
            raise ctx.fail(f"resources[{i}].weight", f"must be 1, got {weight!r}")
        names.append(name)
    return BalancedAllocationArgs(tuple(names) or DEFAULT_RESOURCES)


def balanced_resource_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """kube's balancedResourceScorer, with Go's float64 arithmetic in the same order."""
    fractions: list[float] = []
    total = 0.0
    for req, alloc in zip(requested, allocatable, strict=True):
        if alloc == 0:
            continue
        fraction = min(float(req) / float(alloc), 1.0)
        total += fraction
        fractions.append(fraction)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        squares = 0.0
        for fraction in fractions:
            squares = squares + (fraction - mean) * (fraction - mean)
        std = math.sqrt(squares / len(fractions))
    return int((1 - std) * float(MAX_NODE_SCORE))


def is_scalar_resource_name(name: str) -> bool:
    """kube's IsScalarResourceName: extended ("example.com/foo"), prefixed native
    ("kubernetes.io/..."), hugepages and attachable volumes: the names a NodeInfo keeps."""
    return "/" in name or name.startswith(("hugepages-", "attachable-volumes-"))


def allocatable_and_requested(node: NodeInfo, resource: str, pod_request: int) -> tuple[int, int]:
    """kube's calculateResourceAllocatableRequest with useRequested: (0, 0) leaves the resource out."""
    if resource == CPU:
        return node.allocatable.milli_cpu, node.requested.milli_cpu + pod_request
    if resource == MEMORY:
        return node.allocatable.memory, node.requested.memory + pod_request
    if resource == EPHEMERAL_STORAGE:
        return node.allocatable.ephemeral_storage, node.requested.ephemeral_storage + pod_request
    if pod_request == 0 or not is_scalar_resource_name(resource):
        return 0, 0  # an extended resource the pod does not ask for, or no resource a node offers
    capacity = node.allocatable.scalar.get(resource)
    if capacity is None:
        return 0, 0
    return capacity, node.requested.scalar.get(resource, 0) + pod_request


class NodeResourcesBalancedAllocation(NativePlugin):
    NAME = "NodeResourcesBalancedAllocation"

    def __init__(self, ctx: PluginContext | None = None, name: str = "") -> None:
        super().__init__(ctx, name)
        self.args = parse_args(ctx)

    def pod_request_list(self, pod: KubeObject) -> tuple[int, ...]:
        """The pod's request of each configured resource, as asked (kube's calculatePodResourceRequestList)."""
        requested = pod_requests(pod).requested
        return tuple(requested.get(resource) for resource in self.args.resources)

    def pre_score(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> Status:
        try:
            request = self.pod_request_list(pod)
        except QuantityError as exc:
            return Status(Code.ERROR, f"pod requests: {exc}", self.name)
        if not any(request):
            # kube-scheduler skips best-effort pods, lest they all land on one node.
            return Status(Code.SKIP, "", self.name)
        state.write(_STATE_KEY, request)
        return SUCCESS

    def _request(self, state: CycleState, pod: KubeObject) -> tuple[int, ...]:
        cached = state.get(_STATE_KEY)
        return self.pod_request_list(pod) if cached is None else cached

    def score(self, state: CycleState, pod: KubeObject, node: NodeInfo) -> int | Status:
        request = self._request(state, pod)
        if not any(request):
            return 0  # Score without PreScore's state: a best-effort pod scores 0
        return self._score(request, node)

    def _score(self, request: Sequence[int], node: NodeInfo) -> int:
        requested: list[int] = []
        allocatable: list[int] = []
        for resource, amount in zip(self.args.resources, request, strict=True):
            alloc, req = allocatable_and_requested(node, resource, amount)
            requested.append(req if alloc else 0)
            allocatable.append(alloc)
        return balanced_resource_score(requested, allocatable)

    def score_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> ScoreResult:
        request = self._request(state, pod)
        names = [node.name for node in nodes]
        if not any(request):
            scores = [0] * len(nodes)
        elif self.args.resources == DEFAULT_RESOURCES:
            scores = _score_cpu_and_memory(request[0], request[1], nodes)
        else:
            scores = [self._score(request, node) for node in nodes]
        return ScoreResult.from_columns(SUCCESS, names, scores, copy=False)


def _score_cpu_and_memory(cpu: int, memory: int, nodes: Sequence[NodeInfo]) -> list[int]:
    """`NodeResourcesBalancedAllocation._score` for cpu and memory, the resources read as
    attributes and the scorer inlined: the same figures, computed the same way."""
    scores = []
    top = float(MAX_NODE_SCORE)
    for node in nodes:
        have = node.allocatable
        cpu_capacity, memory_capacity = have.milli_cpu, have.memory
        if cpu_capacity and memory_capacity:
            used = node.requested
            f_cpu = float(used.milli_cpu + cpu) / float(cpu_capacity)
            f_memory = float(used.memory + memory) / float(memory_capacity)
            if f_cpu > 1.0:
                f_cpu = 1.0
            if f_memory > 1.0:
                f_memory = 1.0
            std = (f_cpu - f_memory) / 2
            scores.append(int((1 - (std if std >= 0 else -std)) * top))
        else:
            scores.append(MAX_NODE_SCORE)  # one fraction or none: std 0
    return scores
