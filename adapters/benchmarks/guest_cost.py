"""Where a wasm plugin's time goes, per pod: the guest, the host's functions, the hand-offs.

Run it as

    python -m wasm_scheduler.adapters.benchmarks.guest_cost [--nodes 500] [--pods 1000]
        [--guest NAME=GUEST.wasm ...] [--log-level warning] [--log-format console|json]
        [--rounds 2] [--output table|json]

This module owns one on-demand figure. `simulate` schedules the workload of `wasm-scheduler
bench` (`adapters.benchmarks.workload`: scheduler_perf's SchedulingBasic shape, ``nodes``
nodes each running one pod, ``pods`` pending pods) once with the default plugins alone
(``none``) and once per guest, enabled as NodeNumber is, alternating round by round. For
each guest the CPU seconds of the process per pod are split into:

- the guest: CPU spent inside the instance's extension points (the actor thread's CPU
  while the export runs: wasm, and the host's own work around the call) less the host
  functions below;
- host functions: CPU spent in the ABI's host functions the guest called (encoding the
  pod and nodes, klog lines, events), by function;
- hand-offs and the facade: the rest of what the plugin adds over ``none`` (the facade,
  the mailbox hand-offs between the scheduling thread and the instance's actor, and
  building the framework's results).

The host functions and extension points are timed by wrapping them for the run (one
`time.thread_time` pair a call, about a microsecond, counted in their figures); nothing
is wrapped outside `timed_calls`. Guest log lines that the log level lets through are
written to stderr as the CLI writes them (send stderr to /dev/null to time them without a
terminal). Nothing here is asserted: these machines are shared and noisy. The figures to
compare with the SIG project's Go host are in docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from wasm_scheduler.actors.guest_instance import GuestInstance
from wasm_scheduler.actors.host_functions import ABI_METHODS, HostFunctions
from wasm_scheduler.adapters.benchmarks.throughput import guest_path, machine_facts
from wasm_scheduler.adapters.benchmarks.workload import Workload, documents
from wasm_scheduler.adapters.framework.cluster import Cluster, cluster_from_objects
from wasm_scheduler.adapters.framework.config import API_VERSION, KIND, config_from_dict
from wasm_scheduler.adapters.framework.simulation import simulate
from wasm_scheduler.adapters.logs import DEFAULT_FORMAT, DEFAULT_LEVEL, FORMATS, LEVELS, configure_logging
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.guest_abi import EXPORT_RESULTS

#: The instance's extension points (GuestInstance methods, named as the exports) whose CPU
#: counts as the guest's.
EXTENSION_POINTS: tuple[str, ...] = tuple(EXPORT_RESULTS)
#: The name of the run without a guest.
BASELINE = "none"


@dataclass
class CallTimes:
    """CPU seconds and calls, by name, gathered while `timed_calls` is active."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def clear(self) -> None:
        self.seconds.clear()
        self.calls.clear()


def _timed(times: CallTimes, key: str, method: Callable[..., Any]) -> Callable[..., Any]:
    clock = time.thread_time

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = clock()
        try:
            return method(*args, **kwargs)
        finally:
            times.seconds[key] += clock() - started
            times.calls[key] += 1

    return timed


@contextmanager
def timed_calls() -> Iterator[CallTimes]:
    """Time every extension point of every instance (key ``point:NAME``) and every host
    function (key ``host:ABI_NAME``) until the block ends; the classes are restored then."""
    times = CallTimes()
    originals: list[tuple[type, str, Any]] = []
    targets: list[tuple[type, str, str]] = [(GuestInstance, f"point:{name}", name) for name in EXTENSION_POINTS]
    targets += [(HostFunctions, f"host:{abi}", method) for abi, method in ABI_METHODS.items()]
    try:
        for cls, key, name in targets:
            original = cls.__dict__[name]
            originals.append((cls, name, original))
            setattr(cls, name, _timed(times, key, original))
        yield times
    finally:
        for cls, name, original in originals:
            setattr(cls, name, original)


@dataclass
class GuestCost:
    """One guest's best round: CPU milliseconds per pod."""

    guest: str
    pods: int
    total_ms: float
    #: What the guest adds over the default plugins alone, and its split.
    plugin_ms: float
    guest_ms: float
    host_functions_ms: float
    handoffs_ms: float
    #: Each host function, and each extension point: (ms per pod, calls per pod).
    host_functions: dict[str, tuple[float, float]]
    extension_points: dict[str, tuple[float, float]]


def _config(name: str, guest: Path | None) -> dict[str, Any]:
    profile: dict[str, Any] = {"schedulerName": "default-scheduler"}
    if guest is not None:
        profile["plugins"] = {"multiPoint": {"enabled": [{"name": name, "weight": 1}]}}
        profile["pluginConfig"] = [{"name": name, "args": {"guestURL": str(guest)}}]
    return {"apiVersion": API_VERSION, "kind": KIND, "profiles": [profile]}


def _run(guest: Path | None, cluster_docs: list[dict[str, Any]], compiler: GuestCompiler,
         times: CallTimes) -> tuple[float, int, CallTimes]:
    """One simulate run: (CPU seconds of the process, pods scheduled, its call times)."""
    config = config_from_dict(_config("NodeNumber", guest), "<guest-cost>")
    cluster: Cluster = cluster_from_objects(cluster_docs, "<guest-cost>")
    times.clear()
    started = time.process_time()
    report = simulate(config, cluster, compiler=compiler)
    cpu = time.process_time() - started
    snapshot = CallTimes(dict(times.seconds), dict(times.calls))
    return cpu, sum(1 for pod in report.pods if pod.node), snapshot


def measure(guests: dict[str, Path], workload: Workload, rounds: int,
            progress: Callable[[str], None] = lambda _line: None) -> list[GuestCost]:
    """Every guest and the baseline once per round, alternating; each one's best round."""
    cluster_docs = documents(workload)
    best_total: dict[str, tuple[float, int, CallTimes]] = {}
    with GuestCompiler() as compiler, timed_calls() as times:
        # A first tiny run per guest: compiling it is not part of the figure.
        warm = documents(Workload(nodes=4, init_pods=0, pods=2))
        for path in guests.values():
            _run(path, warm, compiler, times)
        runs: list[tuple[str, Path | None]] = [(BASELINE, None), *guests.items()]
        for round_number in range(rounds):
            for name, guest in runs:
                progress(f"round {round_number + 1}/{rounds}: {name}")
                result = _run(guest, cluster_docs, compiler, times)
                if name not in best_total or result[0] < best_total[name][0]:
                    best_total[name] = result
    base_cpu, base_pods, _ = best_total[BASELINE]
    base_ms = base_cpu / max(base_pods, 1) * 1000
    costs = [GuestCost(BASELINE, base_pods, round(base_ms, 4), 0.0, 0.0, 0.0, 0.0, {}, {})]
    for name in guests:
        cpu, pods, calls = best_total[name]
        per_pod = 1000 / max(pods, 1)
        total = cpu * per_pod
        points = sum(s for key, s in calls.seconds.items() if key.startswith("point:")) * per_pod
        host = {key.removeprefix("host:"): (round(s * per_pod, 4), round(calls.calls[key] / max(pods, 1), 2))
                for key, s in sorted(calls.seconds.items(), key=lambda item: -item[1]) if key.startswith("host:")}
        points_by_name = {key.removeprefix("point:"): (round(s * per_pod, 4), round(calls.calls[key] / max(pods, 1), 2))
                          for key, s in sorted(calls.seconds.items(), key=lambda item: -item[1])
                          if key.startswith("point:")}
        host_ms = sum(ms for ms, _calls in host.values())
        plugin = total - base_ms
        costs.append(GuestCost(name, pods, round(total, 4), round(plugin, 4), round(points - host_ms, 4),
                               round(host_ms, 4), round(plugin - points, 4), host,
                               points_by_name))
    return costs


def _guest_argument(text: str) -> tuple[str, Path]:
    name, _, path = text.rpartition("=")
    guest = Path(path)
    if not guest.is_file():
        raise argparse.ArgumentTypeError(f"{guest}: no such file")
    return name or guest.stem, guest


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=Workload().nodes)
    parser.add_argument("--pods", type=int, default=Workload().pods)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--guest", action="append", type=_guest_argument, metavar="NAME=GUEST.wasm",
                        help="a guest enabled as NodeNumber is (repeat it; default: the project's example)")
    parser.add_argument("--log-level", choices=LEVELS, default=DEFAULT_LEVEL,
                        help=f"least severe line written (default: {DEFAULT_LEVEL}, as the CLI's)")
    parser.add_argument("--log-format", choices=FORMATS, default=DEFAULT_FORMAT,
                        help=f"as the CLI's (default: {DEFAULT_FORMAT})")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.pods < 1 or args.rounds < 1:
        parser.error("--nodes, --pods and --rounds must be at least 1")
    guests = dict(args.guest or [("nodenumber-wat", guest_path())])
    if BASELINE in guests:
        parser.error(f"{BASELINE!r} names the run without a guest: give the guest another name")
    configure_logging(args.log_level, args.log_format)
    workload = Workload(nodes=args.nodes, init_pods=args.nodes, pods=args.pods)
    # Progress goes to a terminal only: stderr may be the log stream (`--log-format json`).
    progress = ((lambda line: print(line, file=sys.stderr, flush=True)) if sys.stderr.isatty()
                else (lambda _line: None))
    costs = measure(guests, workload, args.rounds, progress)
    if args.output == "json":
        print(json.dumps({"machine": machine_facts(), "workload": asdict(workload), "log_level": args.log_level,
                          "log_format": args.log_format,
                          "costs": [asdict(cost) for cost in costs]}, indent=2))
        return 0
    print(f"{workload.nodes} nodes, {workload.pods} pending pods, log level {args.log_level} ({args.log_format}); "
          f"best of {args.rounds} rounds; CPU ms per pod")
    print(f"{'guest':20} {'total':>7} {'plugin':>7} {'guest':>7} {'host fn':>7} {'hand-offs':>9}  top host functions")
    for cost in costs:
        top = ", ".join(f"{name} {ms:.3f} ({calls:g}/pod)"
                        for name, (ms, calls) in list(cost.host_functions.items())[:3])
        print(f"{cost.guest:20} {cost.total_ms:7.3f} {cost.plugin_ms:7.3f} {cost.guest_ms:7.3f} "
              f"{cost.host_functions_ms:7.3f} {cost.handoffs_ms:9.3f}  {top}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
