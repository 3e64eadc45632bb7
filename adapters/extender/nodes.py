"""Where the extender's verbs find nodes, and what a request's guests read of them.

This module owns the node side of the extender: `RequestNode`, what the extender's
framework hands its wasm plugins (a node's name and object: they read no more, so no
`NodeInfo` is made per node and request); `NodeSource`, the node objects of
node-cache-capable requests (`NodeCache` from a loader; `snapshot_reload` has the one
that follows a file); `KnownNodes`, one `RequestNode` per node of such a source, made
again only when the node's object changes; and `RequestHandle`, the framework handle a
request lends its guests: the nodes it carries, looked up by name, with the snapshot
view (image states) built only if a guest asks for it. For requests that carry whole
nodes, `LiveNodes` keeps the latest object of each node a live cycle refers to (and no
other), and `CycleNodes` is what a binding cycle's guests read of them.

See `docs/extender.md` ("The extender's own view of the cluster").
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from wasm_scheduler.adapters.framework.resources import Resources
from wasm_scheduler.adapters.framework.snapshot import NodeInfo, SnapshotView
from wasm_scheduler.vocabulary import KubeObject

#: The allocatable of a node a request carries (the extender does not count resources).
_NOT_COUNTED = Resources()


class RequestNode:
    """A node as the extender's framework hands it to plugins: its name and object."""

    __slots__ = ("name", "node")

    def __init__(self, name: str, node: KubeObject) -> None:
        self.name = name
        self.node = node

    def __repr__(self) -> str:
        return f"RequestNode({self.name!r})"


def request_nodes(names: Iterable[str], nodes: Iterable[KubeObject]) -> list[RequestNode]:
    """Each node with its name (the protocol decoder has read the names already)."""
    return [RequestNode(name, node) for name, node in zip(names, nodes, strict=True)]


def node_infos(nodes: Iterable[KubeObject]) -> list[NodeInfo]:
    """A NodeInfo of each node (no pods, nothing counted): for a snapshot view."""
    return [NodeInfo(node, _NOT_COUNTED) for node in nodes]


class NodeSource(Protocol):
    """Where node-cache-capable requests find node objects (and preemption its victims)."""

    @property
    def nodes(self) -> Mapping[str, KubeObject]: ...

    @property
    def pods(self) -> Mapping[str, KubeObject]: ...

    def refresh(self) -> None:
        """Asked when a request names a node the source does not know; must not block long."""

    def close(self) -> None: ...


@dataclass
class NodeCache:
    """Node objects for node-cache-capable mode from a loader (a `NodeSource`); the file-backed
    one that reloads in the background is `snapshot_reload.SnapshotReloader`."""

    load: Callable[[], tuple[Sequence[KubeObject], Sequence[KubeObject]]] = lambda: ((), ())
    nodes: dict[str, KubeObject] = field(default_factory=dict)
    pods: dict[str, KubeObject] = field(default_factory=dict)

    def refresh(self) -> None:
        nodes, pods = self.load()
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.pods = {str(p.get("metadata", {}).get("uid", "")): p for p in pods}

    def close(self) -> None:
        pass


class KnownNodes:
    """The `RequestNode` of each node of a `NodeSource`, made once per node object: a
    source is swapped whole when it reloads, which starts this afresh, and a node whose
    object changed in place is made again. Safe from several threads (at worst one is
    made twice)."""

    def __init__(self) -> None:
        self._made: dict[str, RequestNode] = {}
        self._source: Mapping[str, KubeObject] | None = None

    def of(self, names: Iterable[str], known: Mapping[str, KubeObject]) -> list[RequestNode]:
        """The node of each name `known` has, in the order named (others left out)."""
        made = self._made
        if self._source is not known:
            made, self._source = {}, known
            self._made = made
        found: list[RequestNode] = []
        for name in names:
            node = known.get(name)
            if node is None:
                continue
            entry = made.get(name)
            if entry is None or entry.node is not node:
                entry = made[name] = RequestNode(name, node)
            found.append(entry)
        return found


class RequestHandle:
    """The FrameworkHandle of one request: the nodes it carries, by name.

    A guest's `node` import is one lookup in a map made on the first such read (most
    requests have none); the snapshot view (for image states) likewise."""

    def __init__(self, nodes: Mapping[str, KubeObject] | Sequence[RequestNode]) -> None:
        self._given = nodes
        self._by_name: Mapping[str, KubeObject] | None = nodes if isinstance(nodes, Mapping) else None
        self._list: tuple[KubeObject, ...] | None = None
        self._view: SnapshotView | None = None
        self.events: list[Mapping[str, Any]] = []

    @property
    def by_name(self) -> Mapping[str, KubeObject]:
        if self._by_name is None:
            entries = self._given
            assert not isinstance(entries, Mapping)
            self._by_name = {entry.name: entry.node for entry in entries}
        return self._by_name

    @property
    def view(self) -> SnapshotView:
        if self._view is None:
            self._view = SnapshotView(node_infos(self.list_nodes()), 0)
        return self._view

    def get_node(self, name: str) -> KubeObject | None:
        return self.by_name.get(name)

    def list_nodes(self) -> Sequence[KubeObject]:
        if self._list is None:
            given = self._given
            self._list = (tuple(given.values()) if isinstance(given, Mapping)
                          else tuple(entry.node for entry in given))
        return self._list

    def image_states(self, node_name: str) -> Mapping[str, Mapping[str, int]]:
        return self.view.image_states(node_name)

    def record_event(self, event: Mapping[str, Any]) -> None:
        self.events.append(event)

    def get_waiting_pod(self, uid: str) -> KubeObject | None:
        return None  # the extender protocol has no waiting pods

    def reject_waiting_pod(self, uid: str, plugin: str, reason: str) -> bool:
        return False


class LiveNodes:
    """The latest object of each node that a live cycle refers to, for requests that carry
    whole nodes (not node-cache-capable): what a binding cycle's guests and a later preempt
    read. One object a node name however many cycles refer to it, and none once no live
    cycle does: every cycle that `refer`s to names must `forget` them when it ends, so what
    this keeps is bounded by the pods in flight, never by the node names ever seen. Safe
    from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, KubeObject] = {}
        #: How many live cycles refer to each node (Counter.update counts in C).
        self._refs: Counter[str] = Counter()

    def refer(self, held: frozenset[str], names: Sequence[str], nodes: Sequence[KubeObject]) -> frozenset[str]:
        """Take these objects as the latest of their nodes; a cycle that refers to `held` now refers
        to these names too (the names it refers to are returned)."""
        new = frozenset(names) - held if held else frozenset(names)
        with self._lock:
            self._objects.update(zip(names, nodes, strict=True))
            self._refs.update(new)
        return held | new if held else new

    def forget(self, names: Iterable[str]) -> None:
        """A cycle that referred to `names` no longer does; a node no cycle refers to is dropped."""
        with self._lock:
            objects, refs = self._objects, self._refs
            for name in names:
                left = refs[name] - 1
                if left > 0:
                    refs[name] = left
                else:
                    del refs[name]
                    objects.pop(name, None)

    def get(self, name: str) -> KubeObject | None:
        return self._objects.get(name)  # one dict read: atomic

    def __len__(self) -> int:
        return len(self._objects)

    def names(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._objects)


class CycleNodes(Mapping[str, KubeObject]):
    """The nodes a binding cycle's guests read: the latest object of each node its cycle refers
    to (`LiveNodes`), then the node source's. Iterating reads the cycle's own names (a frozen
    set) and the source's map (swapped whole, never edited), so no other request changes it
    underfoot."""

    def __init__(self, names: frozenset[str], live: LiveNodes, source: Mapping[str, KubeObject]) -> None:
        self._names = names
        self._live = live
        self._source = source

    def __getitem__(self, name: str) -> KubeObject:
        if name in self._names:
            node = self._live.get(name)
            if node is not None:
                return node
        return self._source[name]

    def __iter__(self) -> Iterator[str]:
        live = self._live
        for name in self._names:
            if live.get(name) is not None:
                yield name
        for name in self._source:
            if name not in self._names:
                yield name

    def __len__(self) -> int:
        return sum(1 for _name in self)
