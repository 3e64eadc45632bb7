"""Building nodes, pods, configurations and test plugins for the framework tests."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from wasm_scheduler.adapters.framework import Scheduler, SchedulerOptions, cluster_from_objects, config_from_dict
from wasm_scheduler.adapters.framework.cluster import Cluster
from wasm_scheduler.adapters.framework.config import API_VERSION, KIND, SchedulerConfig
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, PluginContext
from wasm_scheduler.adapters.framework.results import SimulationReport
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import (
    SUCCESS,
    Code,
    NodeScore,
    NormalizeScoreResult,
    PermitResult,
    PreFilterResult,
    Status,
)
from wasm_scheduler.registry.compiler import GuestCompiler

KubeObject = Mapping[str, Any]


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: int = 110, *, labels: Mapping[str, str] | None = None,
         taints: Sequence[Mapping[str, str]] = (), unschedulable: bool = False,
         extra: Mapping[str, str] | None = None, images: Iterable[tuple[str, int]] = ()) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods), **(extra or {})}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {"allocatable": allocatable, "capacity": dict(allocatable),
                   "images": [{"names": [n], "sizeBytes": size} for n, size in images]},
    }


def pod(name: str, cpu: str = "100m", memory: str = "128Mi", *, priority: int | None = None, node_name: str = "",
        namespace: str = "default", labels: Mapping[str, str] | None = None, image: str = "nginx:1.25",
        start: str = "", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "main", "image": image,
                                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if priority is not None:
        body["priority"] = priority
    if node_name:
        body["nodeName"] = node_name
    body.update(spec)
    status: dict[str, Any] = {"phase": "Running" if node_name else "Pending"}
    if start:
        status["startTime"] = start
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
            "spec": body, "status": status}


def cluster(*objects: KubeObject) -> Cluster:
    return cluster_from_objects([{"apiVersion": "v1", "kind": "List", "items": list(objects)}], "test-cluster.yaml")


def config(*multi: str | tuple[str, int], plugins: Mapping[str, Any] | None = None,
           plugin_config: Sequence[Mapping[str, Any]] = (), percentage: int | None = None,
           base_dir: str = "", **top: Any) -> SchedulerConfig:
    """A one-profile configuration: the defaults, plus `multi` through multiPoint."""
    enabled = [{"name": m} if isinstance(m, str) else {"name": m[0], "weight": m[1]} for m in multi]
    profile_plugins: dict[str, Any] = dict(plugins or {})
    multi_point = dict(profile_plugins.get("multiPoint") or {})
    multi_point["enabled"] = enabled + list(multi_point.get("enabled") or [])
    profile_plugins["multiPoint"] = multi_point
    profile: dict[str, Any] = {"schedulerName": "default-scheduler", "plugins": profile_plugins,
                               "pluginConfig": list(plugin_config)}
    if percentage is not None:
        profile["percentageOfNodesToScore"] = percentage
    doc = {"apiVersion": API_VERSION, "kind": KIND, "profiles": [profile], **top}
    return config_from_dict(doc, "test-config.yaml", base_dir)


def run(cfg: SchedulerConfig, cl: Cluster, compiler: GuestCompiler, registry: Mapping[str, Any] | None = None,
        **options: Any) -> SimulationReport:
    with Scheduler(cfg, cl, compiler, registry, SchedulerOptions(**options)) as scheduler:
        return scheduler.run()


def pod_name(pod: KubeObject) -> str:
    return str(pod["metadata"]["name"])


class Journal:
    """Calls recorded by test plugins, from any thread."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()

    def add(self, plugin: str, point: str, pod: KubeObject) -> None:
        with self._lock:
            self.calls.append((plugin, point, pod_name(pod)))

    def points(self, pod: str, plugin: str | None = None) -> list[str]:
        with self._lock:
            return [pt for pl, pt, p in self.calls if p == pod and (plugin is None or pl == plugin)]

    def of(self, plugin: str) -> list[tuple[str, str]]:
        with self._lock:
            return [(pt, p) for pl, pt, p in self.calls if pl == plugin]


class Recorder(NativePlugin):
    """Implements every extension point (but QueueSort), records each call, and does what
    `behaviour` says: {(point, pod name): Status or result}."""

    def __init__(self, ctx: PluginContext, journal: Journal,
                 behaviour: Mapping[tuple[str, str], Any] | None = None) -> None:
        super().__init__(ctx)
        self.journal = journal
        self.behaviour = dict(behaviour or {})
        self.seen_nodes: dict[str, list[list[str]]] = {}

    def _do(self, point: str, pod: KubeObject, default: Any) -> Any:
        self.journal.add(self.name, point, pod)
        return self.behaviour.get((point, pod_name(pod)), default)

    def pre_filter(self, state: CycleState, pod: KubeObject) -> PreFilterResult:
        return self._do("pre_filter", pod, PreFilterResult(SUCCESS))

    def filter_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> dict[str, Status]:
        self.seen_nodes.setdefault("filter", []).append([n.name for n in nodes])
        rejected = self._do("filter", pod, {})
        return {n.name: rejected.get(n.name, SUCCESS) for n in nodes}

    def add_pod(self, state: CycleState, pod: KubeObject, pod_to_add: KubeObject, node_info: NodeInfo) -> Status:
        result: Status = self._do("add_pod", pod, SUCCESS)
        return result

    def remove_pod(self, state: CycleState, pod: KubeObject, pod_to_remove: KubeObject,
                   node_info: NodeInfo) -> Status:
        result: Status = self._do("remove_pod", pod, SUCCESS)
        return result

    def pre_score(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> Status:
        result: Status = self._do("pre_score", pod, SUCCESS)
        return result

    def score(self, state: CycleState, pod: KubeObject, node: NodeInfo) -> int | Status:
        scores = self.behaviour.get(("score", pod_name(pod)), {})
        return int(scores.get(node.name, 0))

    def score_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> Any:
        self.journal.add(self.name, "score", pod)
        self.seen_nodes.setdefault("score", []).append([n.name for n in nodes])
        return super().score_nodes(state, pod, nodes)

    def normalize_score(self, state: CycleState, pod: KubeObject, scores: Sequence[NodeScore]) -> NormalizeScoreResult:
        self.journal.add(self.name, "normalize_score", pod)
        return NormalizeScoreResult(SUCCESS, tuple(scores))

    def reserve(self, state: CycleState, pod: KubeObject, node_name: str) -> Status:
        result: Status = self._do("reserve", pod, SUCCESS)
        return result

    def unreserve(self, state: CycleState, pod: KubeObject, node_name: str) -> None:
        self._do("unreserve", pod, None)

    def permit(self, state: CycleState, pod: KubeObject, node_name: str) -> PermitResult:
        result: PermitResult = self._do("permit", pod, PermitResult(SUCCESS))
        return result

    def pre_bind(self, state: CycleState, pod: KubeObject, node_name: str) -> Status:
        result: Status = self._do("pre_bind", pod, SUCCESS)
        return result

    def bind(self, state: CycleState, pod: KubeObject, node_name: str) -> Status:
        result: Status = self._do("bind", pod, Status(Code.SKIP))
        return result

    def post_bind(self, state: CycleState, pod: KubeObject, node_name: str) -> None:
        self._do("post_bind", pod, None)


def recorder(journal: Journal, behaviour: Mapping[tuple[str, str], Any] | None = None) -> Any:
    """A registry factory for a Recorder sharing `journal`."""
    instances: list[Recorder] = []

    def make(ctx: PluginContext) -> Recorder:
        plugin = Recorder(ctx, journal, behaviour)
        instances.append(plugin)
        return plugin

    make.instances = instances  # type: ignore[attr-defined]
    return make
