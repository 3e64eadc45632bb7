"""What a guest may see of the scheduler: the framework handle protocol.

This module owns the interface between the guest host and whatever embeds it (the
in-process framework, the HTTP extender, a test). The ABI's host functions read the
cluster through it (`k8s.io/api.node`, `nodeList`, `nodeImageStates`) and act on the
scheduler through it (events, waiting pods). Objects are dicts in the shape `kubectl`
prints; the guest host encodes them for the wire. `EmptyHandle` is the handle of a
scheduler that has nothing to show, used where no snapshot exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

KubeObject = Mapping[str, Any]


def pod_name(pod: KubeObject) -> str:
    """``namespace/name`` of a pod (a pod without a namespace is in ``default``)."""
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


def pod_uid(pod: KubeObject) -> str:
    """The pod's uid; a pod without one is known by its ``namespace/name``."""
    meta = pod.get("metadata") or {}
    return str(meta.get("uid") or pod_name(pod))


class FrameworkHandle(Protocol):
    """Read access to the cluster snapshot and the framework's side effects."""

    def get_node(self, name: str) -> KubeObject | None:
        """The node of that name in the current snapshot, or None."""

    def list_nodes(self) -> Sequence[KubeObject]:
        """Every node of the current snapshot."""

    def image_states(self, node_name: str) -> Mapping[str, Mapping[str, int]]:
        """image name -> {"Size": bytes, "NumNodes": n} for that node ({} if unknown)."""

    def record_event(self, event: Mapping[str, Any]) -> None:
        """Record a Kubernetes event a guest emitted (the eventf JSON, decoded)."""

    def get_waiting_pod(self, uid: str) -> KubeObject | None:
        """The pod of that UID if it waits in Permit, else None."""

    def reject_waiting_pod(self, uid: str, plugin: str, reason: str) -> bool:
        """Reject the waiting pod of that UID; True if one was waiting."""


class EmptyHandle:
    """A handle with no nodes, no waiting pods, and events kept in a list."""

    def __init__(self) -> None:
        self.events: list[Mapping[str, Any]] = []

    def get_node(self, name: str) -> KubeObject | None:
        return None

    def list_nodes(self) -> Sequence[KubeObject]:
        return ()

    def image_states(self, node_name: str) -> Mapping[str, Mapping[str, int]]:
        return {}

    def record_event(self, event: Mapping[str, Any]) -> None:
        self.events.append(event)

    def get_waiting_pod(self, uid: str) -> KubeObject | None:
        return None

    def reject_waiting_pod(self, uid: str, plugin: str, reason: str) -> bool:
        return False
