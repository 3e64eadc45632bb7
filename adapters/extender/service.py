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
kube-scheduler's rules for it, as in-process: the first PreFilter rejection stops the
point, a Skip at PreFilter or PreScore skips that plugin's Filter or Score for the rest
of the pod's cycle (its `CycleState` lives from the filter that began the cycle to
the bind, each request lending it its own handle), scores outside 0..100 are an
error, and a failed binding cycle runs every Reserve plugin's Unreserve.

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
has the slot) under the same namespace, name and UID. A bind of any other pod (the
extender restarted, or the bind came after the bind timeout) answers an error, so
kube-scheduler unreserves and retries the pod: nothing is bound behind a guest's back.

Two cycles of one pod never overlap: a verb that would start a cycle of a pod whose
last bind still runs (kube-scheduler gave up on that bind when its HTTP call timed out)
is refused at once with an error, and the scheduler retries the pod with backoff.
Assignments are kept by pod, so overlapping cycles could not tell their calls apart.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from wasm_scheduler.actors.handle import KubeObject
from wasm_scheduler.adapters.extender import protocol
from wasm_scheduler.adapters.extender.binder import Binder, NoBinder
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.profile import framework_of
from wasm_scheduler.adapters.framework.resources import Resources
from wasm_scheduler.adapters.framework.snapshot import NodeInfo, SnapshotView
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin, pod_key
from wasm_scheduler.framework_api import MAX_NODE_SCORE, Code, NodeScore, Status

log = structlog.get_logger("adapters.extender")

#: The allocatable of a node a request carries (the extender does not count resources).
_NOT_COUNTED = Resources()


@dataclass(frozen=True)
class WeightedPlugin:
    plugin: WasmPlugin
    weight: int = 1


class RequestHandle:
    """The FrameworkHandle of one request: the nodes it carries (or the cached ones).

    The snapshot view (by name, for image states) is built only when a guest asks for
    it: most requests never read a node object. A binding cycle's handle gets node
    objects only, and makes their NodeInfo only then."""

    def __init__(self, nodes: Sequence[KubeObject], pods_by_uid: Mapping[str, KubeObject],
                 infos: Sequence[NodeInfo] | None = None) -> None:
        self._nodes = tuple(nodes)
        self._infos = infos
        self._view: SnapshotView | None = None
        self._pods = pods_by_uid
        self.events: list[Mapping[str, Any]] = []

    @property
    def view(self) -> SnapshotView:
        if self._view is None:
            infos = self._infos if self._infos is not None else _node_infos(self._nodes)
            self._view = SnapshotView(infos, 0)
        return self._view

    def get_node(self, name: str) -> KubeObject | None:
        info = self.view.get(name)
        return info.node if info else None

    def list_nodes(self) -> Sequence[KubeObject]:
        return self._nodes

    def image_states(self, node_name: str) -> Mapping[str, Mapping[str, int]]:
        return self.view.image_states(node_name)

    def record_event(self, event: Mapping[str, Any]) -> None:
        self.events.append(event)

    def get_waiting_pod(self, uid: str) -> KubeObject | None:
        return None  # the extender protocol has no waiting pods

    def reject_waiting_pod(self, uid: str, plugin: str, reason: str) -> bool:
        return False


def _node_infos(nodes: Sequence[KubeObject]) -> list[NodeInfo]:
    return [NodeInfo(node, _NOT_COUNTED) for node in nodes]


class NodeSource(Protocol):
    """Where node-cache-capable requests find node objects (and preemption its victims)."""

    @property
    def nodes(self) -> Mapping[str, KubeObject]: ...

    @property
    def pods(self) -> Mapping[str, KubeObject]: ...

    def refresh(self) -> None:
        """Asked when a request names a node the source does not know; must not block long."""

    def close(self) -> None: ...


@dataclass
class NodeCache:
    """Node objects for node-cache-capable mode from a loader (a `NodeSource`); the file-backed
    one that reloads in the background is `snapshot_reload.SnapshotReloader`."""

    load: Callable[[], tuple[Sequence[KubeObject], Sequence[KubeObject]]] = lambda: ((), ())
    nodes: dict[str, KubeObject] = field(default_factory=dict)
    pods: dict[str, KubeObject] = field(default_factory=dict)

    def refresh(self) -> None:
        nodes, pods = self.load()
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.pods = {str(p.get("metadata", {}).get("uid", "")): p for p in pods}

    def close(self) -> None:
        pass


@dataclass
class _AwaitingBind:
    """A pod held for its bind. It keeps no node list: its binding cycle reads the latest
    object of each node (`ExtenderService._bind_nodes`), so held pods cost no request's
    node list each."""

    pod: KubeObject
    deadline: float
    #: The cycle state of the pod's scheduling cycle (its plugins' Skips), for its binding cycle.
    state: CycleState


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
        self.framework = framework_of("extender", [(wp.plugin, wp.weight) for wp in self.plugins])
        self.node_cache: NodeSource = node_cache or NodeCache()
        self.binder: Binder = binder or NoBinder()
        self.expect_bind = expect_bind
        self.bind_timeout_s = bind_timeout_s
        self.clock = clock
        # Adapter bookkeeping shared by the HTTP threads (no guest instance behind it).
        self._lock = threading.Lock()
        self._awaiting: dict[str, _AwaitingBind] = {}
        #: Pods whose bind runs now (no new cycle of such a pod starts; a pod has one hold,
        #: so one bind of it at a time registers here).
        self._binding: set[str] = set()
        #: Has any bind come since start? (A bind timeout with none hints at a missing bindVerb.)
        self._bind_seen = False
        self._said_no_filter = False
        self._scheduling: str = ""  # uid of the pod whose scheduling cycle has the slot now
        #: That pod (for a bind that comes while its cycle still has the slot), and its cycle state.
        self._scheduling_pod: KubeObject | None = None
        self._scheduling_state: CycleState | None = None
        #: The latest object of every node a request carried whole (not node-cache-capable):
        #: what a binding cycle's guest reads. One object a node name, however many pods wait.
        self._latest_nodes: dict[str, KubeObject] = {}
        #: NodeInfo of the node cache's nodes by name, and the node mapping they were made of.
        self._info_cache: dict[str, NodeInfo] = {}
        self._info_source: Mapping[str, KubeObject] | None = None
        #: Has any filter come since start? (A refused bind with none hints at a missing filterVerb.)
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

    def _nodes_for(self, args: protocol.ExtenderArgs) -> list[NodeInfo]:
        """The nodes a filter or prioritize names, as the framework takes them (nodes the
        node cache does not know are left out)."""
        if args.nodes is not None:
            self._latest_nodes.update(zip(args.node_names, args.nodes, strict=True))
            return _node_infos(args.nodes)
        known = self.node_cache.nodes
        missing = [n for n in args.node_names if n not in known]
        if missing:
            self.node_cache.refresh()
            known = self.node_cache.nodes
        return self._known_infos(args.node_names, known)

    def _known_infos(self, names: Sequence[str], known: Mapping[str, KubeObject]) -> list[NodeInfo]:
        """The NodeInfo of each named node the node cache knows, made once per node object:
        a node cache is swapped whole when it reloads, which starts this cache afresh, and
        a node whose object changed in place is made again."""
        cache = self._info_cache
        if self._info_source is not known:
            cache, self._info_source = {}, known
            self._info_cache = cache
        infos: list[NodeInfo] = []
        for name in names:
            node = known.get(name)
            if node is None:
                continue
            info = cache.get(name)
            if info is None or info.node is not node:
                info = cache[name] = NodeInfo(node, _NOT_COUNTED)
            infos.append(info)
        return infos

    def _bind_nodes(self) -> list[KubeObject]:
        """What a binding cycle's guest reads: the latest object of every known node."""
        return list({**self.node_cache.nodes, **self._latest_nodes}.values())

    def _handle(self, infos: Sequence[NodeInfo]) -> RequestHandle:
        return RequestHandle([info.node for info in infos], self.node_cache.pods, infos)

    def _state(self, pod: KubeObject, handle: RequestHandle) -> CycleState:
        """The pod's cycle state for this request: the one its cycle began with (what its
        plugins asked to skip), lent this request's handle; a new one outside a cycle."""
        uid, _name = pod_key(pod)
        with self._lock:
            held = self._awaiting.get(uid)
            began = held.state if held is not None else (
                self._scheduling_state if self._scheduling == uid else None)
        if began is None:
            return CycleState(handle)
        state = began.clone()
        state.handle = handle
        return state

    def _begin(self, pod: KubeObject, handle: RequestHandle) -> tuple[CycleState, frozenset[str] | None, Status]:
        """A new scheduling cycle: PreFilter of every plugin (`Framework.run_pre_filter`).
        (the cycle's state, the nodes PreFilter allows (None: all), its status)."""
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
            self._scheduling = uid
            self._scheduling_pod = pod
            self._scheduling_state = state
        if abandoned is not None:
            self._release(abandoned.pod, "filtered again before bind")
        subset, status = self.framework.run_pre_filter(state, pod)
        return state, subset, status

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
            state, subset, status = self._begin(args.pod, self._handle(infos))
        except ExtenderCallError as exc:  # the pod's last bind still runs
            return protocol.filter_result([], args.nodes, {}, {}, str(exc))
        if status.code == Code.ERROR:
            return protocol.filter_result([], args.nodes, {}, {}, status.reason)
        if not status.ok:
            target = unresolvable if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE else failed
            reason = status.reason or f"rejected by {status.plugin} at PreFilter"
            target.update(dict.fromkeys(names, reason))
            return protocol.filter_result([], args.nodes, failed, unresolvable)
        candidates = infos
        if subset is not None:
            candidates = [info for info in infos if info.name in subset]
            outside = (n for n in names if n not in subset)
            unresolvable.update(dict.fromkeys(outside, "node not in the PreFilter result"))
        statuses, error = self.framework.run_filter(state, args.pod, candidates)
        if not error.ok:
            return protocol.filter_result([], args.nodes, {}, {}, error.reason)
        feasible: list[str] = []
        for info in candidates:
            node_status = statuses[info.name]
            if node_status.ok:
                feasible.append(info.name)
                continue
            target = unresolvable if node_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE else failed
            target[info.name] = node_status.reason or f"rejected by {node_status.plugin}"
        if feasible and self.expect_bind:
            # kube-scheduler may bind now without a prioritize (one feasible node), and the
            # next pod's filter may come first: the pod's instance leaves the slot here.
            self._hold_for_bind(args.pod)
        return protocol.filter_result(feasible, args.nodes, failed, unresolvable)

    def prioritize(self, args: protocol.ExtenderArgs) -> list[dict[str, Any]]:
        infos = self._nodes_for(args)
        handle = self._handle(infos)
        if self._in_cycle(args.pod):
            state = self._state(args.pod, handle)
        else:  # no filter verb configured: the cycle starts here
            state, _subset, status = self._begin(args.pod, handle)
            if not status.ok:
                self._hold_after_prioritize(args.pod)
                raise ExtenderCallError(status.reason or f"rejected by {status.plugin} at PreFilter")
        try:
            return self._scores(args.pod, state, infos)
        finally:
            self._hold_after_prioritize(args.pod)

    def _hold_after_prioritize(self, pod: KubeObject) -> None:
        if self.expect_bind:  # kube-scheduler binds even when prioritize failed (it ignores the error)
            self._hold_for_bind(pod)

    def _in_cycle(self, pod: KubeObject) -> bool:
        """Is the pod's scheduling cycle under way here (in the slot, or held for its bind)?"""
        uid, _name = pod_key(pod)
        with self._lock:
            return self._scheduling == uid or uid in self._awaiting

    def _scores(self, pod: KubeObject, state: CycleState, infos: Sequence[NodeInfo]) -> list[dict[str, Any]]:
        """PreScore, then Score and NormalizeScore of every scoring plugin, weighted, summed
        and scaled to the extender API's 0..10."""
        status = self.framework.run_pre_score(state, pod, infos)
        if not status.ok:
            raise ExtenderCallError(status.reason)
        table, status = self.framework.run_score(state, pod, infos)
        if not status.ok:
            raise ExtenderCallError(status.reason)
        weights = sum(self.framework.score_weights.get(plugin, 1) for plugin in table.columns)
        scale = MAX_NODE_SCORE * max(weights, 1)
        return protocol.host_priority_list(
            {n: (total * protocol.MAX_EXTENDER_PRIORITY + scale // 2) // scale
             for n, total in zip(table.names, table.totals(), strict=True)}
        )

    def _hold_for_bind(self, pod: KubeObject) -> None:
        """The pod's instance moves to the binding map until its bind (or the timeout)."""
        uid, _name = pod_key(pod)
        with self._lock:
            held = self._awaiting.get(uid)
            if held is not None:  # held since its filter: prioritize keeps it there
                held.deadline = self.clock() + self.bind_timeout_s
                return
            if self._scheduling != uid or self._scheduling_state is None:
                return  # the slot went to another pod, or the cycle was released meanwhile
            for wp in self.plugins:
                wp.plugin.hold_for_binding(pod)
            self._awaiting[uid] = _AwaitingBind(pod, self.clock() + self.bind_timeout_s, self._scheduling_state)
            self._leave_slot()

    def _leave_slot(self) -> None:
        self._scheduling = ""
        self._scheduling_pod = None
        self._scheduling_state = None

    def bind(self, args: protocol.BindingArgs) -> dict[str, Any]:
        uid = args.pod_uid
        with self._lock:
            self._bind_seen = True
            waiting = self._awaiting.get(uid)
            slot_pod = self._scheduling_pod if self._scheduling == uid else None
            if (waiting is None and slot_pod is not None and self._scheduling_state is not None
                    and _same_pod(slot_pod, args)):
                # Its cycle still has the slot (no prioritize, and held nowhere yet): it moves
                # to binding now, before anything else can take the slot.
                for wp in self.plugins:
                    wp.plugin.hold_for_binding(slot_pod)
                waiting = _AwaitingBind(slot_pod, 0.0, self._scheduling_state)
                self._awaiting[uid] = waiting
                self._leave_slot()
            first_without_filter = False
            if waiting is None and slot_pod is not None:
                refusal = (f"bind of {args.pod_namespace}/{args.pod_name} names uid {uid}, which this extender "
                           f"schedules as {pod_key(slot_pod)[1]}")
            elif waiting is None:
                refusal = (f"pod {args.pod_namespace}/{args.pod_name} (uid {uid}) has no scheduling cycle in this "
                           "extender (it restarted, or the bind came after the bind timeout); retry the pod")
                if not self._filter_seen:
                    # kube-scheduler skips prioritize when one node is feasible, so without a
                    # filter verb such a pod's bind is the first call this extender sees.
                    refusal += ("; no filter has come since the extender started: an extender entry with a "
                                "bindVerb needs a filterVerb")
                    first_without_filter = not self._said_no_filter
                    self._said_no_filter = True
            elif not _same_pod(waiting.pod, args):
                refusal = (f"bind of {args.pod_namespace}/{args.pod_name} names uid {uid}, which this extender "
                           f"scheduled as {pod_key(waiting.pod)[1]}")
                waiting = None
            else:
                refusal = ""
                del self._awaiting[uid]
                self._binding.add(uid)
        if waiting is None:
            if first_without_filter:
                log.warning("extender.bind_without_filter",
                            reason="binds come but no filter has: kube-scheduler's extender entry needs a "
                                   "filterVerb with its bindVerb (a pod with one feasible node gets no prioritize)")
            log.warning("extender.bind_refused", pod=f"{args.pod_namespace}/{args.pod_name}", pod_uid=uid,
                        node=args.node, reason=refusal)
            return {"Error": refusal}
        try:
            return self._binding_cycle(waiting, args)
        finally:
            with self._lock:
                self._binding.discard(args.pod_uid)

    def _binding_cycle(self, waiting: _AwaitingBind, args: protocol.BindingArgs) -> dict[str, Any]:
        """Reserve, Permit, PreBind, Bind, PostBind of a held pod; every Reserve plugin's
        Unreserve on a failure."""
        pod, node, framework = waiting.pod, args.node, self.framework
        state = waiting.state.clone()
        state.handle = RequestHandle(self._bind_nodes(), self.node_cache.pods)

        def fail(point: str, status: Status) -> dict[str, Any]:
            reason = status.reason or f"{point} of {status.plugin or 'a plugin'}: {status.code.label}"
            framework.run_unreserve(state, pod, node)
            log.info("cycle.finished", phase="binding", pod=f"{args.pod_namespace}/{args.pod_name}",
                     pod_uid=args.pod_uid, outcome="error", reason=reason)
            return {"Error": reason}

        status = framework.run_reserve(state, pod, node)
        if not status.ok:
            return fail("Reserve", status)
        status, timeouts = framework.run_permit(state, pod, node)
        if status.code == Code.WAIT:
            return fail("Permit", Status(Code.ERROR, f"Permit of {', '.join(timeouts)} asked to wait; the extender "
                                         "API cannot wait for an allow"))
        if not status.ok:
            return fail("Permit", status)
        status = framework.run_pre_bind(state, pod, node)
        if not status.ok:
            return fail("PreBind", status)
        status = framework.run_bind(state, pod, node)
        if status.code == Code.SKIP:  # no wasm plugin binds: the Binding goes through the API
            error = self.binder.bind(args.pod_namespace, args.pod_name, args.pod_uid, node)
            if error:
                return fail("Bind", Status(Code.ERROR, error))
            bound_by = "kubernetes-api"
        elif not status.ok:
            return fail("Bind", status)
        else:
            bound_by = status.plugin
        framework.run_post_bind(state, pod, node)
        log.info("cycle.finished", phase="binding", pod=f"{args.pod_namespace}/{args.pod_name}",
                 pod_uid=args.pod_uid, outcome="bound", node=node, bound_by=bound_by)
        return {"Error": ""}

    def preempt(self, args: protocol.PreemptionArgs) -> dict[str, Any]:
        nodes = [self.node_cache.nodes.get(n) or {"metadata": {"name": n}} for n in args.victims]
        infos = _node_infos(nodes)
        handle = self._handle([info for info, n in zip(infos, args.victims, strict=True)
                               if n in self.node_cache.nodes])
        if self._in_cycle(args.pod):
            state = self._state(args.pod, handle)
        else:
            state, _subset, _status = self._begin(args.pod, handle)
        kept: dict[str, list[Mapping[str, Any]]] = {}
        for info, victims in zip(infos, args.victims.values(), strict=True):
            victims = [self.node_cache.pods.get(str(v["metadata"]["uid"]), v) if args.meta_only else v
                       for v in victims]
            if self._still_feasible(state, args.pod, info, victims):
                kept[info.name] = victims
        return protocol.preemption_result(kept, args.pdb_violations)

    def _still_feasible(self, state: CycleState, pod: KubeObject, node: NodeInfo,
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
            self._release(awaiting.pod, "no bind within the bind timeout")
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


__all__ = ["ExtenderService", "WeightedPlugin", "NodeCache", "NodeSource", "RequestHandle", "ExtenderCallError",
           "NodeScore"]
