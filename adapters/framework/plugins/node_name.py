"""NodeName: a pod that names its node (spec.nodeName) fits only that node."""

from __future__ import annotations

from actors.abi import SUCCESS, ActionType, ClusterEvent, Code, Resource, Status
from adapters.framework.cycle_state import CycleState
from adapters.framework.plugins.base import NativePlugin
from adapters.framework.pods import KubeObject, node_name_of
from adapters.framework.snapshot import NodeInfo

REASON = "node(s) didn't match the requested node name"


class NodeName(NativePlugin):
    NAME = "NodeName"

    def filter(self, state: CycleState, pod: KubeObject, node: NodeInfo) -> Status:
        wanted = node_name_of(pod)
        if not wanted or wanted == node.name:
            return SUCCESS
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON, self.name)

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        return (ClusterEvent(Resource.NODE, ActionType.ADD),)
