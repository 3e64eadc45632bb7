"""End-to-end throughput: scheduler_perf's SchedulingBasic shape through the real control plane.

    python -m tests.e2e.bench [--nodes 500] [--init-pods 500] [--pods 1000] [--rounds 2]
                              [--variants default,extender-nodes,extender-names,simulate]
                              [--guest NODENUMBER.wasm] [--wasm-plugin-scheduler KUBE_SCHEDULER]
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
- `simulate`: `simulate` of the same cluster in this process (no API server);
- `wasm-plugin`: a kube-scheduler built with the SIG project's wasm plugin (the Go host),
  loading the same guest in process. Its Go module cannot be had through the Go module
  proxy (tests/e2e/README.md), so CI does not build it: pass a binary built from that
  project's source with `--wasm-plugin-scheduler`, and the variant joins the rounds.

`--guest` names the NodeNumber guest every variant loads (default: the project's WAT
example), so the SIG project's TinyGo guests can be measured on both hosts.

Figures per variant (best round): pods bound per second (measured pods over the time from
the first create to the last bind), p50 and p99 of create-to-bind, and CPU seconds per
pod of kube-scheduler, the extender and kube-apiserver (from /proc, over the measured
phase). Ratios are to `wasm-plugin` when it ran (what users would pick instead), else to
`default`.
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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tests.e2e.cluster import NODENUMBER_WASM, ControlPlane, ExtenderEntry, Harness, build_binaries, wasm_plugin_config
from tests.e2e.process import ManagedProcess, wait_for
from wasm_scheduler.adapters.benchmarks.workload import NAMESPACE, Workload, documents, objects
from wasm_scheduler.adapters.framework.cluster import cluster_from_objects
from wasm_scheduler.adapters.framework.config import config_from_dict
from wasm_scheduler.adapters.framework.simulation import simulate
from wasm_scheduler.registry.compiler import GuestCompiler

VARIANTS = ("default", "extender-nodes", "extender-names", "simulate")
#: The Go host's variant: runs only with a binary given (`--wasm-plugin-scheduler`).
WASM_PLUGIN = "wasm-plugin"
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


def wasm_plugin_profiles(guest: Path) -> list[dict[str, Any]]:
    """kube-scheduler's profile for the SIG project's wasm plugin: NodeNumber at every point
    (the extender's own configuration, with the guest as a file:// URL, as that plugin reads it)."""
    profiles: list[dict[str, Any]] = wasm_plugin_config({"NodeNumber": guest.resolve().as_uri()})["profiles"]
    return profiles


def run_cluster_round(harness: Harness, variant: str, workload: Workload, guest: Path = NODENUMBER_WASM,
                      wasm_plugin_scheduler: Path | None = None) -> RoundResult:
    measured = prepare(harness, workload)
    processes: dict[str, ManagedProcess] = {"kube-apiserver": harness.control_plane.apiserver}
    entries = []
    if variant.startswith("extender"):
        extender = harness.extender(wasm_plugin_config({"NodeNumber": guest}), "--log-level", "warning",
                                    name=f"extender-{variant}").start()
        processes["extender"] = extender.process
        entries.append(ExtenderEntry(url_prefix=extender.url, weight=1,
                                     node_cache_capable=variant == "extender-names"))
    if variant == WASM_PLUGIN:
        if wasm_plugin_scheduler is None:
            raise ValueError(f"the {WASM_PLUGIN} variant needs a kube-scheduler built with the wasm plugin")
        go_host = Harness(harness.control_plane, replace(harness.binaries, kube_scheduler=wasm_plugin_scheduler),
                          harness.folder)
        scheduler = go_host.kube_scheduler([], name=f"kube-scheduler-{variant}",
                                           profiles=wasm_plugin_profiles(guest)).start()
    else:
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


def run_simulate_round(workload: Workload, compiler: GuestCompiler, guest: Path = NODENUMBER_WASM) -> RoundResult:
    config = config_from_dict(wasm_plugin_config({"NodeNumber": guest}), "<bench>")
    cluster = cluster_from_objects(documents(workload), "<bench>")
    cpu = time.process_time()
    start = time.monotonic()
    report = simulate(config, cluster, compiler=compiler)
    seconds = time.monotonic() - start
    scheduled = sum(1 for p in report.pods if p.node)
    return RoundResult("simulate", scheduled, seconds, scheduled / seconds, float("nan"), float("nan"),
                       {"simulate": (time.process_time() - cpu) / max(scheduled, 1)})


def bench(harness: Harness, workload: Workload, rounds: int, variants: Sequence[str],
          guest: Path = NODENUMBER_WASM, wasm_plugin_scheduler: Path | None = None) -> list[RoundResult]:
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
                results.append(run_simulate_round(workload, compiler, guest) if variant == "simulate"
                               else run_cluster_round(harness, variant, workload, guest, wasm_plugin_scheduler))
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
    parser.add_argument("--variants", default=None,
                        help=f"comma-separated, from {', '.join((*VARIANTS, WASM_PLUGIN))} (default: all of "
                             f"them; {WASM_PLUGIN} when --wasm-plugin-scheduler is given)")
    parser.add_argument("--guest", type=Path, default=NODENUMBER_WASM,
                        help="the NodeNumber guest every variant loads (default: the project's example)")
    parser.add_argument("--wasm-plugin-scheduler", type=Path, default=None, metavar="KUBE_SCHEDULER",
                        help="a kube-scheduler built with the SIG project's wasm plugin: adds the "
                             f"{WASM_PLUGIN} variant (the Go host), and ratios are to it")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    parser.add_argument("--artifacts", type=Path, default=None, help="where the process logs go (default: a temp dir)")
    args = parser.parse_args(argv)
    known = (*VARIANTS, WASM_PLUGIN)
    default = known if args.wasm_plugin_scheduler else VARIANTS
    variants = [v for v in (args.variants or ",".join(default)).split(",") if v]
    unknown = sorted(set(variants) - set(known))
    if unknown:
        parser.error(f"unknown variants {unknown}: choose from {', '.join(known)}")
    if WASM_PLUGIN in variants and args.wasm_plugin_scheduler is None:
        parser.error(f"the {WASM_PLUGIN} variant needs --wasm-plugin-scheduler")
    for path in (args.guest, args.wasm_plugin_scheduler):
        if path is not None and not path.is_file():
            parser.error(f"{path}: no such file")
    workload = Workload(args.nodes, args.init_pods, args.pods)
    folder = args.artifacts or Path(tempfile.mkdtemp(prefix="wasm-scheduler-bench-"))
    binaries = build_binaries()
    plane = ControlPlane(binaries, folder / "control-plane").start()
    try:
        harness = Harness(plane, binaries, folder / "processes")
        results = bench(harness, workload, args.rounds, variants, args.guest, args.wasm_plugin_scheduler)
        harness.cluster.close()
    finally:
        plane.stop()
    best = {v: max((r for r in results if r.variant == v), key=lambda r: r.pods_per_second) for v in variants}
    if args.output == "json":
        print(json.dumps({"workload": asdict(workload), "guest": str(args.guest),
                          "rounds": [asdict(r) for r in results],
                          "best": {v: asdict(r) for v, r in best.items()}}, indent=2))
        return 0
    base_name = WASM_PLUGIN if WASM_PLUGIN in best else "default"
    base = best.get(base_name)
    print(f"\n{workload.nodes} nodes, {workload.init_pods} running pods, {workload.pods} measured pods; "
          f"guest {args.guest.name}; best of {args.rounds} rounds; logs in {folder}")
    print(f"{'variant':16} {'pods/s':>8} {'vs ' + base_name:>14} {'p50 ms':>8} {'p99 ms':>8}  CPU ms per pod")
    for variant, r in best.items():
        ratio = f"{r.pods_per_second / base.pods_per_second:.2f}" if base else "-"
        cpu = ", ".join(f"{name} {seconds * 1000:.2f}" for name, seconds in r.cpu_s_per_pod.items())
        print(f"{variant:16} {r.pods_per_second:8.1f} {ratio:>14} {r.p50_ms:8.1f} {r.p99_ms:8.1f}  {cpu}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
