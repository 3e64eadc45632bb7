"""Running a simulation end to end: files in, `SimulationReport` out.

This module owns what ``wasm-scheduler simulate`` does between reading its arguments
and printing: find the embedded default inputs in ``examples/``, load and check the
scheduler configuration and the cluster snapshot, check that every object a wasm
plugin may be handed encodes to the Kubernetes wire format (so a bad field is the
user's error naming the object, not a trap in a guest), run a `Scheduler` with one
`GuestCompiler`, and always shut it down.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import adapters
from actors.kube_codec import KubeCodecError, encode_node, encode_pod
from adapters.framework.cluster import Cluster, load_cluster
from adapters.framework.config import SchedulerConfig, load_config
from adapters.framework.errors import UserError
from adapters.framework.plugins import PluginFactory
from adapters.framework.results import SimulationReport
from adapters.framework.scheduler import Scheduler, SchedulerOptions
from registry.compiler import GuestCompiler

DEFAULT_CONFIG = "scheduler-config.yaml"
DEFAULT_CLUSTER = "cluster.yaml"


def examples_dir() -> Path:
    """The embedded examples (a source checkout or an editable install)."""
    return Path(adapters.__file__).resolve().parent.parent / "examples"


def default_input(name: str) -> Path:
    folder = examples_dir()
    path = folder / name
    if not path.is_file():
        raise UserError(f"{path}: the embedded default is missing (the examples/ folder is not beside the "
                        "installed package); pass --config and --cluster")
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


def load_inputs(config_path: str | Path | None, cluster_path: str | Path | None) -> tuple[SchedulerConfig, Cluster]:
    config = load_config(config_path or default_input(DEFAULT_CONFIG))
    cluster = load_cluster(cluster_path or default_input(DEFAULT_CLUSTER))
    if uses_wasm(config):
        check_wire(cluster)
    return config, cluster


def simulate(config: SchedulerConfig, cluster: Cluster, *, explain: Iterable[str] = (),
             progress: Callable[[int, int], None] | None = None, compiler: GuestCompiler | None = None,
             registry: Mapping[str, PluginFactory] | None = None, seed: int = 0) -> SimulationReport:
    """Schedule the cluster's pending pods; plugins are stopped whatever happens."""
    options = SchedulerOptions(seed=seed, explain=frozenset(explain), progress=progress)
    with Scheduler(config, cluster, compiler or GuestCompiler(), registry, options) as scheduler:
        return scheduler.run()
