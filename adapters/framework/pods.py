"""What the framework needs to know about one pod, computed once.

This module owns `PodInfo` (the pod's dict in kubectl's JSON shape plus its uid,
``namespace/name``, priority and resource requests) and the small accessors every part
of the framework shares: a pod's ``namespace/name`` (`pod_name`, its key) and uid,
priority, scheduler name, node and nomination.
Pod dicts are never edited: a change (a node name, a nomination) makes a new dict, so
anything keyed on a dict's identity (the wasm side's encodings) stays right.

See `docs/framework.md`.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from wasm_scheduler.adapters.framework.resources import PodRequests, pod_requests
from wasm_scheduler.vocabulary import KubeObject as KubeObject
from wasm_scheduler.vocabulary import pod_name as pod_name
from wasm_scheduler.vocabulary import pod_uid as pod_uid

DEFAULT_SCHEDULER_NAME = "default-scheduler"


def pod_priority(pod: KubeObject) -> int:
    value = (pod.get("spec") or {}).get("priority")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0


def scheduler_name(pod: KubeObject) -> str:
    return str((pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER_NAME)


def node_name_of(pod: KubeObject) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def nominated_node_of(pod: KubeObject) -> str:
    return str((pod.get("status") or {}).get("nominatedNodeName") or "")


def with_changes(pod: KubeObject, *, node_name: str | None = None, nominated: str | None = None) -> dict[str, Any]:
    """A new pod dict with spec.nodeName and/or status.nominatedNodeName set ("" clears)."""
    new = dict(pod)
    if node_name is not None:
        spec = dict(new.get("spec") or {})
        if node_name:
            spec["nodeName"] = node_name
        else:
            spec.pop("nodeName", None)
        new["spec"] = spec
    if nominated is not None:
        status = dict(new.get("status") or {})
        if nominated:
            status["nominatedNodeName"] = nominated
        else:
            status.pop("nominatedNodeName", None)
        new["status"] = status
    return new


@dataclass(frozen=True, slots=True, eq=False)
class PodInfo:
    """A pod and what is derived from it once."""

    pod: KubeObject
    uid: str
    key: str
    priority: int
    requests: PodRequests

    @classmethod
    def of(cls, pod: KubeObject) -> PodInfo:
        """QuantityError if a request is malformed (the cluster loader reports it)."""
        return cls(pod, pod_uid(pod), pod_name(pod), pod_priority(pod), pod_requests(pod))

    def with_pod(self, pod: KubeObject) -> PodInfo:
        """The same pod (same uid, same spec) as a new dict."""
        return PodInfo(pod, self.uid, self.key, pod_priority(pod), self.requests)

    @property
    def start_time(self) -> str:
        """When the pod started (RFC 3339, comparable as text), "" if unknown."""
        status = self.pod.get("status") or {}
        value = status.get("startTime") or (self.pod.get("metadata") or {}).get("creationTimestamp")
        if isinstance(value, datetime.datetime):
            return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return str(value or "")


def more_important(a: PodInfo, b: PodInfo) -> bool:
    """kube's MoreImportantPod: higher priority, then the one that started earlier."""
    if a.priority != b.priority:
        return a.priority > b.priority
    sa, sb = a.start_time, b.start_time
    if sa and sb and sa != sb:
        return sa < sb
    return bool(sa) and not sb
