"""The vocabulary every part shares: Kubernetes objects, a pod's identity, the handle.

This module owns the words the guest host (`actors`), the plugin facade, the in-process
framework and the extender (`adapters`) use with each other, so none of them imports
another for them: objects are `KubeObject`s (dicts in the shape `kubectl` prints; the
guest host encodes them for the wire), a pod is known by `pod_uid` and shown by
`pod_name`, and a plugin reads the cluster and acts on the scheduler through a
`FrameworkHandle` (the ABI's host functions do: `k8s.io/api.node`, `nodeList`,
`nodeImageStates`, events, waiting pods). `EmptyHandle` is the handle of a scheduler
that has nothing to show, used where no snapshot exists; `CycleStateView` is what a
wasm plugin reads of the framework's per-cycle state. It imports nothing of the
project.

See `docs/guest-authors.md` ("Imports").
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


class CycleStateView(Protocol):
    """What a wasm plugin reads of the framework's `CycleState`: the handle of this cycle
    (the extender's, per request), or None when the plugin's own handle serves."""

    @property
    def handle(self) -> FrameworkHandle | None: ...


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
