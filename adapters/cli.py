"""The ``wasm-scheduler`` command line.

This module owns parsing arguments (argparse, one subcommand per job, so more can be
added beside ``simulate``), setting up logging (`adapters.logs`, to stderr), running
the command, and turning a user's mistake (`UserError`: a missing file, bad YAML, an
unknown plugin, a guest that does not load) into one ``error: ...`` line on stderr and
exit code 2. Results go to stdout: a table (with a progress bar for long runs) or
exactly one JSON document.

    wasm-scheduler simulate [--config SCHED.yaml] [--cluster CLUSTER.yaml]
                            [--output table|json] [--explain POD] [--cpus auto|all|LIST]
    wasm-scheduler trace LOGFILE [--pod NAME]
    wasm-scheduler extender --config SCHED.yaml [--listen 127.0.0.1:8888] [--cluster SNAPSHOT.yaml]
    wasm-scheduler bench [--nodes 500] [--init-pods 500] [--pods 1000] [--rounds 3] [--output table|json]

``--cpus`` (simulate, extender, bench) places the command's threads: `adapters.cpu_affinity`
(default ``auto`` for the two that run and end, ``all`` for the long-running extender).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from adapters.cpu_affinity import ALL, AUTO, apply_cpus
from adapters.framework.errors import UserError
from adapters.framework.simulation import DEFAULT_CLUSTER, DEFAULT_CONFIG, examples_dir, load_inputs, simulate
from adapters.logs import FORMATS, LEVELS, configure_logging
from adapters.report import ProgressBar, json_document, render_explain, render_table, write_json
from adapters.trace import read_trace, render

EXIT_USER_ERROR = 2


def _logging_options(parser: argparse.ArgumentParser, top: bool) -> None:
    # Given before or after the subcommand; the subcommand's copy must not reset the other.
    default = "warning" if top else argparse.SUPPRESS
    parser.add_argument("--log-level", choices=LEVELS, default=default,
                        help="least severe log line written to stderr (default: warning)")
    parser.add_argument("--log-format", choices=FORMATS, default="console" if top else argparse.SUPPRESS,
                        help="console for people, json for one JSON object a line (default: console)")


def _cpus_option(parser: argparse.ArgumentParser, default: str = AUTO) -> None:
    parser.add_argument("--cpus", default=default, metavar="auto|all|LIST",
                        help="CPUs the command's threads run on: auto keeps them on one CPU, where hand-offs "
                             "between threads are cheapest; all leaves it to the system; or a list such as 0 or "
                             f"0-3 (default: {default}; see docs/performance.md)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wasm-scheduler",
        description="Run kube-scheduler plugins compiled to WebAssembly, in Python.")
    _logging_options(parser, top=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sim = commands.add_parser(
        "simulate", help="schedule the pending pods of a cluster snapshot",
        description="Schedule the pending pods of a cluster snapshot with a KubeSchedulerConfiguration whose "
                    "plugins may be wasm guests. Without options it runs the example in "
                    f"{examples_dir()}: {DEFAULT_CONFIG} on {DEFAULT_CLUSTER}.")
    sim.add_argument("--config", type=Path, metavar="SCHED.yaml",
                     help=f"KubeSchedulerConfiguration (default: the example {DEFAULT_CONFIG})")
    sim.add_argument("--cluster", type=Path, metavar="CLUSTER.yaml",
                     help="what `kubectl get nodes,pods -A -o yaml` prints, or Node and Pod documents; pods "
                          f"without spec.nodeName are scheduled (default: the example {DEFAULT_CLUSTER})")
    sim.add_argument("--output", choices=("table", "json"), default="table", help="default: table")
    sim.add_argument("--explain", metavar="POD",
                     help="show, for this pending pod (namespace/name, or name), each node's result per filter "
                          "plugin and score per score plugin")
    _cpus_option(sim)
    sim.add_argument("--seed", type=int, default=0, help="seed of the tie-break between equal scores (default: 0)")
    _logging_options(sim, top=False)
    sim.set_defaults(run=run_simulate)

    trace = commands.add_parser(
        "trace", help="rebuild each pod's cycle from a JSON log (--log-format json)",
        description="Read a log written with --log-format json (best with --log-level debug) and show, per pod, "
                    "which instance of which wasm plugin served which extension points.")
    trace.add_argument("log", type=Path, metavar="LOGFILE", help="the JSON log ('-' for stdin)")
    trace.add_argument("--pod", default="", help="only pods whose namespace/name contains this")
    _logging_options(trace, top=False)
    trace.set_defaults(run=run_trace)

    ext = commands.add_parser(
        "extender", help="serve the wasm plugins to a real kube-scheduler (HTTP extender API)",
        description="Serve the wasm plugins of a KubeSchedulerConfiguration at /filter, /prioritize, /bind and "
                    "/preempt, for kube-scheduler's `extenders:` (see examples/extender-scheduler-config.yaml). "
                    "Runs until SIGINT or SIGTERM.")
    ext.add_argument("--config", type=Path, required=True, metavar="SCHED.yaml",
                     help="KubeSchedulerConfiguration whose pluginConfig names the wasm guests")
    ext.add_argument("--listen", default="127.0.0.1:8888", metavar="HOST:PORT", help="default: 127.0.0.1:8888")
    ext.add_argument("--cluster", type=Path, metavar="SNAPSHOT.yaml",
                     help="nodes (and pods) for node-cache-capable mode; reloaded when the file changes")
    ext.add_argument("--bind-timeout", type=float, default=30.0, metavar="SECONDS",
                     help="reclaim a pod's instance when its bind has not come after prioritize (default: 30)")
    ext.add_argument("--no-bind", action="store_true",
                     help="kube-scheduler binds (no bindVerb): instances stay in the scheduling slot")
    ext.add_argument("--kubeconfig", default="", help="credentials to create Bindings (default: in-cluster)")
    ext.add_argument("--api-server", default="", metavar="URL", help="API server URL to create Bindings at")
    # A server runs for long: the system may spread it (and its neighbours) as load moves;
    # `--cpus auto` or a list pins it where the operator decides.
    _cpus_option(ext, default=ALL)
    _logging_options(ext, top=False)
    ext.set_defaults(run=run_extender)

    bench = commands.add_parser(
        "bench", help="measure default plugins, native, wasm and extender NodeNumber side by side",
        description="Schedule a scheduler_perf-like workload (500Nodes) with the default plugins, NodeNumber as a "
                    "native plugin, as a wasm plugin and behind the HTTP extender, alternating; report throughput, "
                    "extension point latencies, micro-figures and the performance targets (docs/performance.md).")
    bench.add_argument("--nodes", type=int, default=500, help="nodes (default: 500)")
    bench.add_argument("--init-pods", type=int, default=500, help="pods already bound to the nodes (default: 500)")
    bench.add_argument("--pods", type=int, default=1000, help="measured pods to schedule (default: 1000)")
    bench.add_argument("--rounds", type=int, default=3, help="rounds of every variant; the best counts (default: 3)")
    bench.add_argument("--output", choices=("table", "json"), default="table", help="default: table")
    bench.add_argument("--public-api", action="store_true",
                       help="call guests through wasmtime-py's public API instead of the fast path (a comparison)")
    _cpus_option(bench)
    _logging_options(bench, top=False)
    bench.set_defaults(run=run_bench)
    return parser


def run_simulate(args: argparse.Namespace) -> int:
    config, cluster = load_inputs(args.config, args.cluster)
    explain_key = None
    if args.explain:
        pod = cluster.find_pending(args.explain)
        if pod is None:
            raise UserError(f"{cluster.source}: --explain {args.explain}: no pending pod of that name "
                            "(give namespace/name; pods with spec.nodeName are running, not scheduled)")
        explain_key = pod.key
    console = Console(file=sys.stdout, highlight=False)
    table = args.output == "table"
    with ProgressBar(console) as progress:
        report = simulate(config, cluster, explain=[explain_key] if explain_key else (),
                          progress=progress if table else None, seed=args.seed)
    explained = report.outcome(explain_key) if explain_key else None
    if table:
        render_table(report, console)
        if explained is not None:
            render_explain(explained, console)
    else:
        write_json(json_document(report, explained), sys.stdout)
    return 0


def run_trace(args: argparse.Namespace) -> int:
    if str(args.log) == "-":
        lines = sys.stdin.read().splitlines()
    else:
        try:
            lines = args.log.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise UserError(f"{args.log}: cannot read the log: {exc.strerror or exc}") from None
    trace = read_trace(lines)
    for line in render(trace, args.pod):
        print(line)
    problems = {uid: found for uid, found in trace.problems.items()
                if not args.pod or args.pod in (uid, trace.pods[uid].pod)}
    if trace.skipped_lines:
        print(f"({trace.skipped_lines} line(s) were not JSON and were skipped)", file=sys.stderr)
    if problems:
        print(f"{len(problems)} pod(s) had a cycle served by more than one instance", file=sys.stderr)
        return 1
    return 0


def run_extender(args: argparse.Namespace) -> int:
    from adapters.extender.command import ExtenderOptions, serve

    if args.bind_timeout <= 0:
        raise UserError(f"--bind-timeout {args.bind_timeout}: must be positive")
    return serve(ExtenderOptions(args.config, args.listen, args.cluster, args.bind_timeout, not args.no_bind,
                                 args.kubeconfig, args.api_server))


def run_bench(args: argparse.Namespace) -> int:
    from adapters.benchmarks.throughput import render_table as render_bench
    from adapters.benchmarks.throughput import run_bench as bench
    from adapters.benchmarks.workload import Workload

    if args.nodes < 1 or args.init_pods < 0 or args.pods < 1 or args.rounds < 1:
        raise UserError("bench: --nodes, --pods and --rounds must be positive, --init-pods not negative")
    status = Console(file=sys.stderr, highlight=False)
    document = bench(Workload(args.nodes, args.init_pods, args.pods), args.rounds,
                     progress=lambda done, total, what: status.print(f"bench [{done}/{total}] {what}"),
                     fast_calls=not args.public_api, cpus=getattr(args, "cpus_used", "all"))
    if args.output == "json":
        write_json(document, sys.stdout)
    else:
        render_bench(document, Console(file=sys.stdout, highlight=False, width=None if sys.stdout.isatty() else 120))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage error (or --help)
        return int(exc.code or 0)
    configure_logging(args.log_level, args.log_format)
    previous = _terminate_on_sigterm()
    pinning = None
    try:
        if hasattr(args, "cpus"):
            pinning = apply_cpus(args.cpus)
            args.cpus_used = pinning.describe()
        code: int = args.run(args)
        return code
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if pinning is not None:
            pinning.restore()  # the caller's threads (a test, an embedding program) run where they did
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _terminate_on_sigterm() -> Any:
    """SIGTERM interrupts like SIGINT, so a command stops every actor and thread on the way
    out (the `with` blocks and `finally` clauses run) instead of dying mid-cycle."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)


if __name__ == "__main__":
    sys.exit(main())
