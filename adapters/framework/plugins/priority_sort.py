"""PrioritySort: the QueueSort plugin; higher priority first, then first come first served."""

from __future__ import annotations

from wasm_scheduler.adapters.framework.plugins.base import NativePlugin
from wasm_scheduler.adapters.framework.queue import QueuedPod


class PrioritySort(NativePlugin):
    NAME = "PrioritySort"

    def less(self, a: QueuedPod, b: QueuedPod) -> bool:
        if a.info.priority != b.info.priority:
            return a.info.priority > b.info.priority
        return a.timestamp < b.timestamp
