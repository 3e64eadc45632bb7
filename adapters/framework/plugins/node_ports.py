"""NodePorts: a pod's host ports must be free on the node.

This module owns kube-scheduler's NodePorts plugin (v1.33). PreFilter collects the
pod's host ports as ``util.GetHostPorts`` does (every port with ``hostPort > 0`` of the
containers and of the sidecars, init containers with ``restartPolicy: Always``) and
answers Skip for a pod without any, so most pods never reach its Filter. Filter
rejects a node where a pod already running or assumed there holds a conflicting
port (``HostPortInfo.CheckConflict``): same protocol and port, and the same host IP,
or either side's host IP the wildcard ``0.0.0.0`` (an empty host IP is the wildcard,
an empty protocol TCP), with kube-scheduler's reason "node(s) didn't have free ports
for the requested pod ports". A node's used ports are computed from its pods once
per version of its pod list, not once per pod scheduled.

See `docs/framework.md` ("NodePorts").
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, PluginContext
from wasm_scheduler.adapters.framework.pods import KubeObject, PodInfo
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import (
    SUCCESS,
    ActionType,
    ClusterEvent,
    Code,
    PreFilterResult,
    Resource,
    Status,
)

_STATE_KEY = "PreFilterNodePorts"
#: kube-scheduler's ErrReason.
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
#: kube's DefaultBindAllHostIP: a host port bound on every address.
BIND_ALL = "0.0.0.0"
DEFAULT_PROTOCOL = "TCP"


@dataclass(frozen=True, slots=True)
class HostPort:
    """One host port of a pod, sanitized as HostPortInfo does (empty IP: 0.0.0.0; empty protocol: TCP)."""

    ip: str
    protocol: str
    port: int


def _port_of(port: Mapping[str, Any]) -> HostPort | None:
    number = port.get("hostPort")
    if isinstance(number, bool) or not isinstance(number, int) or number <= 0:
        return None
    return HostPort(str(port.get("hostIP") or BIND_ALL), str(port.get("protocol") or DEFAULT_PROTOCOL), number)


def host_ports(pod: KubeObject) -> tuple[HostPort, ...]:
    """kube's GetHostPorts: sidecars' (restartable init containers') ports, then the containers'."""
    spec = pod.get("spec") or {}
    found: list[HostPort] = []
    for kind in ("initContainers", "containers"):
        for container in spec.get(kind) or ():
            if kind == "initContainers" and container.get("restartPolicy") != "Always":
                continue  # an init container that runs to completion holds no port while the pod runs
            for port in container.get("ports") or ():
                hp = _port_of(port)
                if hp is not None:
                    found.append(hp)
    return tuple(found)


@dataclass(frozen=True, slots=True)
class UsedPorts:
    """A node's HostPortInfo: every (ip, protocol, port) its pods hold, and the (protocol,
    port) pairs held on any address (what a wildcard request conflicts with)."""

    exact: frozenset[tuple[str, str, int]]
    any_ip: frozenset[tuple[str, int]]

    @classmethod
    def of(cls, ports: Iterable[HostPort]) -> UsedPorts:
        exact = frozenset((p.ip, p.protocol, p.port) for p in ports)
        return cls(exact, frozenset((protocol, port) for _ip, protocol, port in exact))

    def conflicts(self, want: HostPort) -> bool:
        """kube's HostPortInfo.CheckConflict."""
        if want.ip == BIND_ALL:
            return (want.protocol, want.port) in self.any_ip
        return ((BIND_ALL, want.protocol, want.port) in self.exact
                or (want.ip, want.protocol, want.port) in self.exact)


NO_PORTS = UsedPorts(frozenset(), frozenset())


def used_ports(pods: Iterable[PodInfo]) -> UsedPorts:
    """The host ports the pods hold (a node's UsedPorts)."""
    ports = [port for info in pods for port in host_ports(info.pod)]
    return UsedPorts.of(ports) if ports else NO_PORTS


def fits_ports(want: Sequence[HostPort], used: UsedPorts) -> bool:
    return not used.exact or not any(used.conflicts(port) for port in want)


class NodePorts(NativePlugin):
    NAME = "NodePorts"

    def __init__(self, ctx: PluginContext | None = None, name: str = "") -> None:
        super().__init__(ctx, name)
        #: Node name -> (the pods tuple of the NodeInfo it was computed from, its used ports):
        #: a NodeInfo's pods are replaced, never edited, so identity says it is current.
        self._used: dict[str, tuple[tuple[PodInfo, ...], UsedPorts]] = {}
        self._lock = threading.Lock()  # preemption's dry runs filter from worker threads

    def pre_filter(self, state: CycleState, pod: KubeObject) -> PreFilterResult:
        ports = host_ports(pod)
        if not ports:
            return PreFilterResult(Status(Code.SKIP, "", self.name))
        state.write(_STATE_KEY, ports)
        return PreFilterResult(SUCCESS)

    def _wanted(self, state: CycleState, pod: KubeObject) -> tuple[HostPort, ...]:
        cached = state.get(_STATE_KEY)
        return host_ports(pod) if cached is None else cached

    def used(self, node: NodeInfo) -> UsedPorts:
        """The node's used ports, computed once per version of its pod list."""
        pods = node.pods
        with self._lock:
            cached = self._used.get(node.name)
        if cached is not None and cached[0] is pods:
            return cached[1]
        used = used_ports(pods)
        with self._lock:
            self._used[node.name] = (pods, used)
        return used

    def filter_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> dict[str, Status]:
        want = self._wanted(state, pod)
        if not want:
            return dict.fromkeys([node.name for node in nodes], SUCCESS)
        rejected = Status(Code.UNSCHEDULABLE, ERR_REASON, self.name)
        return {node.name: SUCCESS if fits_ports(want, self.used(node)) else rejected for node in nodes}

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        # v1.33 with queueing hints (on by default): a deleted pod may free a port, a new node has all free.
        return (ClusterEvent(Resource.POD, ActionType.DELETE), ClusterEvent(Resource.NODE, ActionType.ADD))
