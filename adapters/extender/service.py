"""The extender verbs mapped onto wasm plugins, and when a pod's instance is held.

This module owns what `filter`, `prioritize`, `bind` and `preempt` do with the
configured wasm plugins (see `protocol` for the wire shapes and `server` for HTTP):

- filter: PreFilter then Filter over the candidate nodes (one actor message each);
- prioritize: PreScore, Score, NormalizeScore on the same pinned instance; weighted
  sum over the plugins, scaled to the API's 0..10;
- bind: Reserve, Permit, PreBind, Bind (the first plugin not answering Skip), PostBind;
  Unreserve on any failure. When no wasm plugin binds, the Binding is created through
  the Kubernetes API;
- preempt: for each candidate node, RemovePod of its victims, Filter, then AddPod
  back, all on the preemptor's instance; nodes that still fail are dropped.

Each point runs through a `Framework` of the wasm plugins (`framework_of`), with
kube-scheduler's rules for it, as in-process: every PreFilter runs after an
Unschedulable one (an unresolvable rejection or an Error stops the point), a Skip at
PreFilter or PreScore skips that plugin's Filter or Score for the rest of the pod's
cycle (its `CycleState` lives from the filter that began the cycle to the bind, each
request lending it its own handle), scores outside 0..100 are an error, and a failed
binding cycle (an exception included) runs every Reserve plugin's Unreserve. `nodes`
has where the nodes come from and what a request's guests read.

When an instance moves to binding (`docs/extender.md` has kube-scheduler's call order):
the protocol has no Permit signal, kube-scheduler starts the next pod's filter before
the previous pod's bind, and it calls prioritize only when more than one node is
feasible (a single feasible node goes straight to bind). So, when binding is expected
(`expect_bind`), a pod's instance leaves the scheduling slot for the binding map at the
end of the filter that passed it on some node (or of prioritize, when no filter verb
started the cycle): prioritize and preempt of that pod still reach it there, and so
does its bind. A pod whose bind never comes (another extender or plugin failed it, the
scheduler restarted) is reclaimed after `bind_timeout_s` by a sweeper; a pod filtered
again is released first. Without `expect_bind`, the instance stays in the slot and the
next pod's filter reassigns it, as in-process. Either way no assignment outlives its
pod's cycle for long, and every held pod counts against the plugin's
`pool.maxInstances`: when every instance is held, a new pod's filter answers a clear
error instead of starting one more.

A bind runs only for a pod this extender scheduled: one it holds (or whose cycle still
has the slot) under the same namespace, name and UID, on a node that passed its filter.
A bind of any other pod (the extender restarted, or the bind came after the bind
timeout), or to any other node, answers an error, so kube-scheduler unreserves and
retries the pod: nothing is bound behind a guest's back. A prioritize for a pod with no
cycle here (it came after the pod's bind) answers an error too, once a filter has come:
only without a filter verb does prioritize begin a cycle. Preempt may begin one (it can
be the first call of a cycle whose in-tree filters left no node).

Two cycles of one pod never overlap: a verb that would start a cycle of a pod whose
last bind still runs (kube-scheduler gave up on that bind when its HTTP call timed out)
is refused at once with an error, and the scheduler retries the pod with backoff.
Assignments are kept by pod, so overlapping cycles could not tell their calls apart.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import ChainMap
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import structlog

from wasm_scheduler.actors.handle import KubeObject
from wasm_scheduler.adapters.extender import protocol
from wasm_scheduler.adapters.extender.binder import Binder, NoBinder
from wasm_scheduler.adapters.extender.nodes import (
    KnownNodes,
    NodeCache,
    NodeSource,
    RequestHandle,
    RequestNode,
    request_nodes,
)
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.framework import Framework
from wasm_scheduler.adapters.framework.profile import framework_of
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin, pod_key
from wasm_scheduler.framework_api import MAX_NODE_SCORE, SUCCESS, Code, Status

log = structlog.get_logger("adapters.extender")


@dataclass(frozen=True)
class WeightedPlugin:
    plugin: WasmPlugin
    weight: int = 1


@dataclass
class _Cycle:
    """One pod's scheduling cycle here, from the verb that began it (its PreFilter) to its
    bind. It keeps no request's nodes: its binding cycle reads the latest object of each
    node (`ExtenderService._bind_nodes`), so held pods cost no node list each."""

    pod: KubeObject
    uid: str
    #: Its CycleState (what its plugins asked to skip), with no request's handle.
    state: CycleState
    #: What PreFilter said, and the nodes it allows (None: all).
    pre_filter: Status = SUCCESS
    subset: frozenset[str] | None = None
    #: The nodes its bind may name: those that passed its filter (or that its prioritize
    #: scored, when no filter verb began the cycle).
    feasible: frozenset[str] = frozenset()


@dataclass
class _AwaitingBind:
    """A pod held for its bind, until `deadline`."""

    cycle: _Cycle
    deadline: float


def _why(point: str, status: Status) -> str:
    """A failed point's status as an extender error: Error statuses already say where."""
    if status.code == Code.ERROR and status.reason:
        return status.reason
    return f"{point} of {status.plugin or 'a plugin'}: {status.reason or status.code.label}"


class ExtenderService:
    """filter / prioritize / bind / preempt over a set of wasm plugins."""

    def __init__(
        self,
        plugins: Sequence[WeightedPlugin],
        node_cache: NodeSource | None = None,
        binder: Binder | None = None,
        expect_bind: bool = True,
        bind_timeout_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.plugins = list(plugins)
        #: The points of every plugin, run with kube-scheduler's rules.
        self.framework: Framework[RequestNode] = framework_of("extender", [(wp.plugin, wp.weight)
                                                                           for wp in self.plugins])
        self.node_cache: NodeSource = node_cache or NodeCache()
        self.binder: Binder = binder or NoBinder()
        self.expect_bind = expect_bind
        self.bind_timeout_s = bind_timeout_s
        self.clock = clock
        # Adapter bookkeeping shared by the HTTP threads (no guest instance behind it).
        self._lock = threading.Lock()
        #: The cycle that has the scheduling slot now (begun, not held for its bind).
        self._slot: _Cycle | None = None
        self._awaiting: dict[str, _AwaitingBind] = {}
        #: Pods whose bind runs now (no new cycle of such a pod starts; a pod has one hold,
        #: so one bind of it at a time registers here).
        self._binding: set[str] = set()
        #: Has any bind come since start? (A bind timeout with none hints at a missing bindVerb.)
        self._bind_seen = False
        self._said_no_filter = False
        #: The latest object of every node a request carried whole (not node-cache-capable):
        #: what a binding cycle's guest reads. One object a node name, however many pods wait.
        self._latest_nodes: dict[str, KubeObject] = {}
        self._known = KnownNodes()
        #: Has any filter come since start? (A refused bind with none hints at a missing
        #: filterVerb; with one, a prioritize never begins a cycle.)
        self._filter_seen = False
        self._stop = threading.Event()
        self._sweeper = threading.Thread(target=self._sweep, name="extender-bind-sweeper", daemon=True)
        self._sweeper.start()

    def close(self) -> None:
        """Stop the bind sweeper and the node source."""
        self._stop.set()
        self._sweeper.join(timeout=5)
        self.node_cache.close()

    # --- helpers -----------------------------------------------------------------------

    def _nodes_for(self, args: protocol.ExtenderArgs) -> list[RequestNode]:
        """The nodes a filter or prioritize names, as the framework takes them (nodes the
        node cache does not know are left out)."""
        if args.nodes is not None:
            self._latest_nodes.update(zip(args.node_names, args.nodes, strict=True))
            return request_nodes(args.node_names, args.nodes)
        known = self.node_cache.nodes
        missing = [n for n in args.node_names if n not in known]
        if missing:
            self.node_cache.refresh()
            known = self.node_cache.nodes
        return self._known.of(args.node_names, known)

    def _bind_nodes(self) -> Mapping[str, KubeObject]:
        """What a binding cycle's guest reads: the latest object of every known node (a
        view, merged only if the guest lists the nodes)."""
        # Only read through (typeshed asks every map of a ChainMap to be mutable).
        return ChainMap(self._latest_nodes, cast(MutableMapping[str, KubeObject], self.node_cache.nodes))

    def _cycle_of(self, pod: KubeObject) -> _Cycle | None:
        """The pod's cycle under way here (held for its bind, or in the slot), if any."""
        uid, _name = pod_key(pod)
        with self._lock:
            held = self._awaiting.get(uid)
            if held is not None:
                return held.cycle
            slot = self._slot
            return slot if slot is not None and slot.uid == uid else None

    @staticmethod
    def _lend(cycle: _Cycle, handle: RequestHandle) -> CycleState:
        """The cycle's state for one request, with that request's handle."""
        state = cycle.state.clone()
        state.handle = handle
        return state

    def _begin(self, pod: KubeObject, handle: RequestHandle) -> tuple[_Cycle, CycleState]:
        """A new scheduling cycle, in the slot: PreFilter of every plugin
        (`Framework.run_pre_filter`). (The cycle, its state lent to this request.)"""
        uid, name = pod_key(pod)
        state = CycleState(handle)
        with self._lock:
            if uid in self._binding:
                # kube-scheduler gave up on the pod's last bind (its call timed out) and
                # schedules the pod again while that bind still runs here. Assignments are
                # kept by pod, so two overlapping cycles of one pod could not tell their
                # calls apart: this one is refused at once, and the scheduler retries the
                # pod with backoff, by when the old bind has ended. (Checked in the same
                # locked step that starts the cycle: a bind cannot slip in between.)
                log.warning("extender.bind_still_running", pod=name, pod_uid=uid)
                raise ExtenderCallError(f"the last bind of pod {name} is still running; retry later")
            abandoned = self._awaiting.pop(uid, None)
            cycle = self._slot = _Cycle(pod, uid, state)
        if abandoned is not None:
            self._release(abandoned.cycle.pod, "filtered again before bind")
        cycle.subset, cycle.pre_filter = self.framework.run_pre_filter(state, pod)
        cycle.state = state.clone()
        cycle.state.handle = None  # the request's nodes are not kept with the cycle
        return cycle, state

    def _release(self, pod: KubeObject, why: str) -> None:
        for wp in self.plugins:
            wp.plugin.release(pod, why)

    # --- verbs -------------------------------------------------------------------------

    def filter(self, args: protocol.ExtenderArgs) -> dict[str, Any]:
        self._filter_seen = True
        infos = self._nodes_for(args)
        names = [info.name for info in infos]
        failed: dict[str, str] = {}
        if len(infos) != len(args.node_names):
            known = set(names)
            failed = {n: "node unknown to the extender's node cache" for n in args.node_names if n not in known}
        unresolvable: dict[str, str] = {}
        try:
            cycle, state = self._begin(args.pod, RequestHandle(infos))
        except ExtenderCallError as exc:  # the pod's last bind still runs
            return protocol.filter_result([], args.nodes, {}, {}, str(exc))
        status, subset = cycle.pre_filter, cycle.subset
        if status.code == Code.ERROR:
            return protocol.filter_result([], args.nodes, {}, {}, status.reason)
        if not status.ok:
            target = unresolvable if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE else failed
            target.update(dict.fromkeys(names, status.reason or f"rejected by {status.plugin} at PreFilter"))
            return protocol.filter_result([], args.nodes, failed, unresolvable)
        candidates = infos
        if subset is not None:
            candidates = [info for info in infos if info.name in subset]
            outside = (n for n in names if n not in subset)
            unresolvable.update(dict.fromkeys(outside, "node not in the PreFilter result"))
        statuses, error = self.framework.run_filter(state, args.pod, candidates)
        if not error.ok:
            return protocol.filter_result([], args.nodes, {}, {}, error.reason)
        # `run_filter` gives every node that passed the one SUCCESS, in the order given.
        feasible = [name for name, node_status in statuses.items() if node_status is SUCCESS]
        if len(feasible) < len(statuses):
            for name, node_status in statuses.items():
                if node_status is not SUCCESS:
                    target = unresolvable if node_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE else failed
                    target[name] = node_status.reason or f"rejected by {node_status.plugin}"
        cycle.feasible = frozenset(feasible)
        if feasible and self.expect_bind:
            # kube-scheduler may bind now without a prioritize (one feasible node), and the
            # next pod's filter may come first: the pod's instance leaves the slot here.
            self._hold_for_bind(cycle)
        return protocol.filter_result(feasible, args.nodes, failed, unresolvable)

    def prioritize(self, args: protocol.ExtenderArgs) -> list[dict[str, Any]]:
        infos = self._nodes_for(args)
        handle = RequestHandle(infos)
        # Without a filter verb, each cycle that reaches this extender starts with its
        # prioritize (a cycle a preempt began ended with that preempt: the pod was retried).
        cycle = self._cycle_of(args.pod) if self._filter_seen else None
        if cycle is not None:
            state = self._lend(cycle, handle)
        elif self._filter_seen:
            # A prioritize follows its pod's filter in the same cycle: this one came after
            # the cycle ended (the pod's bind, or the bind timeout). No cycle starts for it.
            uid, name = pod_key(args.pod)
            with self._lock:
                binding = uid in self._binding
            if binding:
                raise ExtenderCallError(f"the last bind of pod {name} is still running; retry later")
            raise ExtenderCallError(f"pod {name} has no scheduling cycle in this extender (its cycle ended, or "
                                    "its filter did not come); no scores")
        else:  # no filter verb configured: the cycle starts here
            cycle, state = self._begin(args.pod, handle)
            if not cycle.pre_filter.ok:  # not held: a bind of the pod is refused
                raise ExtenderCallError(_why("PreFilter", cycle.pre_filter))
            if cycle.subset is not None:
                infos = [info for info in infos if info.name in cycle.subset]
            cycle.feasible = frozenset(info.name for info in infos)
        try:
            return self._scores(args.pod, state, infos)
        finally:
            if self.expect_bind:  # kube-scheduler binds even when prioritize failed (it ignores the error)
                self._hold_for_bind(cycle)

    def _scores(self, pod: KubeObject, state: CycleState, infos: Sequence[RequestNode]) -> list[dict[str, Any]]:
        """PreScore, then Score and NormalizeScore of every scoring plugin, weighted, summed
        and scaled to the extender API's 0..10."""
        status = self.framework.run_pre_score(state, pod, infos)
        if not status.ok:
            raise ExtenderCallError(_why("PreScore", status))
        table, status = self.framework.run_score(state, pod, infos)
        if not status.ok:
            raise ExtenderCallError(_why("Score", status))
        weights = sum(self.framework.score_weights.get(plugin, 1) for plugin in table.columns)
        scale = MAX_NODE_SCORE * max(weights, 1)
        return protocol.host_priority_list(
            {n: (total * protocol.MAX_EXTENDER_PRIORITY + scale // 2) // scale
             for n, total in zip(table.names, table.totals(), strict=True)}
        )

    def _hold_for_bind(self, cycle: _Cycle) -> None:
        """The pod's instance moves to the binding map until its bind (or the timeout)."""
        with self._lock:
            held = self._awaiting.get(cycle.uid)
            if held is not None and held.cycle is cycle:  # held since its filter: prioritize keeps it there
                held.deadline = self.clock() + self.bind_timeout_s
                return
            if self._slot is not cycle:
                return  # the slot went to another pod, or the cycle was released meanwhile
            for wp in self.plugins:
                wp.plugin.hold_for_binding(cycle.pod)
            self._awaiting[cycle.uid] = _AwaitingBind(cycle, self.clock() + self.bind_timeout_s)
            self._slot = None

    def bind(self, args: protocol.BindingArgs) -> dict[str, Any]:
        uid = args.pod_uid
        pod = f"{args.pod_namespace}/{args.pod_name}"
        first_without_filter = False
        with self._lock:
            self._bind_seen = True
            held = self._awaiting.get(uid)
            slot = self._slot if self._slot is not None and self._slot.uid == uid else None
            cycle = held.cycle if held is not None else slot
            if cycle is None:
                refusal = (f"pod {pod} (uid {uid}) has no scheduling cycle in this extender (it restarted, or the "
                           "bind came after the bind timeout); retry the pod")
                if not self._filter_seen:
                    # kube-scheduler skips prioritize when one node is feasible, so without a
                    # filter verb such a pod's bind is the first call this extender sees.
                    refusal += ("; no filter has come since the extender started: an extender entry with a "
                                "bindVerb needs a filterVerb")
                    first_without_filter = not self._said_no_filter
                    self._said_no_filter = True
            elif not _same_pod(cycle.pod, args):
                refusal = (f"bind of {pod} names uid {uid}, which this extender "
                           f"{'scheduled' if held is not None else 'schedules'} as {pod_key(cycle.pod)[1]}")
            elif args.node not in cycle.feasible:
                refusal = f"node {args.node} did not pass this extender's filter for pod {pod}"
                if not cycle.pre_filter.ok:
                    refusal += f" ({_why('PreFilter', cycle.pre_filter)})"
            else:
                refusal = ""
                if held is None:
                    # Its cycle still has the slot (no prioritize, and held nowhere yet): it
                    # moves to binding now, before anything else can take the slot.
                    for wp in self.plugins:
                        wp.plugin.hold_for_binding(cycle.pod)
                    self._slot = None
                else:
                    del self._awaiting[uid]
                self._binding.add(uid)
        if refusal:
            if first_without_filter:
                log.warning("extender.bind_without_filter",
                            reason="binds come but no filter has: kube-scheduler's extender entry needs a "
                                   "filterVerb with its bindVerb (a pod with one feasible node gets no prioritize)")
            log.warning("extender.bind_refused", pod=pod, pod_uid=uid, node=args.node, reason=refusal)
            return {"Error": refusal}
        assert cycle is not None
        try:
            return self._binding_cycle(cycle, args)
        finally:
            with self._lock:
                self._binding.discard(uid)

    def _binding_cycle(self, cycle: _Cycle, args: protocol.BindingArgs) -> dict[str, Any]:
        """Reserve, Permit, PreBind, Bind, PostBind of a held pod; every Reserve plugin's
        Unreserve on a failure, or on an exception (a bug of ours or a binder's), so the pod's
        instances go back to their pools whatever happens."""
        pod, node, framework = cycle.pod, args.node, self.framework
        state = self._lend(cycle, RequestHandle(self._bind_nodes()))
        who = f"{args.pod_namespace}/{args.pod_name}"

        def fail(reason: str) -> dict[str, Any]:
            framework.run_unreserve(state, pod, node)
            log.info("cycle.finished", phase="binding", pod=who, pod_uid=args.pod_uid, outcome="error",
                     reason=reason)
            return {"Error": reason}

        try:
            status = framework.run_reserve(state, pod, node)
            if not status.ok:
                return fail(_why("Reserve", status))
            status, timeouts = framework.run_permit(state, pod, node)
            if status.code == Code.WAIT:
                return fail(f"Permit of {', '.join(timeouts)} asked to wait; the extender API cannot wait for "
                            "an allow")
            if not status.ok:
                return fail(_why("Permit", status))
            status = framework.run_pre_bind(state, pod, node)
            if not status.ok:
                return fail(_why("PreBind", status))
            status = framework.run_bind(state, pod, node)
            if status.code == Code.SKIP:  # no wasm plugin binds: the Binding goes through the API
                error = self.binder.bind(args.pod_namespace, args.pod_name, args.pod_uid, node)
                if error:
                    return fail(error)
                bound_by = "kubernetes-api"
            elif not status.ok:
                return fail(_why("Bind", status))
            else:
                bound_by = status.plugin
        except Exception as exc:  # our bug, or a binder's: answered, logged, the instances released
            error_id = secrets.token_hex(6)
            log.error("extender.internal_error", verb="bind", error_id=error_id, exc_info=exc)
            try:
                return fail(f"internal error (error id {error_id})")
            except Exception:  # noqa: BLE001 - the Unreserve failed too: the instances go back regardless
                self._release(pod, "internal error")
                return {"Error": f"internal error (error id {error_id})"}
        try:
            framework.run_post_bind(state, pod, node)
        except Exception as exc:  # noqa: BLE001 - the pod is bound: a PostBind bug changes nothing about that
            log.error("extender.internal_error", verb="bind", point="PostBind", error_id=secrets.token_hex(6),
                      exc_info=exc)
            self._release(pod, "internal error")  # every PostBind ran (`Framework._every`); a no-op then
        log.info("cycle.finished", phase="binding", pod=who, pod_uid=args.pod_uid, outcome="bound", node=node,
                 bound_by=bound_by)
        return {"Error": ""}

    def preempt(self, args: protocol.PreemptionArgs) -> dict[str, Any]:
        """Which candidate nodes the pod fits once their victims are gone. Preempt may be
        the first call of a cycle (kube-scheduler's own filters left no node): it begins
        one then, as filter would."""
        known = {name: self.node_cache.nodes.get(name) or self._latest_nodes.get(name) for name in args.victims}
        handle = RequestHandle({n: node for n, node in known.items() if node is not None})
        cycle = self._cycle_of(args.pod)
        if cycle is not None:
            state = self._lend(cycle, handle)
        else:
            cycle, state = self._begin(args.pod, handle)
        status = cycle.pre_filter
        if status.code == Code.ERROR:
            raise ExtenderCallError(_why("PreFilter", status))
        if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return protocol.preemption_result({}, args.pdb_violations)  # no victim can help
        kept: dict[str, list[KubeObject]] = {}
        for name, victims in args.victims.items():
            if cycle.subset is not None and name not in cycle.subset:
                continue  # PreFilter ruled the node out, whatever runs there
            info = RequestNode(name, known[name] or {"metadata": {"name": name}})
            victims = [self.node_cache.pods.get(str(v["metadata"]["uid"]), v) if args.meta_only else v
                       for v in victims]
            if self._still_feasible(state, args.pod, info, victims):
                kept[name] = victims
        return protocol.preemption_result(kept, args.pdb_violations)

    def _still_feasible(self, state: CycleState, pod: KubeObject, node: RequestNode,
                        victims: list[KubeObject]) -> bool:
        """Does the pod pass Filter on `node` with its victims gone? RemovePod of each
        victim, Filter, then AddPod of each back (the plugins keep their state in their
        instances, not in a cloned CycleState). A failing RemovePod makes the node fail."""
        framework = self.framework
        removed: list[KubeObject] = []
        feasible = True
        for victim in victims:
            if not framework.run_remove_pod(state, pod, victim, node).ok:
                feasible = False
                break
            removed.append(victim)
        if feasible:
            statuses, error = framework.run_filter(state, pod, [node])
            feasible = error.ok and statuses[node.name].ok
        for victim in removed:
            framework.run_add_pod(state, pod, victim, node)
        return feasible

    # --- reclaiming ------------------------------------------------------------------------

    def _sweep(self) -> None:
        while not self._stop.wait(min(1.0, max(self.bind_timeout_s / 4, 0.01))):
            self.reclaim_expired()

    def reclaim_expired(self) -> int:
        now = self.clock()
        with self._lock:
            expired = [(uid, a) for uid, a in self._awaiting.items() if a.deadline <= now]
            for uid, _a in expired:
                del self._awaiting[uid]
            hint = bool(expired) and not self._bind_seen
            self._bind_seen = self._bind_seen or hint  # said once
        if hint:
            log.warning("extender.no_bind_seen", pods=len(expired), timeout_s=self.bind_timeout_s,
                        reason="pods reached the bind timeout and no bind has come since the extender started: "
                               "if kube-scheduler's extender entry has no bindVerb, start the extender with "
                               "--no-bind")
        for uid, awaiting in expired:
            log.warning("assignment.bind_timeout", pod_uid=uid, timeout_s=self.bind_timeout_s)
            self._release(awaiting.cycle.pod, "no bind within the bind timeout")
        return len(expired)

    def awaiting_bind(self) -> int:
        with self._lock:
            return len(self._awaiting)


class ExtenderCallError(Exception):
    """A guest failed a verb: answered as the verb's error (HTTP 500 for prioritize)."""


def _same_pod(pod: KubeObject, args: protocol.BindingArgs) -> bool:
    """Does the bind name the pod this extender scheduled under that UID?"""
    meta = pod.get("metadata", {})
    return (meta.get("namespace") or "default") == args.pod_namespace and meta.get("name", "") == args.pod_name


__all__ = ["ExtenderService", "WeightedPlugin", "ExtenderCallError"]
