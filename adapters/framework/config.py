"""Reading a KubeSchedulerConfiguration (``kubescheduler.config.k8s.io/v1``).

This module owns parsing and checking the scheduler configuration file into plain
data: `SchedulerConfig` (profiles, ``percentageOfNodesToScore``, ``parallelism``) and
`ProfileConfig` (each extension point's enabled and disabled plugins, merged with the
defaults the way kube-scheduler's ``mergePlugins`` does, and each plugin's args from
``pluginConfig``). Which plugin serves which point is decided later, when plugins
exist (`adapters.framework.profile`). Every mistake is a `UserError` naming the file,
the profile and the field.

See `docs/framework.md` ("The plugins `simulate` runs").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wasm_scheduler.adapters.framework.cluster import read_yaml_documents
from wasm_scheduler.adapters.framework.errors import UserError, clip, shown
from wasm_scheduler.adapters.framework.plugins import DEFAULT_MULTIPOINT
from wasm_scheduler.adapters.framework.pods import DEFAULT_SCHEDULER_NAME
from wasm_scheduler.framework_api import CONFIG_POINTS

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"

#: The plugin sets a profile's `plugins` may have (`CONFIG_POINTS` maps each per-point one to
#: the framework's point).
_PLUGIN_SETS = (*CONFIG_POINTS, "multiPoint", "preEnqueue")

#: Top-level fields kube-scheduler knows and this simulator ignores.
_IGNORED_TOP = {"leaderElection", "clientConnection", "healthzBindAddress", "metricsBindAddress", "enableProfiling",
                "enableContentionProfiling", "podInitialBackoffSeconds", "podMaxBackoffSeconds",
                "delayCacheUntilActive"}


@dataclass(frozen=True)
class PluginRef:
    name: str
    weight: int = 0
    #: The field it came from, for errors ("plugins.multiPoint.enabled[3]").
    where: str = ""


@dataclass(frozen=True)
class PluginSet:
    enabled: tuple[PluginRef, ...] = ()
    disabled: frozenset[str] = frozenset()


@dataclass(frozen=True)
class PluginArgs:
    args: Mapping[str, Any]
    where: str

    @property
    def is_wasm(self) -> bool:
        """Whether the args name a guest: ``guestURL``, or the same but for case (``guestUrl``,
        which the wasm plugin's own checks then name as a misspelling)."""
        return "guestURL" in self.args or any(isinstance(key, str) and key.casefold() == "guesturl"
                                              for key in self.args)


@dataclass(frozen=True)
class ProfileConfig:
    scheduler_name: str
    #: Config point name (and "multiPoint", "preEnqueue") -> merged plugin set.
    plugins: Mapping[str, PluginSet]
    plugin_args: Mapping[str, PluginArgs]
    percentage_of_nodes_to_score: int | None
    #: "sched.yaml: profiles[0] (default-scheduler)", the prefix of its errors.
    where: str

    def needed(self) -> list[PluginRef]:
        """Every enabled plugin, first reference of each name, in order of appearance."""
        seen: dict[str, PluginRef] = {}
        for point in ("multiPoint", *CONFIG_POINTS):
            for ref in self.plugins[point].enabled:
                seen.setdefault(ref.name, ref)
        return list(seen.values())


@dataclass(frozen=True)
class SchedulerConfig:
    source: str
    #: Directory relative guestURL paths are read from.
    base_dir: str
    profiles: tuple[ProfileConfig, ...]
    percentage_of_nodes_to_score: int | None = None
    parallelism: int = 16


def load_config(path: str | Path) -> SchedulerConfig:
    path = Path(path)
    docs = read_yaml_documents(path, "scheduler configuration")
    if len(docs) != 1:
        raise UserError(f"{path}: expected one KubeSchedulerConfiguration document, found {len(docs)}")
    return config_from_dict(docs[0], str(path), str(path.resolve().parent))


def default_config(base_dir: str = "") -> SchedulerConfig:
    """kube-scheduler's default: one profile, the default plugins."""
    return config_from_dict({"apiVersion": API_VERSION, "kind": KIND}, "<default configuration>", base_dir)


def _fail(where: str, field: str, problem: str) -> UserError:
    return UserError(f"{where}: {field}: {problem}" if field else f"{where}: {problem}")


def _mapping(value: Any, where: str, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _fail(where, field, f"expected a mapping, got {type(value).__name__}")
    return value


def _list(value: Any, where: str, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _fail(where, field, f"expected a list, got {type(value).__name__}")
    return value


def _unknown(raw: Mapping[Any, Any], known: set[str]) -> str:
    """The first (sorted) field of `raw` not in `known`, shown for an error; "" when there is none."""
    unknown = sorted(clip(str(key)) if isinstance(key, str) else shown(key) for key in raw if key not in known)
    return unknown[0] if unknown else ""


def _percentage(value: Any, where: str, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        raise _fail(where, field, f"expected an integer from 0 to 100, got {shown(value)}")
    return value


def config_from_dict(doc: Any, source: str = "<configuration>", base_dir: str = "") -> SchedulerConfig:
    """Check and merge a parsed KubeSchedulerConfiguration."""
    if not isinstance(doc, Mapping):
        raise UserError(f"{source}: expected a KubeSchedulerConfiguration mapping, got {type(doc).__name__}")
    if doc.get("kind") != KIND:
        raise _fail(source, "kind", f"expected {KIND}, got {shown(doc.get('kind'))}")
    if doc.get("apiVersion") != API_VERSION:
        raise _fail(source, "apiVersion", f"expected {API_VERSION}, got {shown(doc.get('apiVersion'))}")
    known = {"apiVersion", "kind", "profiles", "percentageOfNodesToScore", "parallelism", "extenders",
             *_IGNORED_TOP}
    unknown = _unknown(doc, known)
    if unknown:
        raise _fail(source, unknown, "unknown field of KubeSchedulerConfiguration")
    if _list(doc.get("extenders"), source, "extenders"):
        raise _fail(source, "extenders", "scheduler extenders are not supported by this simulator")
    parallelism = doc.get("parallelism", 16)
    if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
        raise _fail(source, "parallelism", f"expected a positive integer, got {shown(parallelism)}")
    percentage = _percentage(doc.get("percentageOfNodesToScore"), source, "percentageOfNodesToScore")
    raw_profiles = _list(doc.get("profiles"), source, "profiles") or [{}]
    profiles = []
    names: set[str] = set()
    for i, raw in enumerate(raw_profiles):
        profile = _profile(raw, f"{source}: profiles[{i}]")
        if profile.scheduler_name in names:
            raise _fail(f"{source}: profiles[{i}]", "schedulerName",
                        f"{shown(profile.scheduler_name)} is the name of another profile")
        names.add(profile.scheduler_name)
        profiles.append(profile)
    return SchedulerConfig(source, base_dir, tuple(profiles), percentage, parallelism)


def _profile(raw: Any, at: str) -> ProfileConfig:
    raw = _mapping(raw, at, "")
    unknown = _unknown(raw, {"schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore"})
    if unknown:
        raise _fail(at, unknown, "unknown field of a profile")
    name = raw.get("schedulerName") or DEFAULT_SCHEDULER_NAME
    if not isinstance(name, str):
        raise _fail(at, "schedulerName", f"expected a string, got {type(name).__name__} {shown(name)}")
    where = f"{at} ({clip(name)})"
    percentage = _percentage(raw.get("percentageOfNodesToScore"), where, "percentageOfNodesToScore")
    plugins = _mapping(raw.get("plugins"), where, "plugins")
    unknown = _unknown(plugins, set(_PLUGIN_SETS))
    if unknown:
        raise _fail(where, f"plugins.{unknown}", f"unknown extension point (known: {', '.join(_PLUGIN_SETS)})")
    custom = {point: _plugin_set(plugins.get(point), where, f"plugins.{point}") for point in _PLUGIN_SETS}
    if custom["preEnqueue"].enabled:
        ref = custom["preEnqueue"].enabled[0]
        raise _fail(where, ref.where, "PreEnqueue plugins are not supported by this simulator")
    defaults = PluginSet(tuple(PluginRef(n, w, "(default plugins)") for n, w in DEFAULT_MULTIPOINT))
    merged = {point: custom[point] for point in CONFIG_POINTS}
    merged["multiPoint"] = _merge(defaults, custom["multiPoint"])
    merged["preEnqueue"] = custom["preEnqueue"]  # its `disabled` only (enabling one is refused above)
    args: dict[str, PluginArgs] = {}
    for i, entry in enumerate(_list(raw.get("pluginConfig"), where, "pluginConfig")):
        here = f"pluginConfig[{i}]"
        entry = _mapping(entry, where, here)
        plugin = entry.get("name")
        if not isinstance(plugin, str) or not plugin:
            raise _fail(where, f"{here}.name", "expected a plugin name")
        if plugin in args:
            raise _fail(where, f"{here}.name", f"a second pluginConfig entry for {shown(plugin)}")
        unknown = _unknown(entry, {"name", "args"})
        if unknown:
            raise _fail(where, f"{here}.{unknown}", "unknown field of a pluginConfig entry")
        args[plugin] = PluginArgs(_mapping(entry.get("args"), where, f"{here}.args"),
                                  f"{where}: {here} ({clip(plugin)})")
    return ProfileConfig(name, merged, args, percentage, where)


def _plugin_set(raw: Any, where: str, field: str) -> PluginSet:
    raw = _mapping(raw, where, field)
    unknown = _unknown(raw, {"enabled", "disabled"})
    if unknown:
        raise _fail(where, f"{field}.{unknown}", "unknown field (expected enabled or disabled)")
    enabled = []
    for i, item in enumerate(_list(raw.get("enabled"), where, f"{field}.enabled")):
        ref_at = f"{field}.enabled[{i}]"
        item = _mapping(item, where, ref_at)
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(where, f"{ref_at}.name", "expected a plugin name")
        weight = item.get("weight", 0)
        if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
            raise _fail(where, f"{ref_at}.weight", f"expected a non-negative integer, got {shown(weight)}")
        enabled.append(PluginRef(name, weight, ref_at))
    disabled = set()
    for i, item in enumerate(_list(raw.get("disabled"), where, f"{field}.disabled")):
        item = _mapping(item, where, f"{field}.disabled[{i}]")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(where, f"{field}.disabled[{i}].name", "expected a plugin name or '*'")
        disabled.add(name)
    return PluginSet(tuple(enabled), frozenset(disabled))


def _merge(defaults: PluginSet, custom: PluginSet) -> PluginSet:
    """kube-scheduler's mergePluginSet: defaults minus disabled, re-configured in place, then the rest."""
    by_name = {ref.name: i for i, ref in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in custom.disabled:
        for ref in defaults.enabled:
            if ref.name in custom.disabled:
                continue
            if ref.name in by_name:
                replaced.add(by_name[ref.name])
                ref = custom.enabled[by_name[ref.name]]
            enabled.append(ref)
    enabled.extend(ref for i, ref in enumerate(custom.enabled) if i not in replaced)
    return PluginSet(tuple(enabled), custom.disabled | defaults.disabled)
