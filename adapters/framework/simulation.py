"""Running a simulation end to end: files in, `SimulationReport` out.

This module owns what ``wasm-scheduler simulate`` does between reading its arguments
and printing: find the embedded default inputs in ``examples/``, load and check the
scheduler configuration and the cluster snapshot, check that every object a wasm
plugin may be handed encodes to the Kubernetes wire format (so a bad field is the
user's error naming the object, not a trap in a guest), warn once about pod
constraints the built-in plugins do not model (`unmodelled_constraints`), run a
`Scheduler` with one `GuestCompiler`, and always shut it down.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

import wasm_scheduler.examples
from wasm_scheduler.actors.kube.codec import KubeCodecError, encode_node, encode_pod
from wasm_scheduler.adapters.framework.cluster import Cluster, LoadProgress, load_cluster
from wasm_scheduler.adapters.framework.config import SchedulerConfig, load_config
from wasm_scheduler.adapters.framework.errors import UserError
from wasm_scheduler.adapters.framework.plugins import PluginFactory
from wasm_scheduler.adapters.framework.pods import KubeObject
from wasm_scheduler.adapters.framework.results import SimulationReport
from wasm_scheduler.adapters.framework.scheduler import Scheduler, SchedulerOptions
from wasm_scheduler.registry.compiler import GuestCompiler

log = structlog.get_logger("adapters.framework.simulation")

DEFAULT_CONFIG = "scheduler-config.yaml"
DEFAULT_CLUSTER = "cluster.yaml"


def examples_dir() -> Path:
    """The embedded examples: the package data `wasm_scheduler.examples` (in a checkout, examples/)."""
    return Path(next(iter(wasm_scheduler.examples.__path__))).resolve()


def default_input(name: str) -> Path:
    folder = examples_dir()
    path = folder / name
    if not path.is_file():
        raise UserError(f"{path}: the embedded default is missing (the package data wasm_scheduler.examples "
                        "is incomplete: reinstall wasm-scheduler); pass --config and --cluster")
    return path


def uses_wasm(config: SchedulerConfig) -> bool:
    return any(args.is_wasm for profile in config.profiles for args in profile.plugin_args.values())


def check_wire(cluster: Cluster) -> None:
    """Every node and pod encodes as a protobuf v1.Node / v1.Pod; UserError naming the field if not."""
    for node in cluster.nodes:
        try:
            encode_node(node.node)
        except KubeCodecError as exc:
            raise UserError(f"{cluster.source}: Node {node.name}: {exc}") from None
    for pod in (*cluster.running, *cluster.pending):
        try:
            encode_pod(pod.pod)
        except KubeCodecError as exc:
            raise UserError(f"{cluster.source}: Pod {pod.key}: {exc}") from None


def load_inputs(config_path: str | Path | None, cluster_path: str | Path | None,
                progress: LoadProgress | None = None) -> tuple[SchedulerConfig, Cluster]:
    """The scheduler configuration and the cluster (the embedded defaults for None), checked;
    `progress` hears when the cluster file's load starts and ends (`load_cluster`)."""
    config = load_config(config_path or default_input(DEFAULT_CONFIG))
    cluster = load_cluster(cluster_path or default_input(DEFAULT_CLUSTER), progress)
    if uses_wasm(config):
        check_wire(cluster)
    return config, cluster


@dataclass
class UnmodelledConstraints:
    """Constraints of pending pods that no built-in plugin models (the simulation ignores them)."""

    #: Kind of constraint -> how many pods carry it, in a stable order.
    kinds: dict[str, int] = field(default_factory=dict)
    #: How many pods carry at least one.
    pods: int = 0

    def __bool__(self) -> bool:
        return self.pods > 0


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def pod_constraints_not_modelled(pod: KubeObject) -> list[str]:
    """The kinds of constraint this pod carries that the built-in plugins do not model.

    Those belong to kube-scheduler plugins this simulator does not implement
    (InterPodAffinity, PodTopologySpread, the volume plugins, NodePorts, SchedulingGates,
    DynamicResources); a wasm plugin may model them.
    """
    spec = _mapping(pod.get("spec"))
    affinity = _mapping(spec.get("affinity"))
    found = []
    for term in ("podAffinity", "podAntiAffinity"):
        rules = _mapping(affinity.get(term))
        for when, label in (("requiredDuringSchedulingIgnoredDuringExecution", "required"),
                            ("preferredDuringSchedulingIgnoredDuringExecution", "preferred")):
            if _items(rules.get(when)):
                found.append(f"{term} ({label})")
    if _items(spec.get("topologySpreadConstraints")):
        found.append("topologySpreadConstraints")
    if any(isinstance(v, Mapping) and (v.get("persistentVolumeClaim") or v.get("ephemeral"))
           for v in _items(spec.get("volumes"))):
        found.append("volumes needing binding (persistentVolumeClaim, ephemeral)")
    containers = [*_items(spec.get("containers")), *_items(spec.get("initContainers"))]
    if any(isinstance(port, Mapping) and port.get("hostPort")
           for c in containers if isinstance(c, Mapping) for port in _items(c.get("ports"))):
        found.append("hostPort")
    if _items(spec.get("schedulingGates")):
        found.append("schedulingGates")
    if _items(spec.get("resourceClaims")):
        found.append("resourceClaims")
    return found


def unmodelled_constraints(pods: Iterable[KubeObject]) -> UnmodelledConstraints:
    """How many pods carry each kind of constraint the built-in plugins do not model."""
    result = UnmodelledConstraints()
    for pod in pods:
        kinds = pod_constraints_not_modelled(pod)
        if kinds:
            result.pods += 1
        for kind in kinds:
            result.kinds[kind] = result.kinds.get(kind, 0) + 1
    return result


def warn_unmodelled(cluster: Cluster) -> UnmodelledConstraints:
    """One warning line for the whole run (not one per pod) naming what is ignored and how often."""
    found = unmodelled_constraints(info.pod for info in cluster.pending)
    if found:
        log.warning(
            "pods.constraints_ignored", source=cluster.source, pods=found.pods, kinds=found.kinds,
            reason="no built-in plugin models these constraints: they are ignored unless a wasm plugin "
                   "of the configuration handles them")
    return found


def simulate(config: SchedulerConfig, cluster: Cluster, *, explain: Iterable[str] = (),
             progress: Callable[[int, int], None] | None = None, compiler: GuestCompiler | None = None,
             registry: Mapping[str, PluginFactory] | None = None, seed: int = 0) -> SimulationReport:
    """Schedule the cluster's pending pods; plugins are stopped whatever happens."""
    warn_unmodelled(cluster)
    options = SchedulerOptions(seed=seed, explain=frozenset(explain), progress=progress)
    with Scheduler(config, cluster, compiler or GuestCompiler(), registry, options) as scheduler:
        return scheduler.run()
