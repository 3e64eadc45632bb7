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
from wasm_scheduler.adapters.framework.resources import Resources
from wasm_scheduler.adapters.framework.snapshot import NodeInfo, SnapshotView
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin, pod_key
from wasm_scheduler.framework_api import Code, NodeScore, Status

log = structlog.get_logger("adapters.extender")

#: Highest score a framework plugin gives (framework.MaxNodeScore).
MAX_NODE_SCORE = 100


@dataclass(frozen=True)
class WeightedPlugin:
    plugin: WasmPlugin
    weight: int = 1


class RequestHandle:
    """The FrameworkHandle of one request: the nodes it carries (or the cached ones).

    The snapshot view (a NodeInfo a node, for image states) is built only when a guest
    asks for it: most requests never read a node object, and building one per node was
    most of a verb's cost on a large cluster."""

    def __init__(self, nodes: Sequence[KubeObject], pods_by_uid: Mapping[str, KubeObject]) -> None:
        self._nodes = tuple(nodes)
        self._view: SnapshotView | None = None
        self._pods = pods_by_uid
        self.events: list[Mapping[str, Any]] = []

    @property
    def view(self) -> SnapshotView:
        if self._view is None:
            self._view = SnapshotView([NodeInfo(n, Resources()) for n in self._nodes], 0)
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


@dataclass
class RequestState:
    """The cycle state the facade reads its handle from."""

    handle: RequestHandle


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
        #: That pod (for a bind that comes while its cycle still has the slot).
        self._scheduling_pod: KubeObject | None = None
        #: The latest object of every node a request carried whole (not node-cache-capable):
        #: what a binding cycle's guest reads. One object a node name, however many pods wait.
        self._latest_nodes: dict[str, KubeObject] = {}
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

    def _nodes_for(self, args: protocol.ExtenderArgs) -> list[KubeObject]:
        if args.nodes is not None:
            self._latest_nodes.update(zip(args.node_names, args.nodes, strict=True))
            return args.nodes
        known = self.node_cache.nodes
        missing = [n for n in args.node_names if n not in known]
        if missing:
            self.node_cache.refresh()
            known = self.node_cache.nodes
        return [known[n] for n in args.node_names if n in known]

    def _bind_nodes(self) -> list[KubeObject]:
        """What a binding cycle's guest reads: the latest object of every known node."""
        return list({**self.node_cache.nodes, **self._latest_nodes}.values())

    def _state(self, nodes: Sequence[KubeObject]) -> RequestState:
        return RequestState(RequestHandle(nodes, self.node_cache.pods))

    def _begin(self, pod: KubeObject, state: RequestState) -> tuple[list[Status], frozenset[str] | None]:
        """PreFilter on every plugin (a new scheduling cycle): the failures, and the
        intersection of the node subsets the plugins asked for (None: all nodes)."""
        uid, name = pod_key(pod)
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
        if abandoned is not None:
            self._release(abandoned.pod, "filtered again before bind")
        failures: list[Status] = []
        subset: frozenset[str] | None = None
        for wp in self.plugins:
            result = wp.plugin.pre_filter(state, pod)
            if not result.status.ok and result.status.code != Code.SKIP:
                failures.append(result.status)
            elif result.node_names is not None:
                subset = result.node_names if subset is None else subset & result.node_names
        return failures, subset

    def _release(self, pod: KubeObject, why: str) -> None:
        for wp in self.plugins:
            wp.plugin.release(pod, why)

    # --- verbs -------------------------------------------------------------------------

    def filter(self, args: protocol.ExtenderArgs) -> dict[str, Any]:
        self._filter_seen = True
        nodes = self._nodes_for(args)
        names = [n["metadata"]["name"] for n in nodes]
        known = set(names)
        unknown = [n for n in args.node_names if n not in known]
        state = self._state(nodes)
        failed: dict[str, str] = {n: "node unknown to the extender's node cache" for n in unknown}
        unresolvable: dict[str, str] = {}
        try:
            failures, subset = self._begin(args.pod, state)
        except ExtenderCallError as exc:  # the pod's last bind still runs
            return protocol.filter_result([], args.nodes, {}, {}, str(exc))
        for status in failures:
            if status.code == Code.ERROR:
                return protocol.filter_result([], args.nodes, {}, {}, status.reason)
            target = unresolvable if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE else failed
            for n in names:
                target.setdefault(n, status.reason or f"rejected by {status.plugin} at PreFilter")
        if subset is not None:
            for n in names:
                if n not in subset and n not in failed:
                    unresolvable.setdefault(n, "node not in the PreFilter result")
        candidates = [n for n in names if n not in failed and n not in unresolvable]
        for wp in self.plugins:
            if not candidates or not wp.plugin.implements("filter"):
                continue
            statuses = wp.plugin.filter_nodes(state, args.pod, candidates)
            rejected: set[str] = set()
            for n, status in statuses.items():
                if status.ok:
                    continue
                if status.code == Code.ERROR:
                    return protocol.filter_result([], args.nodes, {}, {}, status.reason)
                target = unresolvable if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE else failed
                target[n] = status.reason or f"rejected by {status.plugin}"
                rejected.add(n)
            candidates = [n for n in candidates if n not in rejected and n in statuses]
        if candidates and self.expect_bind:
            # kube-scheduler may bind now without a prioritize (one feasible node), and the
            # next pod's filter may come first: the pod's instance leaves the slot here.
            self._hold_for_bind(args.pod)
        return protocol.filter_result(candidates, args.nodes, failed, unresolvable)

    def prioritize(self, args: protocol.ExtenderArgs) -> list[dict[str, Any]]:
        nodes = self._nodes_for(args)
        names = [n["metadata"]["name"] for n in nodes]
        state = self._state(nodes)
        if not self._in_cycle(args.pod):
            self._begin(args.pod, state)  # no filter verb configured: the cycle starts here
        try:
            return self._scores(args.pod, state, names)
        finally:
            # kube-scheduler binds even when prioritize failed (it ignores the error).
            if self.expect_bind:
                self._hold_for_bind(args.pod)

    def _in_cycle(self, pod: KubeObject) -> bool:
        """Is the pod's scheduling cycle under way here (in the slot, or held for its bind)?"""
        uid, _name = pod_key(pod)
        with self._lock:
            return self._scheduling == uid or uid in self._awaiting

    def _scores(self, pod: KubeObject, state: RequestState, names: list[str]) -> list[dict[str, Any]]:
        """PreScore, Score and NormalizeScore of every scoring plugin, summed and scaled."""
        totals = dict.fromkeys(names, 0)
        weights = 0
        for wp in self.plugins:
            if not wp.plugin.implements("score"):
                continue
            status = wp.plugin.pre_score(state, pod, names)
            if not status.ok and status.code != Code.SKIP:
                raise ExtenderCallError(status.reason or f"PreScore of {wp.plugin.name} failed")
            if status.code == Code.SKIP:
                continue
            scored = wp.plugin.score_nodes(state, pod, names)
            if not scored.status.ok:
                raise ExtenderCallError(scored.status.reason or f"Score of {wp.plugin.name} failed")
            normalized = wp.plugin.normalize_score(state, pod, scored.scores)
            if not normalized.status.ok:
                raise ExtenderCallError(normalized.status.reason or f"NormalizeScore of {wp.plugin.name} failed")
            weights += wp.weight
            for score in normalized.scores:
                totals[score.name] = totals.get(score.name, 0) + wp.weight * _clamp(score.score)
        scale = MAX_NODE_SCORE * max(weights, 1)
        return protocol.host_priority_list(
            {n: (total * protocol.MAX_EXTENDER_PRIORITY + scale // 2) // scale for n, total in totals.items()}
        )

    def _hold_for_bind(self, pod: KubeObject) -> None:
        """The pod's instance moves to the binding map until its bind (or the timeout)."""
        uid, _name = pod_key(pod)
        with self._lock:
            held = self._awaiting.get(uid)
            if held is not None:  # held since its filter: prioritize keeps it there
                held.deadline = self.clock() + self.bind_timeout_s
                return
            if self._scheduling != uid:
                return  # the slot went to another pod, or the cycle was released meanwhile
            for wp in self.plugins:
                wp.plugin.hold_for_binding(pod)
            self._awaiting[uid] = _AwaitingBind(pod, self.clock() + self.bind_timeout_s)
            self._scheduling = ""
            self._scheduling_pod = None

    def bind(self, args: protocol.BindingArgs) -> dict[str, Any]:
        uid = args.pod_uid
        with self._lock:
            self._bind_seen = True
            waiting = self._awaiting.get(uid)
            slot_pod = self._scheduling_pod if self._scheduling == uid else None
            if waiting is None and slot_pod is not None and _same_pod(slot_pod, args):
                # Its cycle still has the slot (no prioritize, and held nowhere yet): it moves
                # to binding now, before anything else can take the slot.
                for wp in self.plugins:
                    wp.plugin.hold_for_binding(slot_pod)
                waiting = _AwaitingBind(slot_pod, 0.0)
                self._awaiting[uid] = waiting
                self._scheduling = ""
                self._scheduling_pod = None
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
        """Reserve, Permit, PreBind, Bind, PostBind of a held pod; Unreserve on a failure."""
        pod, node = waiting.pod, args.node
        state = self._state(self._bind_nodes())
        done: list[WeightedPlugin] = []

        def fail(reason: str) -> dict[str, Any]:
            for wp in reversed(done):
                wp.plugin.unreserve(state, pod, node)
            log.info("cycle.finished", phase="binding", pod=f"{args.pod_namespace}/{args.pod_name}",
                     pod_uid=args.pod_uid, outcome="error", reason=reason)
            return {"Error": reason}

        for wp in self.plugins:
            done.append(wp)
            status = wp.plugin.reserve(state, pod, node)
            if not status.ok:
                return fail(status.reason or f"Reserve of {wp.plugin.name} failed")
        for wp in self.plugins:
            permit = wp.plugin.permit(state, pod, node)
            if permit.status.code == Code.WAIT:
                return fail(f"Permit of {wp.plugin.name} asked to wait; the extender API cannot wait for an allow")
            if not permit.status.ok:
                return fail(permit.status.reason or f"Permit of {wp.plugin.name} rejected the pod")
        for wp in self.plugins:
            status = wp.plugin.pre_bind(state, pod, node)
            if not status.ok:
                return fail(status.reason or f"PreBind of {wp.plugin.name} failed")
        bound_by = ""
        for wp in self.plugins:
            if not wp.plugin.implements("bind"):
                continue
            status = wp.plugin.bind(state, pod, node)
            if status.code == Code.SKIP:
                continue
            if not status.ok:
                return fail(status.reason or f"Bind of {wp.plugin.name} failed")
            bound_by = wp.plugin.name
            break
        if not bound_by:
            error = self.binder.bind(args.pod_namespace, args.pod_name, args.pod_uid, node)
            if error:
                return fail(error)
            bound_by = "kubernetes-api"
        for wp in self.plugins:
            wp.plugin.post_bind(state, pod, node)
        log.info("cycle.finished", phase="binding", pod=f"{args.pod_namespace}/{args.pod_name}",
                 pod_uid=args.pod_uid, outcome="bound", node=node, bound_by=bound_by)
        return {"Error": ""}

    def preempt(self, args: protocol.PreemptionArgs) -> dict[str, Any]:
        node_objects = [self.node_cache.nodes[n] for n in args.victims if n in self.node_cache.nodes]
        state = self._state(node_objects)
        if not self._in_cycle(args.pod):
            self._begin(args.pod, state)
        kept: dict[str, list[Mapping[str, Any]]] = {}
        for node, victims in args.victims.items():
            victims = [self.node_cache.pods.get(str(v["metadata"]["uid"]), v) if args.meta_only else v
                       for v in victims]
            if self._still_feasible(state, args.pod, node, victims):
                kept[node] = victims
        return protocol.preemption_result(kept, args.pdb_violations)

    def _still_feasible(self, state: RequestState, pod: KubeObject, node: str, victims: list[KubeObject]) -> bool:
        feasible = True
        for wp in self.plugins:
            if not wp.plugin.implements("pre_filter_extensions"):
                continue
            removed = []
            for victim in victims:
                if wp.plugin.remove_pod(state, pod, victim, node).ok:
                    removed.append(victim)
            if wp.plugin.implements("filter"):
                feasible = feasible and wp.plugin.filter_nodes(state, pod, [node])[node].ok
            for victim in removed:
                wp.plugin.add_pod(state, pod, victim, node)
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


def _clamp(score: int) -> int:
    return max(0, min(MAX_NODE_SCORE, score))


__all__ = ["ExtenderService", "WeightedPlugin", "NodeCache", "NodeSource", "RequestHandle", "ExtenderCallError",
           "NodeScore"]
