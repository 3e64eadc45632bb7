"""NodeUnschedulable: a cordoned node (spec.unschedulable) takes only pods that tolerate it.

Filter over many nodes asks the pod once whether it tolerates a cordon; then each node
costs one attribute test.
"""

from __future__ import annotations

from collections.abc import Sequence

from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin
from wasm_scheduler.adapters.framework.plugins.matching import pod_tolerations, tolerates
from wasm_scheduler.adapters.framework.pods import KubeObject
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import SUCCESS, ActionType, ClusterEvent, Code, Resource, Status

REASON = "node(s) were unschedulable"
TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


class NodeUnschedulable(NativePlugin):
    NAME = "NodeUnschedulable"

    def filter_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> dict[str, Status]:
        if any(tolerates(t, TAINT) for t in pod_tolerations(pod)):
            return dict.fromkeys([node.name for node in nodes], SUCCESS)
        rejected = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON, self.name)
        return {node.name: rejected if node.unschedulable else SUCCESS for node in nodes}

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        return (ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),)
