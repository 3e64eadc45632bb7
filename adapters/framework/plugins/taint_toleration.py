"""TaintToleration: NoSchedule/NoExecute taints filter, PreferNoSchedule taints score.

Filter rejects a node with a NoSchedule or NoExecute taint the pod does not tolerate.
Score counts the node's PreferNoSchedule taints the pod does not tolerate, and
NormalizeScore reverses that into [0, 100] (fewest intolerable taints best), as
kube-scheduler does; its weight in the default profile is 3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actors.abi import SUCCESS, ActionType, ClusterEvent, Code, NodeScore, NormalizeScoreResult, Resource, Status
from adapters.framework.cycle_state import CycleState
from adapters.framework.plugins.base import NativePlugin, default_normalize
from adapters.framework.plugins.matching import first_untolerated, node_taints, pod_tolerations, tolerates
from adapters.framework.pods import KubeObject
from adapters.framework.snapshot import NodeInfo

_STATE_KEY = "PreScoreTaintToleration"


def describe_taint(taint: Mapping[str, Any]) -> str:
    """As kube-scheduler prints it: ``{key: value}``."""
    return f"{{{taint.get('key', '')}: {taint.get('value') or ''}}}"


class TaintToleration(NativePlugin):
    NAME = "TaintToleration"

    def filter(self, state: CycleState, pod: KubeObject, node: NodeInfo) -> Status:
        taint = first_untolerated(node_taints(node.node), pod_tolerations(pod), ("NoSchedule", "NoExecute"))
        if taint is None:
            return SUCCESS
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                      f"node(s) had untolerated taint {describe_taint(taint)}", self.name)

    def pre_score(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> Status:
        prefer = [t for t in pod_tolerations(pod) if not t.get("effect") or t.get("effect") == "PreferNoSchedule"]
        state.write(_STATE_KEY, prefer)
        return SUCCESS

    def score(self, state: CycleState, pod: KubeObject, node: NodeInfo) -> int | Status:
        tolerations = state.get(_STATE_KEY)
        if tolerations is None:
            tolerations = pod_tolerations(pod)
        return sum(1 for taint in node_taints(node.node)
                   if taint.get("effect") == "PreferNoSchedule"
                   and not any(tolerates(t, taint) for t in tolerations))

    def normalize_score(self, state: CycleState, pod: KubeObject, scores: Sequence[NodeScore]) -> NormalizeScoreResult:
        return NormalizeScoreResult(SUCCESS, default_normalize(scores, reverse=True))

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        return (ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),)
