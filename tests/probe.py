"""Driving the probe guest (guests/probe.wat) from tests.

The probe runs a script of host-import calls, written into its memory at 0x100 before
an export is called, and leaves one result word per op at 0x800. Its status word
(0x10) and high word (0x14) are what its exports return. `ExportInputs` calls any
export of an instance by name (the probe's or any guest's), `status_of` reads the
status of what it answered.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wasm_scheduler.actors.guest_instance import GuestInstance
from wasm_scheduler.framework_api import FilterResult, NodeScore, Status
from wasm_scheduler.vocabulary import FrameworkHandle, KubeObject

STATUS = 0x10
HIGH = 0x14
LAST_EXPORT = 0x20
CALLS = 0x24
SCRIPT = 0x100
RESULTS = 0x800
BUF = 0x1000
INPUT = 0x8000  # where tests put names and other inputs

OPS = {
    "node": 1, "nodeList": 2, "currentPod": 3, "targetPod": 4, "currentNodeName": 5,
    "filteredNodeList": 6, "nodeToStatusMap": 7, "nodeScoreList": 8, "nodeImageStates": 9,
    "get_config": 10, "status_reason": 11, "node_names": 12, "nominated_node_name": 13,
    "normalized_score_list": 14, "cluster_events": 15, "eventf": 16, "reject_waiting_pod": 17,
    "get_waiting_pod": 18, "severity": 19, "log": 20, "logs": 21, "fd_write": 22,
    "args_sizes_get": 23, "args_get": 24, "clock_time_get": 25, "random_get": 26,
    "proc_exit": 27, "trap": 28, "node_digit": 29, "environ_sizes_get": 30, "store": 31,
    "memory_grow": 32,
}

EXPORT_IDS = {name: i for i, name in enumerate(
    ["enqueue", "prefilter", "filter", "postfilter", "prescore", "score", "normalizescore", "reserve",
     "unreserve", "permit", "prebind", "bind", "postbind", "addpod", "removepod"], start=1)}


@dataclass
class Script:
    """A list of ops for the probe, plus the data they point at."""

    ops: list[tuple[int, ...]] = field(default_factory=list)
    data: list[tuple[int, bytes]] = field(default_factory=list)
    _next_input: int = INPUT

    def put(self, data: bytes) -> tuple[int, int]:
        """Place bytes in guest memory; (ptr, len) of them."""
        ptr = self._next_input
        self.data.append((ptr, data))
        self._next_input += (len(data) + 7) & ~7
        return ptr, len(data)

    def op(self, name: str, *args: int) -> Script:
        self.ops.append((OPS[name], *args, *([0] * (5 - len(args)))))
        return self

    def returns(self, status: int, high: int = 0) -> Script:
        self.op("store", STATUS, status & 0xFFFF_FFFF)
        return self.op("store", HIGH, high & 0xFFFF_FFFF)

    def load(self, instance: GuestInstance) -> None:
        mem = instance.memory
        words = [len(self.ops)] + [w & 0xFFFF_FFFF for op in self.ops for w in op]
        mem.write(SCRIPT, struct.pack(f"<{len(words)}I", *words))
        mem.write(RESULTS, bytes(4 * max(len(self.ops), 1)))
        for ptr, data in self.data:
            mem.write(ptr, data)


def results(instance: GuestInstance, count: int) -> list[int]:
    raw = instance.memory.read(RESULTS, 4 * count)
    return [r - (1 << 32) if r & 0x8000_0000 else r for r in struct.unpack(f"<{count}I", raw)]


def read(instance: GuestInstance, ptr: int, length: int) -> bytes:
    return instance.memory.read(ptr, length)


def word(instance: GuestInstance, ptr: int) -> int:
    return int(struct.unpack("<I", instance.memory.read(ptr, 4))[0])


@dataclass(frozen=True)
class ExportInputs:
    """What a test hands the exports of a `GuestInstance`: `call` runs any export by name
    with the arguments its method takes."""

    pod: KubeObject
    #: The pod AddPod and RemovePod add or remove.
    target: KubeObject
    #: The node of the per-node and binding-cycle exports.
    node: str = "node-1"
    #: Filter's and Score's nodes (None: `node` alone).
    nodes: Sequence[str] | None = None
    #: PreScore's filtered nodes (None: `nodes`).
    filtered: Sequence[str] | None = None
    #: PostFilter's node statuses, as codes (None: `node` Unschedulable).
    statuses: Mapping[str, int] | None = None
    #: NormalizeScore's scores (None: `node` scored 1).
    scores: Sequence[NodeScore] | None = None

    def args(self, export: str, handle: FrameworkHandle) -> tuple[Any, ...]:
        """The arguments of ``GuestInstance.<export>``."""
        nodes = list(self.nodes) if self.nodes is not None else [self.node]
        if export in ("filter", "score"):
            return (self.pod, nodes, handle)
        if export == "prescore":
            return (self.pod, list(self.filtered) if self.filtered is not None else nodes, handle)
        if export == "prefilter":
            return (self.pod, handle)
        if export == "postfilter":
            return (self.pod, dict(self.statuses) if self.statuses is not None else {self.node: 2}, handle)
        if export == "normalizescore":
            return (self.pod, list(self.scores) if self.scores is not None else [NodeScore(self.node, 1)], handle)
        if export in ("addpod", "removepod"):
            return (self.pod, self.target, self.node, handle)
        if export == "enqueue":
            return (handle,)
        return (self.pod, self.node, handle)

    def call(self, instance: GuestInstance, export: str, handle: FrameworkHandle) -> Any:
        """What ``instance.<export>`` answers to these inputs."""
        return getattr(instance, export)(*self.args(export, handle))


def status_of(result: Any) -> Status:
    """The status of any export's answer (a Filter's: its first node's)."""
    if isinstance(result, Status):
        return result
    if isinstance(result, FilterResult):
        return result.statuses[0][1]
    if isinstance(result, tuple):  # enqueue: (events, status)
        status: Status = result[1]
        return status
    found: Status = result.status
    return found
