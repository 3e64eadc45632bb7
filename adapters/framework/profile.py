"""Building a profile's Framework: making its plugins and placing them at their points.

This module owns turning a `ProfileConfig` into a ready `Framework`: every enabled
plugin is made once (a native one from the registry with its ``pluginConfig`` args;
any plugin whose args carry ``guestURL`` is a wasm plugin, loaded with the run's one
`GuestCompiler`), then each extension point's list is built with kube-scheduler's
multiPoint expansion (explicit per-point entries override, multiPoint plugins follow
in order, a plugin only lands where it `implements` the point, per-point ``disabled``
wins), score weights are taken from ``score`` then ``multiPoint`` (0 means 1), and the
profile must have one QueueSort and at least one Bind plugin. If anything fails,
every plugin already made is stopped before the `UserError` propagates. The HTTP
extender places a profile's enabled wasm plugins alone by the same rules
(`enabled_wasm_plugins`, `profile_framework_of`).

See `docs/framework.md` ("The plugins `simulate` runs").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from wasm_scheduler.adapters.framework.config import (
    PluginArgs,
    PluginRef,
    ProfileConfig,
    SchedulerConfig,
)
from wasm_scheduler.adapters.framework.errors import UserError
from wasm_scheduler.adapters.framework.framework import Framework, NodeT
from wasm_scheduler.adapters.framework.handle import SchedulerHandle
from wasm_scheduler.adapters.framework.plugins import IN_TREE, UPSTREAM_ONLY, Plugin, PluginContext, PluginFactory
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.framework_api import CONFIG_POINTS
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig, PluginConfigError
from wasm_scheduler.registry.errors import GuestLoadError
from wasm_scheduler.vocabulary import FrameworkHandle


def build_framework(profile: ProfileConfig, config: SchedulerConfig, handle: SchedulerHandle,
                    compiler: GuestCompiler,
                    registry: Mapping[str, PluginFactory] | None = None) -> Framework[NodeInfo]:
    """The profile's Framework with every plugin made and placed; UserError on a mistake."""
    registry = {**IN_TREE, **(registry or {})}
    percentage = profile.percentage_of_nodes_to_score
    if percentage is None:
        percentage = config.percentage_of_nodes_to_score
    framework: Framework[NodeInfo] = Framework(profile.scheduler_name, handle, percentage)
    try:
        for ref in profile.needed():
            framework.plugins[ref.name] = _make(ref, profile, config, handle, compiler, registry, framework)
        _place(framework, profile)
    except BaseException:
        framework.close()
        raise
    return framework


def _make(ref: PluginRef, profile: ProfileConfig, config: SchedulerConfig, handle: SchedulerHandle,
          compiler: GuestCompiler, registry: Mapping[str, PluginFactory],
          framework: Framework[NodeInfo]) -> Plugin[NodeInfo]:
    entry = profile.plugin_args.get(ref.name)
    if entry is not None and entry.is_wasm:
        return load_wasm_plugin(ref.name, entry, config, compiler, handle)
    factory = registry.get(ref.name)
    if factory is None:
        if ref.name in UPSTREAM_ONLY:
            problem = f"{ref.name!r} is a kube-scheduler plugin this simulator does not implement; disable it"
        else:
            problem = (f"unknown plugin {ref.name!r} (native plugins: {', '.join(sorted(registry))}; a wasm plugin "
                       "needs a pluginConfig entry of that name whose args carry guestURL)")
        raise UserError(f"{profile.where}: {ref.where}.name: {problem}")
    ctx = PluginContext(ref.name, entry.args if entry else {}, handle, framework,
                        f"{entry.where}: args" if entry else f"{profile.where}: {ref.where}")
    return factory(ctx)


def load_wasm_plugin(name: str, entry: PluginArgs, config: SchedulerConfig, compiler: GuestCompiler,
                     handle: FrameworkHandle | None) -> WasmPlugin:
    """The wasm plugin a pluginConfig entry describes, loaded; UserError naming the entry if not."""
    try:
        plugin_config = PluginConfig.from_args(name, entry.args, config.base_dir)
    except PluginConfigError as exc:
        raise UserError(f"{entry.where}: {exc}") from None
    try:
        return WasmPlugin.load(plugin_config, compiler, handle)
    except GuestLoadError as exc:
        raise UserError(f"{entry.where}: args.guestURL: {exc}") from None


def _place(framework: Framework[Any], profile: ProfileConfig, partial: bool = False) -> None:
    """Each point's plugins by the profile's rules. `partial`: the framework holds only some of
    the profile's enabled plugins (the extender's wasm ones); the others are passed over, and a
    profile's own QueueSort and Bind plugins are not asked for."""
    plugins = framework.plugins
    multi = profile.plugins["multiPoint"]
    for config_point, point in CONFIG_POINTS.items():
        pset = profile.plugins[config_point]
        # A partial framework's Bind: an in-tree binder placed before a wasm plugin binds every
        # pod first (DefaultBinder never skips), so kube-scheduler would never call that wasm
        # plugin's Bind; its place is kept here to cut the list there (below).
        binders = IN_TREE_BINDERS if partial and point == "bind" else frozenset()
        explicit: list[str] = []
        for ref in pset.enabled:
            if ref.name in binders:
                explicit.append(ref.name)
                continue
            if partial and ref.name not in plugins:
                continue
            if not plugins[ref.name].implements(point):
                raise UserError(f"{profile.where}: {ref.where}.name: plugin {ref.name!r} does not extend "
                                f"{config_point}")
            if ref.name in explicit:
                raise UserError(f"{profile.where}: {ref.where}.name: plugin {ref.name!r} is enabled twice")
            explicit.append(ref.name)
        order = list(explicit)
        if "*" not in pset.disabled:
            overrides: list[str] = []
            from_multi: list[str] = []
            for ref in multi.enabled:
                if ref.name in pset.disabled or (ref.name not in binders and (
                        ref.name not in plugins or not plugins[ref.name].implements(point))):
                    continue
                if ref.name in explicit:
                    overrides.append(ref.name)
                    continue
                if ref.name in from_multi:
                    raise UserError(f"{profile.where}: {ref.where}.name: plugin {ref.name!r} is enabled twice")
                from_multi.append(ref.name)
            order = overrides + from_multi + [n for n in explicit if n not in overrides]
        if binders:
            order = order[:next((i for i, name in enumerate(order) if name in binders), len(order))]
        framework.points[point] = [plugins[n] for n in order]
    _derive_points(framework)
    for ref in (*profile.plugins["score"].enabled, *multi.enabled):
        plugin = plugins.get(ref.name)
        if ref.name in framework.score_weights or plugin is None or plugin not in framework.points["score"]:
            continue
        framework.score_weights[ref.name] = ref.weight or 1
    if partial:
        return
    if len(framework.points["queue_sort"]) != 1:
        raise UserError(f"{profile.where}: plugins: exactly one queueSort plugin is needed, got "
                        f"{len(framework.points['queue_sort'])} ({', '.join(framework.names('queue_sort'))})")
    if not framework.points["bind"]:
        raise UserError(f"{profile.where}: plugins: at least one bind plugin is needed")


#: The in-tree plugins that bind (DefaultBinder: it never skips a pod).
IN_TREE_BINDERS = frozenset(name for name, factory in IN_TREE.items()
                            if isinstance(factory, type) and issubclass(factory, NativePlugin)
                            and factory.bind is not NativePlugin.bind)


def enabled_wasm_plugins(profile: ProfileConfig) -> list[PluginRef]:
    """The profile's enabled plugins (`ProfileConfig.needed`) whose pluginConfig args carry
    guestURL: what the HTTP extender serves for the profile's pods. A pluginConfig entry of a
    plugin the profile does not enable (or disables) is not among them."""
    return [ref for ref in profile.needed()
            if (entry := profile.plugin_args.get(ref.name)) is not None and entry.is_wasm]


def profile_framework_of(profile: ProfileConfig, plugins: Mapping[str, Plugin[NodeT]]) -> Framework[NodeT]:
    """A Framework of `plugins`, some of the profile's enabled plugins (the extender's wasm ones),
    each at the points the profile places it with kube-scheduler's rules (multiPoint expansion,
    per-point enabled and disabled, ``disabled: [{name: "*"}]``), with the profile's score
    weights; the profile's other plugins are left out. UserError on a mistake."""
    framework: Framework[NodeT] = Framework(profile.scheduler_name, None)
    framework.plugins.update(plugins)
    _place(framework, profile, partial=True)
    return framework


def framework_of(name: str, plugins: Sequence[tuple[Plugin[NodeT], int]]) -> Framework[NodeT]:
    """A Framework of `plugins` alone: each at every point it implements, in the order
    given, with its score weight (0 means 1). What the HTTP extender runs: it has no
    queue and no nominated pods (the scheduler that calls it keeps those), and a pod it
    binds through none of its plugins goes through the Kubernetes API."""
    framework: Framework[NodeT] = Framework(name, None)
    for plugin, _weight in plugins:
        framework.plugins[plugin.name] = plugin
    for point in CONFIG_POINTS.values():
        framework.points[point] = [plugin for plugin, _weight in plugins if plugin.implements(point)]
    _derive_points(framework)
    framework.score_weights = {plugin.name: weight or 1 for plugin, weight in plugins
                               if plugin in framework.points["score"]}
    return framework


def _derive_points(framework: Framework[Any]) -> None:
    """The points that follow others: Unreserve runs the Reserve plugins, the PreFilter
    extensions and NormalizeScore are those of PreFilter and Score plugins that have them."""
    plugins = framework.plugins
    framework.points["unreserve"] = list(framework.points["reserve"])
    framework.points["pre_filter_extensions"] = [
        p for p in framework.points["pre_filter"] if p.implements("pre_filter_extensions")]
    framework.points["normalize_score"] = [p for p in framework.points["score"] if p.implements("normalize_score")]
    framework.points["enqueue_extensions"] = [p for p in plugins.values() if p.implements("enqueue_extensions")]
