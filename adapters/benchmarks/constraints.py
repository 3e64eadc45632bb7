"""What the pod-constraint plugins cost the pods that do not use them.

Run it as `python -m wasm_scheduler.adapters.benchmarks.constraints [--nodes 1000] [--pods 5000]`.

This module owns one on-demand figure. A cluster of ``nodes`` nodes in 10 zones, one
plain pod already running on each, and ``pods`` pending pods of which every other one
(half) carries a required pod anti-affinity on ``kubernetes.io/hostname`` and a
DoNotSchedule topology spread constraint on ``topology.kubernetes.io/zone`` (maxSkew 1),
both over its group of ``group`` replicas (label ``app``); the other half carries
nothing (the shape of `adapters.benchmarks.workload`'s pod). The same snapshot is
scheduled twice in one run, alternating round by round: ``full``, the default
profile, and ``without``, the default profile with the plugins added for pod
constraints and their neighbours disabled (`NEW_PLUGINS`). Each pod's scheduling
cycles are timed (wall, and CPU of the scheduling thread, which leaves out the binding
cycles running beside it); the figure is the mean cost of a pod of each half, and the
ratio full/without for the plain pods: what a pod without constraints pays for the
plugins being there (among pods that use them). Nothing here is asserted: these
machines are shared and noisy.

See `docs/performance.md` ("What the pod-constraint plugins cost pods without
constraints").
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from wasm_scheduler.adapters.benchmarks.throughput import machine_facts
from wasm_scheduler.adapters.benchmarks.workload import NAMESPACE, node, pod
from wasm_scheduler.adapters.framework.cluster import Cluster, cluster_from_objects
from wasm_scheduler.adapters.framework.config import API_VERSION, KIND, SchedulerConfig, config_from_dict
from wasm_scheduler.adapters.framework.queue import QueuedPod
from wasm_scheduler.adapters.framework.results import PodStatus
from wasm_scheduler.adapters.framework.scheduler import Scheduler, SchedulerOptions
from wasm_scheduler.adapters.logs import configure_logging
from wasm_scheduler.registry.compiler import GuestCompiler

#: The plugins `without` disables: the ones added beside the first default set.
NEW_PLUGINS: tuple[str, ...] = ("InterPodAffinity", "PodTopologySpread", "NodePorts", "SchedulingGates",
                                "NodeResourcesBalancedAllocation", "ImageLocality")
VARIANTS: tuple[str, ...] = ("full", "without")
ZONES = 10
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
PLAIN, CONSTRAINED = "plain", "constrained"


def constrained_pod(name: str, app: str) -> dict[str, Any]:
    """The workload's pod with a required hostname anti-affinity and a zone spread over its `app`."""
    obj = pod(name)
    selector = {"matchLabels": {"app": app}}
    obj["metadata"]["labels"] = {"app": app}
    obj["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": selector, "topologyKey": HOSTNAME}]}}
    obj["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}]
    return obj


def objects(nodes: int, pods: int, group: int = 10) -> list[dict[str, Any]]:
    """Nodes in `ZONES` zones, one running plain pod each, then `pods` pending pods, every other one constrained."""
    width = max(4, len(str(max(nodes, pods))))
    made = []
    for i in range(nodes):
        obj = node(i, width)
        obj["metadata"]["labels"][ZONE] = f"zone-{i % ZONES}"
        made.append(obj)
    running = [pod(f"init-pod-{i:0{width}d}", made[i]["metadata"]["name"]) for i in range(nodes)]
    pending = [constrained_pod(f"app-pod-{i:0{width}d}", f"app-{i // 2 // group}") if i % 2 else
               pod(f"pod-{i:0{width}d}") for i in range(pods)]
    return [*made, *running, *pending]


def variant_config(variant: str) -> SchedulerConfig:
    profile: dict[str, Any] = {"schedulerName": "default-scheduler"}
    if variant == "without":
        profile["plugins"] = {"multiPoint": {"disabled": [{"name": name} for name in NEW_PLUGINS]}}
    elif variant != "full":
        raise ValueError(f"unknown variant {variant!r}")
    doc = {"apiVersion": API_VERSION, "kind": KIND, "profiles": [profile]}
    return config_from_dict(doc, f"<constraints benchmark: {variant}>")


class _TimedScheduler(Scheduler):
    """A Scheduler that times each pod's scheduling cycles: (wall, thread CPU) seconds by pod key."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cycles: dict[str, list[float]] = {}

    def _schedule_one(self, item: QueuedPod) -> None:
        started, cpu = time.perf_counter(), time.thread_time()
        super()._schedule_one(item)
        wall, used = time.perf_counter() - started, time.thread_time() - cpu
        spent = self.cycles.setdefault(item.info.key, [0.0, 0.0])
        spent[0] += wall
        spent[1] += used


@dataclass
class Half:
    """One half of the pending pods in one round: their count and cost a pod."""

    pods: int
    scheduled: int
    #: Mean and median wall time of a pod's scheduling cycles, and mean CPU of the scheduling thread, in us.
    mean_us: float
    p50_us: float
    cpu_us: float


@dataclass
class Round:
    variant: str
    seconds: float
    halves: dict[str, Half] = field(default_factory=dict)


def run_round(variant: str, cluster: Cluster, compiler: GuestCompiler) -> Round:
    """Schedule every pending pod with the variant's profile; the cost a pod of each half."""
    scheduler = _TimedScheduler(variant_config(variant), cluster, compiler, None, SchedulerOptions())
    with scheduler:
        gc.collect()
        gc.freeze()  # what exists now is never garbage of this round
        try:
            report = scheduler.run()
        finally:
            gc.unfreeze()
        cycles = scheduler.cycles
    status = {p.key: p.status for p in report.pods}
    result = Round(variant, report.seconds)
    for half in (PLAIN, CONSTRAINED):
        keys = [key for key in status if (half == CONSTRAINED) == key.split("/", 1)[1].startswith("app-pod-")]
        walls = [cycles[key][0] * 1e6 for key in keys if key in cycles]
        cpus = [cycles[key][1] * 1e6 for key in keys if key in cycles]
        result.halves[half] = Half(len(keys), sum(status[k] == PodStatus.SCHEDULED for k in keys),
                                   statistics.fmean(walls) if walls else 0.0,
                                   statistics.median(walls) if walls else 0.0,
                                   statistics.fmean(cpus) if cpus else 0.0)
    return result


def measure(nodes: int, pods: int, rounds: int = 1, group: int = 10,
            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Both variants, alternating, `rounds` each; each half's best round (the lowest mean) counts."""
    cluster = cluster_from_objects([{"apiVersion": "v1", "kind": "List", "items": objects(nodes, pods, group)}],
                                   f"<constraints benchmark: {nodes} nodes, {pods} pods>")
    results: dict[str, list[Round]] = {variant: [] for variant in VARIANTS}
    with GuestCompiler() as compiler:
        for r in range(rounds):
            for variant in VARIANTS:
                rnd = run_round(variant, cluster, compiler)
                results[variant].append(rnd)
                if progress is not None:
                    progress(f"round {r + 1}/{rounds} {variant}: {rnd.seconds:.1f} s")
    best = {variant: {half: min((rnd.halves[half] for rnd in rounds_), key=lambda h: h.mean_us)
                      for half in (PLAIN, CONSTRAINED)}
            for variant, rounds_ in results.items()}
    plain_full, plain_without = best["full"][PLAIN], best["without"][PLAIN]
    return {
        "workload": {"nodes": nodes, "pods": pods, "constrained": pods // 2, "group": group, "zones": ZONES,
                     "namespace": NAMESPACE, "rounds": rounds},
        "machine": machine_facts(),
        "seconds": {variant: [round(rnd.seconds, 2) for rnd in rounds_] for variant, rounds_ in results.items()},
        "per_pod_us": {variant: {half: {"pods": h.pods, "scheduled": h.scheduled, "mean": round(h.mean_us, 1),
                                        "p50": round(h.p50_us, 1), "cpu": round(h.cpu_us, 1)}
                                 for half, h in halves.items()}
                       for variant, halves in best.items()},
        "plain_ratio": {
            "wall": round(plain_full.mean_us / plain_without.mean_us, 3) if plain_without.mean_us else None,
            "cpu": round(plain_full.cpu_us / plain_without.cpu_us, 3) if plain_without.cpu_us else None,
            "target": 2.0,
        },
    }


def render(doc: dict[str, Any]) -> str:
    rows = [f"{'variant':<9}{'pods':<13}{'count':>7}{'scheduled':>11}{'mean us':>10}{'p50 us':>10}{'cpu us':>10}"]
    for variant, halves in doc["per_pod_us"].items():
        for half, h in halves.items():
            rows.append(f"{variant:<9}{half:<13}{h['pods']:>7}{h['scheduled']:>11}{h['mean']:>10.1f}"
                        f"{h['p50']:>10.1f}{h['cpu']:>10.1f}")
    ratio = doc["plain_ratio"]
    rows.append(f"plain pods, full / without: {ratio['wall']} (wall), {ratio['cpu']} (cpu); goal <= {ratio['target']}")
    rows.append("round seconds: " + ", ".join(f"{v} {s}" for v, s in doc["seconds"].items()))
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wasm_scheduler.adapters.benchmarks.constraints",
                                     description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000, help="nodes (default: 1000)")
    parser.add_argument("--pods", type=int, default=5000, help="pending pods, half constrained (default: 5000)")
    parser.add_argument("--group", type=int, default=10, help="replicas of each constrained app (default: 10)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of each variant; the best counts (default: 1)")
    parser.add_argument("--output", choices=("table", "json"), default="table", help="default: table")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.pods < 2 or args.group < 1 or args.rounds < 1:
        parser.error("--nodes, --group and --rounds must be positive, --pods at least 2")
    configure_logging("warning")

    def progress(line: str) -> None:
        sys.stderr.write(line + "\n")

    doc = measure(args.nodes, args.pods, args.rounds, args.group, progress)
    sys.stdout.write((json.dumps(doc, indent=2) if args.output == "json" else render(doc)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
