"""NodeName: a pod that names its node (spec.nodeName) fits only that node."""

from __future__ import annotations

from collections.abc import Sequence

from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin
from wasm_scheduler.adapters.framework.pods import KubeObject, node_name_of
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import SUCCESS, ActionType, ClusterEvent, Code, Resource, Status

REASON = "node(s) didn't match the requested node name"


class NodeName(NativePlugin):
    NAME = "NodeName"

    def filter_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> dict[str, Status]:
        wanted = node_name_of(pod)  # read once for all the nodes
        names = [node.name for node in nodes]
        if not wanted:
            return dict.fromkeys(names, SUCCESS)
        rejected = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON, self.name)
        return {name: SUCCESS if name == wanted else rejected for name in names}

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        return (ClusterEvent(Resource.NODE, ActionType.ADD),)
