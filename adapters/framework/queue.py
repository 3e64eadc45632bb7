"""The scheduling queue: which pending pod is scheduled next, and which wait.

This module owns kube-scheduler's queue semantics as a simulation needs them: an
active queue ordered by the profile's QueueSort plugin, a set of unschedulable pods
that go back to the active queue when a cluster event one of their rejecting plugins
registered for happens (a pod deleted by preemption, an assumed pod forgotten after a
binding failure), and the nominator (pods that preemption nominated to a node, which
lower-priority pods must not take the room of). A pod is added through its profile's
PreEnqueue plugins (`PreEnqueuePlugin`, SchedulingGates): one that rejects it keeps
the pod out of the active queue as gated. Backoff timers are not modelled: the
simulation has no wall clock, a moved pod is retried at once.

See `docs/framework.md` ("What a scheduling attempt does").
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from wasm_scheduler.adapters.framework.pods import KubeObject, PodInfo, scheduler_name
from wasm_scheduler.framework_api import SUCCESS, ActionType, ClusterEvent, Resource, Status

#: What kube-scheduler calls AssignedPodDelete.
ASSIGNED_POD_DELETE = ClusterEvent(Resource.POD, ActionType.DELETE)


@dataclass(eq=False)
class QueuedPod:
    """A pending pod in the queue, with what the queue knows about its attempts."""

    info: PodInfo
    #: Order of arrival in the queue (kube's Timestamp); renewed when it fails.
    timestamp: int = 0
    attempts: int = 0
    #: Plugins that rejected it last time (an event they registered for moves it).
    unschedulable_plugins: frozenset[str] = field(default_factory=frozenset)

    @property
    def pod(self) -> Mapping[str, object]:
        return self.info.pod


class _Entry:
    __slots__ = ("item", "less")

    def __init__(self, item: QueuedPod, less: Callable[[QueuedPod, QueuedPod], bool]) -> None:
        self.item = item
        self.less = less

    def __lt__(self, other: _Entry) -> bool:
        return self.less(self.item, other.item)


@runtime_checkable
class PreEnqueuePlugin(Protocol):
    """A plugin of kube-scheduler's PreEnqueue point: asked once, when a pod is added to the
    queue, whether it may enter the active queue (Success) or is held back (gated)."""

    name: str

    def pre_enqueue(self, pod: KubeObject, /) -> Status: ...


def run_pre_enqueue(plugins: Iterable[PreEnqueuePlugin], pod: KubeObject) -> Status:
    """kube's runPreEnqueuePlugins: the first status that is not Success, naming its plugin."""
    for plugin in plugins:
        status = plugin.pre_enqueue(pod)
        if not status.ok:
            return status.with_plugin(plugin.name)
    return SUCCESS


def event_matches(registered: Iterable[ClusterEvent], event: ClusterEvent) -> bool:
    return any((int(r.resource) == int(event.resource) or int(r.resource) == Resource.WILDCARD)
               and int(r.action) & int(event.action) for r in registered)


class SchedulingQueue:
    """Active and unschedulable pods; safe from any thread."""

    def __init__(self, less: Callable[[QueuedPod, QueuedPod], bool],
                 pre_enqueue: Mapping[str, Sequence[PreEnqueuePlugin]] | None = None) -> None:
        self._less = less
        #: Profile (schedulerName) -> its PreEnqueue plugins, in order.
        self._pre_enqueue = dict(pre_enqueue or {})
        self._active: list[_Entry] = []
        self._unschedulable: dict[str, QueuedPod] = {}
        #: Pods a PreEnqueue plugin held back; nothing in a simulation lifts their gates.
        self._gated: dict[str, QueuedPod] = {}
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def add(self, info: PodInfo) -> Status:
        """A new pending pod: into the active queue (Success), or held back as gated when a
        PreEnqueue plugin of its profile rejects it (that plugin's status is returned)."""
        plugins = self._pre_enqueue.get(scheduler_name(info.pod))
        status = run_pre_enqueue(plugins, info.pod) if plugins else SUCCESS
        if not status.ok:
            with self._lock:
                self._gated[info.uid] = QueuedPod(info)
            return status
        self._push(QueuedPod(info))
        return SUCCESS

    def _push(self, item: QueuedPod) -> None:
        item.timestamp = next(self._seq)
        with self._lock:
            heapq.heappush(self._active, _Entry(item, self._less))

    def pop(self) -> QueuedPod | None:
        """The next pod to schedule, or None when the active queue is empty."""
        with self._lock:
            if not self._active:
                return None
            item = heapq.heappop(self._active).item
        item.attempts += 1
        return item

    def add_unschedulable(self, item: QueuedPod, plugins: Iterable[str]) -> None:
        """The pod failed; it waits for an event that may help it."""
        item.unschedulable_plugins = frozenset(plugins)
        item.timestamp = next(self._seq)
        with self._lock:
            self._unschedulable[item.info.uid] = item

    def requeue(self, item: QueuedPod) -> None:
        """Back into the active queue at once (a preempted pod, recreated by its owner)."""
        with self._lock:
            self._unschedulable.pop(item.info.uid, None)
        self._push(item)

    def move_all_to_active(self, event: ClusterEvent, registrations: Mapping[str, Iterable[ClusterEvent]],
                           skip_uid: str = "") -> int:
        """Move unschedulable pods that `event` may help; how many moved."""
        with self._lock:
            moving = [
                item for uid, item in self._unschedulable.items()
                if uid != skip_uid and (
                    not item.unschedulable_plugins
                    or any(event_matches(registrations.get(p, ()), event) for p in item.unschedulable_plugins))
            ]
            for item in moving:
                del self._unschedulable[item.info.uid]
        for item in moving:
            self._push(item)
        return len(moving)

    def __len__(self) -> int:
        with self._lock:
            return len(self._active)


class Nominator:
    """Pods nominated to a node by preemption; safe from any thread."""

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}
        self._lock = threading.Lock()

    def add(self, info: PodInfo, node: str) -> None:
        with self._lock:
            self._delete(info.uid)
            self._by_node.setdefault(node, {})[info.uid] = info
            self._node_of[info.uid] = node

    def delete(self, uid: str) -> None:
        with self._lock:
            self._delete(uid)

    def _delete(self, uid: str) -> None:
        node = self._node_of.pop(uid, None)
        if node is not None:
            self._by_node[node].pop(uid, None)

    def node_of(self, uid: str) -> str:
        with self._lock:
            return self._node_of.get(uid, "")

    def pods_on(self, node: str) -> list[PodInfo]:
        with self._lock:
            return list(self._by_node.get(node, {}).values())

    def by_node(self) -> dict[str, list[PodInfo]]:
        """Every nomination at once: node name -> pods nominated to it."""
        with self._lock:
            return {node: list(pods.values()) for node, pods in self._by_node.items() if pods}
