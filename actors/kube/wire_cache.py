"""Encoded Kubernetes objects, made once per object version and shared by instances.

This module owns the rule "a node is encoded once per version, a pod once per cycle":
`WireCache` keeps each node's protobuf bytes keyed by the node object itself (the
snapshot replaces a node's dict when the node changes; it never edits one in place)
and assembles a `v1.NodeList` from the cached items without re-encoding them. A pod's
spec and status, which the pods of one template share, are encoded once for all of
them (`codec.PodPartCache`); only the metadata is encoded for every pod. One
cache serves all instances of a plugin, from their own threads: entries are
immutable tuples swapped in whole, so a race costs at most a duplicate encoding.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from wasm_scheduler.actors.kube.codec import PodPartCache, encode_node, encode_pod

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


#: Pods whose bytes a `WireCache` keeps (the cycles in flight: scheduling, binding, preemption).
POD_ENTRIES = 64


class WireCache:
    """node name -> (node object, its v1.Node bytes); the last pods -> their v1.Pod bytes."""

    def __init__(self) -> None:
        self._nodes: dict[str, tuple[Mapping[str, Any], bytes]] = {}
        self._list: tuple[tuple[int, ...], bytes] | None = None
        self._pods: dict[int, tuple[Mapping[str, Any], bytes]] = {}
        #: The spec and status that pods share, encoded once (pods of one template).
        self.pod_parts = PodPartCache()

    def pod(self, pod: Mapping[str, Any]) -> bytes:
        """The pod's bytes, encoded once per pod object (a pod dict is never edited in place:
        the framework makes a new one for every change)."""
        entry = self._pods.get(id(pod))
        if entry is not None and entry[0] is pod:
            return entry[1]
        data = encode_pod(pod, parts=self.pod_parts)
        pods = self._pods
        if len(pods) >= POD_ENTRIES:
            # The oldest entry (insertion order); another thread may have taken it already.
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                del pods[next(iter(pods))]
        pods[id(pod)] = (pod, data)
        return data

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
