"""The one table of extension points (`framework_api.POINTS`) against what uses it.

Every other list of points is derived from `POINTS`; these tests hold the table itself
to the outside facts it must match: the guest ABI's exports (`registry.guest_abi`), the
plugin methods native plugins override (`adapters.framework.plugins.base.Plugin`), and
KubeSchedulerConfiguration's plugin sets.
"""

from __future__ import annotations

from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, Plugin
from wasm_scheduler.adapters.wasm_plugin import POINT_EXPORTS
from wasm_scheduler.framework_api import (
    BINDING_CYCLE_EXPORTS,
    CONFIG_POINTS,
    CYCLE_LABELS,
    LIFECYCLE_POINTS,
    POINT_NAMES,
    POINTS,
    SCHEDULING_LABELS,
)
from wasm_scheduler.registry.guest_abi import EXPORT_RESULTS


def test_every_guest_export_of_the_abi_implements_exactly_one_point() -> None:
    exports = [export for point in POINTS for export in point.exports]
    assert sorted(exports) == sorted(EXPORT_RESULTS)  # each once, and none the ABI lacks


def test_every_plugin_method_a_point_names_is_a_method_of_native_plugins() -> None:
    methods = {method for point in POINTS for method in point.methods}
    assert methods <= {name for name in dir(NativePlugin) if callable(getattr(NativePlugin, name))}
    # What the framework calls is the plugin contract; `less` (queue sort) and the per-node
    # `filter`/`score` are NativePlugin's own forms, reached through the contract's methods.
    assert methods - set(Plugin.__dict__) == {"less", "filter", "score"}


def test_kube_scheduler_configuration_plugin_sets() -> None:
    assert set(CONFIG_POINTS) == {"queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve",
                                  "permit", "preBind", "bind", "postBind"}
    assert set(CONFIG_POINTS.values()) <= set(POINT_NAMES)


def test_the_derived_tables() -> None:
    assert {"pre_filter", "reserve", "permit", "post_bind"} == LIFECYCLE_POINTS
    assert {"prebind", "bind", "postbind", "unreserve"} == BINDING_CYCLE_EXPORTS
    assert CYCLE_LABELS == ("PreFilter", "Filter", "AddPod", "RemovePod", "PostFilter", "PreScore", "Score",
                            "NormalizeScore", "Reserve", "Unreserve", "Permit", "PreBind", "Bind", "PostBind")
    assert set(CYCLE_LABELS) - {"Unreserve", "PreBind", "Bind", "PostBind"} == SCHEDULING_LABELS
    assert POINT_EXPORTS["pre_filter_extensions"] == ("addpod", "removepod")
    assert "unreserve" not in POINT_EXPORTS and "queue_sort" in POINT_EXPORTS and not POINT_EXPORTS["queue_sort"]
