"""Encoded Kubernetes objects, made once per object version and shared by instances.

This module owns the rule "a node is encoded once per version, a pod once per cycle":
`WireCache` keeps each node's protobuf bytes keyed by the node object itself (the
snapshot replaces a node's dict when the node changes; it never edits one in place)
and assembles a `v1.NodeList` from the cached items without re-encoding them. A pod's
spec and status, which the pods of one template share, are encoded once for all of
them (`codec.PodPartCache`); only the metadata is encoded for every pod. One
cache serves all instances of a plugin, from their own threads: entries are
immutable tuples swapped in whole, so a race costs at most a duplicate encoding.

What it keeps is bounded by what is live: a pod's bytes go when its cycle ends
(`forget_pod`, told by the plugin facade), and the other pods' (victims a preemption
read) once no cycle's pod is left; a caller that knows which nodes are live (the HTTP extender) drops
the others' bytes with `retain_nodes`. The counts are capped besides (`POD_ENTRIES`,
`TARGET_POD_ENTRIES`), and the shared spec and status parts by `PodPartCache`'s own bounds.

See `docs/performance.md` ("Why each fast path exists").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from wasm_scheduler.actors.kube.codec import PodPartCache, encode_node, encode_pod
from wasm_scheduler.vocabulary import pod_uid

_NODELIST_ITEMS_TAG = b"\x12"  # NodeList.items = 2, length-delimited


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


#: Most pods whose bytes a `WireCache` keeps (the cycles in flight: scheduling, binding);
#: a pod's bytes go when its cycle ends, this only caps a leak.
POD_ENTRIES = 64
#: Most other pods (targetPod: preemption's victims, AddPod's) whose bytes are kept; they go
#: when no cycle's pod is left.
TARGET_POD_ENTRIES = 16


class WireCache:
    """node name -> (node object, its v1.Node bytes); pod uid -> (pod object, its v1.Pod bytes)
    for the pods in flight, and likewise for the pods their calls read (targetPod)."""

    def __init__(self) -> None:
        self._nodes: dict[str, tuple[Mapping[str, Any], bytes]] = {}
        self._list: tuple[tuple[int, ...], bytes] | None = None
        self._pods: dict[str, tuple[Mapping[str, Any], bytes]] = {}
        self._targets: dict[str, tuple[Mapping[str, Any], bytes]] = {}
        #: The spec and status that pods share, encoded once (pods of one template).
        self.pod_parts = PodPartCache()

    def pod(self, pod: Mapping[str, Any], target: bool = False) -> bytes:
        """The pod's bytes, encoded once per pod object (a pod dict is never edited in place:
        the framework makes a new one for every change). `target`: not the pod of a cycle but
        one a call of it reads (targetPod), kept apart and dropped once no cycle's pod is left."""
        store, limit = (self._targets, TARGET_POD_ENTRIES) if target else (self._pods, POD_ENTRIES)
        key = pod_uid(pod)
        entry = store.get(key)
        if entry is not None and entry[0] is pod:
            return entry[1]
        data = encode_pod(pod, parts=self.pod_parts)
        if key not in store and len(store) >= limit:
            # The oldest entry (insertion order); another thread may have taken it already.
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                del store[next(iter(store))]
        store[key] = (pod, data)
        return data

    def forget_pod(self, uid: str) -> None:
        """The pod's cycle ended: its bytes go, and, when it was the last pod, the other pods'
        that the cycles read (a preemption's victims, read again while its cycle lasts)."""
        self._pods.pop(uid, None)
        if not self._pods:
            self._targets.clear()

    def retain_nodes(self, live: Callable[[str, Mapping[str, Any]], bool]) -> int:
        """Keep the bytes of the nodes `live(name, node)` says are live, drop the others' (and the
        node list made of them); the number dropped. Safe beside the plugin's calls: an entry
        put back meanwhile is kept, a race costs at most a re-encoding."""
        dropped = 0
        for name, entry in self._nodes.copy().items():
            if not live(name, entry[0]) and self._nodes.get(name) is entry:
                with contextlib.suppress(KeyError):
                    del self._nodes[name]
                dropped += 1
        if dropped:
            self._list = None
        return dropped

    def sizes(self) -> tuple[int, int, int]:
        """(nodes, pods, target pods) whose bytes are kept now."""
        return len(self._nodes), len(self._pods), len(self._targets)

    def node(self, node: Mapping[str, Any]) -> bytes:
        name = str(node.get("metadata", {}).get("name", ""))
        entry = self._nodes.get(name)
        if entry is not None and entry[0] is node:
            return entry[1]
        data = encode_node(node)
        self._nodes[name] = (node, data)
        return data

    def node_list(self, nodes: Sequence[Mapping[str, Any]]) -> bytes:
        key = tuple(id(n) for n in nodes)
        cached = self._list
        if cached is not None and cached[0] == key and all(
            self._nodes.get(str(n.get("metadata", {}).get("name", "")), (None,))[0] is n
            for n in nodes
        ):
            return cached[1]
        parts = []
        for node in nodes:
            data = self.node(node)
            parts.append(_NODELIST_ITEMS_TAG + _varint(len(data)) + data)
        encoded = b"".join(parts)
        self._list = (key, encoded)
        return encoded
