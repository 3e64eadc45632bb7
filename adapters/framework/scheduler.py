"""Scheduler: the scheduling loop over a snapshot, with binding cycles on a worker pool.

This module owns kube-scheduler's scheduleOne as a simulation runs it: pop the next
pod (QueueSort), take a snapshot view, run the scheduling cycle of the pod's profile
(PreFilter, Filter over as many nodes as ``percentageOfNodesToScore`` asks for,
starting where the last pod stopped, the nominated node first; PostFilter when no
node fits; PreScore, Score and a seeded tie-break otherwise), assume the pod on the
chosen node, Reserve and Permit, then hand the binding cycle (wait on Permit,
PreBind, Bind, PostBind) to a thread pool and go on with the next pod. Any failure
after Reserve runs Unreserve and forgets the assumed pod; that frees room, so pods
waiting for such an event go back to the queue. Preemption victims are evicted here
(a pending pod of this run that is evicted is recreated, as its controller would).
A pending pod a PreEnqueue plugin holds back (SchedulingGates) is reported as gated
and never tried. The result is one `PodOutcome` per pending pod.

See `docs/framework.md` ("What a scheduling attempt does").
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from wasm_scheduler.adapters.framework.cluster import Cluster
from wasm_scheduler.adapters.framework.config import SchedulerConfig
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.errors import UserError
from wasm_scheduler.adapters.framework.framework import Diagnosis, Framework, ScoreTable
from wasm_scheduler.adapters.framework.handle import SchedulerHandle
from wasm_scheduler.adapters.framework.plugins import PluginFactory
from wasm_scheduler.adapters.framework.pods import KubeObject, PodInfo, nominated_node_of, scheduler_name
from wasm_scheduler.adapters.framework.profile import build_framework
from wasm_scheduler.adapters.framework.queue import (
    ASSIGNED_POD_DELETE,
    PreEnqueuePlugin,
    QueuedPod,
    SchedulingQueue,
    event_matches,
)
from wasm_scheduler.adapters.framework.resources import QuantityError, pod_requests
from wasm_scheduler.adapters.framework.results import (
    REASON_SEPARATOR,
    CycleTrace,
    PodOutcome,
    PodStatus,
    Preemption,
    Shortfall,
    SimulationReport,
)
from wasm_scheduler.adapters.framework.snapshot import NodeInfo, SnapshotView
from wasm_scheduler.adapters.framework.waiting_pods import WaitingPod
from wasm_scheduler.framework_api import SUCCESS, ClusterEvent, Code, Cycle, Status
from wasm_scheduler.logger import get_logger
from wasm_scheduler.registry.compiler import GuestCompiler

log = get_logger("adapters.framework.scheduler")

MIN_FEASIBLE_NODES_TO_FIND = 100
#: Seed of the tie-break between nodes with the same score, unless one is given (--seed).
DEFAULT_SEED = 0
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """How many feasible nodes kube-scheduler looks for before it stops filtering."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if not percentage:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    found = num_all_nodes * percentage // 100
    return max(found, MIN_FEASIBLE_NODES_TO_FIND)


INSUFFICIENT = "Insufficient "


def trace_shortfalls(trace: CycleTrace, pod: KubeObject, statuses: Mapping[str, Status], view: SnapshotView) -> None:
    """For --explain: for each resource nodes were rejected as short of ("Insufficient cpu"),
    the pod's request and the most any of those nodes has free (allocatable less requested)."""
    try:
        request = pod_requests(pod).requested
    except QuantityError:
        return  # NodeResourcesFit's PreFilter said so already
    for name, status in statuses.items():
        if status.ok or not status.reason:
            continue
        node = view.get(name)
        if node is None:
            continue
        for reason in status.reason.split(REASON_SEPARATOR):
            if not reason.startswith(INSUFFICIENT):
                continue
            resource = reason[len(INSUFFICIENT):]
            free = max(node.allocatable.get(resource) - node.requested.get(resource), 0)
            found = trace.shortfalls.get(resource)
            if found is None:
                trace.shortfalls[resource] = Shortfall(request.get(resource), free, 1)
            else:
                found.max_free = max(found.max_free, free)
                found.nodes += 1


@dataclass(frozen=True)
class SchedulerOptions:
    #: Seed of the tie-break between nodes with the same score (kube-scheduler picks at random).
    seed: int = DEFAULT_SEED
    #: Threads running binding cycles (a pod waiting in Permit holds one).
    binding_workers: int = 16
    #: A pod that failed this many attempts is reported as it stands.
    max_attempts: int = 5
    #: Keys (namespace/name) of pods whose every attempt is traced for --explain.
    explain: frozenset[str] = frozenset()
    #: Called after each scheduling attempt with (pods attempted at least once, all pods).
    progress: Callable[[int, int], None] | None = None
    #: Chooses the node a pod is assumed on: (pod key, the scored nodes, their total
    #: scores) -> one of those nodes. None: the highest total, ties broken at random
    #: (seeded), as kube-scheduler does. A replay of a real scheduler's run gives its
    #: choices here, so each pod is judged on the cluster the real scheduler saw and one
    #: choice made otherwise does not change every later pod's (tests/e2e/test_fidelity_e2e.py).
    choose_host: Callable[[str, Sequence[str], Sequence[int]], str] | None = None


@dataclass
class _Binding:
    """What the binding cycle of one assumed pod needs."""

    item: QueuedPod
    framework: Framework[NodeInfo]
    state: CycleState
    assumed: PodInfo
    node: str
    waiting: WaitingPod | None
    trace: CycleTrace | None
    scores: dict[str, int] = field(default_factory=dict)


class Scheduler:
    """Schedules a cluster snapshot's pending pods with the configured profiles."""

    def __init__(self, config: SchedulerConfig, cluster: Cluster, compiler: GuestCompiler | None = None,
                 registry: Mapping[str, PluginFactory] | None = None,
                 options: SchedulerOptions | None = None) -> None:
        self.config = config
        self.cluster = cluster
        self.options = options or SchedulerOptions()
        self.snapshot = cluster.snapshot()
        self.handle = SchedulerHandle(self.snapshot, parallelism=config.parallelism, workloads=cluster.workloads)
        self.handle.set_evictor(self._evict)
        self.compiler = compiler or GuestCompiler()
        self.frameworks: dict[str, Framework[NodeInfo]] = {}
        self._binding_pool: ThreadPoolExecutor | None = None
        try:
            for profile in config.profiles:
                self.frameworks[profile.scheduler_name] = build_framework(
                    profile, config, self.handle, self.compiler, registry)
            self.queue = SchedulingQueue(self._queue_sort(), self._pre_enqueue_plugins())
            self.registrations = self._registrations()
        except BaseException:
            self.close()
            raise
        self._binding_pool = ThreadPoolExecutor(self.options.binding_workers, thread_name_prefix="binding")
        self._lock = threading.Lock()
        self._inflight: set[Future[None]] = set()
        self._outcomes: dict[str, PodOutcome] = {}
        self._originals: dict[str, PodInfo] = {}
        self._attempted: set[str] = set()
        self._preemptions: list[Preemption] = []
        self._preempted_for: dict[str, tuple[str, list[str]]] = {}
        self._delete_events = 0
        self._rng = random.Random(self.options.seed)
        self._next_start_node_index = 0
        self._ran = False
        # Bound once: a module-level structlog logger assembles itself on every call.
        self.log = log.bind()

    # --- set-up ------------------------------------------------------------------------

    def _queue_sort(self) -> Callable[[QueuedPod, QueuedPod], bool]:
        sorts = {name: fw.points["queue_sort"][0] for name, fw in self.frameworks.items()}
        if len({plugin.name for plugin in sorts.values()}) > 1:
            listed = ", ".join(f"{profile}: {plugin.name}" for profile, plugin in sorts.items())
            raise UserError(f"{self.config.source}: profiles: every profile must use the same queueSort plugin "
                            f"({listed})")
        plugin = next(iter(sorts.values()))
        less: Callable[[QueuedPod, QueuedPod], bool] = plugin.less  # type: ignore[attr-defined]
        return less

    def _pre_enqueue_plugins(self) -> dict[str, list[PreEnqueuePlugin]]:
        """Profile -> its PreEnqueue plugins (multiPoint's, less ``preEnqueue.disabled``), in order."""
        found: dict[str, list[PreEnqueuePlugin]] = {}
        for profile in self.config.profiles:
            pset = profile.plugins.get("preEnqueue")
            disabled = pset.disabled if pset is not None else frozenset()
            found[profile.scheduler_name] = [
                plugin for plugin in self.frameworks[profile.scheduler_name].plugins.values()
                if isinstance(plugin, PreEnqueuePlugin) and "*" not in disabled and plugin.name not in disabled]
        return found

    def _registrations(self) -> dict[str, tuple[ClusterEvent, ...]]:
        """Plugin name -> the cluster events that may make a pod it rejected schedulable."""
        events: dict[str, tuple[ClusterEvent, ...]] = {}
        for framework in self.frameworks.values():
            for plugin in framework.plugins.values():
                events.setdefault(plugin.name, tuple(plugin.events_to_register()))
        return events

    # --- the loop ----------------------------------------------------------------------

    def run(self) -> SimulationReport:
        """Schedule every pending pod of the snapshot; wait for every binding cycle."""
        if self._ran:
            raise RuntimeError("a Scheduler runs once")
        self._ran = True
        started = time.perf_counter()
        ignored = []
        gated: list[str] = []
        for info in self.cluster.pending:
            if scheduler_name(info.pod) not in self.frameworks:
                ignored.append(info.key)
                continue
            namespace, name = info.key.split("/", 1)
            self._outcomes[info.uid] = PodOutcome(namespace, name, info.uid)
            self._originals[info.uid] = info
            gate = self.queue.add(info)
            if not gate.ok:  # kept out of the queue (and the nominator) by a PreEnqueue plugin: never tried
                gated.append(info.key)
                outcome = self._outcomes[info.uid]
                outcome.status = PodStatus.GATED
                outcome.reason = f"{gate.reason} ({gate.plugin})" if gate.plugin else gate.reason
                continue
            nominated = nominated_node_of(info.pod)
            if nominated:
                self.handle.nominator.add(info, nominated)
        if gated:
            self.log.info("pods.gated", count=len(gated), pods=gated[:10],
                          reason="a PreEnqueue plugin holds them back (spec.schedulingGates): they are not scheduled")
        if ignored:
            self.log.warning("pods.ignored", count=len(ignored), pods=ignored[:10],
                             reason="spec.schedulerName names no profile of the configuration")
        total = len(self._outcomes) - len(gated)
        while True:
            item = self.queue.pop()
            if item is not None:
                self._schedule_one(item)
                self._attempted.add(item.info.uid)
                if self.options.progress is not None:
                    self.options.progress(len(self._attempted), total)
                continue
            with self._lock:
                inflight = set(self._inflight)
            if not inflight:
                if len(self.queue):
                    continue  # a binding cycle that just ended put a pod back
                break
            wait(inflight, return_when=FIRST_COMPLETED)
        seconds = time.perf_counter() - started
        outcomes = [self._outcomes[info.uid] for info in self.cluster.pending if info.uid in self._outcomes]
        return SimulationReport(outcomes, seconds, list(self._preemptions), ignored)

    def close(self) -> None:
        """Reject pods still waiting, finish binding cycles, close every plugin."""
        self.handle.waiting_pods.reject_all("", "the scheduler is shutting down")
        if self._binding_pool is not None:
            self._binding_pool.shutdown(wait=True)
        for framework in self.frameworks.values():
            framework.close()
        self.handle.close()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- scheduling cycle --------------------------------------------------------------

    def _schedule_one(self, item: QueuedPod) -> None:
        info = item.info
        framework = self.frameworks[scheduler_name(info.pod)]
        outcome = self._outcomes[info.uid]
        outcome.attempts = item.attempts
        trace = CycleTrace(item.attempts) if info.key in self.options.explain else None
        if trace is not None:
            outcome.traces.append(trace)
            trace.weights = dict(framework.score_weights)
        state = CycleState()
        events_before = self._delete_events
        view = self.snapshot.update_view()
        self.log.info("cycle.started", pod=info.key, pod_uid=info.uid, phase="scheduling", attempt=item.attempts,
                      profile=framework.profile_name)
        try:
            self._scheduling_cycle(item, framework, state, view, trace, events_before)
        except Exception as exc:  # a bug of a plugin or of the framework: this pod fails, the run goes on
            self.log.exception("cycle.crashed", pod=info.key, pod_uid=info.uid)
            self._fail(item, Status(Code.ERROR, f"internal error: {type(exc).__name__}: {exc}"), set(), trace)

    def _scheduling_cycle(self, item: QueuedPod, framework: Framework[NodeInfo], state: CycleState, view: SnapshotView,
                          trace: CycleTrace | None, events_before: int) -> None:
        info = item.info
        pod = info.pod
        if trace is not None:
            trace.num_nodes = len(view)
        if len(view) == 0:
            message = "0/0 nodes are available: no nodes available to schedule pods."
            if trace is not None:
                trace.fit_error = message
            self._unschedulable(item, message, set(), trace, events_before)
            return
        diagnosis = Diagnosis()
        feasible: list[NodeInfo] = []
        subset, status = framework.run_pre_filter(state, pod, trace)
        if status.code == Code.ERROR:
            self._fail(item, status, {status.plugin}, trace)
            return
        if not status.ok:
            diagnosis.pre_filter_msg = f"{status.reason or status.code.label} ({status.plugin})"
            diagnosis.statuses = {node.name: status for node in view.node_infos}
            diagnosis.unschedulable_plugins.add(status.plugin)
        else:
            nodes = list(view.node_infos)
            if subset is not None:
                nodes = [node for node in nodes if node.name in subset]
                if trace is not None:
                    trace.node_subset = sorted(subset)
            feasible, statuses, error = self._find_feasible(framework, state, info, nodes, trace)
            if trace is not None and statuses:
                trace_shortfalls(trace, pod, statuses, view)
            if not error.ok:
                self._fail(item, error, {error.plugin}, trace)
                return
            if not feasible:
                diagnosis.statuses = statuses
                diagnosis.unschedulable_plugins.update(s.plugin for s in statuses.values() if s.plugin)
                if subset is not None:
                    outside = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                     "node is filtered out by the prefilter result")
                    for node in view.node_infos:
                        diagnosis.statuses.setdefault(node.name, outside)
        if not feasible:
            self._post_filter(item, framework, state, view, diagnosis, trace, events_before)
            return

        scores: dict[str, int] = {}
        if len(feasible) == 1:
            selected = feasible[0].name
        else:
            status = framework.run_pre_score(state, pod, feasible, trace)
            if status.ok:
                table, status = framework.run_score(state, pod, feasible, trace)
            if not status.ok:
                self._fail(item, status, {status.plugin}, trace)
                return
            selected = self._select_host(table, info.key)
            scores = table.of(selected)
        if trace is not None:
            trace.selected = selected
        self._reserve_and_permit(item, framework, state, selected, scores, trace, events_before)

    def _find_feasible(self, framework: Framework[NodeInfo], state: CycleState, info: PodInfo,
                       nodes: Sequence[NodeInfo],
                       trace: CycleTrace | None) -> tuple[list[NodeInfo], dict[str, Status], Status]:
        """(feasible nodes, statuses of rejected nodes, Error status or Success)."""
        nominated = self.handle.nominator.node_of(info.uid)
        if nominated:
            node = next((n for n in nodes if n.name == nominated), None)
            if node is not None:
                if trace is not None:
                    trace.nominated_node = nominated
                statuses, error = framework.run_filter_with_nominated(state, info, [node], trace)
                if not error.ok:
                    return [], {}, error
                if statuses[nominated].ok:
                    return [node], {}, error
        if not nodes:
            return [], {}, Status()
        count = len(nodes)
        wanted = num_feasible_nodes_to_find(framework.percentage_of_nodes_to_score, count)
        start = self._next_start_node_index % count
        ordered = [*nodes[start:], *nodes[:start]]
        feasible: list[NodeInfo] = []
        rejected: dict[str, Status] = {}
        processed = 0
        for begin in range(0, count, wanted):
            chunk = ordered[begin:begin + wanted]
            statuses, error = framework.run_filter_with_nominated(state, info, chunk, trace)
            if not error.ok:
                return [], {}, error
            for node in chunk:
                processed += 1
                status = statuses[node.name]
                if status is SUCCESS or status.ok:
                    feasible.append(node)
                    if len(feasible) == wanted:
                        break
                else:
                    rejected[node.name] = status
            if len(feasible) == wanted:
                break
        self._next_start_node_index = (start + processed) % count
        return feasible, rejected, Status()

    def _select_host(self, table: ScoreTable, pod_name: str) -> str:
        """The highest total score; ties broken at random (seeded), by reservoir sampling; or
        the options' `choose_host`."""
        choose = self.options.choose_host
        if choose is not None:
            chosen = choose(pod_name, table.names, table.totals())
            if chosen not in table.names:
                raise ValueError(f"choose_host chose {chosen!r} for {pod_name}, not a scored node")
            return chosen
        best = ""
        best_total = -1
        ties = 0
        for name, total in zip(table.names, table.totals(), strict=True):
            if total > best_total:
                best, best_total, ties = name, total, 1
            elif total == best_total:
                ties += 1
                if self._rng.randrange(ties) == 0:
                    best = name
        return best

    def _post_filter(self, item: QueuedPod, framework: Framework[NodeInfo], state: CycleState, view: SnapshotView,
                     diagnosis: Diagnosis, trace: CycleTrace | None, events_before: int) -> None:
        info = item.info
        nominated = ""
        if framework.has("post_filter"):
            result, status = framework.run_post_filter(state, info.pod, diagnosis.statuses)
            diagnosis.post_filter_msg = status.reason
            if status.code == Code.ERROR:
                self.log.error("postfilter.failed", pod=info.key, pod_uid=info.uid, reason=status.reason)
            if result is not None and result.nominated_node_name:
                nominated = result.nominated_node_name
                self.handle.nominator.add(info, nominated)
            if trace is not None:
                trace.post_filter = str(status) + (f"; nominated node {nominated}" if nominated else "")
        message = diagnosis.message(len(view))
        if trace is not None:
            trace.fit_error = message
        if nominated:
            # The victims are gone already: the pod is retried at once (kube-scheduler's
            # in-flight events would move it out of the unschedulable pods the same way).
            self._record(item, PodStatus.UNSCHEDULABLE, f"{message} Nominated to node {nominated}.", trace)
            self._retry(item, set(diagnosis.unschedulable_plugins), requeue=True)
            return
        self._unschedulable(item, message, diagnosis.unschedulable_plugins, trace, events_before)

    def _reserve_and_permit(self, item: QueuedPod, framework: Framework[NodeInfo], state: CycleState, node: str,
                            scores: dict[str, int], trace: CycleTrace | None, events_before: int) -> None:
        info = item.info
        assumed = self.snapshot.assume(info, node)
        self.handle.nominator.delete(info.uid)
        try:
            status = framework.run_reserve(state, assumed.pod, node)
            if status.ok:
                status, timeouts = framework.run_permit(state, assumed.pod, node)
                if status.code == Code.WAIT:
                    waiting = WaitingPod(assumed.pod, node, timeouts)
                    self.handle.waiting_pods.add(waiting)
                    self._start_binding(_Binding(item, framework, state, assumed, node, waiting, trace, scores))
                    return
                if status.ok:
                    self._start_binding(_Binding(item, framework, state, assumed, node, None, trace, scores))
                    return
        except Exception as exc:  # a plugin's bug after the pod was assumed: undo the reservation
            self.log.exception("cycle.crashed", pod=info.key, pod_uid=info.uid)
            status = Status(Code.ERROR, f"internal error: {type(exc).__name__}: {exc}")
        framework.run_unreserve(state, assumed.pod, node)
        self.snapshot.forget(info.uid)
        if status.is_rejection:
            reason = Diagnosis({node: status}).message(1)
            self._unschedulable(item, reason, {status.plugin}, trace, events_before)
        else:
            self._fail(item, status, {status.plugin}, trace)

    # --- binding cycle -----------------------------------------------------------------

    def _start_binding(self, binding: _Binding) -> None:
        assert self._binding_pool is not None
        self.log.info("cycle.finished", pod=binding.assumed.key, pod_uid=binding.assumed.uid, phase="scheduling",
                      outcome="Waiting" if binding.waiting is not None else "Assumed", node=binding.node)
        future = self._binding_pool.submit(self._binding_cycle, binding)
        with self._lock:
            self._inflight.add(future)
        future.add_done_callback(self._binding_done)

    def _binding_done(self, future: Future[None]) -> None:
        with self._lock:
            self._inflight.discard(future)

    def _binding_cycle(self, b: _Binding) -> None:
        pod = b.assumed.pod
        self.log.info("cycle.started", pod=b.assumed.key, pod_uid=b.assumed.uid, phase="binding", node=b.node)
        try:
            if b.waiting is not None:
                status = b.waiting.wait()
                self.handle.waiting_pods.remove(b.assumed.uid)
                if not status.ok:
                    self._binding_failed(b, status)
                    return
            status = b.framework.run_pre_bind(b.state, pod, b.node)
            if status.ok:
                status = b.framework.run_bind(b.state, pod, b.node)
                if status.code == Code.SKIP:
                    status = Status(Code.ERROR, "no Bind plugin bound the pod (every one returned Skip)")
            if status.ok:
                problem = self.snapshot.bind(b.assumed.uid, b.node)
                if problem:
                    status = Status(Code.ERROR, f"binding to {b.node}: {problem}")
            if not status.ok:
                self._binding_failed(b, status)
                return
        except Exception as exc:  # a plugin's bug: this pod fails, its reservation is undone
            self.log.exception("binding.crashed", pod=b.assumed.key, pod_uid=b.assumed.uid)
            self._binding_failed(b, Status(Code.ERROR, f"internal error: {type(exc).__name__}: {exc}"))
            return
        self._bound(b)
        try:
            b.framework.run_post_bind(b.state, pod, b.node)
        except Exception:  # the pod is bound; a PostBind bug changes nothing about that
            self.log.exception("postbind.crashed", pod=b.assumed.key, pod_uid=b.assumed.uid)

    def _bound(self, b: _Binding) -> None:
        reason = ""
        preempted = self._preempted_for.get(b.assumed.uid)
        if preempted is not None and preempted[0] == b.node:
            reason = f"preempted {', '.join(preempted[1])} on {b.node}"
        with self._lock:
            if self.snapshot.location(b.assumed.uid) != (b.node, True):
                return  # preempted the moment it was bound: `_evict` recorded that
            outcome = self._outcomes[b.assumed.uid]
            outcome.status = PodStatus.SCHEDULED
            outcome.node = b.node
            outcome.reason = reason
            outcome.scores = dict(b.scores)
        if b.trace is not None:
            b.trace.outcome = f"Scheduled on {b.node}"
        self.log.info("cycle.finished", pod=b.assumed.key, pod_uid=b.assumed.uid, phase="binding",
                      outcome=str(PodStatus.SCHEDULED), node=b.node, reason=reason)

    def _binding_failed(self, b: _Binding, status: Status) -> None:
        """kube's handleBindingCycleError: Unreserve, forget (a pod-delete event), fail the pod."""
        b.framework.run_unreserve(b.state, b.assumed.pod, b.node)
        if self.snapshot.forget(b.assumed.uid):
            self._cluster_event(ASSIGNED_POD_DELETE, skip_uid=b.assumed.uid if status.is_rejection else "")
        preemptor = self.handle.terminated(b.assumed.uid)
        if preemptor:
            status = Status(Code.UNSCHEDULABLE, f"preempted by {preemptor} while binding to {b.node}")
        if status.is_rejection:
            text = f"{status.reason} ({status.plugin})" if status.plugin else status.reason
            self._record(b.item, PodStatus.UNSCHEDULABLE, text, b.trace, phase="binding")
            self._retry(b.item, {status.plugin} if status.plugin else set(), requeue=bool(preemptor))
        else:
            self._fail(b.item, status, {status.plugin}, b.trace, phase="binding")

    # --- outcomes ----------------------------------------------------------------------

    def _record(self, item: QueuedPod, status: PodStatus, reason: str, trace: CycleTrace | None,
                phase: Cycle = "scheduling") -> None:
        with self._lock:
            outcome = self._outcomes[item.info.uid]
            outcome.status = status
            outcome.node = None
            outcome.reason = reason
            outcome.scores = {}
        if trace is not None:
            trace.outcome = f"{status}: {reason}"
        self.log.info("cycle.finished", pod=item.info.key, pod_uid=item.info.uid, phase=phase, outcome=str(status),
                      reason=reason)

    def _retry(self, item: QueuedPod, plugins: Iterable[str], requeue: bool = False) -> None:
        if item.attempts >= self.options.max_attempts:
            return
        if requeue:
            self.queue.requeue(item)
        else:
            self.queue.add_unschedulable(item, plugins)

    def _unschedulable(self, item: QueuedPod, reason: str, plugins: set[str], trace: CycleTrace | None,
                       events_before: int) -> None:
        self._record(item, PodStatus.UNSCHEDULABLE, reason, trace)
        # A pod-delete event during this cycle may already have made room (kube's in-flight events).
        helped = self._delete_events != events_before and (
            not plugins or any(event_matches(self.registrations.get(p, ()), ASSIGNED_POD_DELETE) for p in plugins))
        self._retry(item, plugins, requeue=helped)

    def _fail(self, item: QueuedPod, status: Status, plugins: set[str], trace: CycleTrace | None,
              phase: Cycle = "scheduling") -> None:
        """An Error: reported as is, not retried (kube-scheduler would retry it after a backoff)."""
        text = status.reason or status.code.label
        if status.code != Code.ERROR:
            self._record(item, PodStatus.UNSCHEDULABLE, text, trace, phase)
            self._retry(item, plugins)
            return
        self._record(item, PodStatus.ERROR, text, trace, phase)

    def _cluster_event(self, event: ClusterEvent, skip_uid: str = "") -> None:
        with self._lock:
            self._delete_events += 1
        moved = self.queue.move_all_to_active(event, self.registrations, skip_uid)
        if moved:
            self.log.debug("queue.moved", count=moved, cluster_event="AssignedPodDelete")

    # --- preemption --------------------------------------------------------------------

    def _evict(self, victims: Sequence[PodInfo], preemptor: PodInfo, node: str) -> None:
        """Delete preemption victims (DefaultPreemption calls this through the handle)."""
        for victim in victims:
            self._preemptions.append(Preemption(victim.key, preemptor.key, node))
            self.log.info("pod.preempted", pod=victim.key, pod_uid=victim.uid, node=node, preemptor=preemptor.key)
            waiting = self.handle.waiting_pods.get(victim.uid)
            self.handle.mark_terminating(victim.uid, preemptor.key)
            if waiting is not None and waiting.reject("DefaultPreemption", "preempted"):
                continue  # kube-scheduler rejects a waiting victim instead of deleting it
            removed = self.snapshot.evict(victim.uid)
            if removed is not None and not removed[2]:
                continue  # assumed, not bound: its binding cycle will fail and see it was preempted
            self.handle.terminated(victim.uid)
            if removed is None or victim.uid not in self._outcomes:
                continue  # a running pod of the snapshot: its controller is not simulated
            # A pod this run placed: deleted, then recreated by its owner as a pending pod.
            original = self._originals[victim.uid]
            item = QueuedPod(original, attempts=self._outcomes[victim.uid].attempts)
            self._record(item, PodStatus.UNSCHEDULABLE, f"preempted by {preemptor.key} from {node}", None)
            self._retry(item, (), requeue=True)
        for other in self.handle.nominator.pods_on(node):
            if other.priority < preemptor.priority:
                self.handle.nominator.delete(other.uid)
        self._preempted_for[preemptor.uid] = (node, [v.key for v in victims])
        self._cluster_event(ASSIGNED_POD_DELETE)
