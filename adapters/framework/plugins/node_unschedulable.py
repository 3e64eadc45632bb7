"""NodeUnschedulable: a cordoned node (spec.unschedulable) takes only pods that tolerate it."""

from __future__ import annotations

from actors.abi import SUCCESS, ActionType, ClusterEvent, Code, Resource, Status
from adapters.framework.cycle_state import CycleState
from adapters.framework.plugins.base import NativePlugin
from adapters.framework.plugins.matching import pod_tolerations, tolerates
from adapters.framework.pods import KubeObject
from adapters.framework.snapshot import NodeInfo

REASON = "node(s) were unschedulable"
TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


class NodeUnschedulable(NativePlugin):
    NAME = "NodeUnschedulable"

    def filter(self, state: CycleState, pod: KubeObject, node: NodeInfo) -> Status:
        if not (node.node.get("spec") or {}).get("unschedulable"):
            return SUCCESS
        if any(tolerates(t, TAINT) for t in pod_tolerations(pod)):
            return SUCCESS
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON, self.name)

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        return (ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),)
