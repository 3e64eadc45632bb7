"""WasmPlugin: one configured wasm plugin, shaped like a kube-scheduler plugin.

This module owns the scheduler-facing facade of a guest: one object per configured
plugin with the framework's extension points as snake_case methods. Which guest actor
serves a pod follows the rules of the plugin's `SupervisorActor` (the table at the
top of `actors/supervisor.py`); each call sends that actor one message for the whole
phase (Filter and Score over many nodes are one message). The facade drives the
supervisor's transitions at the right points: PreFilter begins the cycle, Permit moves
the pod to binding, PostBind and Unreserve end it. Those lifecycle points are always
reported as implemented, whatever the guest exports, so no subset of exports can leak
an instance. A guest that exports nothing of the binding cycle (no prebind, bind,
postbind or unreserve: a filter or score plugin) can never be called for a pod after
its Permit, so the pod does not hold an instance through its binding cycle: it keeps
the scheduling slot, which the next pod's PreFilter takes over as it would a rejected
pod's, and its PostBind or Unreserve releases the slot only if no pod has taken it.

The facade applies no rule of that lifecycle itself: it sends each transition and
remembers answers. Three things keep a pod's cycle cheap without changing who serves
it (each actor message is a thread hand-off, the dominant cost of a call):

- BeginCycle carries the cycle's first call (PreFilter), which the supervisor sends on
  to the actor it picked without waiting for it: the caller waits once, not twice;
- the supervisor's answer to BeginCycle is remembered for the rest of that pod's cycle
  in the plugin's `CycleCache` (`actors/cycle_cache.py`: what it keeps, and where it
  learns what to forget), so the pod's later calls go straight to its actor. A pod with
  no remembered answer asks the supervisor (`Route`);
- a point the guest does not export (Reserve, Permit, Unreserve, PreScore,
  NormalizeScore, PostBind; PreFilter still begins the cycle) sends no guest call, only
  the supervisor's transition (a tell), and a Release is not sent for a pod the facade
  holds no answer for (the supervisor already said its slot went to another pod).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Literal, TypeVar

import pykka

from wasm_scheduler.actors.assignments import moves_to_binding
from wasm_scheduler.actors.cycle_cache import CycleCache, EarlyScores
from wasm_scheduler.actors.guest_actor import (
    PRESCORE_AND_SCORE,
    Describe,
    GuestResult,
    InstanceBroken,
    InstanceInfo,
    Invoke,
    Point,
    Replied,
)
from wasm_scheduler.actors.kube.codec import KubeCodecError, encode_node, encode_pod
from wasm_scheduler.actors.kube.wire_cache import WireCache
from wasm_scheduler.actors.mailbox import Ask, ReplyFuture, ask
from wasm_scheduler.actors.supervisor import (
    Assigned,
    Began,
    BeginCycle,
    Borrow,
    GetActors,
    GetCounts,
    GetPlacement,
    GiveBack,
    Lost,
    PoolCounts,
    Release,
    Route,
    SupervisorActor,
    ToBinding,
)
from wasm_scheduler.framework_api import (
    DEFAULT_CLUSTER_EVENTS,
    LIFECYCLE_POINTS,
    POINTS,
    ClusterEvent,
    Code,
    Cycle,
    FilterResult,
    NamedNode,
    NodeScore,
    NormalizeScoreResult,
    PermitResult,
    PostFilterResult,
    PreFilterResult,
    PreScoreAndScore,
    ScoreResult,
    Status,
)
from wasm_scheduler.logger import get_logger
from wasm_scheduler.registry.compiler import CompiledGuest, GuestCompiler
from wasm_scheduler.registry.config import PluginConfig
from wasm_scheduler.registry.errors import GuestLoadError
from wasm_scheduler.registry.guest_abi import Export
from wasm_scheduler.vocabulary import CycleStateView, EmptyHandle, FrameworkHandle, KubeObject, pod_name, pod_uid

log = get_logger("adapters.wasm_plugin")

#: Framework extension point -> the guest exports that implement it (Unreserve is left
#: out: it is implemented whatever the guest exports, as Reserve's lifecycle always releases).
POINT_EXPORTS: Mapping[str, tuple[str, ...]] = {point.name: point.exports for point in POINTS
                                                if point.name != "unreserve"}


def uid_and_name(pod: KubeObject) -> tuple[str, str]:
    """(uid, namespace/name) of a pod; a pod without a uid is known by its name."""
    return pod_uid(pod), pod_name(pod)


def wire_problem(obj: KubeObject, kind: Literal["Node", "Pod"]) -> str:
    """Why a guest could not be handed `obj`, a v1.Node or v1.Pod (the wire codec's
    message, naming the field), or "" if it can."""
    try:
        (encode_node if kind == "Node" else encode_pod)(obj)
    except KubeCodecError as exc:
        return str(exc)
    return ""


#: An asked message's answer.
R = TypeVar("R")

#: What BeginCycle answers, and the route a cycle's first call comes back with.
BeginAnswer = Began | Lost


_name_of = attrgetter("name")


def _names(nodes: Sequence[NamedNode | str]) -> list[str]:
    """The nodes' names: NodeInfos (the framework's) at C speed, or names as they are."""
    if nodes and not isinstance(nodes[0], str):
        with contextlib.suppress(AttributeError):  # a mix of nodes and names: the loop below
            return list(map(_name_of, nodes))
    return [n if isinstance(n, str) else n.name for n in nodes]


class WasmPlugin:
    """A loaded wasm plugin: its supervisor, pool and extension points."""

    def __init__(self, guest: CompiledGuest, config: PluginConfig, handle: FrameworkHandle | None = None) -> None:
        self.name = config.name
        #: This plugin's Success (a Status is immutable: one serves every answer).
        self._success = Status(plugin=self.name)
        self.config = config
        self.guest = guest
        self.handle: FrameworkHandle = handle or EmptyHandle()
        self.wire_cache = WireCache()
        self._reads_pod = ("k8s.io/scheduler", "currentPod") in guest.shape.host_imports
        self.log = log.bind(plugin=self.name)
        self.supervisor = SupervisorActor.start(guest, config, self.wire_cache)
        self._events: tuple[ClusterEvent, ...] | None = None
        #: The supervisor's answers for the rest of each pod's cycle, and PreScore's early scores.
        self._cycles = CycleCache(self.wire_cache.forget_pod)
        #: Does Permit move a pod's actor to the binding map? (`assignments.moves_to_binding`)
        self._moves_to_binding = moves_to_binding(guest.exports)
        info = self._first_instance()
        if info.broken:
            self.close()
            raise GuestLoadError(f"{config.name!r} ({guest.url})", info.broken.split(": ", 1)[-1])

    @classmethod
    def load(cls, config: PluginConfig, compiler: GuestCompiler, handle: FrameworkHandle | None = None) -> WasmPlugin:
        """Fetch, compile (once per compiler) and start the plugin; GuestLoadError if it cannot run."""
        return cls(compiler.load(config), config, handle)

    def _first_instance(self) -> InstanceInfo:
        lent = self._ask_supervisor(Borrow())
        assert isinstance(lent, Assigned), lent
        try:
            info = ask(lent.actor, Describe())
        finally:
            self.supervisor.tell(GiveBack(lent.instance_id))
        return info

    # --- introspection -----------------------------------------------------------------

    @property
    def exports(self) -> frozenset[str]:
        return self.guest.exports

    def implements(self, point: str) -> bool:
        """Does the framework need to call this extension point of the plugin?"""
        if point in LIFECYCLE_POINTS:
            return True
        if point == "unreserve":
            return True  # Reserve is a lifecycle point; its Unreserve always releases
        return any(export in self.guest.exports for export in POINT_EXPORTS.get(point, ()))

    @property
    def extension_points(self) -> frozenset[str]:
        return frozenset(p for p in (*POINT_EXPORTS, "unreserve") if self.implements(p))

    # --- inspection: the supervisor's answers, for operators and tests -----------------

    def counts(self) -> PoolCounts:
        """How many instances are idle, assigned, lent; started, discarded, reaped."""
        return self._ask_supervisor(GetCounts())

    def placement(self) -> dict[str, str]:
        """Instance id -> where it is now ("idle", "slot", "binding", "lent")."""
        return self._ask_supervisor(GetPlacement())

    def assignment(self, pod: KubeObject, binding: bool = False) -> Assigned | Lost:
        """The supervisor's word on which actor serves `pod` now; `binding`: for a call of
        the pod's binding cycle."""
        return self._ask_supervisor(Route(*uid_and_name(pod), binding_first=binding))

    def close(self, timeout: float = 10.0) -> None:
        """Stop the supervisor and every guest actor of this plugin, and wait for them."""
        self._cycles.clear()
        try:
            guests = self._ask_supervisor(GetActors())
            self.supervisor.stop()
        except pykka.ActorDeadError:
            return
        for ref in guests:
            try:
                ref.stop(block=True, timeout=timeout)
            except pykka.Timeout:
                self.log.warning("instance.stop_timeout", timeout_s=timeout)

    def __enter__(self) -> WasmPlugin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing ----------------------------------------------------------------------

    def _handle(self, state: CycleStateView | None) -> FrameworkHandle:
        """The handle of this call: one the cycle state carries (the extender's, per request),
        else the plugin's own."""
        if state is None or state.handle is None:
            return self.handle
        return state.handle

    def _error(self, reason: str) -> Status:
        return Status(Code.ERROR, reason, self.name)

    # --- routes: which actor serves a pod ----------------------------------------------

    def _begin(self, uid: str, name: str, invoke: Invoke[BeginAnswer] | None = None,
               pod: KubeObject | None = None) -> tuple[Assigned | Lost, GuestResult | None]:
        """BeginCycle: the supervisor gives the pod an actor (the slot's, or one from its
        pool) and sends it `invoke`, whose result comes back with the route on one future.
        The answer goes to the cycle cache (`CycleCache.began`, or `lost`).

        While the supervisor's and the actor's threads wake up, this thread encodes `pod`
        for the guest (if it reads the pod at all): time the GIL would sit idle otherwise."""
        if invoke is None:
            asked: pykka.Future[BeginAnswer] = self.supervisor.ask(BeginCycle(uid, name), block=False)
        else:
            future: ReplyFuture[Replied[BeginAnswer]] = ReplyFuture()
            self.supervisor.tell(BeginCycle(uid, name, invoke.replying(future)))
        self._cycles.beginning(uid)
        if pod is not None and self._reads_pod:
            with contextlib.suppress(KubeCodecError):  # the guest's own call reports it
                self.wire_cache.pod(pod)
        began: BeginAnswer | None
        result: GuestResult | None
        if invoke is None:
            began, result = asked.get(), None
        else:
            try:
                replied = self._await_reply(future)
            except pykka.ActorDeadError:
                raise
            except Exception as exc:  # the actor answered our own bug (it reports itself broken)
                return Lost(self._host_bug(None, invoke, exc).reason), None
            began, result = replied.route, replied.result
        if isinstance(began, Lost):
            self._cycles.lost(uid)
            return began, result
        assert isinstance(began, Began), began
        self._cycles.began(uid, began)
        return began.assigned, result

    def _await_reply(self, future: pykka.Future[Replied[BeginAnswer]]) -> Replied[BeginAnswer]:
        """The actor's `Replied` to a forwarded call. Told messages carry no envelope
        future that pykka would fail if the supervisor stopped with the message unread,
        so the wait looks at the supervisor once a second (only a stop or a crash makes
        a reply this late)."""
        while True:
            try:
                return future.get(timeout=1.0)
            except pykka.Timeout:
                if not self.supervisor.is_alive():
                    raise pykka.ActorDeadError(f"wasm plugin {self.name}: its supervisor stopped") from None

    def _to_binding(self, uid: str, name: str) -> None:
        """ToBinding: the supervisor moves the pod's actor to the binding map; the answer
        remembered for its cycle now serves its binding cycle."""
        self._cycles.to_binding(uid)
        self.supervisor.tell(ToBinding(uid, name))

    def _ask_supervisor(self, message: Ask[R]) -> R:
        return ask(self.supervisor, message)

    def _release(self, uid: str, name: str, why: str) -> None:
        """Release: the supervisor returns the pod's actor to the pool. Not sent for a pod
        this facade holds no answer for (`CycleCache.release`): the supervisor said its slot
        went to another pod (or never gave it one), so there is nothing to release and no
        need to wake it."""
        if not self._cycles.release(uid):
            return
        self.supervisor.tell(Release(uid, name, why))

    def _broken(self, instance_id: str, reason: str) -> None:
        """Tell the supervisor to discard an instance (a no-op if it already has). Answers
        remembered for it stay: a call to its stopped actor is answered as discarded."""
        self.supervisor.tell(InstanceBroken(instance_id, reason))

    def _route(self, uid: str, name: str, cycle: Cycle) -> Assigned | Lost:
        """The pod's actor: the answer remembered for this part of its cycle (its binding
        cycle's for a binding-cycle call), else the supervisor's."""
        answer = self._cycles.route(uid, binding=cycle == "binding")
        if answer is not None:
            return answer
        return self._ask_supervisor(Route(uid, name, cycle == "binding"))

    def _begin_with(self, point: Point, args: tuple[object, ...], pod: KubeObject) -> GuestResult:
        """Begin the pod's cycle with its first call, `point`: BeginCycle carries it, the
        supervisor sends it on and the actor answers here, with the route; a Status if no
        actor can take it."""
        uid, name = uid_and_name(pod)
        answer, result = self._begin(uid, name, Invoke(point, args, name, uid, "scheduling"), pod)
        if isinstance(answer, Lost):
            return self._error(answer.reason)
        assert result is not None, "a call that reached an actor has its answer"
        return result

    def _run(self, point: Point, args: tuple[object, ...], pod: KubeObject, cycle: Cycle) -> GuestResult:
        """Run `point` on the pod's actor (remembered, or routed by the supervisor); a
        Status if none can."""
        uid, name = uid_and_name(pod)
        invoke: Invoke[None] = Invoke(point, args, name, uid, cycle)
        answer = self._route(uid, name, cycle)
        if isinstance(answer, Lost):
            return self._error(answer.reason)
        try:
            return ask(answer.actor, invoke)
        except pykka.ActorDeadError:
            # Discarded by the supervisor, or died: in both cases tell it (a no-op for the first).
            self._broken(answer.instance_id, "its actor died")
            return self._error(f"wasm plugin {self.name}: instance {answer.instance_id} serving pod {name} "
                               "was discarded; its cycle state is gone")
        except Exception as exc:  # the actor answered with our own bug: the instance is broken
            return self._host_bug(answer, invoke, exc)

    def _run_status(self, point: Export, args: tuple[object, ...], pod: KubeObject, cycle: Cycle) -> Status:
        """`_run` of a point whose result is a Status."""
        result = self._run(point, args, pod, cycle)
        assert isinstance(result, Status)
        return result

    def _host_bug(self, answer: Assigned | None, invoke: Invoke[R], exc: Exception) -> Status:
        """A call that raised our own bug: logged loudly, the instance discarded, an Error."""
        error_id = secrets.token_hex(6)  # the status names only this; the log has the details
        self.log.error("instance.host_bug", instance=answer.instance_id if answer else "", pod=invoke.pod,
                       extension_point=invoke.point, error_id=error_id, exc_info=exc)
        if answer is not None:
            self._broken(answer.instance_id, f"host error (error id {error_id})")
        return self._error(f"wasm plugin {self.name}: internal error in {invoke.point} (error id {error_id})")

    def _exports(self, export: Export) -> bool:
        return export in self.guest.exports

    # --- scheduling cycle --------------------------------------------------------------

    def pre_filter(self, state: CycleStateView | None, pod: KubeObject) -> PreFilterResult:
        if not self._exports("prefilter"):
            uid, name = uid_and_name(pod)
            answer, _ = self._begin(uid, name)
            return PreFilterResult(self._error(answer.reason) if isinstance(answer, Lost) else self._success)
        result = self._begin_with("prefilter", (pod, self._handle(state)), pod)
        if isinstance(result, Status):
            return PreFilterResult(result)
        assert isinstance(result, PreFilterResult)
        return result

    def filter_nodes(self, state: CycleStateView | None, pod: KubeObject,
                     nodes: Sequence[NamedNode | str]) -> dict[str, Status]:
        names = _names(nodes)
        result = self._run("filter", (pod, names, self._handle(state)), pod, "scheduling")
        if isinstance(result, Status):
            return dict.fromkeys(names, result)
        assert isinstance(result, FilterResult)
        return result.as_dict()

    def add_pod(self, state: CycleStateView | None, pod: KubeObject, pod_to_add: KubeObject,
                node: NamedNode | str) -> Status:
        node_name = node if isinstance(node, str) else node.name
        return self._run_status("addpod", (pod, pod_to_add, node_name, self._handle(state)), pod, "scheduling")

    def remove_pod(self, state: CycleStateView | None, pod: KubeObject, pod_to_remove: KubeObject,
                   node: NamedNode | str) -> Status:
        node_name = node if isinstance(node, str) else node.name
        return self._run_status("removepod", (pod, pod_to_remove, node_name, self._handle(state)), pod, "scheduling")

    def post_filter(self, state: CycleStateView | None, pod: KubeObject,
                    statuses: Mapping[str, Status]) -> PostFilterResult:
        codes = {name: int(status.code) for name, status in statuses.items()}
        result = self._run("postfilter", (pod, codes, self._handle(state)), pod, "scheduling")
        if isinstance(result, Status):
            return PostFilterResult(result)
        assert isinstance(result, PostFilterResult)
        return result

    def pre_score(self, state: CycleStateView | None, pod: KubeObject, nodes: Sequence[NamedNode | str]) -> Status:
        """PreScore, and Score over the same nodes in the same message (a guest exporting
        prescore also exports score): Score then answers from what this call brought."""
        if not self._exports("prescore"):
            return self._success
        names = _names(nodes)
        result = self._run(PRESCORE_AND_SCORE, (pod, names, self._handle(state)), pod, "scheduling")
        if isinstance(result, Status):
            return result
        assert isinstance(result, PreScoreAndScore)
        if result.score is not None:
            self._cycles.keep_scores(uid_and_name(pod)[0], EarlyScores(nodes, names, result.score))
        return result.prescore

    def score_nodes(self, state: CycleStateView | None, pod: KubeObject,
                    nodes: Sequence[NamedNode | str]) -> ScoreResult:
        early = self._cycles.take_scores(uid_and_name(pod)[0])
        if early is not None and (early.nodes is nodes or early.names == _names(nodes)):
            return early.result
        result = self._run("score", (pod, _names(nodes), self._handle(state)), pod, "scheduling")
        if isinstance(result, Status):
            return ScoreResult(result)
        assert isinstance(result, ScoreResult)
        return result

    def normalize_score(self, state: CycleStateView | None, pod: KubeObject,
                        scores: Sequence[NodeScore]) -> NormalizeScoreResult:
        if not self._exports("normalizescore"):
            return NormalizeScoreResult(self._success, tuple(scores))
        result = self._run("normalizescore", (pod, tuple(scores), self._handle(state)), pod, "scheduling")
        if isinstance(result, Status):
            return NormalizeScoreResult(result)
        assert isinstance(result, NormalizeScoreResult)
        return result

    def reserve(self, state: CycleStateView | None, pod: KubeObject, node_name: str) -> Status:
        if not self._exports("reserve"):
            return self._success
        return self._run_status("reserve", (pod, node_name, self._handle(state)), pod, "scheduling")

    def permit(self, state: CycleStateView | None, pod: KubeObject, node_name: str) -> PermitResult:
        result: GuestResult = self._success
        if self._exports("permit"):
            result = self._run("permit", (pod, node_name, self._handle(state)), pod, "scheduling")
        if self._moves_to_binding:
            self._to_binding(*uid_and_name(pod))
        if isinstance(result, Status):
            return PermitResult(result)
        assert isinstance(result, PermitResult)
        return result

    # --- binding cycle (or the end of a failed scheduling cycle) ------------------------

    def unreserve(self, state: CycleStateView | None, pod: KubeObject, node_name: str) -> None:
        """Runs on the pod's own actor, wherever it is, then returns that actor to the pool."""
        status = self._success
        if self._exports("unreserve"):
            status = self._run_status("unreserve", (pod, node_name, self._handle(state)), pod, "binding")
        uid, name = uid_and_name(pod)
        self._release(uid, name, "unreserve")
        if not status.ok:
            self.log.warning("cycle.unreserve_failed", pod=name, pod_uid=uid, reason=status.reason)

    def pre_bind(self, state: CycleStateView | None, pod: KubeObject, node_name: str) -> Status:
        return self._run_status("prebind", (pod, node_name, self._handle(state)), pod, "binding")

    def bind(self, state: CycleStateView | None, pod: KubeObject, node_name: str) -> Status:
        return self._run_status("bind", (pod, node_name, self._handle(state)), pod, "binding")

    def post_bind(self, state: CycleStateView | None, pod: KubeObject, node_name: str) -> None:
        """The last call of a successful binding cycle: the pod's actor returns to the pool."""
        uid, name = uid_and_name(pod)
        status = self._success
        if self._exports("postbind"):
            status = self._run_status("postbind", (pod, node_name, self._handle(state)), pod, "binding")
        self._release(uid, name, "postbind")
        if not status.ok:
            self.log.warning("cycle.postbind_failed", pod=name, pod_uid=uid, reason=status.reason)

    def hold_for_binding(self, pod: KubeObject) -> None:
        """Move the pod's instance to the binding map without a guest call (the extender's
        stand-in for Permit, which it runs later inside bind)."""
        uid, name = uid_and_name(pod)
        self._to_binding(uid, name)

    def release(self, pod: KubeObject, why: str) -> None:
        """End the pod's cycle without a guest call: the HTTP extender gave up on a pod it
        held for its bind (it never came, or the pod was filtered again). The scheduling
        loop never needs this: the next pod's PreFilter takes over a rejected pod's slot."""
        uid, name = uid_and_name(pod)
        self._release(uid, name, why)

    # --- outside every cycle -----------------------------------------------------------

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        if self._events is not None:
            return self._events
        if "enqueue" not in self.guest.exports:
            self._events = DEFAULT_CLUSTER_EVENTS
            return self._events
        lent = self._ask_supervisor(Borrow())
        if isinstance(lent, Lost):
            return DEFAULT_CLUSTER_EVENTS
        try:
            invoke: Invoke[None] = Invoke("enqueue", (self.handle,), phase="enqueue")
            answer = ask(lent.actor, invoke)
            assert isinstance(answer, tuple)
            events, status = answer
        finally:
            self.supervisor.tell(GiveBack(lent.instance_id))
        if not status.ok:
            self.log.warning("enqueue.failed", reason=status.reason)
            return DEFAULT_CLUSTER_EVENTS
        self._events = tuple(events)
        return self._events
