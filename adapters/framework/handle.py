"""SchedulerHandle: the framework handle plugins (native and wasm) are given.

This module owns what a plugin may see of the scheduler and do through it. For the
wasm host functions it implements `vocabulary.FrameworkHandle`: the node lister
and image states read the snapshot view of the scheduling cycle in progress (node
dicts are the snapshot's, replaced on change, never edited), events are recorded,
and waiting pods can be looked up and rejected. Native plugins additionally get the
waiting pods themselves (to allow them), the nominator, the snapshot, the snapshot's
`Workloads` (PodTopologySpread's default constraints), a worker pool for parallel
work, and `evict`, through which preemption deletes its victims (the
scheduler decides what deleting a pod means in a simulation).

See `docs/framework.md`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from wasm_scheduler.adapters.framework.pods import KubeObject, PodInfo
from wasm_scheduler.adapters.framework.queue import Nominator
from wasm_scheduler.adapters.framework.snapshot import Snapshot
from wasm_scheduler.adapters.framework.waiting_pods import WaitingPod, WaitingPods
from wasm_scheduler.adapters.framework.workloads import NO_WORKLOADS, Workloads
from wasm_scheduler.logger import get_logger

log = get_logger("adapters.framework.handle")

T = TypeVar("T")
R = TypeVar("R")

#: Deletes preemption victims: (victims, the preemptor, the node) -> None.
Evictor = Callable[[Sequence[PodInfo], PodInfo, str], None]


class SchedulerHandle:
    """The scheduler as plugins see it; every method is safe from any thread."""

    def __init__(self, snapshot: Snapshot, waiting_pods: WaitingPods | None = None,
                 nominator: Nominator | None = None, parallelism: int = 16,
                 workloads: Workloads = NO_WORKLOADS) -> None:
        self.snapshot = snapshot
        #: The cluster's Services, ReplicaSets, StatefulSets, ReplicationControllers (never change).
        self.workloads = workloads
        self.waiting_pods = waiting_pods or WaitingPods()
        self.nominator = nominator or Nominator()
        self.parallelism = max(1, parallelism)
        self._events: list[Mapping[str, Any]] = []
        self._events_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._evictor: Evictor | None = None
        #: Evicted pods whose binding cycle has not ended yet: uid -> who preempted them.
        self._terminating: dict[str, str] = {}
        self._terminating_lock = threading.Lock()

    # --- vocabulary.FrameworkHandle ---------------------------------------------------

    def get_node(self, name: str) -> KubeObject | None:
        info = self.snapshot.view.get(name)
        return info.node if info is not None else None

    def list_nodes(self) -> Sequence[KubeObject]:
        return self.snapshot.view.node_dicts

    def image_states(self, node_name: str) -> Mapping[str, Mapping[str, int]]:
        return self.snapshot.view.image_states(node_name)

    def record_event(self, event: Mapping[str, Any]) -> None:
        with self._events_lock:
            self._events.append(event)
        log.debug("event.recorded", reason=event.get("Reason"), note=event.get("Note"))

    def get_waiting_pod(self, uid: str) -> KubeObject | None:
        waiting = self.waiting_pods.get(uid)
        return waiting.pod if waiting is not None else None

    def reject_waiting_pod(self, uid: str, plugin: str, reason: str) -> bool:
        waiting = self.waiting_pods.get(uid)
        return waiting.reject(plugin, reason) if waiting is not None else False

    # --- for native plugins ------------------------------------------------------------

    @property
    def events(self) -> list[Mapping[str, Any]]:
        with self._events_lock:
            return list(self._events)

    def iterate_waiting_pods(self) -> Iterable[WaitingPod]:
        return iter(self.waiting_pods)

    def parallelize(self, func: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """func over items on the handle's worker pool, results in the items' order."""
        if len(items) <= 1 or self.parallelism == 1:
            return [func(item) for item in items]
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.parallelism, thread_name_prefix="parallelize")
            pool = self._pool
        return list(pool.map(func, items))

    def set_evictor(self, evictor: Evictor) -> None:
        self._evictor = evictor

    def evict(self, victims: Sequence[PodInfo], preemptor: PodInfo, node: str) -> None:
        if self._evictor is None:
            for victim in victims:
                self.snapshot.evict(victim.uid)
        else:
            self._evictor(victims, preemptor, node)

    def mark_terminating(self, uid: str, preemptor: str) -> None:
        with self._terminating_lock:
            self._terminating[uid] = preemptor

    def is_terminating(self, uid: str) -> bool:
        with self._terminating_lock:
            return uid in self._terminating

    def terminated(self, uid: str) -> str:
        """The pod is gone; who preempted it ("" if it was not evicted)."""
        with self._terminating_lock:
            return self._terminating.pop(uid, "")

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
