"""The cluster as the scheduler sees it: nodes, the pods on them, and what they use.

This module owns `NodeInfo` (a node dict with its allocatable resources, its pods and
what they request, and which of those pods have pod (anti-)affinity: immutable, a change
makes a new one), `Snapshot` (the scheduler's cache: assume, forget, bind and evict pods,
under one lock because binding cycles run on worker threads) and `SnapshotView` (the
frozen picture one scheduling cycle works on, taken at its start, as kube-scheduler's
UpdateSnapshot does, with its nodes that hold pods with pod (anti-)affinity). Node dicts are
never edited (binding a pod leaves its node dict as it is: images are only those the
node's status.images reports, as in kube-scheduler), so encodings cached by object
identity stay valid. Nodes are listed in kube-scheduler's
node-tree order: zones interleaved round-robin.

See `docs/framework.md`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wasm_scheduler.adapters.framework.pods import KubeObject, PodInfo, with_changes
from wasm_scheduler.adapters.framework.resources import ZERO, Resources

ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")


def node_name(node: KubeObject) -> str:
    return str((node.get("metadata") or {}).get("name", ""))


def node_labels(node: KubeObject) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def zone_key(node: KubeObject) -> str:
    labels = node_labels(node)
    region = next((labels[k] for k in REGION_LABELS if labels.get(k)), "")
    zone = next((labels[k] for k in ZONE_LABELS if labels.get(k)), "")
    return f"{region}:\x00:{zone}" if region or zone else ""


def pod_affinity_kinds(pod: KubeObject) -> tuple[bool, bool]:
    """(has pod affinity or anti-affinity, has required anti-affinity terms): kube-scheduler's
    podWithAffinity and podWithRequiredAntiAffinity."""
    affinity = (pod.get("spec") or {}).get("affinity")
    if not affinity:
        return False, False
    anti = affinity.get("podAntiAffinity")
    return (affinity.get("podAffinity") is not None or anti is not None,
            bool(anti and anti.get("requiredDuringSchedulingIgnoredDuringExecution")))


def node_tree_order(nodes: Sequence[KubeObject]) -> list[KubeObject]:
    """kube-scheduler's NodeTree listing: one node of each zone in turn."""
    zones: dict[str, list[KubeObject]] = {}
    for node in nodes:
        zones.setdefault(zone_key(node), []).append(node)
    ordered: list[KubeObject] = []
    columns = list(zones.values())
    for i in range(max((len(c) for c in columns), default=0)):
        ordered.extend(column[i] for column in columns if i < len(column))
    return ordered


@dataclass(frozen=True, slots=True, eq=False)
class NodeInfo:
    """A node and the pods on it (running, bound or assumed)."""

    node: KubeObject
    allocatable: Resources
    pods: tuple[PodInfo, ...] = ()
    requested: Resources = ZERO
    non_zero_requested: Resources = ZERO
    #: metadata.name of `node` (read on every Filter and Score of every node: kept).
    name: str = field(init=False)
    #: spec.taints of `node` (empty for most nodes: the taint plugins test this first).
    taints: tuple[Mapping[str, Any], ...] = field(init=False)
    #: spec.unschedulable of `node` (a cordoned node).
    unschedulable: bool = field(init=False)
    #: (pods with pod affinity or anti-affinity, pods with required anti-affinity), found on
    #: first use (`pods_with_affinity`): None until then.
    _affinity_pods: tuple[tuple[PodInfo, ...], tuple[PodInfo, ...]] | None = field(
        init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        node = self.node
        _set = object.__setattr__
        _set(self, "name", node_name(node))
        spec = node.get("spec")
        if spec:
            _set(self, "taints", tuple(spec.get("taints") or ()))
            _set(self, "unschedulable", bool(spec.get("unschedulable")))
        else:  # most nodes a request carries have an empty spec: two constants
            _set(self, "taints", ())
            _set(self, "unschedulable", False)

    @classmethod
    def of(cls, node: KubeObject, allocatable: Resources, pods: Iterable[PodInfo] = ()) -> NodeInfo:
        info = cls(node, allocatable)
        for pod in pods:
            info = info.with_pod(pod)
        return info

    def with_pod(self, pod: PodInfo) -> NodeInfo:
        info = NodeInfo(self.node, self.allocatable, (*self.pods, pod),
                        self.requested + pod.requests.requested,
                        self.non_zero_requested + pod.requests.non_zero)
        cached = self._affinity_pods
        if cached is not None:  # kept up to date rather than found again
            with_affinity, required_anti = pod_affinity_kinds(pod.pod)
            object.__setattr__(info, "_affinity_pods", (
                (*cached[0], pod) if with_affinity else cached[0], (*cached[1], pod) if required_anti else cached[1]))
        return info

    def without_pod(self, uid: str) -> NodeInfo:
        gone = next((p for p in self.pods if p.uid == uid), None)
        if gone is None:
            return self
        info = NodeInfo(self.node, self.allocatable, tuple(p for p in self.pods if p.uid != uid),
                        self.requested - gone.requests.requested,
                        self.non_zero_requested - gone.requests.non_zero)
        cached = self._affinity_pods
        if cached is not None:
            object.__setattr__(info, "_affinity_pods", (tuple(p for p in cached[0] if p is not gone),
                                                        tuple(p for p in cached[1] if p is not gone)))
        return info

    def _pods_by_affinity(self) -> tuple[tuple[PodInfo, ...], tuple[PodInfo, ...]]:
        cached = self._affinity_pods
        if cached is None:  # two threads at once find equal tuples
            kinds = [(pod, *pod_affinity_kinds(pod.pod)) for pod in self.pods]
            cached = (tuple(p for p, with_affinity, _ in kinds if with_affinity),
                      tuple(p for p, _, required_anti in kinds if required_anti))
            object.__setattr__(self, "_affinity_pods", cached)
        return cached

    @property
    def pods_with_affinity(self) -> tuple[PodInfo, ...]:
        """kube-scheduler's NodeInfo.PodsWithAffinity: the pods with pod affinity or
        anti-affinity (found once per NodeInfo, then carried along by `with_pod`)."""
        return self._pods_by_affinity()[0]

    @property
    def pods_with_required_anti_affinity(self) -> tuple[PodInfo, ...]:
        """kube-scheduler's NodeInfo.PodsWithRequiredAntiAffinity."""
        return self._pods_by_affinity()[1]

    def images(self) -> dict[str, int]:
        """image name -> size in bytes, from the node's status.images."""
        sizes: dict[str, int] = {}
        for image in (self.node.get("status") or {}).get("images") or ():
            size = image.get("sizeBytes") or 0
            for name in image.get("names") or ():
                sizes[str(name)] = int(size) if isinstance(size, int) else 0
        return sizes


class SnapshotView:
    """The nodes one scheduling cycle sees; never changes once taken."""

    def __init__(self, nodes: Sequence[NodeInfo] | Mapping[str, NodeInfo], generation: int,
                 affinity_nodes: tuple[tuple[NodeInfo, ...], tuple[NodeInfo, ...]] | None = None) -> None:
        """`nodes`: the NodeInfos, or a map of them by name (`Snapshot`'s own: copied in C,
        which matters when a view is taken per pod of a large cluster). `affinity_nodes`:
        (`nodes_with_pod_affinity`, `nodes_with_required_anti_affinity`) when the caller
        keeps them (`Snapshot` does); None: found on first use."""
        if isinstance(nodes, Mapping):
            self.node_infos: tuple[NodeInfo, ...] = tuple(nodes.values())
            self._by_name = dict(nodes)
        else:
            self.node_infos = tuple(nodes)
            self._by_name = {info.name: info for info in self.node_infos}
        self.generation = generation
        self._node_dicts: tuple[KubeObject, ...] | None = None
        self._image_nodes: dict[str, int] | None = None
        self._affinity_nodes = affinity_nodes

    @property
    def node_dicts(self) -> tuple[KubeObject, ...]:
        """Each node's object (made on first use: only a guest's `nodeList` asks)."""
        found = self._node_dicts
        if found is None:
            found = self._node_dicts = tuple(info.node for info in self.node_infos)
        return found

    def __len__(self) -> int:
        return len(self.node_infos)

    def get(self, name: str) -> NodeInfo | None:
        return self._by_name.get(name)

    def _nodes_by_affinity(self) -> tuple[tuple[NodeInfo, ...], tuple[NodeInfo, ...]]:
        found = self._affinity_nodes
        if found is None:  # once per view (a view of the Snapshot is given them)
            found = (tuple(n for n in self.node_infos if n.pods_with_affinity),
                     tuple(n for n in self.node_infos if n.pods_with_required_anti_affinity))
            self._affinity_nodes = found
        return found

    def nodes_with_pod_affinity(self) -> tuple[NodeInfo, ...]:
        """kube-scheduler's HavePodsWithAffinityList: nodes holding a pod with pod (anti-)affinity."""
        return self._nodes_by_affinity()[0]

    def nodes_with_required_anti_affinity(self) -> tuple[NodeInfo, ...]:
        """kube-scheduler's HavePodsWithRequiredAntiAffinityList."""
        return self._nodes_by_affinity()[1]

    def image_states(self, name: str) -> dict[str, dict[str, int]]:
        info = self._by_name.get(name)
        if info is None:
            return {}
        counts = self._image_nodes
        if counts is None:
            counts = {}
            for other in self.node_infos:
                for image in other.images():
                    counts[image] = counts.get(image, 0) + 1
            self._image_nodes = counts
        return {image: {"Size": size, "NumNodes": counts.get(image, 1)} for image, size in info.images().items()}


@dataclass(slots=True)
class _PodState:
    info: PodInfo
    node: str
    bound: bool


class Snapshot:
    """The scheduler's cache of the cluster; every method is safe from any thread."""

    def __init__(self, nodes: Iterable[NodeInfo]) -> None:
        self._lock = threading.Lock()
        ordered = node_tree_order([n.node for n in nodes])
        by_name = {n.name: n for n in nodes}
        self._nodes: dict[str, NodeInfo] = {node_name(n): by_name[node_name(n)] for n in ordered}
        self._pods: dict[str, _PodState] = {}
        #: The nodes holding pods with pod (anti-)affinity, and with required anti-affinity,
        #: by name: kept as nodes change, so a view need not look at every node for them.
        self._with_affinity: dict[str, NodeInfo] = {}
        self._with_required_anti_affinity: dict[str, NodeInfo] = {}
        for info in self._nodes.values():
            for pod in info.pods:
                self._pods[pod.uid] = _PodState(pod, info.name, True)
            self._index_affinity(info)
        self._generation = 0
        self._view = self._new_view()

    # --- what a cycle sees -------------------------------------------------------------

    @property
    def view(self) -> SnapshotView:
        """The view of the scheduling cycle in progress (the last `update_view`)."""
        return self._view

    def update_view(self) -> SnapshotView:
        """Take the picture the next scheduling cycle works on."""
        with self._lock:
            if self._view.generation != self._generation:
                self._view = self._new_view()
            return self._view

    def _new_view(self) -> SnapshotView:
        return SnapshotView(self._nodes, self._generation,
                            (tuple(self._with_affinity.values()), tuple(self._with_required_anti_affinity.values())))

    def _index_affinity(self, info: NodeInfo) -> None:
        for index, pods in ((self._with_affinity, info.pods_with_affinity),
                            (self._with_required_anti_affinity, info.pods_with_required_anti_affinity)):
            if pods:
                index[info.name] = info
            else:
                index.pop(info.name, None)

    def _put(self, info: NodeInfo) -> None:
        """Replace the node's NodeInfo (under the lock)."""
        self._nodes[info.name] = info
        self._index_affinity(info)

    def node_info(self, name: str) -> NodeInfo | None:
        with self._lock:
            return self._nodes.get(name)

    def location(self, uid: str) -> tuple[str, bool] | None:
        """(node name, bound?) of a pod the cache holds, else None."""
        with self._lock:
            state = self._pods.get(uid)
            return (state.node, state.bound) if state else None

    # --- changes -----------------------------------------------------------------------

    def _changed(self) -> None:
        self._generation += 1

    def assume(self, pod: PodInfo, node: str) -> PodInfo:
        """Count the pod on `node` before it is bound; the assumed pod (nodeName set)."""
        assumed = pod.with_pod(with_changes(pod.pod, node_name=node, nominated=""))
        with self._lock:
            if pod.uid in self._pods:
                raise ValueError(f"pod {pod.key} is already in the cache")
            self._put(self._nodes[node].with_pod(assumed))
            self._pods[pod.uid] = _PodState(assumed, node, False)
            self._changed()
        return assumed

    def forget(self, uid: str) -> bool:
        """Undo `assume` (binding failed); False if the pod is not assumed."""
        with self._lock:
            state = self._pods.get(uid)
            if state is None or state.bound:
                return False
            del self._pods[uid]
            self._put(self._nodes[state.node].without_pod(uid))
            self._changed()
            return True

    def bind(self, uid: str, node: str) -> str:
        """Mark an assumed pod bound to `node`; "" on success, else why not."""
        with self._lock:
            state = self._pods.get(uid)
            if state is None:
                return "the pod is no longer in the cluster (it was deleted or preempted)"
            if state.node != node:
                return f"the pod is assumed on node {state.node}, not {node}"
            if state.bound:
                return ""
            # Binding changes neither the node's NodeInfo nor its images: as in
            # kube-scheduler (cache.FinishBinding), a node's images are only what its
            # status.images reports; a pulled image appears when the kubelet reports it,
            # which a simulation does not model.
            state.bound = True
            return ""

    def evict(self, uid: str) -> tuple[PodInfo, str, bool] | None:
        """Delete a pod (a preemption victim); (its info, node, was bound) or None."""
        with self._lock:
            state = self._pods.pop(uid, None)
            if state is None:
                return None
            self._put(self._nodes[state.node].without_pod(uid))
            self._changed()
            return state.info, state.node, state.bound

