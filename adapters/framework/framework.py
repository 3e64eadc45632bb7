"""Framework: one profile's plugins and how each extension point runs them.

This module owns the semantics of kube-scheduler's frameworkImpl for one profile: the
ordered plugins of every extension point and the score weights (filled in by
`adapters.framework.profile`), and the ``run_*`` methods that call them in order with
kube-scheduler's rules: PreFilter node subsets intersect and a rejection stops the
point; Filter is batched (one call per plugin over the nodes still feasible, so the
first plugin that rejects a node is the one reported) and honours nominated pods;
PostFilter stops at the first plugin that succeeds; Score runs NormalizeScore, checks
the range and applies weights; Reserve stops at the first failure and Unreserve runs
every Reserve plugin in reverse; Permit collects Wait timeouts; Bind takes the first
plugin that does not Skip. It also formats the "0/N nodes are available" message.
The scheduling loop that calls these lives in `adapters.framework.scheduler`.

See `docs/framework.md` ("What a scheduling attempt does").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.pods import KubeObject, PodInfo, pod_name
from wasm_scheduler.adapters.framework.results import PASSED, CycleTrace, reason_groups
from wasm_scheduler.adapters.framework.results import REASON_SEPARATOR as REASON_SEPARATOR  # re-exported
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.adapters.framework.waiting_pods import MAX_PERMIT_TIMEOUT_S
from wasm_scheduler.framework_api import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    POINT_NAMES,
    SUCCESS,
    Code,
    NamedNode,
    PostFilterResult,
    Status,
    score_columns,
)
from wasm_scheduler.logger import DEBUG, enabled, get_logger

if TYPE_CHECKING:
    from wasm_scheduler.adapters.framework.handle import SchedulerHandle
    from wasm_scheduler.adapters.framework.plugins.base import Plugin

log = get_logger("adapters.framework")

#: The nodes a framework hands its plugins: `NodeInfo` in the scheduler; the HTTP
#: extender's wasm plugins read only names and get lighter nodes.
NodeT = TypeVar("NodeT", bound=NamedNode)

#: Called after every plugin call, opt-in, with (extension point, plugin name, pod, seconds,
#: CPU seconds of the calling thread): the second figure leaves out what other threads ran
#: while the call waited (a wasm plugin's call waits for its actor).
CallObserver = Callable[[str, str, KubeObject, float, float], None]
#: Called after every plugin call, opt-in, with (extension point, plugin name, seconds, the
#: call's result): the metrics' hook (`adapters.extender.metrics.PluginCallMetrics`).
CallRecorder = Callable[[str, str, float, Any], None]


def _error(point: str, plugin: str, status: Status) -> Status:
    return Status(Code.ERROR, f"running {point} plugin {plugin!r}: {status.reason or status.code.label}", plugin)


def _trace_text(status: Status) -> str:
    """A status as --explain shows it under its plugin's name."""
    if status.ok:
        return PASSED
    return status.reason if status.reason else status.code.label


def _unfinished(trace: CycleTrace, nodes: Iterable[NamedNode]) -> None:
    """The nodes not rejected yet when the Filter point ended in Error: not evaluated."""
    for node in nodes:
        trace.node(node.name).unfinished = True


@dataclass
class Diagnosis:
    """Why no node fits: each node's status and what PreFilter/PostFilter said."""

    statuses: dict[str, Status] = field(default_factory=dict)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    #: Plugins that rejected the pod somewhere (an event they care about may help it).
    unschedulable_plugins: set[str] = field(default_factory=set)

    def message(self, num_nodes: int) -> str:
        """kube-scheduler's FitError text, each reason followed by its plugin.

        A status carrying several reasons separates them with `REASON_SEPARATOR`.
        """
        text = f"0/{num_nodes} nodes are available:"
        if self.pre_filter_msg:
            text += f" {self.pre_filter_msg.rstrip('.')}."
        else:
            histogram: dict[str, int] = {}
            groups = reason_groups((node, status.plugin, status.reason or status.code.label)
                                   for node, status in self.statuses.items())
            for (plugin, reason), nodes in groups.items():
                label = f"{reason} ({plugin})" if plugin else reason
                histogram[label] = histogram.get(label, 0) + len(nodes)
            if histogram:
                text += " " + ", ".join(sorted(f"{n} {r}" for r, n in histogram.items())) + "."
        if self.post_filter_msg:
            text += f" {self.post_filter_msg.rstrip('.')}."
        return text


class ScoreTable:
    """Score's outcome over the feasible nodes: one column of weighted scores per plugin,
    each in the order of `names` (summed by the scheduler to pick the node)."""

    __slots__ = ("names", "columns", "_index")

    def __init__(self, names: Sequence[str]) -> None:
        self.names: list[str] = list(names)
        #: Plugin -> its weighted score of each node, in the order of `names`.
        self.columns: dict[str, Sequence[int]] = {}
        self._index: dict[str, int] | None = None

    def column(self, plugin: str, names: Sequence[str], scores: Sequence[int]) -> tuple[Sequence[int], Status]:
        """A plugin's (node, score) columns checked and put in the table's node order:
        (scores, Success), or an Error status naming the first score out of range or the
        node scored that is not one of the table's, or missing."""
        if len(scores) and (min(scores) < MIN_NODE_SCORE or max(scores) > MAX_NODE_SCORE):
            node, score = next((n, v) for n, v in zip(names, scores, strict=True)
                               if not MIN_NODE_SCORE <= v <= MAX_NODE_SCORE)
            return (), Status(Code.ERROR, f"plugin {plugin!r} returns an invalid score {score}, it should in "
                              f"the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing", plugin)
        if len(names) != len(self.names):
            return (), Status(Code.ERROR, f"Score plugin {plugin!r} scored {len(names)} of {len(self.names)} nodes",
                              plugin)
        if names == self.names or list(names) == self.names:
            return scores, SUCCESS  # the nodes in the order asked, as every plugin here gives them
        index = self._index
        if index is None:
            index = self._index = {name: i for i, name in enumerate(self.names)}
        ordered: list[int | None] = [None] * len(self.names)
        for node, score in zip(names, scores, strict=True):
            at = index.get(node)
            if at is None:
                return (), Status(Code.ERROR, f"Score plugin {plugin!r} scored unknown node {node}", plugin)
            ordered[at] = score
        missing = next((self.names[i] for i, score in enumerate(ordered) if score is None), None)
        if missing is not None:
            return (), Status(Code.ERROR, f"Score plugin {plugin!r} gave no score for node {missing}", plugin)
        return [score for score in ordered if score is not None], SUCCESS

    def add(self, plugin: str, weighted: Sequence[int]) -> None:
        self.columns[plugin] = weighted

    def totals(self) -> list[int]:
        """Each node's sum over the plugins, in the order of `names`."""
        if not self.columns:
            return [0] * len(self.names)
        return list(map(sum, zip(*self.columns.values(), strict=True)))

    def of(self, node: str) -> dict[str, int]:
        """Plugin -> weighted score of one node."""
        at = self.names.index(node)
        return {plugin: column[at] for plugin, column in self.columns.items()}


class Framework(Generic[NodeT]):
    """The plugins of one profile, per extension point, and how they run."""

    def __init__(self, profile_name: str, handle: SchedulerHandle | None,
                 percentage_of_nodes_to_score: int | None = None) -> None:
        self.profile_name = profile_name
        #: The scheduler's handle (its nominated pods); None where no scheduler runs here
        #: (the HTTP extender: the scheduler that calls it nominates).
        self.handle = handle
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        #: Every plugin of the profile by name (each once, whatever points it serves).
        self.plugins: dict[str, Plugin[NodeT]] = {}
        self.points: dict[str, list[Plugin[NodeT]]] = {point: [] for point in POINT_NAMES}
        self.score_weights: dict[str, int] = {}
        self.log = log.bind(profile=profile_name)
        #: Timing hook (`wasm-scheduler bench`): None costs one attribute test per call.
        self.observer: CallObserver | None = None
        #: Metrics hook (the extender's /metrics, `simulate`'s summary): likewise.
        self.recorder: CallRecorder | None = None

    def has(self, point: str) -> bool:
        return bool(self.points.get(point))

    def names(self, point: str) -> list[str]:
        return [p.name for p in self.points.get(point, ())]

    def close(self) -> None:
        """Close every plugin (wasm plugins stop their actors)."""
        for plugin in self.plugins.values():
            try:
                plugin.close()
            except Exception:  # noqa: BLE001 - one plugin failing to close must not keep the others alive
                self.log.exception("plugin.stop_failed", plugin=plugin.name)

    def _call(self, point: str, plugin: Plugin[NodeT], pod: KubeObject, func: Any, *args: Any) -> Any:
        observer = self.observer
        started = time.perf_counter()
        cpu = time.thread_time() if observer is not None else 0.0
        result = func(*args)
        if observer is not None:
            # The CPU interval is read inside the wall one (the clock reads themselves cost
            # a microsecond or so), so a call's CPU never shows more than its time.
            used = time.thread_time() - cpu
            elapsed = time.perf_counter() - started
            observer(point, plugin.name, pod, elapsed, used)
        else:
            elapsed = time.perf_counter() - started
        recorder = self.recorder
        if recorder is not None:
            recorder(point, plugin.name, elapsed, result)
        if enabled(self.log, DEBUG):  # a line nobody sees is not even built
            self.log.debug("plugin.called", plugin=plugin.name, extension_point=point.lower(), pod=pod_name(pod),
                           duration_ms=round(elapsed * 1000, 3))
        return result

    @staticmethod
    def _started(state: CycleState, plugin: Plugin[Any]) -> bool:
        """False for a plugin whose PreFilter did not run this cycle (an earlier one rejected)."""
        return plugin.name not in state.not_started

    # --- PreFilter ---------------------------------------------------------------------

    def run_pre_filter(self, state: CycleState, pod: KubeObject,
                       trace: CycleTrace | None = None) -> tuple[frozenset[str] | None, Status]:
        """(node subset or None for all, status), by kube-scheduler's rules (1.28 on): an
        Unschedulable PreFilter does not stop the point, so every plugin's PreFilter runs
        and preemption later finds each one's state (the last such status is the
        answer); UnschedulableAndUnresolvable, an empty intersection of node subsets or
        an Error stops it (the plugins after it are not started: no preemption follows)."""
        subset: frozenset[str] | None = None
        contributors: list[str] = []
        rejection: Status | None = None
        plugins = self.points["pre_filter"]
        for i, plugin in enumerate(plugins):
            result = self._call("PreFilter", plugin, pod, plugin.pre_filter, state, pod)
            status = result.status
            if trace is not None:
                trace.pre_filter.append((plugin.name, _trace_text(status)))
            if status.code == Code.SKIP:
                state.skip_filter_plugins.add(plugin.name)
                continue
            if status.code == Code.UNSCHEDULABLE:
                rejection = status.with_plugin(plugin.name)
                continue
            if not status.ok:
                state.not_started.update(p.name for p in plugins[i + 1:])
                if status.is_rejection:
                    return None, status.with_plugin(plugin.name)
                return None, _error("PreFilter", plugin.name, status)
            if result.node_names is not None:
                contributors.append(plugin.name)
                subset = result.node_names if subset is None else subset & result.node_names
                if not subset:
                    state.not_started.update(p.name for p in plugins[i + 1:])
                    which = (f"plugin {contributors[0]}" if len(contributors) == 1
                             else f"plugin(s) [{' '.join(sorted(contributors))}] simultaneously")
                    return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"node(s) didn't satisfy {which}",
                                        plugin.name)
        if rejection is not None:
            return None, rejection
        return subset, SUCCESS

    # --- Filter ------------------------------------------------------------------------

    def run_filter(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeT],
                   trace: CycleTrace | None = None) -> tuple[dict[str, Status], Status]:
        """(each node's status: Success or the first rejection, Error status or Success)."""
        statuses: dict[str, Status] = {}
        remaining = list(nodes)
        plugins = self.points["filter"]
        for at, plugin in enumerate(plugins):
            if not remaining:
                break
            if plugin.name in state.skip_filter_plugins:
                continue
            if not self._started(state, plugin):
                # Only preemption filters a pod whose PreFilter was rejected. kube-scheduler
                # runs this plugin's Filter then, and it fails for want of what its PreFilter
                # would have written: no node passes (a wasm plugin is not even called, it
                # has no cycle for the pod).
                status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                f"the PreFilter of plugin {plugin.name!r} did not run for this pod", plugin.name)
                for node in remaining:
                    statuses[node.name] = status
                    if trace is not None:
                        trace.node(node.name).filters.append((plugin.name, _trace_text(status)))
                remaining = []
                break
            try:
                results = self._call("Filter", plugin, pod, plugin.filter_nodes, state, pod, remaining)
            except Exception:
                if trace is not None:
                    _unfinished(trace, remaining)
                raise
            passed = []
            for node in remaining:
                status = results.get(node.name)
                if status is SUCCESS and trace is None:  # most nodes pass most filters: the short way
                    passed.append(node)
                    continue
                if status is None:
                    status = Status(Code.ERROR, f"returned no status for node {node.name}", plugin.name)
                if trace is not None:
                    trace.node(node.name).filters.append((plugin.name, _trace_text(status)))
                if status.ok:
                    passed.append(node)
                elif status.is_rejection:
                    statuses[node.name] = status.with_plugin(plugin.name)
                else:
                    if trace is not None:
                        # Nodes it passed are feasible only if no Filter plugin was left to run on them.
                        later = any(p.name not in state.skip_filter_plugins for p in plugins[at + 1:])
                        done = set() if later else {n.name for n in passed}
                        _unfinished(trace, [n for n in remaining if n.name not in statuses and n.name not in done])
                    return statuses, _error("Filter", plugin.name, status)
            remaining = passed
        statuses.update(dict.fromkeys([node.name for node in remaining], SUCCESS))
        if trace is not None:
            for node in remaining:
                if not trace.node(node.name).filters:
                    trace.node(node.name).filters.append(("(no filter plugins)", PASSED))
        return statuses, SUCCESS

    def run_filter_with_nominated(self: Framework[NodeInfo], state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
                                  trace: CycleTrace | None = None) -> tuple[dict[str, Status], Status]:
        """Filter as if pods nominated to a node with at least this pod's priority ran there.

        A node that has such pods must pass with them added (and, as `run_filter` does
        for every node, without them): the pod must not take room preemption freed for
        a more important pod.
        """
        nominations = self.handle.nominator.by_node() if self.handle is not None else {}
        if not nominations:
            return self.run_filter(state, pod.pod, nodes, trace)
        statuses: dict[str, Status] = {}
        batch: list[NodeInfo] = []
        for node in nodes:
            nominated = [p for p in nominations.get(node.name, ())
                         if p.uid != pod.uid and p.priority >= pod.priority]
            if nominated:
                status = self._filter_with_pods_added(state, pod.pod, node, nominated)
                if status.code == Code.ERROR:
                    return statuses, status
                if not status.ok:
                    statuses[node.name] = status
                    if trace is not None:
                        trace.node(node.name).filters.append(
                            (status.plugin or "(nominated pods)",
                             f"{_trace_text(status)} (counting the pods nominated to the node)"))
                    continue
            batch.append(node)
        batch_statuses, error = self.run_filter(state, pod.pod, batch, trace)
        statuses.update(batch_statuses)
        return statuses, error

    def _filter_with_pods_added(self: Framework[NodeInfo], state: CycleState, pod: KubeObject, node: NodeInfo,
                                added: Sequence[PodInfo]) -> Status:
        state = state.clone()
        for other in added:
            node = node.with_pod(other)
            status = self.run_add_pod(state, pod, other.pod, node)
            if not status.ok:
                return status
        statuses, error = self.run_filter(state, pod, [node])
        return error if not error.ok else statuses[node.name]

    def run_add_pod(self, state: CycleState, pod: KubeObject, added: KubeObject, node: NodeT) -> Status:
        for plugin in self.points["pre_filter_extensions"]:
            if plugin.name in state.skip_filter_plugins or not self._started(state, plugin):
                continue
            status = self._call("AddPod", plugin, pod, plugin.add_pod, state, pod, added, node)
            if not status.ok:
                return _error("AddPod", plugin.name, status)
        return SUCCESS

    def run_remove_pod(self, state: CycleState, pod: KubeObject, removed: KubeObject, node: NodeT) -> Status:
        for plugin in self.points["pre_filter_extensions"]:
            if plugin.name in state.skip_filter_plugins or not self._started(state, plugin):
                continue
            status = self._call("RemovePod", plugin, pod, plugin.remove_pod, state, pod, removed, node)
            if not status.ok:
                return _error("RemovePod", plugin.name, status)
        return SUCCESS

    # --- PostFilter --------------------------------------------------------------------

    def run_post_filter(self, state: CycleState, pod: KubeObject,
                        statuses: Mapping[str, Status]) -> tuple[PostFilterResult | None, Status]:
        result: PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        for plugin in self.points["post_filter"]:
            if not self._started(state, plugin):
                continue
            r = self._call("PostFilter", plugin, pod, plugin.post_filter, state, pod, statuses)
            status = r.status
            if status.ok:
                return r, status.with_plugin(plugin.name)
            if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return r, status.with_plugin(plugin.name)
            if not status.is_rejection:
                return None, _error("PostFilter", plugin.name, status)
            if r.nominated_node_name:
                result = r
            if status.reason:
                reasons.append(status.reason)
            rejector = rejector or plugin.name
        return result, Status(Code.UNSCHEDULABLE, ", ".join(reasons), rejector)

    # --- PreScore, Score ---------------------------------------------------------------

    def run_pre_score(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeT],
                      trace: CycleTrace | None = None) -> Status:
        for plugin in self.points["pre_score"]:
            status = self._call("PreScore", plugin, pod, plugin.pre_score, state, pod, nodes)
            if trace is not None:
                trace.pre_score.append((plugin.name, _trace_text(status)))
            if status.code == Code.SKIP:
                state.skip_score_plugins.add(plugin.name)
            elif not status.ok:
                return _error("PreScore", plugin.name, status)
        return SUCCESS

    def run_score(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeT],
                  trace: CycleTrace | None = None) -> tuple[ScoreTable, Status]:
        """Every Score plugin's weighted scores of `nodes`, after NormalizeScore; or an Error
        status (then the table holds the plugins scored before it)."""
        table = ScoreTable([node.name for node in nodes])
        for plugin in self.points["score"]:
            if plugin.name in state.skip_score_plugins:
                continue
            result = self._call("Score", plugin, pod, plugin.score_nodes, state, pod, nodes)
            if not result.status.ok:
                return table, _error("Score", plugin.name, result.status)
            if len(result) != len(nodes):
                return table, Status(Code.ERROR, f"Score plugin {plugin.name!r} scored {len(result)} of "
                                     f"{len(nodes)} nodes", plugin.name)
            names, values = result.columns()
            if plugin.implements("normalize_score"):
                normalized = self._call("NormalizeScore", plugin, pod, plugin.normalize_score, state, pod,
                                        result.scores)
                if not normalized.status.ok:
                    return table, _error("NormalizeScore", plugin.name, normalized.status)
                names, values = score_columns(normalized.scores)
            column, status = table.column(plugin.name, names, values)
            if not status.ok:
                return table, status
            weight = self.score_weights.get(plugin.name, 1)
            weighted = column if weight == 1 else [score * weight for score in column]
            table.add(plugin.name, weighted)
            if trace is not None:
                for node, score, total in zip(table.names, column, weighted, strict=True):
                    trace.node(node).scores[plugin.name] = (score, total)
        return table, SUCCESS

    # --- Reserve, Permit ---------------------------------------------------------------

    def run_reserve(self, state: CycleState, pod: KubeObject, node: str) -> Status:
        for plugin in self.points["reserve"]:
            status = self._call("Reserve", plugin, pod, plugin.reserve, state, pod, node)
            if not status.ok:
                return status.with_plugin(plugin.name) if status.is_rejection else _error("Reserve", plugin.name,
                                                                                           status)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: KubeObject, node: str) -> None:
        """Every Reserve plugin's Unreserve, in reverse order (see `_every`)."""
        self._every("Unreserve", "unreserve", reversed(self.points["reserve"]), state, pod, node)

    def _every(self, point: str, method: str, plugins: Iterable[Plugin[NodeT]], state: CycleState,
               pod: KubeObject, node: str) -> None:
        """`method` of every plugin, even after one raised (a bug): each plugin's instance
        must go back to its pool; the first exception is raised again at the end."""
        failure: Exception | None = None
        for plugin in plugins:
            try:
                self._call(point, plugin, pod, getattr(plugin, method), state, pod, node)
            except Exception as exc:  # noqa: BLE001 - raised again below, once the others ran
                failure = failure or exc
        if failure is not None:
            raise failure

    def run_permit(self, state: CycleState, pod: KubeObject, node: str) -> tuple[Status, dict[str, float]]:
        """(Success, Wait with the waiting plugins' timeouts in seconds, or the rejection/error)."""
        timeouts: dict[str, float] = {}
        for plugin in self.points["permit"]:
            result = self._call("Permit", plugin, pod, plugin.permit, state, pod, node)
            status = result.status
            if status.ok:
                continue
            if status.is_rejection:
                return status.with_plugin(plugin.name), {}
            if status.code == Code.WAIT:
                timeouts[plugin.name] = min(result.timeout_ms / 1000.0, MAX_PERMIT_TIMEOUT_S)
                continue
            return _error("Permit", plugin.name, status), {}
        if timeouts:
            return Status(Code.WAIT, "", ""), timeouts
        return SUCCESS, {}

    # --- binding cycle -----------------------------------------------------------------

    def run_pre_bind(self, state: CycleState, pod: KubeObject, node: str) -> Status:
        for plugin in self.points["pre_bind"]:
            status = self._call("PreBind", plugin, pod, plugin.pre_bind, state, pod, node)
            if status.code == Code.SKIP:
                continue
            if not status.ok:
                return status.with_plugin(plugin.name) if status.is_rejection else _error("PreBind", plugin.name,
                                                                                           status)
        return SUCCESS

    def run_bind(self, state: CycleState, pod: KubeObject, node: str) -> Status:
        """The first plugin that does not Skip binds; Skip if every one skipped."""
        for plugin in self.points["bind"]:
            status: Status = self._call("Bind", plugin, pod, plugin.bind, state, pod, node)
            if status.code == Code.SKIP:
                continue
            if not status.ok:
                return status.with_plugin(plugin.name) if status.is_rejection else _error("Bind", plugin.name, status)
            return status.with_plugin(plugin.name)
        return Status(Code.SKIP, "every Bind plugin skipped the pod", "")

    def run_post_bind(self, state: CycleState, pod: KubeObject, node: str) -> None:
        """Every PostBind plugin (see `_every`)."""
        self._every("PostBind", "post_bind", self.points["post_bind"], state, pod, node)
