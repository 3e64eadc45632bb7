"""DefaultPreemption: the PostFilter plugin that evicts lower-priority pods to make room.

When no node fits a pod, this plugin looks for nodes where removing pods of lower
priority would let it fit, as kube-scheduler's preemption does: nodes whose status is
UnschedulableAndUnresolvable are not tried; on each candidate node (in parallel, on
its own copy of the cycle state and node) every lower-priority pod is removed through
the profile's RemovePod extensions, the profile's Filter must then pass, and the most
important pods are added back (AddPod) one by one while it still passes; those that
cannot come back are the victims. Of the candidates, the node whose victims matter
least wins (lowest highest priority, lowest priority sum, fewest victims, latest
start). The victims are evicted through the handle and the pod is nominated to the
node. PodDisruptionBudgets are not modelled.

See `docs/framework.md` ("What a scheduling attempt does").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.framework import Diagnosis
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, PluginContext
from wasm_scheduler.adapters.framework.pods import KubeObject, PodInfo, more_important
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import SUCCESS, Code, NominatingMode, PostFilterResult, Status

NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
_INT32_OFFSET = 2**31


@dataclass(frozen=True)
class Candidate:
    node: str
    #: Most important first.
    victims: tuple[PodInfo, ...]


class DefaultPreemption(NativePlugin):
    NAME = "DefaultPreemption"

    def __init__(self, ctx: PluginContext | None = None, name: str = "") -> None:
        super().__init__(ctx, name)
        args = dict(ctx.args) if ctx else {}
        self.min_percentage = self._arg(args, "minCandidateNodesPercentage", 10, 0, 100)
        self.min_absolute = self._arg(args, "minCandidateNodesAbsolute", 100, 0, None)
        unknown = sorted(set(args) - {"minCandidateNodesPercentage", "minCandidateNodesAbsolute"})
        if unknown and ctx:
            raise ctx.fail(unknown[0], "unknown DefaultPreemption arg; known: minCandidateNodesAbsolute, "
                           "minCandidateNodesPercentage")

    def _arg(self, args: Mapping[str, object], key: str, default: int, low: int, high: int | None) -> int:
        value = args.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
            assert self.ctx is not None
            bound = f"{low}..{high}" if high is not None else f">= {low}"
            raise self.ctx.fail(key, f"expected an integer {bound}, got {value!r}")
        return value

    # --- PostFilter --------------------------------------------------------------------

    def post_filter(self, state: CycleState, pod: KubeObject, statuses: Mapping[str, Status]) -> PostFilterResult:
        assert self.ctx is not None, "DefaultPreemption needs the framework handle"
        info = PodInfo.of(pod)
        if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
            return PostFilterResult(Status(Code.UNSCHEDULABLE,
                                           "preemption: not eligible due to preemptionPolicy=Never.", self.name))
        handle = self.ctx.handle
        nominated = handle.snapshot.view.get(handle.nominator.node_of(info.uid))
        if nominated is not None and any(p.priority < info.priority and handle.is_terminating(p.uid)
                                         for p in nominated.pods):
            # Its last preemption is still under way: wait for those victims to go.
            return PostFilterResult(Status(Code.UNSCHEDULABLE, "preemption: not eligible due to a terminating pod "
                                           "on the nominated node.", self.name))
        nodes = handle.snapshot.view.node_infos
        potential = [n for n in nodes
                     if statuses.get(n.name, SUCCESS).code != Code.UNSCHEDULABLE_AND_UNRESOLVABLE]
        if not potential:
            diagnosis = Diagnosis({n.name: Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NOT_HELPFUL) for n in nodes})
            return PostFilterResult(Status(Code.UNSCHEDULABLE, "preemption: " + diagnosis.message(len(nodes)),
                                           self.name))
        candidates, failures = self.find_candidates(state, info, potential)
        if not candidates:
            message = Diagnosis(failures).message(len(potential))
            return PostFilterResult(Status(Code.UNSCHEDULABLE, "preemption: " + message, self.name))
        best = pick_one(candidates)
        handle.evict(best.victims, info, best.node)
        return PostFilterResult(Status(plugin=self.name), best.node, NominatingMode.OVERRIDE)

    def candidates_wanted(self, potential: int) -> int:
        wanted = max(potential * self.min_percentage // 100, self.min_absolute)
        return min(wanted, potential)

    def find_candidates(self, state: CycleState, pod: PodInfo,
                        nodes: Sequence[NodeInfo]) -> tuple[list[Candidate], dict[str, Status]]:
        """Dry-run preemption on each node in parallel; candidates in node order, failures by node."""
        assert self.ctx is not None
        results = self.ctx.handle.parallelize(lambda node: self.select_victims(state.clone(), pod, node), nodes)
        wanted = self.candidates_wanted(len(nodes))
        candidates: list[Candidate] = []
        failures: dict[str, Status] = {}
        for node, (victims, status) in zip(nodes, results, strict=True):
            if status.ok and len(candidates) < wanted:
                candidates.append(Candidate(node.name, tuple(victims)))
            elif not status.ok:
                failures[node.name] = status
        return candidates, failures

    def select_victims(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[list[PodInfo], Status]:
        """The fewest, least important pods to remove from `node` so that `pod` fits."""
        assert self.ctx is not None
        framework = self.ctx.framework
        lower = [p for p in node.pods if p.priority < pod.priority]
        if not lower:
            return [], Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_VICTIMS, self.name)
        for victim in lower:
            node = node.without_pod(victim.uid)
            status = framework.run_remove_pod(state, pod.pod, victim.pod, node)
            if not status.ok:
                return [], status
        status = self._fits(state, pod, node)
        if not status.ok:
            return [], status
        ordered = sorted(lower, key=_importance_key)
        victims: list[PodInfo] = []
        for candidate in ordered:
            node = node.with_pod(candidate)
            status = framework.run_add_pod(state, pod.pod, candidate.pod, node)
            if not status.ok:
                return [], status
            fits = self._fits(state, pod, node)
            if fits.code == Code.ERROR:
                return [], fits
            if not fits.ok:
                node = node.without_pod(candidate.uid)
                status = framework.run_remove_pod(state, pod.pod, candidate.pod, node)
                if not status.ok:
                    return [], status
                victims.append(candidate)
        return victims, SUCCESS

    def _fits(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        assert self.ctx is not None
        statuses, error = self.ctx.framework.run_filter_with_nominated(state, pod, [node])
        return error if not error.ok else statuses[node.name]


class _Importance:
    """Sort key: more important pods first (kube's MoreImportantPod)."""

    __slots__ = ("pod",)

    def __init__(self, pod: PodInfo) -> None:
        self.pod = pod

    def __lt__(self, other: _Importance) -> bool:
        return more_important(self.pod, other.pod)


def _importance_key(pod: PodInfo) -> _Importance:
    return _Importance(pod)


def pick_one(candidates: Sequence[Candidate]) -> Candidate:
    """kube-scheduler's pickOneNodeForPreemption, without PodDisruptionBudgets."""
    for candidate in candidates:
        if not candidate.victims:
            return candidate

    def earliest_start_of_top(c: Candidate) -> str:
        top = c.victims[0].priority
        starts = [v.start_time for v in c.victims if v.priority == top and v.start_time]
        return min(starts) if starts else ""

    remaining = list(candidates)
    for key in (
        lambda c: c.victims[0].priority,
        lambda c: sum(v.priority + _INT32_OFFSET for v in c.victims),
        lambda c: len(c.victims),
    ):
        best = min(key(c) for c in remaining)
        remaining = [c for c in remaining if key(c) == best]
        if len(remaining) == 1:
            return remaining[0]
    latest = max(earliest_start_of_top(c) for c in remaining)
    return next(c for c in remaining if earliest_start_of_top(c) == latest)
