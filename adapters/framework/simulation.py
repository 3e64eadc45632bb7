"""Running a simulation end to end: files in, `SimulationReport` out.

This module owns what ``wasm-scheduler simulate`` does between reading its arguments
and printing: find the embedded default inputs in ``examples/``, load and check the
scheduler configuration and the cluster snapshot, check that every object a wasm
plugin may be handed encodes to the Kubernetes wire format (so a bad field is the
user's error naming the object, not a trap in a guest), find what of each pending pod
the built-in plugins do not model (`pod_unmodelled`, the one place that decides it),
warn once about it for the run and put it on each pod's outcome, run a `Scheduler`
with one `GuestCompiler`, and always shut it down.

See `docs/framework.md` ("What is not modelled").
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import wasm_scheduler.examples
from wasm_scheduler.adapters.extender.metrics import PluginCallMetrics, simulation_metrics
from wasm_scheduler.adapters.framework.cluster import Cluster, LoadProgress, load_cluster
from wasm_scheduler.adapters.framework.config import SchedulerConfig, load_config
from wasm_scheduler.adapters.framework.errors import UserError
from wasm_scheduler.adapters.framework.framework import Framework
from wasm_scheduler.adapters.framework.plugins import PluginFactory
from wasm_scheduler.adapters.framework.plugins.inter_pod_affinity import NAMESPACE_NAME_LABEL, namespace_selector_keys
from wasm_scheduler.adapters.framework.plugins.pod_topology_spread import (
    PodTopologySpread,
    missing_default_spread_owners,
)
from wasm_scheduler.adapters.framework.pods import KubeObject, PodInfo, scheduler_name
from wasm_scheduler.adapters.framework.results import SimulationReport, Unmodelled
from wasm_scheduler.adapters.framework.scheduler import DEFAULT_SEED, Scheduler, SchedulerOptions
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.adapters.framework.workloads import NO_WORKLOADS, Workloads
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin, wire_problem
from wasm_scheduler.logger import get_logger
from wasm_scheduler.registry.compiler import GuestCompiler

log = get_logger("adapters.framework.simulation")

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
        if problem := wire_problem(node.node, "Node"):
            raise UserError(f"{cluster.source}: Node {node.name}: {problem}")
    for pod in (*cluster.running, *cluster.pending):
        if problem := wire_problem(pod.pod, "Pod"):
            raise UserError(f"{cluster.source}: Pod {pod.key}: {problem}")


def load_inputs(config_path: str | Path | None, cluster_path: str | Path | None,
                progress: LoadProgress | None = None) -> tuple[SchedulerConfig, Cluster]:
    """The scheduler configuration and the cluster (the embedded defaults for None), checked;
    `progress` hears when the cluster file's load starts and ends (`load_cluster`)."""
    config = load_config(config_path or default_input(DEFAULT_CONFIG))
    cluster = load_cluster(cluster_path or default_input(DEFAULT_CLUSTER), progress)
    if uses_wasm(config):
        check_wire(cluster)
    return config, cluster


def find_explained(cluster: Cluster, name: str) -> PodInfo:
    """The pending pod ``--explain`` names, by ``namespace/name`` or by a name only one namespace
    has; UserError in one line when there is none, or one in each of several namespaces."""
    pod = cluster.find_pending(name)
    if pod is not None:
        return pod
    namesakes = [] if "/" in name else [p.key for p in cluster.pending if p.key.split("/", 1)[1] == name]
    if len(namesakes) > 1:
        namespaces = [key.split("/", 1)[0] for key in namesakes]
        raise UserError(f"{cluster.source}: --explain {name}: a pending pod of that name is in each of "
                        f"{len(namespaces)} namespaces ({', '.join(namespaces)}): give NAMESPACE/NAME, such as "
                        f"{namesakes[0]}")
    raise UserError(f"{cluster.source}: --explain {name}: no pending pod of that name "
                    "(give namespace/name; pods with spec.nodeName are running, not scheduled)")


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


#: A pod (anti-)affinity term selects namespaces by labels the snapshot does not have.
NAMESPACE_LABELS_KIND = "pod (anti-)affinity namespaceSelector on namespace labels"
#: A PersistentVolumeClaim (or a generic ephemeral volume, which makes one): the volume plugins are not implemented.
VOLUMES_KIND = "volumes: PersistentVolumeClaim not checked"
#: An inline volume of a type VolumeRestrictions or NodeVolumeLimits checks on the node.
INLINE_VOLUMES_KIND = "volumes: inline disk not checked"
#: spec.resourceClaims: DynamicResources is not implemented.
RESOURCE_CLAIMS_KIND = "resourceClaims: DynamicResources not checked"
#: Default topology spreading needs the pod's controller, which the snapshot lacks.
DEFAULT_SPREAD_KIND = "default topology spread: controller not in the snapshot"

#: The volume plugins of kube-scheduler this simulator does not implement.
VOLUME_PLUGINS = "VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits"
#: Inline volume types VolumeRestrictions (conflicts on a node) or NodeVolumeLimits
#: (attachable volumes migrated to CSI) read.
INLINE_DISK_VOLUMES = ("awsElasticBlockStore", "azureDisk", "azureFile", "cinder", "gcePersistentDisk", "iscsi",
                       "portworxVolume", "rbd", "vsphereVolume")


def pod_unmodelled(pod: KubeObject, workloads: Workloads = NO_WORKLOADS,
                   default_spread: bool = False) -> list[Unmodelled]:
    """What this pod's result depends on that the built-in plugins do not model: the one
    place that decides it, for the run's warning and for each pod's report alike.

    Those belong to kube-scheduler plugins this simulator does not implement (the volume
    plugins, DynamicResources); a wasm plugin may model them. Pod (anti-)affinity is
    InterPodAffinity's (built in), but for a ``namespaceSelector`` on namespace labels
    other than ``kubernetes.io/metadata.name`` (a snapshot has no Namespace objects: see
    `wasm_scheduler.adapters.framework.plugins.inter_pod_affinity`). topologySpreadConstraints
    are PodTopologySpread's (built in); with `default_spread` (the pod's profile has default
    constraints), a pod whose controller the snapshot (`workloads`) lacks is found by
    `wasm_scheduler.adapters.framework.plugins.pod_topology_spread.missing_default_spread_owners`.
    """
    spec = _mapping(pod.get("spec"))
    found = []
    namespace_keys = namespace_selector_keys(pod) - {NAMESPACE_NAME_LABEL}
    if namespace_keys:
        found.append(Unmodelled(NAMESPACE_LABELS_KIND, (
            f"a namespaceSelector on {', '.join(sorted(namespace_keys))}: the snapshot has no Namespace objects, "
            f"so a namespace is taken to carry only {NAMESPACE_NAME_LABEL} and such a selector matches no "
            "namespace")))
    volumes = [v for v in _items(spec.get("volumes")) if isinstance(v, Mapping)]
    claims = [f"{v.get('name')} (persistentVolumeClaim {_mapping(v.get('persistentVolumeClaim')).get('claimName')})"
              if v.get("persistentVolumeClaim") else f"{v.get('name')} (ephemeral)"
              for v in volumes if v.get("persistentVolumeClaim") or v.get("ephemeral")]
    if claims:
        found.append(Unmodelled(VOLUMES_KIND, (
            f"volume {', '.join(claims)}: {VOLUME_PLUGINS} are not implemented (a snapshot's "
            "PersistentVolumes, PersistentVolumeClaims and StorageClasses are not read): the claim's binding, "
            "zone and access mode and the node's volume limits are not checked")))
    inline = [f"{v.get('name')} ({kind})" for v in volumes for kind in INLINE_DISK_VOLUMES if v.get(kind)]
    if inline:
        found.append(Unmodelled(INLINE_VOLUMES_KIND, (
            f"volume {', '.join(inline)}: VolumeRestrictions and NodeVolumeLimits are not implemented: conflicts "
            "with the same disk on a node and the node's volume limits are not checked")))
    resource_claims = [str(_mapping(c).get("name")) for c in _items(spec.get("resourceClaims"))]
    if resource_claims:
        found.append(Unmodelled(RESOURCE_CLAIMS_KIND, (
            f"claim {', '.join(resource_claims)}: DynamicResources is not implemented: the claims are neither "
            "allocated nor checked against the node")))
    if default_spread:
        owners = missing_default_spread_owners(pod, workloads)
        if owners:
            found.append(Unmodelled(DEFAULT_SPREAD_KIND, (
                f"{', '.join(owners)} is not in the snapshot: PodTopologySpread's default constraints select "
                "pods by its selector, so the pod is scored as if no controller selected it")))
    return found


def default_spread_profiles(frameworks: Mapping[str, Framework[NodeInfo]]) -> frozenset[str]:
    """The profiles (schedulerName) whose PodTopologySpread has default constraints
    (``defaultingType: System``, or ``List`` with ``defaultConstraints``)."""
    return frozenset(name for name, framework in frameworks.items()
                     if any(isinstance(plugin, PodTopologySpread) and plugin.default_constraints
                            for plugin in framework.plugins.values()))


def find_unmodelled(cluster: Cluster, spread_profiles: Collection[str] = frozenset()) -> dict[str, list[Unmodelled]]:
    """Pending pod's uid -> `pod_unmodelled` (pods with nothing are left out); a pod whose
    profile is in `spread_profiles` has default topology spreading."""
    found = {}
    for info in cluster.pending:
        gaps = pod_unmodelled(info.pod, cluster.workloads, scheduler_name(info.pod) in spread_profiles)
        if gaps:
            found[info.uid] = gaps
    return found


def unmodelled_constraints(found: Iterable[Sequence[Unmodelled]]) -> UnmodelledConstraints:
    """How many pods carry each kind, from each pod's `pod_unmodelled`."""
    result = UnmodelledConstraints()
    for gaps in found:
        if gaps:
            result.pods += 1
        for gap in gaps:
            result.kinds[gap.kind] = result.kinds.get(gap.kind, 0) + 1
    return result


def warn_unmodelled(cluster: Cluster, found: Mapping[str, Sequence[Unmodelled]] | None = None) -> UnmodelledConstraints:
    """One warning line for the whole run (not one per pod) naming what is ignored and how
    often; `found` is `find_unmodelled`'s answer (computed here without default spreading if None)."""
    counted = unmodelled_constraints((found if found is not None else find_unmodelled(cluster)).values())
    if counted:
        log.warning(
            "pods.constraints_ignored", source=cluster.source, pods=counted.pods, kinds=counted.kinds,
            reason="no built-in plugin models these constraints: they are ignored unless a wasm plugin "
                   "of the configuration handles them (each pod's `unmodelled` says which)")
    return counted


def simulate(config: SchedulerConfig, cluster: Cluster, *, explain: Iterable[str] = (),
             progress: Callable[[int, int], None] | None = None, compiler: GuestCompiler | None = None,
             registry: Mapping[str, PluginFactory] | None = None, seed: int = DEFAULT_SEED,
             metrics: bool = False) -> SimulationReport:
    """Schedule the cluster's pending pods; plugins are stopped whatever happens. With `metrics`,
    the report's `metrics` has each wasm plugin's traps, discarded instances and guest calls."""
    options = SchedulerOptions(seed=seed, explain=frozenset(explain), progress=progress)
    with Scheduler(config, cluster, compiler or GuestCompiler(), registry, options) as scheduler:
        # Warned once the plugins loaded: a guest that does not load is one error line, no warning before it.
        found = find_unmodelled(cluster, default_spread_profiles(scheduler.frameworks))
        warn_unmodelled(cluster, found)
        wasm = [plugin for framework in scheduler.frameworks.values() for plugin in framework.plugins.values()
                if isinstance(plugin, WasmPlugin)]
        calls = PluginCallMetrics(only={plugin.name for plugin in wasm}) if metrics else None
        if calls is not None:
            calls.attach(scheduler.frameworks.values())
        report = scheduler.run()
        if calls is not None:
            report.metrics = simulation_metrics(wasm, calls)
    for outcome in report.pods:
        outcome.unmodelled = list(found.get(outcome.uid, ()))
    return report
