"""End-to-end throughput: scheduler_perf's SchedulingBasic shape through the real control plane.

    python -m tests.e2e.bench [--nodes 500] [--init-pods 500] [--pods 1000] [--rounds 2]
                              [--variants default,extender-nodes,extender-names,simulate]
                              [--output table|json]

Each round creates the workload of `wasm-scheduler bench` (`adapters/benchmarks/workload.py`:
scheduler_perf's node and pod templates) in a real kube-apiserver, starts the variant's
processes, creates the measured pods from 4 client threads, and times each pod from its
create call's answer to the watch event that shows it bound. Variants, in alternating
rounds on one control plane:

- `default`: kube-scheduler 1.33 with its default plugins;
- `extender-nodes` / `extender-names`: the same kube-scheduler with `wasm-scheduler
  extender` serving NodeNumber (`nodeCacheCapable` false: whole nodes; true: names and
  the extender's watched view);
- `simulate`: `simulate` of the same cluster in this process (no API server).

Figures per variant (best round): pods bound per second (measured pods over the time from
the first create to the last bind), p50 and p99 of create-to-bind, and CPU seconds per
pod of kube-scheduler, the extender and kube-apiserver (from /proc, over the measured
phase). Ratios are to `default`. The SIG project's Go host (its wasm plugin compiled into
kube-scheduler) is not a variant: its Go module cannot be had through the Go module
proxy (tests/e2e/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.e2e.cluster import NODENUMBER_WASM, ControlPlane, ExtenderEntry, Harness, build_binaries, wasm_plugin_config
from tests.e2e.process import ManagedProcess, wait_for
from wasm_scheduler.adapters.benchmarks.workload import NAMESPACE, Workload, documents, objects
from wasm_scheduler.adapters.framework.cluster import cluster_from_objects
from wasm_scheduler.adapters.framework.config import config_from_dict
from wasm_scheduler.adapters.framework.simulation import simulate
from wasm_scheduler.registry.compiler import GuestCompiler

VARIANTS = ("default", "extender-nodes", "extender-names", "simulate")
CLIENT_THREADS = 4
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class RoundResult:
    variant: str
    pods: int
    seconds: float
    pods_per_second: float
    p50_ms: float
    p99_ms: float
    cpu_s_per_pod: dict[str, float] = field(default_factory=dict)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process and its waited-for children, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / TICKS


class BindWatch:
    """The time each pod of the namespace is first seen bound, from one watch of the API."""

    def __init__(self, harness: Harness) -> None:
        self.core = harness.cluster.core
        self.bound: dict[str, float] = {}
        self._stop = threading.Event()
        listed = json.loads(self.core.list_namespaced_pod(NAMESPACE, _preload_content=False).data)
        self._version = listed["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                answer = self.core.list_namespaced_pod(NAMESPACE, watch=True, resource_version=self._version,
                                                       timeout_seconds=30, _preload_content=False)
                for line in answer:
                    if self._stop.is_set():
                        return
                    event = json.loads(line)
                    pod = event.get("object", {})
                    self._version = pod.get("metadata", {}).get("resourceVersion", self._version)
                    if pod.get("spec", {}).get("nodeName"):
                        self.bound.setdefault(pod["metadata"]["name"], time.monotonic())
            except Exception:  # noqa: BLE001 - a cut watch is opened again; after stop() it just ends
                if self._stop.is_set():
                    return
                time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()


def prepare(harness: Harness, workload: Workload) -> list[dict[str, object]]:
    """A fresh namespace with the nodes and the bound init pods; the measured pods to create."""
    cluster = harness.cluster
    cluster.delete_all(NAMESPACE)
    everything = objects(workload)
    nodes = [o for o in everything if o["kind"] == "Node"]
    pods = [o for o in everything if o["kind"] == "Pod"]
    for item in everything:
        item["metadata"].pop("uid", None)  # type: ignore[union-attr]
        item.pop("status", None) if item["kind"] == "Pod" else None
    cluster.create_nodes(nodes)
    with ThreadPoolExecutor(CLIENT_THREADS) as pool:
        list(pool.map(lambda p: cluster.core.create_namespaced_pod(NAMESPACE, p),
                      [p for p in pods if p["spec"].get("nodeName")]))  # type: ignore[union-attr]
    return [p for p in pods if not p["spec"].get("nodeName")]  # type: ignore[union-attr]


def run_cluster_round(harness: Harness, variant: str, workload: Workload) -> RoundResult:
    measured = prepare(harness, workload)
    processes: dict[str, ManagedProcess] = {"kube-apiserver": harness.control_plane.apiserver}
    entries = []
    if variant.startswith("extender"):
        extender = harness.extender(wasm_plugin_config({"NodeNumber": NODENUMBER_WASM}), "--log-level", "warning",
                                    name=f"extender-{variant}").start()
        processes["extender"] = extender.process
        entries.append(ExtenderEntry(url_prefix=extender.url, weight=1,
                                     node_cache_capable=variant == "extender-names"))
    scheduler = harness.kube_scheduler(entries, name=f"kube-scheduler-{variant}").start()
    processes["kube-scheduler"] = scheduler
    try:
        # Ready when it binds a first pod; that pod is not measured.
        warm = dict(measured[0])
        warm["metadata"] = {"name": "warm-up", "namespace": NAMESPACE}
        harness.cluster.core.create_namespaced_pod(NAMESPACE, warm)
        harness.cluster.wait_bound(["warm-up"], 120, NAMESPACE)
        watch = BindWatch(harness)
        created: dict[str, float] = {}
        before = {name: cpu_seconds(p.pid) for name, p in processes.items()}

        def create(pod: dict[str, object]) -> None:
            harness.cluster.core.create_namespaced_pod(NAMESPACE, pod)
            created[pod["metadata"]["name"]] = time.monotonic()  # type: ignore[index]

        start = time.monotonic()
        with ThreadPoolExecutor(CLIENT_THREADS) as pool:
            list(pool.map(create, measured))
        names = [p["metadata"]["name"] for p in measured]  # type: ignore[index]
        wait_for(lambda: all(n in watch.bound for n in names), 600, f"{len(names)} pods bound ({variant})",
                 interval_s=0.2)
        watch.stop()
        after = {name: cpu_seconds(p.pid) for name, p in processes.items()}
    finally:
        for process in (scheduler, *(p for n, p in processes.items() if n == "extender")):
            process.stop()
    latencies = sorted((watch.bound[n] - created[n]) * 1000 for n in names)
    seconds = max(watch.bound[n] for n in names) - start
    return RoundResult(variant, len(names), seconds, len(names) / seconds, statistics.median(latencies),
                       latencies[int(len(latencies) * 0.99) - 1],
                       {name: (after[name] - before[name]) / len(names) for name in processes})


def run_simulate_round(workload: Workload, compiler: GuestCompiler) -> RoundResult:
    config = config_from_dict(wasm_plugin_config({"NodeNumber": NODENUMBER_WASM}), "<bench>")
    cluster = cluster_from_objects(documents(workload), "<bench>")
    cpu = time.process_time()
    start = time.monotonic()
    report = simulate(config, cluster, compiler=compiler)
    seconds = time.monotonic() - start
    scheduled = sum(1 for p in report.pods if p.node)
    return RoundResult("simulate", scheduled, seconds, scheduled / seconds, float("nan"), float("nan"),
                       {"simulate": (time.process_time() - cpu) / max(scheduled, 1)})


def bench(harness: Harness, workload: Workload, rounds: int, variants: Sequence[str]) -> list[RoundResult]:
    """Every variant once per round, alternating, on the harness's control plane."""
    from kubernetes.client.exceptions import ApiException

    try:
        harness.cluster.core.create_namespace({"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": NAMESPACE}})
    except ApiException as exc:
        if exc.status != 409:  # already there
            raise
    compiler = GuestCompiler()
    results: list[RoundResult] = []
    try:
        for round_number in range(rounds):
            for variant in variants:
                print(f"round {round_number + 1}/{rounds}: {variant}", flush=True)
                results.append(run_simulate_round(workload, compiler) if variant == "simulate"
                               else run_cluster_round(harness, variant, workload))
    finally:
        compiler.close()
        harness.cluster.delete_all(NAMESPACE)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--init-pods", type=int, default=500)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--output", choices=("table", "json"), default="table")
    parser.add_argument("--artifacts", type=Path, default=None, help="where the process logs go (default: a temp dir)")
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}: choose from {', '.join(VARIANTS)}")
    workload = Workload(args.nodes, args.init_pods, args.pods)
    folder = args.artifacts or Path(tempfile.mkdtemp(prefix="wasm-scheduler-bench-"))
    binaries = build_binaries()
    plane = ControlPlane(binaries, folder / "control-plane").start()
    try:
        harness = Harness(plane, binaries, folder / "processes")
        results = bench(harness, workload, args.rounds, variants)
        harness.cluster.close()
    finally:
        plane.stop()
    best = {v: max((r for r in results if r.variant == v), key=lambda r: r.pods_per_second) for v in variants}
    if args.output == "json":
        print(json.dumps({"workload": asdict(workload), "rounds": [asdict(r) for r in results],
                          "best": {v: asdict(r) for v, r in best.items()}}, indent=2))
        return 0
    base = best.get("default")
    print(f"\n{workload.nodes} nodes, {workload.init_pods} running pods, {workload.pods} measured pods; "
          f"best of {args.rounds} rounds; logs in {folder}")
    print(f"{'variant':16} {'pods/s':>8} {'vs default':>10} {'p50 ms':>8} {'p99 ms':>8}  CPU ms per pod")
    for variant, r in best.items():
        ratio = f"{r.pods_per_second / base.pods_per_second:.2f}" if base else "-"
        cpu = ", ".join(f"{name} {seconds * 1000:.2f}" for name, seconds in r.cpu_s_per_pod.items())
        print(f"{variant:16} {r.pods_per_second:8.1f} {ratio:>10} {r.p50_ms:8.1f} {r.p99_ms:8.1f}  {cpu}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
