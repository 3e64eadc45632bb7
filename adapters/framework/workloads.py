"""The workload objects of a cluster snapshot that default topology spreading reads.

This module owns `Workloads`: the Services, ReplicaSets, StatefulSets and
ReplicationControllers a snapshot carries, indexed as kube-scheduler's informer
listers serve them to PodTopologySpread's default constraints (its
``helper.DefaultSelector``): a namespace's Services, and one controller by kind,
namespace and name. A snapshot without them (``kubectl get nodes,pods``) gives
`NO_WORKLOADS`. The loader (`adapters.framework.cluster`) checks their shapes.

See `docs/framework.md` ("PodTopologySpread").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from wasm_scheduler.adapters.framework.pods import KubeObject

#: The kinds a snapshot may carry for default spreading, in the order kube lists them.
WORKLOAD_KINDS: tuple[str, ...] = ("Service", "ReplicationController", "ReplicaSet", "StatefulSet")
#: The kinds whose objects are found through a pod's controller reference.
CONTROLLER_KINDS: tuple[str, ...] = ("ReplicationController", "ReplicaSet", "StatefulSet")


def _namespace(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def _name(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


@dataclass(frozen=True)
class Workloads:
    """Services by namespace, and controllers by (kind, namespace, name)."""

    services: Mapping[str, tuple[KubeObject, ...]] = field(default_factory=dict)
    controllers: Mapping[tuple[str, str, str], KubeObject] = field(default_factory=dict)

    @classmethod
    def of(cls, objects: Iterable[KubeObject]) -> Workloads:
        """Index objects of the `WORKLOAD_KINDS` (others are ignored); a namespace-less one is in "default"."""
        services: dict[str, list[KubeObject]] = {}
        controllers: dict[tuple[str, str, str], KubeObject] = {}
        for obj in objects:
            kind = obj.get("kind")
            if kind == "Service":
                services.setdefault(_namespace(obj), []).append(obj)
            elif kind in CONTROLLER_KINDS:
                controllers[(str(kind), _namespace(obj), _name(obj))] = obj
        return cls({ns: tuple(items) for ns, items in services.items()}, controllers)

    def __bool__(self) -> bool:
        return bool(self.services) or bool(self.controllers)

    def __len__(self) -> int:
        return sum(len(items) for items in self.services.values()) + len(self.controllers)

    def services_in(self, namespace: str) -> tuple[KubeObject, ...]:
        return self.services.get(namespace, ())

    def controller(self, kind: str, namespace: str, name: str) -> KubeObject | None:
        return self.controllers.get((kind, namespace, name))


#: A snapshot that carries none.
NO_WORKLOADS = Workloads()
