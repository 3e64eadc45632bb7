"""The ``wasm-scheduler`` command line.

This module owns parsing arguments (argparse, one subcommand per job: ``simulate``,
``trace``, ``extender``, ``bench``), setting up logging (`adapters.logs`, to stderr),
running the command, and turning a user's mistake (`UserError`: a missing file, bad
YAML, an unknown plugin, a guest that does not load) into one ``error: ...`` line on
stderr and exit code 2. Whatever way a command ends, the actors and threads it started
are stopped; a reader of stdout or stderr that goes away ends it quietly with status
141 (the ``EXIT_*`` constants list every status). Results go to stdout: a table (with a
progress bar for long runs) or exactly one JSON document. Option defaults come from the
constants the code uses. README.md ("Commands") lists every command and option.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pykka
from rich.console import Console
from rich.status import Status

from wasm_scheduler.adapters.benchmarks.workload import DEFAULT_ROUNDS, Workload
from wasm_scheduler.adapters.cpu_affinity import ALL, AUTO, apply_cpus
from wasm_scheduler.adapters.extender.defaults import (
    DEFAULT_BIND_TIMEOUT_S,
    DEFAULT_DRAIN_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_LISTEN,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_READ_TIMEOUT_S,
    DEFAULT_SYNC_TIMEOUT_S,
    DEFAULT_WORKERS,
)
from wasm_scheduler.adapters.extender.probes import DEFAULT_READY_MAX_VIEW_AGE_S
from wasm_scheduler.adapters.extender.snapshot_reload import DEFAULT_POLL_S
from wasm_scheduler.adapters.framework.cluster import LoadStep
from wasm_scheduler.adapters.framework.errors import UserError
from wasm_scheduler.adapters.framework.results import PodStatus
from wasm_scheduler.adapters.framework.scheduler import DEFAULT_SEED
from wasm_scheduler.adapters.framework.simulation import (
    DEFAULT_CLUSTER,
    DEFAULT_CONFIG,
    examples_dir,
    find_explained,
    load_inputs,
    simulate,
)
from wasm_scheduler.adapters.logs import DEFAULT_FORMAT, DEFAULT_LEVEL, FORMATS, LEVELS, LogSink, configure_logging
from wasm_scheduler.adapters.report import (
    ProgressBar,
    counted,
    json_document,
    render_explain,
    render_table,
    write_json,
)
from wasm_scheduler.adapters.trace import matching_pods, read_trace, render
from wasm_scheduler.registry.compiler import GuestCompiler, default_cache_dir

EXIT_OK = 0
#: The output (stdout) cannot be written: a full disk, say (one line says so); also any unexpected failure.
EXIT_OUTPUT_ERROR = 1
EXIT_USER_ERROR = 2
#: simulate: at least one pod's cycle ended in Error (a guest trapped, a plugin failed).
EXIT_POD_ERRORS = 3
EXIT_INTERRUPTED = 130
#: 128 + SIGPIPE: the reader of stdout or stderr went away (``... | head``).
EXIT_BROKEN_PIPE = 141
#: Seconds to wait for the actors and threads a failed command left behind to stop.
STOP_TIMEOUT_S = 10.0

EXIT_STATUSES = (f"Exit status: {EXIT_OK} when the command did its job (for simulate: every pending pod was "
                 f"scheduled or found unschedulable); {EXIT_USER_ERROR} for a mistake in the command line or its "
                 f"files, with one line saying which; {EXIT_POD_ERRORS} (simulate) when any pod's cycle ended in "
                 f"Error; {EXIT_INTERRUPTED} when interrupted (SIGINT, SIGTERM); {EXIT_BROKEN_PIPE} when the "
                 f"reader of the output or the log went away; {EXIT_OUTPUT_ERROR} when the output cannot be "
                 "written (a full disk, say) or for anything else.")


def _logging_options(parser: argparse.ArgumentParser, top: bool) -> None:
    # Given before or after the subcommand; the subcommand's copy must not reset the other.
    parser.add_argument("--log-level", choices=LEVELS, default=DEFAULT_LEVEL if top else argparse.SUPPRESS,
                        help=f"least severe log line written to stderr (default: {DEFAULT_LEVEL})")
    parser.add_argument("--log-format", choices=FORMATS, default=DEFAULT_FORMAT if top else argparse.SUPPRESS,
                        help=f"console for people, json for one JSON object a line (default: {DEFAULT_FORMAT})")


def _cpus_option(parser: argparse.ArgumentParser, default: str = AUTO) -> None:
    parser.add_argument("--cpus", default=default, metavar="auto|all|LIST",
                        help="CPUs the command's threads run on: auto keeps them on one CPU, where hand-offs "
                             "between threads are cheapest; all leaves it to the system; or a list such as 0 or "
                             f"0-3 (default: {default}; the performance guide of the documentation says why)")


def _cache_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--cache-dir", type=Path, metavar="DIR",
                       help=f"folder of compiled guests kept between runs (default: {default_cache_dir()})")
    group.add_argument("--no-cache", action="store_true",
                       help="compile every guest on every run and write no compiled guest to disk")


def cache_dir_of(args: argparse.Namespace) -> Path | None:
    """The compiled-guest cache folder the command line asks for; None for --no-cache."""
    if args.no_cache:
        return None
    return args.cache_dir if args.cache_dir is not None else default_cache_dir()


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help, but a path or an option is never broken at a hyphen (one too long for
    the line stands alone on it, whole, so it can be copied)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False, break_long_words=False)


class _HelpParser(argparse.ArgumentParser):
    """A subcommand's parser, with the same help layout as the command's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wasm-scheduler", formatter_class=_HelpFormatter,
        description="Run kube-scheduler plugins compiled to WebAssembly, in Python.", epilog=EXIT_STATUSES)
    _logging_options(parser, top=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                     parser_class=_HelpParser)
    sim = commands.add_parser(
        "simulate", help="schedule the pending pods of a cluster snapshot",
        description="Schedule the pending pods of a cluster snapshot with a KubeSchedulerConfiguration whose "
                    "plugins may be wasm guests. Without options it runs the example in "
                    f"{examples_dir()}: {DEFAULT_CONFIG} on {DEFAULT_CLUSTER}.",
        epilog=f"Exit status: {EXIT_OK} when every pending pod was scheduled or found unschedulable (an "
               f"unschedulable pod is a normal outcome); {EXIT_POD_ERRORS} when any pod's cycle ended in Error; "
               f"{EXIT_USER_ERROR} for a mistake in the command line or its files; {EXIT_BROKEN_PIPE} when the "
               "reader of the output or the log went away.")
    sim.add_argument("--config", type=Path, metavar="SCHED.yaml",
                     help=f"KubeSchedulerConfiguration (default: the example {DEFAULT_CONFIG})")
    sim.add_argument("--cluster", type=Path, metavar="CLUSTER.yaml",
                     help="what `kubectl get nodes,pods -A -o yaml` prints, or Node and Pod documents; pods "
                          f"without spec.nodeName are scheduled (default: the example {DEFAULT_CLUSTER})")
    sim.add_argument("--output", choices=("table", "json"), default="table", help="default: table")
    sim.add_argument("--explain", metavar="POD",
                     help="show only why this pending pod (namespace/name, or a name one namespace has) is where "
                          "it is or pending: the rejected nodes by plugin and reason, the best nodes' scores per "
                          "plugin, what the simulation does not check (with --output json: the whole document "
                          "plus an explain key)")
    _cpus_option(sim)
    _cache_options(sim)
    sim.add_argument("--seed", type=int, default=DEFAULT_SEED,
                     help=f"seed of the tie-break between equal scores (default: {DEFAULT_SEED})")
    _logging_options(sim, top=False)
    sim.set_defaults(run=run_simulate)

    trace = commands.add_parser(
        "trace", help="rebuild each pod's cycle from a JSON log (--log-format json)",
        description="Read a log written with --log-format json (best with --log-level debug) and show, per pod, "
                    "which instance of which wasm plugin served which extension points.",
        epilog=f"Exit status: {EXIT_OK} when every cycle was served by one instance; 1 when a cycle was served by "
               f"more than one; {EXIT_USER_ERROR} when LOGFILE cannot be read, has no JSON log lines or no pod "
               "named by --pod.")
    trace.add_argument("log", type=Path, metavar="LOGFILE", help="the JSON log ('-' for stdin)")
    trace.add_argument("--pod", default="", metavar="POD",
                       help="only this pod: namespace/name, name or uid")
    _logging_options(trace, top=False)
    trace.set_defaults(run=run_trace)

    ext = commands.add_parser(
        "extender", help="serve the wasm plugins to a real kube-scheduler (HTTP extender API)",
        description="Serve the wasm plugins each profile of a KubeSchedulerConfiguration enables, to that "
                    "profile's pods, at /filter, /prioritize, /bind and /preempt (or the paths --filter-verb ... "
                    "name: kube-scheduler's filterVerb ...), for kube-scheduler's `extenders:` (see "
                    f"{examples_dir() / 'extender-scheduler-config.yaml'}). Runs until SIGINT or SIGTERM.")
    ext.add_argument("--config", type=Path, required=True, metavar="SCHED.yaml",
                     help="KubeSchedulerConfiguration whose pluginConfig names the wasm guests")
    ext.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT", help=f"default: {DEFAULT_LISTEN}")
    ext.add_argument("--cluster", type=Path, metavar="SNAPSHOT.yaml",
                     help="nodes (and pods) for node-cache-capable mode from this file, reloaded when it changes; "
                          "without it they are listed and watched from the API server when credentials are found")
    ext.add_argument("--no-watch", action="store_true",
                     help="without --cluster, do not watch nodes and pods (node-cache-capable requests then find "
                          "no node)")
    ext.add_argument("--sync-timeout", type=float, default=DEFAULT_SYNC_TIMEOUT_S, metavar="SECONDS",
                     help="at start, wait this long for the first list of the watched nodes and pods, then serve "
                          f"anyway with a warning (default: {DEFAULT_SYNC_TIMEOUT_S:g}; 0: do not wait)")
    ext.add_argument("--bind-timeout", type=float, default=DEFAULT_BIND_TIMEOUT_S, metavar="SECONDS",
                     help="reclaim a pod's instance when its bind has not come after filter or prioritize "
                          f"(default: {DEFAULT_BIND_TIMEOUT_S:g})")
    ext.add_argument("--snapshot-poll", type=float, default=DEFAULT_POLL_S, metavar="SECONDS",
                     help=f"how often the --cluster snapshot file is checked for changes (default: {DEFAULT_POLL_S:g})")
    ext.add_argument("--no-bind", action="store_true",
                     help="kube-scheduler binds (no bindVerb): instances stay in the scheduling slot")
    ext.add_argument("--kubeconfig", default="",
                     help="credentials to create Bindings and watch nodes and pods (default: in-cluster, "
                          "$KUBECONFIG, ~/.kube/config)")
    ext.add_argument("--api-server", default="", metavar="URL",
                     help="API server URL to create Bindings at and watch nodes and pods from")
    ext.add_argument("--read-timeout", type=float, default=DEFAULT_READ_TIMEOUT_S, metavar="SECONDS",
                     help="drop a connection whose request has not fully arrived this long after its connect, or "
                          f"after its first byte on a kept-alive connection (default: {DEFAULT_READ_TIMEOUT_S:g})")
    ext.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT_S, metavar="SECONDS",
                     help="close a kept-alive connection idle this long between requests; keep it above the client's "
                          f"own (90 for kube-scheduler's Go client) (default: {DEFAULT_IDLE_TIMEOUT_S:g})")
    for verb in ("filter", "prioritize", "bind", "preempt"):
        ext.add_argument(f"--{verb}-verb", default=verb, metavar="PATH",
                         help=f"the path of {verb} under the urlPrefix: kube-scheduler's {verb}Verb (default: {verb})")
    ext.add_argument("--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS, metavar="N",
                     help="connections served at once; more get 503 and are closed "
                          f"(default: {DEFAULT_MAX_CONNECTIONS})")
    ext.add_argument("--workers", type=int, default=DEFAULT_WORKERS, metavar="N",
                     help="threads that run the verbs at once (binds of many pods run in parallel); more requests "
                          f"wait for one (default: {DEFAULT_WORKERS})")
    ext.add_argument("--drain-seconds", type=float, default=DEFAULT_DRAIN_S, metavar="SECONDS",
                     help="on SIGTERM/SIGINT, how long requests in flight may take to finish "
                          f"(default: {DEFAULT_DRAIN_S:g})")
    ext.add_argument("--tls-cert", type=Path, metavar="FILE", help="serve HTTPS with this PEM certificate (chain)")
    ext.add_argument("--tls-key", type=Path, metavar="FILE", help="the PEM private key of --tls-cert")
    ext.add_argument("--client-ca", type=Path, metavar="FILE",
                     help="require client certificates signed by these PEM CA certificates (mutual TLS)")
    ext.add_argument("--token-file", type=Path, metavar="FILE",
                     help="require 'Authorization: Bearer <token>' on every verb; the token is this file's content. "
                          "kube-scheduler cannot send one: this is for clients in front of the extender (a proxy "
                          "that adds it); the reliability guide of the documentation says more")
    ext.add_argument("--no-metrics", action="store_true",
                     help="serve no /metrics and time nothing for it (its cost is in `wasm-scheduler bench`)")
    ext.add_argument("--ready-max-view-age", type=float, default=DEFAULT_READY_MAX_VIEW_AGE_S, metavar="SECONDS",
                     help="/readyz answers 503 once the watch of nodes and pods has failed this long with no answer "
                          f"from the API server (default: {DEFAULT_READY_MAX_VIEW_AGE_S:g})")
    # A server runs for long: the system may spread it (and its neighbours) as load moves;
    # `--cpus auto` or a list pins it where the operator decides.
    _cpus_option(ext, default=ALL)
    _cache_options(ext)
    _logging_options(ext, top=False)
    ext.set_defaults(run=run_extender)

    bench = commands.add_parser(
        "bench", help="measure default plugins, native, wasm and extender NodeNumber side by side",
        description="Schedule a scheduler_perf-like workload (500Nodes) with the default plugins, NodeNumber as a "
                    "native plugin, as a wasm plugin and behind the HTTP extender, alternating; report throughput, "
                    "extension point latencies, micro-figures and the performance targets (the performance "
                    "guide of the documentation explains each figure).")
    workload = Workload()
    bench.add_argument("--nodes", type=int, default=workload.nodes, help=f"nodes (default: {workload.nodes})")
    bench.add_argument("--init-pods", type=int, default=workload.init_pods,
                       help=f"pods already bound to the nodes (default: {workload.init_pods})")
    bench.add_argument("--pods", type=int, default=workload.pods,
                       help=f"measured pods to schedule (default: {workload.pods})")
    bench.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                       help=f"rounds of every variant; the best counts (default: {DEFAULT_ROUNDS})")
    bench.add_argument("--output", choices=("table", "json"), default="table", help="default: table")
    bench.add_argument("--compare-metrics", action="store_true",
                       help="also run both extender variants behind an extender started with --no-metrics: the "
                            "metrics' cost, row beside row")
    bench.add_argument("--public-api", action="store_true",
                       help="call guests through wasmtime-py's public API instead of the fast path (a comparison)")
    _cpus_option(bench)
    _cache_options(bench)
    _logging_options(bench, top=False)
    bench.set_defaults(run=run_bench)
    return parser


def human_size(size_bytes: int) -> str:
    """A file size for people: 812 B, 4.1 kB, 12.3 MB."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.1f} {unit}"
    return f"{size_bytes} B"


class ClusterLoadStatus:
    """What a person at a terminal sees while a cluster file loads: a spinner naming the file and
    its size, then one summary line (unless the log, at info or debug, already shows it as
    ``cluster.loaded``). When stderr is not a terminal it shows nothing."""

    def __init__(self, console: Console, enabled: bool, summary: bool = True) -> None:
        self.console = console
        self.enabled = enabled
        self.summary = summary
        self._status: Status | None = None

    def __call__(self, step: LoadStep) -> None:
        if not self.enabled:
            return
        if not step.done:
            self.stop()
            self._status = self.console.status(f"loading {step.path.name} ({human_size(step.size_bytes)})…")
            self._status.start()
            return
        self.stop()
        if self.summary:
            self.console.print(f"loaded {step.nodes} nodes, {step.pods} pods in {step.seconds:.1f} s",
                               style="dim", highlight=False)

    def stop(self) -> None:
        """Remove the spinner (a failed load leaves no spinner behind)."""
        if self._status is not None:
            self._status.stop()
            self._status = None


def run_simulate(args: argparse.Namespace) -> int:
    # Until the inputs are checked and the plugins started (the first pod is scheduled), log
    # lines wait: a mistake found meanwhile is then one line, with no warning before it.
    sink: LogSink = args.log_sink
    sink.hold()
    loading = ClusterLoadStatus(CommandConsole(file=sys.stderr, highlight=False), enabled=sys.stderr.isatty(),
                                summary=LEVELS.index(args.log_level) > LEVELS.index("info"))
    try:
        config, cluster = load_inputs(args.config, args.cluster, progress=loading)
    finally:
        loading.stop()
    explain_key = find_explained(cluster, args.explain).key if args.explain else None
    console = CommandConsole(file=sys.stdout, highlight=False)
    table = args.output == "table"
    with GuestCompiler(cache_dir=cache_dir_of(args)) as compiler, ProgressBar(console) as bar:
        def progress(done: int, total: int) -> None:
            sink.release()
            if table:
                bar(done, total)

        report = simulate(config, cluster, explain=[explain_key] if explain_key else (),
                          progress=progress, seed=args.seed, compiler=compiler, metrics=not table)
    sink.release()
    explained = report.outcome(explain_key) if explain_key else None
    with writing_output():
        if table and explained is not None:
            render_explain(explained, console)  # the explanation alone: the pod's row is its first line
        elif table:
            render_table(report, console)
        else:
            write_json(json_document(report, explained), sys.stdout)
    return EXIT_POD_ERRORS if report.count(PodStatus.ERROR) else EXIT_OK


#: Pods named when --pod matches none of them.
_PODS_SHOWN = 10


def run_trace(args: argparse.Namespace) -> int:
    source = "stdin" if str(args.log) == "-" else str(args.log)
    if str(args.log) == "-":
        lines = sys.stdin.read().splitlines()
    else:
        try:
            lines = args.log.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise UserError(f"{args.log}: cannot read the log: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise UserError(f"{args.log}: cannot read the log: not UTF-8 text ({exc.reason} at byte {exc.start})") \
                from None
    trace = read_trace(lines)
    if trace.json_lines == 0:
        raise UserError(f"{source} has no JSON log lines: run with --log-format json")
    if not trace.pods:
        raise UserError(f"{source} has no pod's cycle in it: run with --log-format json and --log-level info "
                        "(or debug, to see every call)")
    selected = matching_pods(trace, args.pod)
    if not selected:
        seen = [pod.pod for pod in trace.pods.values()]
        more = f" (first {_PODS_SHOWN} of {len(seen)})" if len(seen) > _PODS_SHOWN else ""
        raise UserError(f"no pod named {args.pod} in {source}; pods seen: {', '.join(seen[:_PODS_SHOWN])}{more}")
    with writing_output():
        for line in render(trace, args.pod):
            print(line)
    problems = {uid: found for uid, found in trace.problems.items() if uid in selected}
    if trace.skipped_lines:
        lines_were = "line was" if trace.skipped_lines == 1 else "lines were"
        print(f"({trace.skipped_lines} {lines_were} not JSON and skipped)", file=sys.stderr)
    if problems:
        print(f"{counted(len(problems), 'pod')} had a cycle served by more than one instance", file=sys.stderr)
        return 1
    return 0


def run_extender(args: argparse.Namespace) -> int:
    from wasm_scheduler.adapters.extender.command import ExtenderOptions, serve
    from wasm_scheduler.adapters.extender.server import Verbs

    # Every time option is checked (finite, in range) by ExtenderOptions.limits().
    verbs = Verbs(args.filter_verb, args.prioritize_verb, args.bind_verb, args.preempt_verb)
    return serve(ExtenderOptions(args.config, args.listen, args.cluster, args.bind_timeout, not args.no_bind,
                                 args.kubeconfig, args.api_server, read_timeout_s=args.read_timeout,
                                 max_connections=args.max_connections, workers=args.workers,
                                 drain_s=args.drain_seconds,
                                 snapshot_poll_s=args.snapshot_poll, watch=not args.no_watch,
                                 sync_timeout_s=args.sync_timeout,
                                 tls_cert=args.tls_cert, tls_key=args.tls_key, client_ca=args.client_ca,
                                 token_file=args.token_file, cache_dir=cache_dir_of(args),
                                 idle_timeout_s=args.idle_timeout, verbs=verbs, metrics=not args.no_metrics,
                                 ready_max_view_age_s=args.ready_max_view_age))


def run_bench(args: argparse.Namespace) -> int:
    from wasm_scheduler.adapters.benchmarks.throughput import render_table as render_bench
    from wasm_scheduler.adapters.benchmarks.throughput import run_bench as bench

    if args.nodes < 1 or args.init_pods < 0 or args.pods < 1 or args.rounds < 1:
        raise UserError("bench: --nodes, --pods and --rounds must be positive, --init-pods not negative")
    status = CommandConsole(file=sys.stderr, highlight=False)
    with GuestCompiler(cache_dir=cache_dir_of(args), fast_calls=not args.public_api) as compiler:
        document = bench(Workload(args.nodes, args.init_pods, args.pods), args.rounds,
                         progress=lambda done, total, what: status.print(f"bench [{done}/{total}] {what}"),
                         compiler=compiler, fast_calls=not args.public_api, cpus=getattr(args, "cpus_used", "all"),
                         compare_metrics=args.compare_metrics)
    with writing_output():
        if args.output == "json":
            write_json(document, sys.stdout)
        else:
            render_bench(document, CommandConsole(file=sys.stdout, highlight=False,
                                                 width=None if sys.stdout.isatty() else 120))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage error (or --help)
        return int(exc.code or 0)
    command = _Command.start()
    sink = configure_logging(args.log_level, args.log_format, on_broken_pipe=command.interrupt)
    args.log_sink = sink
    previous = _terminate_on_sigterm()
    pinning = None
    try:
        if hasattr(args, "cpus"):
            pinning = apply_cpus(args.cpus)
            args.cpus_used = pinning.describe()
        code: int = args.run(args)
        return code
    except UserError as exc:
        sink.release(drop_from=logging.WARNING)  # the mistake is the one line that matters
        _say(f"error: {exc}")
        return EXIT_USER_ERROR
    except OutputError as exc:
        return _output_failed(str(exc))
    except BrokenPipeError:  # stdout's reader went away (stderr's never raises: see LogSink)
        return _quiet_exit_on_broken_pipe(sink)
    except KeyboardInterrupt:
        if sink.broken:  # the log sink interrupted us: stderr's reader went away
            return _quiet_exit_on_broken_pipe(sink)
        _say("interrupted")
        return EXIT_INTERRUPTED
    finally:
        sink.release()
        # Whatever happened (a bug included), nothing the command started outlives it.
        command.finish()
        if pinning is not None:
            pinning.restore()  # the caller's threads (a test, an embedding program) run where they did
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


class OutputError(Exception):
    """stdout could not be written (not its reader going away: that is BrokenPipeError)."""


class CommandConsole(Console):
    """rich's Console for what a command writes (its output, a status line on stderr). When
    the reader goes away rich's own exits with status 1 (SystemExit); this one raises
    BrokenPipeError, which `main` turns into the quiet exit status 141 like every other write."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


@contextmanager
def writing_output() -> Iterator[None]:
    """Write the command's output (flushed at the end): a failed write other than a broken
    pipe (a full disk) is an `OutputError` naming the problem, not a traceback."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(exc.strerror or str(exc)) from None


@dataclass
class _Command:
    """One run of a command: the actors and threads alive before it, so those it started can be
    stopped after it, and whether it still runs (only then may a broken log pipe interrupt it)."""

    actors: frozenset[str]
    threads: frozenset[threading.Thread]
    #: Whether the command runs on the main thread (as a program does), the only one a signal interrupts.
    on_main_thread: bool
    running: bool = True

    @classmethod
    def start(cls) -> _Command:
        return cls(frozenset(ref.actor_urn for ref in pykka.ActorRegistry.get_all()), frozenset(threading.enumerate()),
                   threading.current_thread() is threading.main_thread())

    def interrupt(self) -> None:
        """Stop the command promptly: a KeyboardInterrupt in the main thread, even one blocked waiting."""
        main_thread = threading.main_thread()
        if not self.running or not self.on_main_thread or main_thread.ident is None:
            return
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.pthread_kill(main_thread.ident, signal.SIGINT)  # wakes a blocked wait, unlike interrupt_main
        else:
            import _thread

            _thread.interrupt_main()

    def finish(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop every actor started since, and wait (bounded) for the non-daemon threads started since.

        After a clean run there are none: this matters when a command failed half-way.
        """
        self.running = False
        deadline = time.monotonic() + timeout
        stopping = []
        for ref in pykka.ActorRegistry.get_all():
            if ref.actor_urn not in self.actors:
                try:
                    stopping.append(ref.stop(block=False))
                except pykka.ActorDeadError:
                    continue
        for future in stopping:
            try:
                future.get(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:  # an actor that will not stop in time, or died on the way: go on with the rest
                continue
        for thread in threading.enumerate():
            if thread not in self.threads and not thread.daemon and thread is not threading.current_thread():
                thread.join(timeout=max(0.0, deadline - time.monotonic()))


def _output_failed(problem: str) -> int:
    _say(f"error: cannot write the output to stdout: {problem}")
    _point_at_devnull(sys.stdout)  # what it still holds must not fail again at exit
    return EXIT_OUTPUT_ERROR


def _say(line: str) -> None:
    """One line on stderr; if its reader is gone, nothing (and nothing left to fail at exit)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except BrokenPipeError:
        _point_at_devnull(sys.stderr)


def _quiet_exit_on_broken_pipe(sink: LogSink) -> int:
    """Exit as CPython's tools do when their reader goes away: no message, no traceback.

    A stream whose reader is gone still holds what it could not write; it is pointed at
    /dev/null so the interpreter's last flush does not fail a second time.
    """
    for stream, broken in ((sys.stdout, False), (sys.stderr, sink.broken)):
        try:
            stream.flush()
        except BrokenPipeError:
            broken = True
        except (OSError, ValueError):
            pass
        if broken:
            _point_at_devnull(stream)
    return EXIT_BROKEN_PIPE


def _point_at_devnull(stream: Any) -> None:
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture): nothing to flush at exit
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


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
