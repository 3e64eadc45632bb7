"""`wasm-scheduler bench`: the five variants side by side, the micro-figures, the targets.

This module owns the benchmark run and its report: the same scheduler_perf-like
workload (`adapters.benchmarks.workload`) scheduled with the default plugins alone
(``baseline``), plus NodeNumber as a native plugin (``native``), as the wasm guest
(``wasm``), and behind the HTTP extender started in this process, with whole nodes
(``extender``) or node names only (``extender-names``); with ``compare_metrics`` the
extender variants again without metrics. Variants alternate round by round; only the
measured pods are timed, every plugin call through `Framework.observer`. `run_bench`
returns one JSON-ready document and `render_table` shows it; nothing here fails on a
figure. `docs/performance.md` ("How to measure") explains every figure.
"""

from __future__ import annotations

import gc
import json
import math
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from wasm_scheduler.adapters.benchmarks import micro
from wasm_scheduler.adapters.benchmarks.extender_client import ExtenderClient
from wasm_scheduler.adapters.benchmarks.native_nodenumber import NativeNodeNumber
from wasm_scheduler.adapters.benchmarks.workload import DEFAULT_ROUNDS, Workload, documents, objects
from wasm_scheduler.adapters.framework.cluster import Cluster, cluster_from_objects
from wasm_scheduler.adapters.framework.config import API_VERSION, KIND, SchedulerConfig, config_from_dict
from wasm_scheduler.adapters.framework.plugins import PluginFactory
from wasm_scheduler.adapters.framework.pods import KubeObject, pod_uid
from wasm_scheduler.adapters.framework.results import PodStatus
from wasm_scheduler.adapters.framework.scheduler import DEFAULT_SEED, Scheduler, SchedulerOptions
from wasm_scheduler.adapters.framework.simulation import examples_dir
from wasm_scheduler.framework_api import CYCLE_LABELS, SCHEDULING_LABELS
from wasm_scheduler.registry.compiler import GuestCompiler

VARIANTS: tuple[str, ...] = ("baseline", "native", "wasm", "extender", "extender-names")
#: The variants `compare_metrics` adds: the extender variant each repeats with --no-metrics.
METRICS_OFF: Mapping[str, str] = {"extender-no-metrics": "extender", "extender-names-no-metrics": "extender-names"}
#: The plugin each variant adds to the default profile (none for baseline).
CUSTOM_PLUGIN = {"baseline": "", "native": "NodeNumber", "wasm": "NodeNumber", "extender": ExtenderClient.NAME,
                 "extender-names": ExtenderClient.NAME, "extender-no-metrics": ExtenderClient.NAME,
                 "extender-names-no-metrics": ExtenderClient.NAME}
#: Extender variant -> its ``nodeCacheCapable``.
NODE_CACHE_CAPABLE = {"extender": False, "extender-names": True, "extender-no-metrics": False,
                      "extender-names-no-metrics": True}
#: Points of the scheduling cycle: the scheduling loop waits for them (binding cycles run beside it).
SCHEDULING_POINTS = SCHEDULING_LABELS
#: Extension points in kube-scheduler's order, for the report.
POINT_ORDER = CYCLE_LABELS

#: A progress report: (steps done, all steps, what was just done).
Progress = Callable[[int, int, str], None]


def guest_path() -> Path:
    return examples_dir() / "nodenumber" / "nodenumber.wasm"


# --- one round ---------------------------------------------------------------------------


def variant_config(variant: str, extender_url: str = "") -> SchedulerConfig:
    """The default profile plus the variant's NodeNumber (weight 1)."""
    if variant not in CUSTOM_PLUGIN:
        raise ValueError(f"unknown variant {variant!r}")
    profile: dict[str, Any] = {"schedulerName": "default-scheduler"}
    custom = CUSTOM_PLUGIN[variant]
    if custom:
        profile["plugins"] = {"multiPoint": {"enabled": [{"name": custom, "weight": 1}]}}
    if variant == "wasm":
        profile["pluginConfig"] = [{"name": custom, "args": {"guestURL": str(guest_path())}}]
    elif variant in NODE_CACHE_CAPABLE:
        profile["pluginConfig"] = [{"name": custom, "args": {"urlPrefix": extender_url,
                                                              "nodeCacheCapable": NODE_CACHE_CAPABLE[variant]}}]
    doc = {"apiVersion": API_VERSION, "kind": KIND, "profiles": [profile]}
    return config_from_dict(doc, f"<bench {variant} configuration>", str(examples_dir()))


def variant_registry(variant: str) -> Mapping[str, PluginFactory]:
    if variant == "native":
        return {NativeNodeNumber.NAME: NativeNodeNumber}
    if variant in NODE_CACHE_CAPABLE:
        return {ExtenderClient.NAME: ExtenderClient}
    return {}


@dataclass
class Round:
    """One variant scheduling the workload's measured pods once."""

    variant: str
    seconds: float
    scheduled: int
    pods: int
    #: namespace/name -> node (None when not scheduled).
    placements: dict[str, str | None]
    #: Extension point -> its duration for each pod (seconds, summed over its plugins).
    points: dict[str, list[float]] = field(repr=False)
    #: The same for the variant's own plugin alone (empty for baseline).
    custom_points: dict[str, list[float]] = field(repr=False)
    #: CPU seconds the scheduling thread spent inside the variant's own plugin in the
    #: scheduling cycles, all pods together (0 for baseline).
    custom_scheduling_cpu_seconds: float = 0.0

    @property
    def pods_per_second(self) -> float:
        return self.scheduled / self.seconds if self.seconds > 0 else 0.0

    @property
    def custom_scheduling_seconds(self) -> float:
        """The variant's own plugin's time in the scheduling cycles (what the loop waits for)."""
        return sum(sum(values) for point, values in self.custom_points.items() if point in SCHEDULING_POINTS)


def _per_pod(calls: Sequence[tuple[str, str, str, float]], plugin: str | None) -> dict[str, list[float]]:
    """Extension point -> each pod's total time in it (only `plugin`'s calls if given)."""
    totals: dict[tuple[str, str], float] = {}
    for point, name, uid, seconds in calls:
        if plugin is None or name == plugin:
            totals[(point, uid)] = totals.get((point, uid), 0.0) + seconds
    points: dict[str, list[float]] = {}
    for (point, _uid), seconds in totals.items():
        points.setdefault(point, []).append(seconds)
    return points


_uid = pod_uid


def run_round(variant: str, cluster: Cluster, compiler: GuestCompiler, extender_url: str = "",
              seed: int = 0) -> Round:
    """Schedule the cluster's pending pods with the variant's profile; time the scheduling only."""
    config = variant_config(variant, extender_url)
    calls: list[tuple[str, str, str, float]] = []
    record = calls.append
    custom = CUSTOM_PLUGIN[variant]
    cpu_seconds = [0.0]

    def observe(point: str, plugin: str, pod: KubeObject, seconds: float, cpu: float) -> None:
        record((point, plugin, _uid(pod), seconds))
        if plugin == custom and point in SCHEDULING_POINTS:
            cpu_seconds[0] += cpu

    with Scheduler(config, cluster, compiler, variant_registry(variant), SchedulerOptions(seed=seed)) as scheduler:
        for framework in scheduler.frameworks.values():
            framework.observer = observe
        # What exists now is never garbage of this round: the collector leaves it alone.
        gc.collect()
        gc.freeze()
        try:
            report = scheduler.run()
        finally:
            gc.unfreeze()
    placements = {pod.key: pod.node for pod in report.pods}
    return Round(variant, report.seconds, report.count(PodStatus.SCHEDULED), len(report.pods), placements,
                 _per_pod(calls, None), _per_pod(calls, custom) if custom else {}, cpu_seconds[0])


# --- the extender on loopback --------------------------------------------------------------


@contextmanager
def loopback_extender(workload: Workload, compiler: GuestCompiler, metrics: bool = True) -> Iterator[str]:
    """The NodeNumber guest behind `wasm-scheduler extender --no-bind` (and --no-metrics unless
    `metrics`), in this process; its URL."""
    from wasm_scheduler.adapters.extender.command import ExtenderOptions, RunningExtender

    with tempfile.TemporaryDirectory(prefix="wasm-scheduler-bench-") as tmp:
        config = Path(tmp) / "scheduler-config.yaml"
        nodes = Path(tmp) / "nodes.yaml"
        # JSON is YAML: written fast, read by the same loaders as a user's files.
        config.write_text(json.dumps({"apiVersion": API_VERSION, "kind": KIND, "profiles": [{
            "schedulerName": "default-scheduler",
            "plugins": {"multiPoint": {"enabled": [{"name": "NodeNumber", "weight": 1}]}},
            "pluginConfig": [{"name": "NodeNumber", "args": {"guestURL": str(guest_path())}}],
        }]}))
        node_objects = [obj for obj in objects(workload) if obj["kind"] == "Node"]
        nodes.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": node_objects}))
        running = RunningExtender(ExtenderOptions(config, "127.0.0.1:0", nodes, expect_bind=False, metrics=metrics),
                                  compiler)
        try:
            running.server.start_background()
            yield running.server.url
        finally:
            running.close()


# --- figures ---------------------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def point_stats(rounds: Sequence[Round], custom: bool = False) -> dict[str, dict[str, float]]:
    """Per extension point: p50/p99 in us of its duration per pod (summed over its plugins,
    or the variant's own plugin alone), and how many pod-cycles it ran in, over all rounds."""
    by_point: dict[str, list[float]] = {}
    for rnd in rounds:
        for point, values in (rnd.custom_points if custom else rnd.points).items():
            by_point.setdefault(point, []).extend(values)
    stats = {}
    for point in sorted(by_point, key=lambda p: POINT_ORDER.index(p) if p in POINT_ORDER else len(POINT_ORDER)):
        values = sorted(by_point[point])
        stats[point] = {"p50_us": round(percentile(values, 50) * 1e6, 1),
                        "p99_us": round(percentile(values, 99) * 1e6, 1), "count": len(values)}
    return stats


def _best(rounds: Sequence[Round]) -> Round:
    return max(rounds, key=lambda r: r.pods_per_second)


def _target(value: float | None, target: float, op: str, unit: str = "",
            ceiling: float | None = None) -> dict[str, Any]:
    """A target's figure; `ceiling`, when given, is the most the figure can be in this run."""
    met = value is not None and (value >= target if op == ">=" else value <= target)
    figure = {"value": value, "target": target, "op": op, "unit": unit, "met": bool(met)}
    if ceiling is not None:
        figure["ceiling"] = ceiling
    return figure


def machine_facts() -> dict[str, Any]:
    """The machine a figure was measured on: CPUs, platform, Python, wasmtime."""
    try:
        wasmtime_version = metadata.version("wasmtime")
    except metadata.PackageNotFoundError:  # pragma: no cover - wasmtime is a dependency
        wasmtime_version = "unknown"
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "wasmtime": wasmtime_version}


def _us_per_pod(rnd: Round) -> float:
    return rnd.seconds / rnd.scheduled * 1e6 if rnd.scheduled else float("inf")


def _ratio(value: float, other: float) -> float | None:
    return round(value / other, 3) if other else None


def throughput_figures(results: Mapping[str, Sequence[Round]]) -> dict[str, Any]:
    """Throughput, ratios, added time per pod, extension points and checks from the rounds."""
    best = {variant: _best(rounds) for variant, rounds in results.items()}
    throughput = {v: round(r.pods_per_second, 1) for v, r in best.items()}
    per_pod_us = {v: _us_per_pod(r) for v, r in best.items()}
    # The time a plugin adds per pod: the difference to baseline, but never less than the
    # CPU time the scheduling thread spends inside the plugin per pod in the scheduling
    # cycle (a difference under the noise can be <= 0). That floor is a lower bound for
    # every variant; the plugin's wall time is not one: while a wasm call waits for its
    # actor, other threads run work that baseline has too (the binding cycles).
    added: dict[str, float] = {}
    own: dict[str, float] = {}
    own_cpu: dict[str, float] = {}
    for variant in [v for v in results if v != "baseline"]:
        rounds = results[variant]
        own[variant] = statistics.median(r.custom_scheduling_seconds / max(r.scheduled, 1) for r in rounds) * 1e6
        own_cpu[variant] = statistics.median(
            r.custom_scheduling_cpu_seconds / max(r.scheduled, 1) for r in rounds) * 1e6
        added[variant] = max(per_pod_us[variant] - per_pod_us["baseline"], own_cpu[variant])
    ratios = {
        "wasm/native": _ratio(throughput["wasm"], throughput["native"]),
        "wasm/extender": _ratio(throughput["wasm"], throughput["extender"]),
        "wasm/extender-names": _ratio(throughput["wasm"], throughput["extender-names"]),
        "added_cost_wasm/native": round(added["wasm"] / added["native"], 2) if added["native"] > 0 else None,
        # The most wasm/extender can be: NodeNumber only adds work to the default profile,
        # so no variant of it runs faster than baseline.
        "baseline/extender": _ratio(throughput["baseline"], throughput["extender"]),
    }
    reference = results["native"][0].placements
    checks = {
        "placements_identical": {
            "wasm/native": all(r.placements == reference for r in results["wasm"]),
            "extender/native": all(r.placements == reference for r in results["extender"]),
            "extender-names/native": all(r.placements == reference for r in results["extender-names"]),
            "rounds/native": all(r.placements == reference for r in results["native"]),
            **{f"{v}/native": all(r.placements == reference for r in results[v]) for v in METRICS_OFF
               if v in results},
        },
        "all_scheduled": {v: all(r.scheduled == r.pods for r in rounds) for v, rounds in results.items()},
    }
    return {
        "throughput": throughput,
        "rounds": {v: [round(r.pods_per_second, 1) for r in rounds] for v, rounds in results.items()},
        "time_per_pod_us": {v: round(us, 1) for v, us in per_pod_us.items()},
        "added_us_per_pod": {v: round(us, 1) for v, us in added.items()},
        # Each round's time a pod less the same round's baseline (rounds alternate, so a
        # pair shares the machine's moment): the spread behind the figure above, and
        # what several runs can be pooled from.
        "added_us_per_pod_rounds": {v: [round(_us_per_pod(r) - _us_per_pod(b), 1)
                                        for r, b in zip(results[v], results["baseline"], strict=False)]
                                    for v in results if v != "baseline"},
        "plugin_us_per_pod": {v: round(us, 1) for v, us in own.items()},
        "plugin_cpu_us_per_pod": {v: round(us, 1) for v, us in own_cpu.items()},
        "ratios": ratios,
        "extension_points": {v: point_stats(rounds) for v, rounds in results.items()},
        "custom_plugin_points": {v: point_stats(rounds, custom=True) for v, rounds in results.items()
                                 if CUSTOM_PLUGIN[v]},
        "checks": checks,
    }


def targets(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each target of the bench: the figure, the bound, whether it is met."""
    ratios = doc["ratios"]
    call = doc["call_overhead_us"]
    memory = doc["memory_per_instance_mib"]
    return {
        "throughput wasm/native": _target(ratios["wasm/native"], 0.8, ">="),
        "throughput wasm/extender": _target(ratios["wasm/extender"], 5.0, ">=",
                                            ceiling=ratios.get("baseline/extender")),
        "added time per pod wasm/native": _target(ratios["added_cost_wasm/native"], 3.0, "<="),
        "export call host/floor": _target(call["ratio"], 1.5, "<="),
        "RSS per idle instance (MiB)": _target(memory["rss_per_instance"],
                                               round(memory["linear_memory"] + 1.0, 3), "<=", "MiB"),
        "plugin load, warm cache (ms)": _target(doc["load_ms"]["cached"], 50.0, "<=", "ms"),
    }


# --- the whole run ---------------------------------------------------------------------------


def call_overhead(compiler: GuestCompiler, runs: int = 3) -> dict[str, Any]:
    """`micro.call_overhead`, the run with the median ratio of `runs` (host and floor are
    timed in separate windows, so one run's ratio moves with the machine's noise)."""
    results = sorted((micro.call_overhead(compiler) for _ in range(runs)), key=lambda r: float(r["ratio"]))
    return results[len(results) // 2]


def run_bench(workload: Workload, rounds: int = DEFAULT_ROUNDS, progress: Progress | None = None,
              compiler: GuestCompiler | None = None, seed: int = DEFAULT_SEED, fast_calls: bool = True,
              cpus: str = "all", compare_metrics: bool = False) -> dict[str, Any]:
    """Every figure of `wasm-scheduler bench`, as one JSON-ready document.

    `fast_calls=False` runs the guests through wasmtime-py's public API (the call path
    before `actors.fast_call`), for a before/after comparison of that path alone. `cpus`
    is only recorded: the command places its threads (`adapters.cpu_affinity`) before
    this runs, the same for every variant. `compare_metrics` adds the extender variants
    without metrics (`METRICS_OFF`)."""
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    own_compiler = compiler is None
    compiler = compiler or GuestCompiler(fast_calls=fast_calls)
    variants = VARIANTS + (tuple(METRICS_OFF) if compare_metrics else ())
    total = rounds * len(variants) + 4
    done = 0

    def step(what: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total, what)

    started = time.perf_counter()
    try:
        cluster = cluster_from_objects(documents(workload), "<bench workload>")
        results: dict[str, list[Round]] = {v: [] for v in variants}
        with ExitStack() as stack:
            url = stack.enter_context(loopback_extender(workload, compiler))
            url_off = stack.enter_context(loopback_extender(workload, compiler, metrics=False)) if compare_metrics \
                else ""
            for index in range(rounds):
                for variant in variants:
                    rnd = run_round(variant, cluster, compiler, url_off if variant in METRICS_OFF else url, seed)
                    results[variant].append(rnd)
                    step(f"round {index + 1}/{rounds} {variant}: {rnd.pods_per_second:.1f} pods/s")
        doc: dict[str, Any] = {
            "workload": {"nodes": workload.nodes, "init_pods": workload.init_pods, "pods": workload.pods,
                         "rounds": rounds, "percentage_of_nodes_to_score": "default (kube-scheduler's adaptive)",
                         "call_path": "fast" if compiler.fast_calls else "public API", "cpus_used": cpus,
                         "extender_metrics": "on and off" if compare_metrics else "on"},
            "machine": machine_facts(),
        }
        doc.update(throughput_figures(results))
        call = call_overhead(compiler)
        doc["call_overhead_us"] = {"host": call["host"], "floor": call["floor"], "ratio": call["ratio"],
                                   "single": call["single"], "single_ratio": call["single_ratio"],
                                   "fast_path": call["fast_path"]}
        step(f"export call: {call['host']} us a node in Filter, {call['single']} us alone "
             f"(floor {call['floor']} us)")
        doc["host_function_round_trip_us"] = micro.host_function_round_trip(compiler)
        step(f"host function round trip: {doc['host_function_round_trip_us']} us")
        memory = micro.memory_per_instance(compiler, guest_path())
        doc["memory_per_instance_mib"] = {"rss_per_instance": memory["rss_per_instance_mib"],
                                          "linear_memory": memory["linear_memory_mib"],
                                          "instances": memory["instances"]}
        step(f"memory per idle instance: {memory['rss_per_instance_mib']} MiB")
        doc["load_ms"] = micro.load_time(guest_path())
        step(f"plugin load: {doc['load_ms']['cold']} ms cold, {doc['load_ms']['cached']} ms cached")
    finally:
        if own_compiler:
            compiler.close()
    doc["targets"] = targets(doc)
    doc["seconds"] = round(time.perf_counter() - started, 1)
    return doc


# --- showing it --------------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def render_table(doc: Mapping[str, Any], console: Console) -> None:
    w = doc["workload"]
    machine = doc["machine"]
    console.print(f"[bold]wasm-scheduler bench[/]: {w['nodes']} nodes, {w['init_pods']} init pods, "
                  f"{w['pods']} measured pods, best of {w['rounds']} round(s), {w['call_path']} call path, "
                  f"threads on CPUs {w.get('cpus_used', 'all')}; "
                  f"{machine['cpus']} CPUs, Python {machine['python']}, wasmtime {machine['wasmtime']}",
                  highlight=False)

    table = Table(title="Throughput (measured pods only)", title_justify="left")
    for column in ("variant", "pods/s", "us per pod", "added us/pod", "plugin us/pod", "plugin CPU us/pod",
                   "rounds (pods/s)"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for variant in doc["throughput"]:
        table.add_row(variant, _fmt(doc["throughput"][variant]), _fmt(doc["time_per_pod_us"][variant]),
                      _fmt(doc["added_us_per_pod"].get(variant)), _fmt(doc["plugin_us_per_pod"].get(variant)),
                      _fmt(doc["plugin_cpu_us_per_pod"].get(variant)),
                      ", ".join(_fmt(v) for v in doc["rounds"][variant]))
    console.print(table)
    console.print("ratios: " + ", ".join(f"{name} {_fmt(value)}" for name, value in doc["ratios"].items()),
                  highlight=False)
    console.print("added us/pod, each round against its own baseline: " + "; ".join(
        f"{v} {', '.join(_fmt(x) for x in xs)}" for v, xs in doc["added_us_per_pod_rounds"].items()),
        highlight=False)

    shown = list(doc["throughput"])
    points = [p for p in POINT_ORDER if any(p in doc["extension_points"][v] for v in shown)]
    table = Table(title="Extension points: p50 / p99 per pod, us (all plugins of the point)", title_justify="left")
    table.add_column("point")
    for variant in shown:
        table.add_column(variant, justify="right")
    for point in points:
        cells = []
        for variant in shown:
            stats = doc["extension_points"][variant].get(point)
            cells.append(f"{_fmt(stats['p50_us'])} / {_fmt(stats['p99_us'])}" if stats else "")
        table.add_row(point, *cells)
    console.print(table)

    table = Table(title="The custom plugin alone: p50 / p99 per pod, us", title_justify="left")
    table.add_column("point")
    custom = doc["custom_plugin_points"]
    for variant in custom:
        table.add_column(f"{variant} ({CUSTOM_PLUGIN[variant]})", justify="right")
    for point in [p for p in POINT_ORDER if any(p in custom[v] for v in custom)]:
        table.add_row(point, *[f"{_fmt(custom[v][point]['p50_us'])} / {_fmt(custom[v][point]['p99_us'])}"
                               if point in custom[v] else "" for v in custom])
    console.print(table)

    call, memory, load = doc["call_overhead_us"], doc["memory_per_instance_mib"], doc["load_ms"]
    table = Table(title="Micro-figures", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("next to", justify="right")
    table.add_row("export call through the host, a node in Filter (us)", _fmt(call["host"]),
                  f"floor {_fmt(call['floor'])}")
    table.add_row("export call through the host, alone (us)", _fmt(call["single"]), f"floor {_fmt(call['floor'])}")
    table.add_row("host function round trip (us)", _fmt(doc["host_function_round_trip_us"]), "")
    table.add_row("RSS per idle instance (MiB)", _fmt(memory["rss_per_instance"]),
                  f"linear memory {_fmt(memory['linear_memory'])}")
    table.add_row("plugin load (ms)", f"cold {_fmt(load['cold'])}", f"cached {_fmt(load['cached'])}")
    console.print(table)

    table = Table(title="Targets", title_justify="left")
    for column in ("target", "value", "bound", "met"):
        table.add_column(column, justify="left" if column == "target" else "right")
    for name, target in doc["targets"].items():
        bound = f"{target['op']} {_fmt(target['target'])}"
        if "ceiling" in target:
            bound += f" (at most {_fmt(target['ceiling'])} here)"
        table.add_row(name, _fmt(target["value"]), bound,
                      Text("met", style="green") if target["met"] else Text("missed", style="red"))
    console.print(table)
    checks = doc["checks"]["placements_identical"]
    same = all(checks.values())
    console.print(("[green]" if same else "[red]") + "placements: " + ", ".join(
        f"{pair} {'identical' if ok else 'DIFFER'}" for pair, ok in checks.items()) + "[/]", highlight=False)
