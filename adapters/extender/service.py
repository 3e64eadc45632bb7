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

Each point runs through the `Framework` of the pod's profile (its enabled wasm plugins,
`ServedProfile`), with kube-scheduler's rules for it, as in-process: every PreFilter runs after an
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

Profiles: the service serves, for each profile of the configuration, exactly the wasm
plugins that profile enables, at the points it places them (`ServedProfile`), to the
pods whose `spec.schedulerName` (default "default-scheduler") names it. A pod of any
other scheduler name passes through untouched: filter passes every node, prioritize
scores every node 0, preempt approves the candidates as given, and its bind (after such
a filter) creates the Binding through the Kubernetes API, as the scheduler's own
DefaultBinder would have (kube-scheduler's extenders serve every profile's pods).

Nodes the extender does not know (node-cache-capable requests naming a node its node
view lacks) get one answer in every verb: filter fails them as unresolvable, prioritize
scores them 0, preempt approves no victim on them, and a bind to one is refused.

What it keeps is bounded by the pods in flight, and kept by one owner, the service's
`CycleLedger` (`adapters/extender/ledger.py`): the held cycles (until their bind or the
bind timeout), the cycle in the slot (until the next pod's, or the bind timeout), the
pods passed through (until their bind or the bind timeout), and the latest object of
each node those cycles refer to (`LiveNodes`), nothing per node name ever seen. This
module decides what each verb does and says; the ledger, where each pod's cycle is.

Two cycles of one pod never overlap: a verb that would start a cycle of a pod whose
last bind still runs (kube-scheduler gave up on that bind when its HTTP call timed out)
is refused at once with an error, and the scheduler retries the pod with backoff.
Assignments are kept by pod, so overlapping cycles could not tell their calls apart.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pykka

from wasm_scheduler.adapters.extender import protocol
from wasm_scheduler.adapters.extender.binder import Binder, NoBinder
from wasm_scheduler.adapters.extender.defaults import DEFAULT_BIND_TIMEOUT_S
from wasm_scheduler.adapters.extender.ledger import BindVerdict, CycleLedger, Footprint, PodCycle
from wasm_scheduler.adapters.extender.nodes import (
    CycleNodes,
    KnownNodes,
    NodeCache,
    NodeSource,
    RequestHandle,
    RequestNode,
    request_nodes,
)
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.framework import Framework
from wasm_scheduler.adapters.framework.pods import DEFAULT_SCHEDULER_NAME
from wasm_scheduler.adapters.framework.profile import framework_of
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin, uid_and_name
from wasm_scheduler.framework_api import MAX_NODE_SCORE, SUCCESS, Code, Status
from wasm_scheduler.logger import get_logger
from wasm_scheduler.vocabulary import KubeObject

log = get_logger("adapters.extender")

#: Why filter fails a node the extender's node view lacks (and prioritize scores it 0, and
#: preempt approves no victim on it).
UNKNOWN_NODE = "node unknown to the extender's node view"


@dataclass(frozen=True)
class WeightedPlugin:
    plugin: WasmPlugin
    weight: int = 1


@dataclass(frozen=True)
class ServedProfile:
    """The wasm plugins one profile enables, at the points the profile places them: what the
    service runs for the pods whose spec.schedulerName names the profile."""

    scheduler_name: str
    plugins: tuple[WeightedPlugin, ...]
    framework: Framework[RequestNode]

    @classmethod
    def of(cls, plugins: Sequence[WeightedPlugin], scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> ServedProfile:
        """Every plugin at every point it implements, in the order given, with its weight."""
        return cls(scheduler_name, tuple(plugins),
                   framework_of(scheduler_name, [(wp.plugin, wp.weight) for wp in plugins]))


#: The outcomes `ExtenderService.bind_counts` tallies: a Binding created (by the API or a wasm
#: Bind plugin), a binding cycle that failed (a plugin, or the API, said no), a bind refused
#: before any plugin ran (no cycle here, another pod, a node its filter did not pass).
BIND_OUTCOMES = ("created", "failed", "refused")


def scheduler_name_of(pod: KubeObject) -> str:
    """The pod's spec.schedulerName; "default-scheduler" when it has none (as the API server defaults it)."""
    spec = pod.get("spec")
    name = spec.get("schedulerName") if isinstance(spec, Mapping) else None
    return name if isinstance(name, str) and name else DEFAULT_SCHEDULER_NAME


def _why(point: str, status: Status) -> str:
    """A failed point's status as an extender error: Error statuses already say where."""
    if status.code == Code.ERROR and status.reason:
        return status.reason
    return f"{point} of {status.plugin or 'a plugin'}: {status.reason or status.code.label}"


class ExtenderService:
    """filter / prioritize / bind / preempt over the wasm plugins of each served profile."""

    def __init__(
        self,
        plugins: Sequence[WeightedPlugin] | Sequence[ServedProfile],
        node_cache: NodeSource | None = None,
        binder: Binder | None = None,
        expect_bind: bool = True,
        bind_timeout_s: float = DEFAULT_BIND_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # Plugins given alone (tests, benchmarks) are one profile for default-scheduler's pods,
        # every plugin at every point it implements.
        given = list(plugins)
        profiles = [p for p in given if isinstance(p, ServedProfile)]
        loose = [p for p in given if isinstance(p, WeightedPlugin)]
        if loose:
            profiles.append(ServedProfile.of(loose))
        #: schedulerName -> the profile that serves its pods.
        self.profiles: dict[str, ServedProfile] = {}
        for profile in profiles:
            if profile.scheduler_name in self.profiles:
                raise ValueError(f"two served profiles are named {profile.scheduler_name!r}")
            self.profiles[profile.scheduler_name] = profile
        #: Every plugin of every served profile.
        self.plugins = [wp for profile in self.profiles.values() for wp in profile.plugins]
        self.node_cache: NodeSource = node_cache or NodeCache()
        self.binder: Binder = binder or NoBinder()
        self.expect_bind = expect_bind
        self.bind_timeout_s = bind_timeout_s
        self.clock = clock
        #: Where each pod's cycle is (the slot, held, binding), the pods passed through, the
        #: nodes their cycles refer to, and until when: the one owner of all of it.
        self.ledger = CycleLedger(bind_timeout_s, clock)
        # The service's own tallies, shared by the HTTP threads.
        self._lock = threading.Lock()
        #: Binds answered since start, by outcome (`BIND_OUTCOMES`), under the lock.
        self._binds = dict.fromkeys(BIND_OUTCOMES, 0)
        self._said_no_filter = False
        self._known = KnownNodes()
        #: Has any filter come since start? (A refused bind with none hints at a missing
        #: filterVerb; with one, a prioritize never begins a cycle.)
        self._filter_seen = False
        #: Set by close(): the plugins stop next, so a call that finds them stopped is the
        #: shutdown's doing, not a bug.
        self._closing = False
        self._stop = threading.Event()
        self._sweeper = threading.Thread(target=self._sweep, name="extender-bind-sweeper", daemon=True)
        self._sweeper.start()

    def close(self) -> None:
        """Stop the bind sweeper and the node source."""
        self._closing = True
        self._stop.set()
        self._sweeper.join(timeout=5)
        self.node_cache.close()

    def __enter__(self) -> ExtenderService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- helpers -----------------------------------------------------------------------

    def _profile_of(self, pod: KubeObject) -> ServedProfile | None:
        """The profile that serves the pod (its spec.schedulerName), or None: the pod passes through."""
        return self.profiles.get(scheduler_name_of(pod))

    def _nodes_for(self, args: protocol.ExtenderArgs) -> list[RequestNode]:
        """The nodes a filter or prioritize names, as the framework takes them (nodes the
        node cache does not know are left out)."""
        if args.nodes is not None:
            return request_nodes(args.node_names, args.nodes)
        known = self.node_cache.nodes
        missing = [n for n in args.node_names if n not in known]
        if missing:
            self.node_cache.refresh()
            known = self.node_cache.nodes
        return self._known.of(args.node_names, known)

    def _refer(self, cycle: PodCycle, args: protocol.ExtenderArgs) -> None:
        """The cycle refers to the whole nodes its request carried (their latest objects)."""
        if args.nodes is not None:
            self.ledger.refer(cycle, args.node_names, args.nodes)

    def _bind_nodes(self, cycle: PodCycle) -> Mapping[str, KubeObject]:
        """What a binding cycle's guest reads: the latest object of each node its cycle refers
        to, then the node source's (a view, made into a list only if the guest lists the nodes)."""
        return CycleNodes(cycle.nodes, self.ledger.live, self.node_cache.nodes)

    def _cycle_of(self, pod: KubeObject) -> PodCycle | None:
        """The pod's cycle under way here (held for its bind, or in the slot), if any."""
        return self.ledger.cycle_of(uid_and_name(pod)[0])

    def _lend(self, cycle: PodCycle, handle: RequestHandle) -> CycleState:
        """The cycle's state for one request, with that request's handle (a cycle in the slot
        is not given up while the request runs)."""
        self.ledger.verb_started(cycle)
        state = cycle.state.clone()
        state.handle = handle
        return state

    def _done(self, cycle: PodCycle) -> None:
        """A verb of the cycle answered (`CycleLedger.verb_done`)."""
        self.ledger.verb_done(cycle)

    def _begin(self, pod: KubeObject, handle: RequestHandle, profile: ServedProfile) -> tuple[PodCycle, CycleState]:
        """A new scheduling cycle, in the slot: PreFilter of every plugin of the pod's profile
        (`Framework.run_pre_filter`). (The cycle, its state lent to this request.)"""
        uid, name = uid_and_name(pod)
        state = CycleState(handle)
        began = self.ledger.begin(pod, uid, state, profile)
        if began is None:  # the pod's last bind still runs (`CycleLedger.begin`)
            log.warning("extender.bind_still_running", pod=name, pod_uid=uid)
            raise ExtenderCallError(f"the last bind of pod {name} is still running; retry later")
        cycle, previous = began.cycle, began.previous
        if began.abandoned is not None:
            began.abandoned.release("filtered again before bind")
        if previous is not None and previous.profile is not profile:
            # The next pod of the same profile takes the slot's instances over (the supervisor
            # reassigns them); another profile's plugins never see this pod, so they let go now.
            previous.release("the next pod's cycle began")
        try:
            cycle.subset, cycle.pre_filter = profile.framework.run_pre_filter(state, pod)
        except BaseException:
            self._done(cycle)  # the verb ends here: the cycle is given up in time all the same
            raise
        cycle.state = state.clone()
        cycle.state.handle = None  # the request's nodes are not kept with the cycle
        return cycle, state

    # --- pods of profiles not served here -------------------------------------------------

    def _pass_filter(self, args: protocol.ExtenderArgs) -> dict[str, Any]:
        """A pod of a profile not served here: every node passes; its bind may follow."""
        uid, name = uid_and_name(args.pod)
        if self.expect_bind:
            self.ledger.pass_filter(uid, name, args.node_names)
        log.debug("extender.passed_through", verb="filter", pod=name, pod_uid=uid,
                  scheduler_name=scheduler_name_of(args.pod))
        return protocol.filter_result(list(args.node_names), args.nodes, {}, {})

    def _pass_prioritize(self, args: protocol.ExtenderArgs) -> list[dict[str, Any]]:
        """A pod of a profile not served here: every node scores 0 (without a filter verb, this
        begins what its bind needs)."""
        uid, name = uid_and_name(args.pod)
        if self.expect_bind:
            self.ledger.pass_prioritize(uid, name, args.node_names, self._filter_seen)
        log.debug("extender.passed_through", verb="prioritize", pod=name, pod_uid=uid,
                  scheduler_name=scheduler_name_of(args.pod))
        return protocol.host_priority_list(dict.fromkeys(args.node_names, 0))

    def _bind_passed(self, args: protocol.BindingArgs) -> dict[str, Any]:
        """The bind of a pod passed through: the Binding through the Kubernetes API, no plugin."""
        who = f"{args.pod_namespace}/{args.pod_name}"
        error = self.binder.bind(args.pod_namespace, args.pod_name, args.pod_uid, args.node)
        if error:
            log.info("cycle.finished", phase="binding", pod=who, pod_uid=args.pod_uid, outcome="error", reason=error)
            return {"Error": error}
        log.info("cycle.finished", phase="binding", pod=who, pod_uid=args.pod_uid, outcome="bound", node=args.node,
                 bound_by="kubernetes-api")
        return {"Error": ""}

    # --- verbs -------------------------------------------------------------------------

    def filter(self, args: protocol.ExtenderArgs) -> dict[str, Any]:
        self._filter_seen = True
        profile = self._profile_of(args.pod)
        if profile is None:
            return self._pass_filter(args)
        infos = self._nodes_for(args)
        unresolvable: dict[str, str] = {}
        if len(infos) != len(args.node_names):
            known = {info.name for info in infos}
            unresolvable = {n: UNKNOWN_NODE for n in args.node_names if n not in known}
        try:
            cycle, state = self._begin(args.pod, RequestHandle(infos), profile)
        except ExtenderCallError as exc:  # the pod's last bind still runs
            return protocol.filter_result([], args.nodes, {}, {}, str(exc))
        self._refer(cycle, args)
        try:
            return self._filter(cycle, state, args, infos, unresolvable)
        finally:
            self._done(cycle)

    def _filter(self, cycle: PodCycle, state: CycleState, args: protocol.ExtenderArgs, infos: list[RequestNode],
                unresolvable: dict[str, str]) -> dict[str, Any]:
        names = [info.name for info in infos]
        failed: dict[str, str] = {}
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
        statuses, error = cycle.profile.framework.run_filter(state, args.pod, candidates)
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
            self.ledger.hold_for_bind(cycle)
        return protocol.filter_result(feasible, args.nodes, failed, unresolvable)

    def prioritize(self, args: protocol.ExtenderArgs) -> list[dict[str, Any]]:
        profile = self._profile_of(args.pod)
        if profile is None:
            return self._pass_prioritize(args)
        infos = self._nodes_for(args)
        unknown: list[str] = []
        if len(infos) != len(args.node_names):  # node-cache-capable, a node the view lacks: it scores 0
            known = {info.name for info in infos}
            unknown = [n for n in args.node_names if n not in known]
        handle = RequestHandle(infos)
        # Without a filter verb, each cycle that reaches this extender starts with its
        # prioritize (a cycle a preempt began ended with that preempt: the pod was retried).
        cycle = self._cycle_of(args.pod) if self._filter_seen else None
        if cycle is not None:
            state = self._lend(cycle, handle)
        elif self._filter_seen:
            # A prioritize follows its pod's filter in the same cycle: this one came after
            # the cycle ended (the pod's bind, or the bind timeout). No cycle starts for it.
            uid, name = uid_and_name(args.pod)
            if self.ledger.binding_now(uid):
                raise ExtenderCallError(f"the last bind of pod {name} is still running; retry later")
            raise ExtenderCallError(f"pod {name} has no scheduling cycle in this extender (its cycle ended, or "
                                    "its filter did not come); no scores")
        else:  # no filter verb configured: the cycle starts here
            cycle, state = self._begin(args.pod, handle, profile)
            if not cycle.pre_filter.ok:  # not held: a bind of the pod is refused
                self._done(cycle)
                raise ExtenderCallError(_why("PreFilter", cycle.pre_filter))
            if cycle.subset is not None:
                infos = [info for info in infos if info.name in cycle.subset]
            cycle.feasible = frozenset(info.name for info in infos)
        self._refer(cycle, args)
        try:
            try:
                scores = self._scores(cycle.profile.framework, args.pod, state, infos)
            except ExtenderCallError as exc:
                cycle.scoring_failed = str(exc)
                raise
            return scores + protocol.host_priority_list(dict.fromkeys(unknown, 0)) if unknown else scores
        finally:
            if self.expect_bind:  # kube-scheduler binds even when prioritize failed (it ignores the error)
                self.ledger.hold_for_bind(cycle)
            self._done(cycle)

    def _scores(self, framework: Framework[RequestNode], pod: KubeObject, state: CycleState,
                infos: Sequence[RequestNode]) -> list[dict[str, Any]]:
        """PreScore, then Score and NormalizeScore of every scoring plugin, weighted, summed
        and scaled to the extender API's 0..10."""
        status = framework.run_pre_score(state, pod, infos)
        if not status.ok:
            raise ExtenderCallError(_why("PreScore", status))
        table, status = framework.run_score(state, pod, infos)
        if not status.ok:
            raise ExtenderCallError(_why("Score", status))
        weights = sum(framework.score_weights.get(plugin, 1) for plugin in table.columns)
        scale = MAX_NODE_SCORE * max(weights, 1)
        return protocol.host_priority_list(
            {n: (total * protocol.MAX_EXTENDER_PRIORITY + scale // 2) // scale
             for n, total in zip(table.names, table.totals(), strict=True)}
        )

    def bind(self, args: protocol.BindingArgs) -> dict[str, Any]:
        uid = args.pod_uid
        pod = f"{args.pod_namespace}/{args.pod_name}"
        claim = self.ledger.claim_bind(args)
        cycle, passed, verdict = claim.cycle, claim.passed, claim.verdict
        refusal = ""
        first_without_filter = False
        if verdict is BindVerdict.UNKNOWN:
            refusal = (f"pod {pod} (uid {uid}) has no scheduling cycle in this extender (it restarted, or the "
                       "bind came after the bind timeout); retry the pod")
            if not self._filter_seen:
                # kube-scheduler skips prioritize when one node is feasible, so without a
                # filter verb such a pod's bind is the first call this extender sees.
                refusal += ("; no filter has come since the extender started: an extender entry with a "
                            "bindVerb needs a filterVerb")
                with self._lock:
                    first_without_filter = not self._said_no_filter
                    self._said_no_filter = True
        elif verdict is BindVerdict.OTHER_POD:
            if cycle is not None:
                refusal = (f"bind of {pod} names uid {uid}, which this extender "
                           f"{'scheduled' if claim.held else 'schedules'} as {uid_and_name(cycle.pod)[1]}")
            else:
                assert passed is not None
                refusal = f"bind of {pod} names uid {uid}, which this extender passed through as {passed.pod}"
        elif verdict is BindVerdict.NODE_NOT_FILTERED:
            if cycle is not None:
                refusal = f"node {args.node} did not pass this extender's filter for pod {pod}"
                if not cycle.pre_filter.ok:
                    refusal += f" ({_why('PreFilter', cycle.pre_filter)})"
            else:
                refusal = f"node {args.node} was not in the filter of pod {pod}"
        elif verdict is BindVerdict.SCORING_FAILED:
            assert cycle is not None
            # In-process, a Score error fails the cycle and the pod is retried; kube-scheduler
            # instead binds without a failed extender's scores. Refusing the bind retries the
            # pod, as the plugin's own host would (docs/extender.md).
            refusal = (f"the prioritize of pod {pod} failed ({cycle.scoring_failed}): the pod is retried "
                       "rather than bound without its scores")
        if refusal:
            if first_without_filter:
                log.warning("extender.bind_without_filter",
                            reason="binds come but no filter has: kube-scheduler's extender entry needs a "
                                   "filterVerb with its bindVerb (a pod with one feasible node gets no prioritize)")
            log.warning("extender.bind_refused", pod=pod, pod_uid=uid, node=args.node, reason=refusal)
            with self._lock:
                self._binds["refused"] += 1
            if verdict is BindVerdict.SCORING_FAILED and cycle is not None:
                cycle.release("prioritize failed")
            return {"Error": refusal}
        answer: dict[str, Any] = {"Error": "raised"}  # an exception: failed
        if verdict is BindVerdict.BIND_PASSED:
            answer = self._bind_passed(args)
            with self._lock:
                self._binds["failed" if answer["Error"] else "created"] += 1
            return answer
        assert cycle is not None
        try:
            answer = self._binding_cycle(cycle, args)
            return answer
        finally:
            self.ledger.bind_finished(cycle)
            with self._lock:
                self._binds["failed" if answer["Error"] else "created"] += 1

    def _binding_cycle(self, cycle: PodCycle, args: protocol.BindingArgs) -> dict[str, Any]:
        """Reserve, Permit, PreBind, Bind, PostBind of a held pod; every Reserve plugin's
        Unreserve on a failure, or on an exception (a bug of ours or a binder's), so the pod's
        instances go back to their pools whatever happens. A bind the shutdown overtook (the
        plugins stopped under it after the drain time) answers an Error, with a warning."""
        pod, node, framework = assumed_pod(cycle.pod, args.node), args.node, cycle.profile.framework
        state = self._lend(cycle, RequestHandle(self._bind_nodes(cycle)))
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
            if self._stopped_under(exc):
                return self._stopped_mid_bind(args, "before the bind finished")
            error_id = secrets.token_hex(6)
            log.error("extender.internal_error", verb="bind", error_id=error_id, exc_info=exc)
            try:
                return fail(f"internal error (error id {error_id})")
            except Exception:  # noqa: BLE001 - the Unreserve failed too: the instances go back regardless
                cycle.release("internal error")
                return {"Error": f"internal error (error id {error_id})"}
        try:
            framework.run_post_bind(state, pod, node)
        except Exception as exc:  # noqa: BLE001 - the pod is bound: a PostBind bug changes nothing about that
            if not self._stopped_under(exc):
                log.error("extender.internal_error", verb="bind", point="PostBind", error_id=secrets.token_hex(6),
                          exc_info=exc)
            cycle.release("internal error")  # every PostBind ran (`Framework._every`); a no-op then
        log.info("cycle.finished", phase="binding", pod=who, pod_uid=args.pod_uid, outcome="bound", node=node,
                 bound_by=bound_by)
        return {"Error": ""}

    def _stopped_under(self, exc: BaseException) -> bool:
        """Did the shutdown stop the plugins under this call? (Not a bug: the drain time ran out.)"""
        return self._closing and isinstance(exc, pykka.ActorDeadError)

    @staticmethod
    def _stopped_mid_bind(args: protocol.BindingArgs, when: str) -> dict[str, Any]:
        reason = f"the extender stopped {when}: its drain time (--drain-seconds) ran out; retry the pod"
        log.warning("extender.stopped_mid_request", verb="bind", pod=f"{args.pod_namespace}/{args.pod_name}",
                    pod_uid=args.pod_uid, node=args.node, reason=reason)
        return {"Error": reason}

    def preempt(self, args: protocol.PreemptionArgs) -> dict[str, Any]:
        """Which candidate nodes the pod fits once their victims are gone. Preempt may be
        the first call of a cycle (kube-scheduler's own filters left no node): it begins
        one then, as filter would. Node-cache-capable (victims by UID), a node the node view
        lacks gets no victim approved, as its filter failed it; with whole nodes, a node no
        live cycle carried is evaluated on its name alone."""
        profile = self._profile_of(args.pod)
        if profile is None:  # not served here: the candidates as they came
            return protocol.preemption_result(args.victims, args.pdb_violations)
        source = self.node_cache.nodes
        if args.meta_only and any(name not in source for name in args.victims):
            self.node_cache.refresh()
            source = self.node_cache.nodes
        known = {name: source.get(name) if args.meta_only else (source.get(name) or self.ledger.live.get(name))
                 for name in args.victims}
        handle = RequestHandle({n: node for n, node in known.items() if node is not None})
        cycle = self._cycle_of(args.pod)
        if cycle is not None:
            state = self._lend(cycle, handle)
        else:
            cycle, state = self._begin(args.pod, handle, profile)
        try:
            status = cycle.pre_filter
            if status.code == Code.ERROR:
                raise ExtenderCallError(_why("PreFilter", status))
            if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return protocol.preemption_result({}, args.pdb_violations)  # no victim can help
            kept: dict[str, list[KubeObject]] = {}
            for name, victims in args.victims.items():
                if cycle.subset is not None and name not in cycle.subset:
                    continue  # PreFilter ruled the node out, whatever runs there
                node = known[name]
                if node is None:
                    if args.meta_only:
                        continue  # unknown to the node view: its filter failed it, no victim helps
                    node = {"metadata": {"name": name}}
                victims = [self.node_cache.pods.get(str(v["metadata"]["uid"]), v) if args.meta_only else v
                           for v in victims]
                if self._still_feasible(cycle.profile.framework, state, args.pod, RequestNode(name, node), victims):
                    kept[name] = victims
            return protocol.preemption_result(kept, args.pdb_violations)
        finally:
            self._done(cycle)

    @staticmethod
    def _still_feasible(framework: Framework[RequestNode], state: CycleState, pod: KubeObject, node: RequestNode,
                        victims: list[KubeObject]) -> bool:
        """Does the pod pass Filter on `node` with its victims gone? RemovePod of each
        victim, Filter, then AddPod of each back (the plugins keep their state in their
        instances, not in a cloned CycleState). A failing RemovePod makes the node fail."""
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
            self.trim_wire_caches()

    def reclaim_expired(self) -> int:
        """Give up the pods whose bind (or next verb) has not come within the bind timeout
        (`CycleLedger.reclaim`); the number of held pods given up."""
        reclaimed = self.ledger.reclaim()
        if reclaimed.no_bind_seen:
            log.warning("extender.no_bind_seen", pods=len(reclaimed.expired), timeout_s=self.bind_timeout_s,
                        reason="pods reached the bind timeout and no bind has come since the extender started: "
                               "if kube-scheduler's extender entry has no bindVerb, start the extender with "
                               "--no-bind")
        for uid, cycle in reclaimed.expired:
            log.warning("assignment.bind_timeout", pod_uid=uid, timeout_s=self.bind_timeout_s)
            cycle.release("no bind within the bind timeout")
        if reclaimed.stale is not None:
            reclaimed.stale.release("no call of its cycle within the bind timeout")
        return len(reclaimed.expired)

    def trim_wire_caches(self) -> None:
        """Each plugin's encoded nodes are kept only for the nodes still live here (the node
        source's, and those a cycle in flight refers to)."""
        source, live = self.node_cache.nodes, self.ledger.live

        def live_node(name: str, node: Any) -> bool:
            return node is source.get(name) or node is live.get(name)

        for wp in self.plugins:
            wp.plugin.wire_cache.retain_nodes(live_node)

    def bind_counts(self) -> dict[str, int]:
        """Binds answered since start, by outcome (`BIND_OUTCOMES`): what /metrics reads."""
        with self._lock:
            return dict(self._binds)

    def awaiting_bind(self) -> int:
        return self.ledger.awaiting_bind()

    def footprint(self) -> Footprint:
        """What the service keeps now."""
        return self.ledger.footprint()


class ExtenderCallError(Exception):
    """A guest failed a verb: answered as the verb's error (HTTP 500 for prioritize)."""


def assumed_pod(pod: KubeObject, node: str) -> KubeObject:
    """The pod as kube-scheduler hands it to Reserve, Permit and the binding cycle: a copy
    with `spec.nodeName` set to the chosen node (`schedulingCycle` assumes it there)."""
    spec = pod.get("spec")
    return {**pod, "spec": {**(spec if isinstance(spec, dict) else {}), "nodeName": node}}


__all__ = ["ExtenderService", "WeightedPlugin", "ServedProfile", "Footprint", "ExtenderCallError"]
