"""The native (Python) plugins and the in-tree registry.

One module per plugin; this package maps plugin names to factories (`IN_TREE`) and
says which of them the default profile enables through ``multiPoint`` with which
score weights (`DEFAULT_MULTIPOINT`, kube-scheduler's defaults restricted to the
plugins implemented here). `UPSTREAM_ONLY` names kube-scheduler plugins this
simulator does not implement, so a configuration naming one gets a precise error.

See `docs/framework.md` ("The plugins `simulate` runs").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, Plugin, PluginContext
from wasm_scheduler.adapters.framework.plugins.default_binder import DefaultBinder
from wasm_scheduler.adapters.framework.plugins.default_preemption import DefaultPreemption
from wasm_scheduler.adapters.framework.plugins.image_locality import ImageLocality
from wasm_scheduler.adapters.framework.plugins.inter_pod_affinity import InterPodAffinity
from wasm_scheduler.adapters.framework.plugins.node_affinity import NodeAffinity
from wasm_scheduler.adapters.framework.plugins.node_name import NodeName
from wasm_scheduler.adapters.framework.plugins.node_ports import NodePorts
from wasm_scheduler.adapters.framework.plugins.node_resources_balanced_allocation import (
    NodeResourcesBalancedAllocation,
)
from wasm_scheduler.adapters.framework.plugins.node_resources_fit import NodeResourcesFit
from wasm_scheduler.adapters.framework.plugins.node_unschedulable import NodeUnschedulable
from wasm_scheduler.adapters.framework.plugins.pod_topology_spread import PodTopologySpread
from wasm_scheduler.adapters.framework.plugins.priority_sort import PrioritySort
from wasm_scheduler.adapters.framework.plugins.scheduling_gates import SchedulingGates
from wasm_scheduler.adapters.framework.plugins.taint_toleration import TaintToleration
from wasm_scheduler.adapters.framework.snapshot import NodeInfo

PluginFactory = Callable[[PluginContext], Plugin[NodeInfo]]

IN_TREE: Mapping[str, PluginFactory] = {
    cls.NAME: cls
    for cls in (PrioritySort, NodeName, NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit,
                PodTopologySpread, DefaultPreemption, DefaultBinder,
                SchedulingGates, NodePorts, NodeResourcesBalancedAllocation, ImageLocality, InterPodAffinity)
}

#: (name, weight) enabled through multiPoint by default, in kube-scheduler's order.
DEFAULT_MULTIPOINT: tuple[tuple[str, int], ...] = (
    ("SchedulingGates", 0),
    ("PrioritySort", 0),
    ("NodeUnschedulable", 0),
    ("NodeName", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 0),
)

UPSTREAM_ONLY = frozenset({
    "VolumeRestrictions", "EBSLimits", "GCEPDLimits", "NodeVolumeLimits",
    "AzureDiskLimits", "CinderLimits", "VolumeBinding", "VolumeZone",
    "DynamicResources", "SelectorSpread",
})

__all__ = ["DEFAULT_MULTIPOINT", "IN_TREE", "UPSTREAM_ONLY", "NativePlugin", "Plugin", "PluginContext",
           "PluginFactory"]
