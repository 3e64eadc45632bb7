"""Pods waiting in Permit, and how they are allowed, rejected or time out.

This module owns `WaitingPod` (a pod that one or more Permit plugins told to Wait,
each with its own timeout) and `WaitingPods` (the map the framework handle exposes:
get by uid, iterate, reject). The binding cycle blocks in `WaitingPod.wait` until
every pending plugin allowed the pod, one rejected it, or one plugin's timeout
passed. Timeouts are deadlines checked whenever the pod is touched, so no timer
thread exists per pod; a late Allow after a deadline passed changes nothing, as in
kube-scheduler, where the timer fires first.

See `docs/framework.md` ("What a scheduling attempt does").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from wasm_scheduler.adapters.framework.pods import KubeObject, pod_name, pod_uid
from wasm_scheduler.framework_api import Code, Status

#: kube-scheduler caps a Permit plugin's wait at 15 minutes.
MAX_PERMIT_TIMEOUT_S = 15 * 60.0


@dataclass(frozen=True, slots=True)
class _Pending:
    deadline: float
    timeout_s: float


class WaitingPod:
    """A pod held in Permit by the plugins in `pending`."""

    def __init__(self, pod: KubeObject, node: str, timeouts: Mapping[str, float],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.pod = pod
        self.node = node
        self.uid = pod_uid(pod)
        self.key = pod_name(pod)
        self._clock = clock
        now = clock()
        self._pending = {name: _Pending(now + min(t, MAX_PERMIT_TIMEOUT_S), min(t, MAX_PERMIT_TIMEOUT_S))
                         for name, t in timeouts.items()}
        self._result: Status | None = None if self._pending else Status()
        self._cond = threading.Condition()

    @property
    def pending_plugins(self) -> list[str]:
        with self._cond:
            self._expire()
            return sorted(self._pending)

    def _expire(self) -> None:
        """Reject on the first plugin whose deadline passed (caller holds the lock)."""
        if self._result is not None:
            return
        now = self._clock()
        for name, pending in sorted(self._pending.items(), key=lambda kv: kv[1].deadline):
            if pending.deadline <= now:
                self._finish(Status(Code.UNSCHEDULABLE,
                                    f"rejected due to timeout after waiting {_duration(pending.timeout_s)} "
                                    f"at plugin {name}", name))
                return

    def _finish(self, status: Status) -> None:
        self._result = status
        self._cond.notify_all()

    def allow(self, plugin: str) -> bool:
        """`plugin` lets the pod go; it binds once no plugin is pending. False if too late."""
        with self._cond:
            self._expire()
            if self._result is not None:
                return False
            self._pending.pop(plugin, None)
            if not self._pending:
                self._finish(Status())
            return True

    def reject(self, plugin: str, reason: str) -> bool:
        """`plugin` rejects the pod (Unschedulable). False if its wait was already over."""
        with self._cond:
            self._expire()
            if self._result is not None:
                return False
            self._finish(Status(Code.UNSCHEDULABLE, reason, plugin))
            return True

    def wait(self) -> Status:
        """Block until allowed (Success), rejected or timed out (Unschedulable)."""
        with self._cond:
            while True:
                self._expire()
                if self._result is not None:
                    return self._result
                deadline = min(p.deadline for p in self._pending.values())
                self._cond.wait(max(deadline - self._clock(), 0.0) + 0.001)


def _duration(seconds: float) -> str:
    """Go's time.Duration text for the common cases ("50ms", "10s", "1m30s")."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{seconds:g}s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:g}s"


class WaitingPods:
    """Every pod waiting in Permit, by uid; safe from any thread."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}
        self._lock = threading.Lock()

    def add(self, waiting: WaitingPod) -> None:
        with self._lock:
            self._pods[waiting.uid] = waiting

    def remove(self, uid: str) -> None:
        with self._lock:
            self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPod | None:
        with self._lock:
            return self._pods.get(uid)

    def __iter__(self) -> Iterator[WaitingPod]:
        with self._lock:
            return iter(list(self._pods.values()))

    def __len__(self) -> int:
        with self._lock:
            return len(self._pods)

    def reject_all(self, plugin: str, reason: str) -> None:
        for waiting in self:
            waiting.reject(plugin, reason)
