"""SchedulingGates: a pod that carries spec.schedulingGates is not scheduled.

This module owns kube-scheduler's PreEnqueue plugin of that name (v1.33): asked once,
when a pending pod is added to the queue, it answers UnschedulableAndUnresolvable
"waiting for scheduling gates: [a b]" for a pod with gates, and the queue holds the
pod back as gated instead of scheduling it (`adapters.framework.queue`). A pod's gates
can only be removed by an update, which a simulation of a snapshot never sees: a gated
pod stays gated, so the plugin registers for no cluster event.

See `docs/framework.md` ("SchedulingGates").
"""

from __future__ import annotations

from collections.abc import Mapping

from wasm_scheduler.adapters.framework.plugins.base import NativePlugin
from wasm_scheduler.adapters.framework.pods import KubeObject
from wasm_scheduler.framework_api import SUCCESS, ClusterEvent, Code, Status


def gate_names(pod: KubeObject) -> list[str]:
    """The names of the pod's scheduling gates, in order (empty for most pods)."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or ()
    return [str(gate.get("name", "")) if isinstance(gate, Mapping) else str(gate) for gate in gates]


class SchedulingGates(NativePlugin):
    NAME = "SchedulingGates"

    def pre_enqueue(self, pod: KubeObject) -> Status:
        """Success, or why the pod may not enter the active queue yet (Go's ``%v`` of the names)."""
        gates = gate_names(pod)
        if not gates:
            return SUCCESS
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"waiting for scheduling gates: [{' '.join(gates)}]",
                      self.name)

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        return ()
