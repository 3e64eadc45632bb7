"""DefaultBinder: binds the pod to its node in the snapshot (what the API call does in a cluster)."""

from __future__ import annotations

from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin
from wasm_scheduler.adapters.framework.pods import KubeObject, pod_uid
from wasm_scheduler.framework_api import SUCCESS, Code, Status


class DefaultBinder(NativePlugin):
    NAME = "DefaultBinder"

    def bind(self, state: CycleState, pod: KubeObject, node_name: str) -> Status:
        assert self.ctx is not None, "DefaultBinder needs the framework handle"
        problem = self.ctx.handle.snapshot.bind(pod_uid(pod), node_name)
        return SUCCESS if not problem else Status(Code.ERROR, f"binding to {node_name}: {problem}", self.name)
