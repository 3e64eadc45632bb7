"""TaintToleration: NoSchedule/NoExecute taints filter, PreferNoSchedule taints score.

Filter rejects a node with a NoSchedule or NoExecute taint the pod does not tolerate.
Score counts the node's PreferNoSchedule taints the pod does not tolerate, and
NormalizeScore reverses that into [0, 100] (fewest intolerable taints best), as
kube-scheduler does; its weight in the default profile is 3. Over many nodes, the pod's
tolerations are read once, and a node without taints (most nodes) costs one test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, default_normalize
from wasm_scheduler.adapters.framework.plugins.matching import first_untolerated, pod_tolerations, tolerates
from wasm_scheduler.adapters.framework.pods import KubeObject
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import (
    SUCCESS,
    ActionType,
    ClusterEvent,
    Code,
    NodeScore,
    NormalizeScoreResult,
    Resource,
    ScoreResult,
    Status,
)

_STATE_KEY = "PreScoreTaintToleration"
_FILTER_EFFECTS = ("NoSchedule", "NoExecute")


def describe_taint(taint: Mapping[str, Any]) -> str:
    """As kube-scheduler prints it: ``{key: value}``."""
    return f"{{{taint.get('key', '')}: {taint.get('value') or ''}}}"


def _untolerated_prefer(taints: Sequence[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]]) -> int:
    """How many PreferNoSchedule taints no toleration tolerates."""
    return sum(1 for taint in taints
               if taint.get("effect") == "PreferNoSchedule" and not any(tolerates(t, taint) for t in tolerations))


class TaintToleration(NativePlugin):
    NAME = "TaintToleration"

    def filter_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> dict[str, Status]:
        tolerations = pod_tolerations(pod)
        statuses: dict[str, Status] = {}
        for node in nodes:
            taint = first_untolerated(node.taints, tolerations, _FILTER_EFFECTS) if node.taints else None
            if taint is None:
                statuses[node.name] = SUCCESS
            else:
                statuses[node.name] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                             f"node(s) had untolerated taint {describe_taint(taint)}", self.name)
        return statuses

    def pre_score(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> Status:
        prefer = [t for t in pod_tolerations(pod) if not t.get("effect") or t.get("effect") == "PreferNoSchedule"]
        state.write(_STATE_KEY, prefer)
        return SUCCESS

    def _prefer_tolerations(self, state: CycleState, pod: KubeObject) -> Sequence[Mapping[str, Any]]:
        tolerations = state.get(_STATE_KEY)
        return pod_tolerations(pod) if tolerations is None else tolerations

    def score(self, state: CycleState, pod: KubeObject, node: NodeInfo) -> int | Status:
        return _untolerated_prefer(node.taints, self._prefer_tolerations(state, pod))

    def score_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> ScoreResult:
        tolerations = self._prefer_tolerations(state, pod)
        scores = [_untolerated_prefer(node.taints, tolerations) if node.taints else 0 for node in nodes]
        return ScoreResult.from_columns(SUCCESS, [node.name for node in nodes], scores, copy=False)

    def normalize_score(self, state: CycleState, pod: KubeObject, scores: Sequence[NodeScore]) -> NormalizeScoreResult:
        return NormalizeScoreResult(SUCCESS, default_normalize(scores, reverse=True))

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        return (ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),)
