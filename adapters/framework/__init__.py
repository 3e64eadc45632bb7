"""The in-process scheduling framework: kube-scheduler's semantics, in Python.

Native Python plugins and wasm plugins (`adapters.wasm_plugin.WasmPlugin`) run side by
side through the same extension points. Modules, one job each:

- `errors`: `UserError`, the one-line error a user's mistake gives.
- `resources`: quantities and what a pod requests.
- `pods`: `PodInfo` and pod accessors.
- `cluster`: reading a cluster snapshot file.
- `snapshot`: `NodeInfo`, the scheduler's cache and the per-cycle view.
- `config`: reading a KubeSchedulerConfiguration.
- `profile`: making a profile's plugins and placing them (multiPoint expansion).
- `framework`: running one profile's extension points.
- `cycle_state`, `waiting_pods`, `queue`: per-cycle state, Permit waits, the queue
  and the nominator.
- `handle`: the handle plugins (and the wasm host functions) use.
- `plugins`: the native plugins.
- `scheduler`: the scheduling loop and the binding worker pool.
- `results`: outcomes and explain traces.
- `simulation`: files in, report out (what ``wasm-scheduler simulate`` runs).

See `docs/framework.md`.
"""

from wasm_scheduler.adapters.framework.cluster import Cluster, cluster_from_objects, load_cluster
from wasm_scheduler.adapters.framework.config import SchedulerConfig, config_from_dict, default_config, load_config
from wasm_scheduler.adapters.framework.errors import UserError
from wasm_scheduler.adapters.framework.results import PodOutcome, PodStatus, SimulationReport
from wasm_scheduler.adapters.framework.scheduler import Scheduler, SchedulerOptions

__all__ = [
    "Cluster",
    "PodOutcome",
    "PodStatus",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerOptions",
    "SimulationReport",
    "UserError",
    "cluster_from_objects",
    "config_from_dict",
    "default_config",
    "load_cluster",
    "load_config",
]
