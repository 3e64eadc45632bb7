"""CycleLedger: where each pod's cycle is in the extender, and until when.

This module owns the extender's one record of the pods in flight, which
`ExtenderService` (`adapters/extender/service.py`) makes and alone calls. Every move
is one method, one locked step, so no two HTTP threads (nor the bind sweeper) see a
pod half-moved. What a cycle's verbs learn (its PreFilter answer and state, the nodes
its filter passed, a failed prioritize) the verb serving it writes on its `PodCycle`:
kube-scheduler sends one pod's verbs one after another, and the ledger's lock, taken
by the next move, orders those writes before its reads. A served pod's cycle is in one
of three places:

| place        | what it means                                   | until                            |
|--------------|-------------------------------------------------|----------------------------------|
| the slot     | its scheduling cycle: begun by its filter (or   | the next pod's cycle takes the   |
|              | prioritize, or preempt), not held for its bind  | slot, it is held, or the bind    |
|              |                                                 | timeout after its last verb      |
| awaiting     | held for its bind: its instances are in their   | its bind claims it, it is        |
|              | supervisors' binding maps                       | filtered again, or the timeout   |
| binding      | its bind runs (no new cycle of the pod begins)  | its binding cycle ends           |

Besides: the pods of profiles not served here that a filter passed (`PassedThrough`,
until their bind or the timeout), and the latest object of each node a live cycle
refers to (`live`, a `LiveNodes`). The ledger moves a cycle's instances with it: holding
a cycle tells each plugin of its profile to move the pod to its binding map
(`PodCycle.hold`, inside the same locked step, before any other pod can take the slot);
a cycle the ledger gives up is handed back to the caller, which releases its instances
(`PodCycle.release`) outside the lock.

"Slot" names one thing here, the place of the cycle whose pod is being scheduled now
(whose instances are in the supervisors' scheduling slots); "scheduling cycle" is the
phase, as in kube-scheduler. The deadlines (the slot's and each awaiting or passed
pod's) are what the service's sweeper reclaims (`reclaim`).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

import pykka

from wasm_scheduler.adapters.extender import protocol
from wasm_scheduler.adapters.extender.nodes import LiveNodes
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.framework_api import SUCCESS, Status
from wasm_scheduler.vocabulary import KubeObject

if TYPE_CHECKING:  # the service imports this module
    from wasm_scheduler.adapters.extender.service import ServedProfile


@dataclass
class PodCycle:
    """One served pod's cycle here, from the verb that began it (its PreFilter) to the end of
    its bind. It keeps no request's nodes: its binding cycle reads the latest object of each
    node (`ExtenderService._bind_nodes`), so held pods cost no node list each."""

    pod: KubeObject
    uid: str
    #: Its CycleState (what its plugins asked to skip), with no request's handle.
    state: CycleState
    #: The profile whose plugins run the cycle (the pod's schedulerName).
    profile: ServedProfile
    #: What PreFilter said, and the nodes it allows (None: all).
    pre_filter: Status = SUCCESS
    subset: frozenset[str] | None = None
    #: The nodes its bind may name: those that passed its filter (or that its prioritize
    #: scored, when no filter verb began the cycle).
    feasible: frozenset[str] = frozenset()
    #: The nodes it refers to in the ledger's `LiveNodes` (requests with whole nodes): all
    #: its filter's while it has the slot (a preempt may follow), those it may bind to once held.
    nodes: frozenset[str] = frozenset()
    #: Set when the cycle ends (bound, given up, its slot taken): it then refers to no node.
    ended: bool = False
    #: Why its prioritize failed ("" if it did not): kube-scheduler ignores a failed
    #: prioritize and binds without this extender's scores, so its bind is refused.
    scoring_failed: str = ""

    def hold(self) -> None:
        """Each plugin of its profile moves the pod's instance to its binding map (a tell)."""
        for wp in self.profile.plugins:
            wp.plugin.hold_for_binding(self.pod)

    def release(self, why: str) -> None:
        """Each plugin of its profile gives the pod's instance back to its pool."""
        for wp in self.profile.plugins:
            with contextlib.suppress(pykka.ActorDeadError):  # a stopped plugin holds nothing
                wp.plugin.release(self.pod, why)


@dataclass
class AwaitingBind:
    """A pod held for its bind, until `deadline`."""

    cycle: PodCycle
    deadline: float


@dataclass
class PassedThrough:
    """A pod of a profile this extender does not serve, passed by its filter, until its bind
    (or `deadline`): its bind creates the Binding through the API, to a node of that filter."""

    pod: str
    feasible: frozenset[str]
    deadline: float


@dataclass(frozen=True)
class Footprint:
    """What the service keeps now (`ExtenderService.footprint`): every count falls to 0 once
    the pods in flight are bound or given up."""

    held: int
    binding: int
    passed_through: int
    slot: int
    live_nodes: int


@dataclass(frozen=True, slots=True)
class NewCycle:
    """`CycleLedger.begin`'s answer: the cycle now in the slot, and the cycles it ended, whose
    instances the caller releases (or, for the slot's last cycle of the same profile, lets
    the supervisors reassign)."""

    cycle: PodCycle
    #: The pod's own cycle held for its bind, filtered again before the bind came.
    abandoned: PodCycle | None
    #: The cycle that had the slot.
    previous: PodCycle | None


class BindVerdict(Enum):
    """What the ledger makes of a bind (`CycleLedger.claim_bind`)."""

    #: The pod's cycle is here and binds now: it is in `binding` until `bind_finished`.
    BIND = "bind"
    #: A pod passed through: its Binding goes through the API; it is no longer passed.
    BIND_PASSED = "bind passed"
    #: No cycle here and no pod passed through under the uid.
    UNKNOWN = "unknown"
    #: The uid's cycle (or passed pod) is of another namespace/name.
    OTHER_POD = "other pod"
    #: The node did not pass the pod's filter.
    NODE_NOT_FILTERED = "node not filtered"
    #: The pod's prioritize failed: its cycle is given up, its instances to be released.
    SCORING_FAILED = "scoring failed"


@dataclass(frozen=True, slots=True)
class BindClaim:
    """`CycleLedger.claim_bind`'s answer: the verdict, and the cycle or passed pod it is about."""

    verdict: BindVerdict
    cycle: PodCycle | None = None
    passed: PassedThrough | None = None
    #: Was the cycle held for its bind (else it still had the slot)?
    held: bool = False


@dataclass(frozen=True, slots=True)
class Reclaimed:
    """`CycleLedger.reclaim`'s answer: the cycles given up, whose instances the caller releases."""

    #: Held pods whose bind did not come in time: (uid, cycle).
    expired: list[tuple[str, PodCycle]]
    #: The slot's cycle, if no verb of it came in time.
    stale: PodCycle | None
    #: Held pods expired and no bind has ever come: say once that a bindVerb may be missing.
    no_bind_seen: bool


class CycleLedger:
    """The extender's pods in flight: the slot, the held pods, the binds running, the pods
    passed through, and the nodes their cycles refer to."""

    def __init__(self, bind_timeout_s: float, clock: Callable[[], float]) -> None:
        self.bind_timeout_s = bind_timeout_s
        self.clock = clock
        self._lock = threading.Lock()
        #: The cycle that has the slot now, and when it is given up if no verb of it comes
        #: (infinite while one runs).
        self._slot: PodCycle | None = None
        self._slot_deadline = math.inf
        #: Pods held for their bind, by uid.
        self._awaiting: dict[str, AwaitingBind] = {}
        #: Pods whose bind runs now (no new cycle of such a pod starts; a pod has one hold,
        #: so one bind of it at a time registers here).
        self._binding: set[str] = set()
        #: Pods of profiles not served here that a filter passed, until their bind.
        self._passed: dict[str, PassedThrough] = {}
        #: Has any bind come since start? (A bind timeout with none hints at a missing bindVerb.)
        self._bind_seen = False
        #: The latest object of each node a live cycle refers to, from requests that carried
        #: whole nodes (not node-cache-capable): what a binding cycle's guest and a preempt read.
        #: One object a node name, however many pods wait, and none once no cycle refers to it.
        self.live = LiveNodes()

    def _deadline(self) -> float:
        return self.clock() + self.bind_timeout_s

    def _end(self, cycle: PodCycle) -> None:
        """The cycle is over here: it refers to no node any more. (Holding the lock.)"""
        if cycle.ended:
            return
        cycle.ended = True
        names, cycle.nodes = cycle.nodes, frozenset()
        self.live.forget(names)

    # --- served pods' cycles -----------------------------------------------------------

    def begin(self, pod: KubeObject, uid: str, state: CycleState, profile: ServedProfile) -> NewCycle | None:
        """A new cycle of the pod takes the slot; None if the pod's last bind still runs.

        kube-scheduler gives up on a bind whose call timed out and schedules the pod again
        while that bind still runs here. Assignments are kept by pod, so two overlapping
        cycles of one pod could not tell their calls apart: the caller refuses this one,
        and the scheduler retries the pod with backoff, by when the old bind has ended.
        (Checked in the same locked step that starts the cycle: a bind cannot slip in.)"""
        with self._lock:
            if uid in self._binding:
                return None
            abandoned = self._awaiting.pop(uid, None)
            if abandoned is not None:
                self._end(abandoned.cycle)
            previous = self._slot
            if previous is not None:
                self._end(previous)
            cycle = self._slot = PodCycle(pod, uid, state, profile)
            self._slot_deadline = math.inf
        return NewCycle(cycle, abandoned.cycle if abandoned is not None else None, previous)

    def cycle_of(self, uid: str) -> PodCycle | None:
        """The pod's cycle under way here (held for its bind, or in the slot), if any."""
        with self._lock:
            held = self._awaiting.get(uid)
            if held is not None:
                return held.cycle
            slot = self._slot
            return slot if slot is not None and slot.uid == uid else None

    def verb_started(self, cycle: PodCycle) -> None:
        """A verb of the cycle runs: a cycle in the slot is not given up meanwhile."""
        with self._lock:
            if self._slot is cycle:
                self._slot_deadline = math.inf

    def verb_done(self, cycle: PodCycle) -> None:
        """A verb of the cycle answered: a cycle still in the slot is given up if nothing more
        of it comes within the bind timeout."""
        with self._lock:
            if self._slot is cycle:
                self._slot_deadline = self._deadline()

    def refer(self, cycle: PodCycle, names: Sequence[str], nodes: Sequence[KubeObject]) -> None:
        """The cycle refers to the whole nodes a request of it carried (their latest objects)."""
        with self._lock:
            if not cycle.ended:
                cycle.nodes = self.live.refer(cycle.nodes, names, nodes)

    def hold_for_bind(self, cycle: PodCycle) -> None:
        """The cycle leaves the slot, held for its bind until the bind timeout (a held cycle's
        deadline starts again); from now on it refers only to the nodes its bind may name.
        Nothing happens to a cycle whose slot went to another pod, or that ended meanwhile."""
        with self._lock:
            held = self._awaiting.get(cycle.uid)
            if held is not None and held.cycle is cycle:  # held since its filter: prioritize keeps it there
                held.deadline = self._deadline()
                return
            if self._slot is not cycle:
                return
            cycle.hold()
            dropped = cycle.nodes - cycle.feasible
            if dropped:
                cycle.nodes = cycle.nodes & cycle.feasible
                self.live.forget(dropped)
            self._awaiting[cycle.uid] = AwaitingBind(cycle, self._deadline())
            self._slot = None

    def binding_now(self, uid: str) -> bool:
        """Does a bind of the pod run now?"""
        with self._lock:
            return uid in self._binding

    def claim_bind(self, args: protocol.BindingArgs) -> BindClaim:
        """A bind came: the cycle (or passed pod) it may run for, in one locked step.

        A bind runs only for a pod this extender scheduled (held, or whose cycle still has
        the slot) under the same namespace, name and UID, to a node that passed its filter,
        and whose prioritize did not fail (that cycle is given up now: `SCORING_FAILED`). A
        cycle that binds leaves the slot or its hold (a cycle still in the slot is held
        first, before anything else can take the slot) and is in `binding` until
        `bind_finished`."""
        uid, who = args.pod_uid, f"{args.pod_namespace}/{args.pod_name}"
        with self._lock:
            self._bind_seen = True
            held = self._awaiting.get(uid)
            slot = self._slot if self._slot is not None and self._slot.uid == uid else None
            cycle = held.cycle if held is not None else slot
            if cycle is None:
                passed = self._passed.get(uid)
                if passed is None:
                    return BindClaim(BindVerdict.UNKNOWN)
                if passed.pod != who:
                    return BindClaim(BindVerdict.OTHER_POD, passed=passed)
                if args.node not in passed.feasible:
                    return BindClaim(BindVerdict.NODE_NOT_FILTERED, passed=passed)
                del self._passed[uid]
                return BindClaim(BindVerdict.BIND_PASSED, passed=passed)
            is_held = held is not None
            if not _same_pod(cycle.pod, args):
                return BindClaim(BindVerdict.OTHER_POD, cycle, held=is_held)
            if args.node not in cycle.feasible:
                return BindClaim(BindVerdict.NODE_NOT_FILTERED, cycle, held=is_held)
            if is_held:
                del self._awaiting[uid]
            else:
                self._slot = None
            if cycle.scoring_failed:
                self._end(cycle)
                return BindClaim(BindVerdict.SCORING_FAILED, cycle, held=is_held)
            if not is_held:
                # Its cycle still had the slot (no prioritize, and held nowhere yet): it
                # moves to binding now, before anything else can take the slot.
                cycle.hold()
            self._binding.add(uid)
            return BindClaim(BindVerdict.BIND, cycle, held=is_held)

    def bind_finished(self, cycle: PodCycle) -> None:
        """The cycle's bind ended, whatever its outcome: the cycle is over here."""
        with self._lock:
            self._binding.discard(cycle.uid)
            self._end(cycle)

    # --- pods passed through -------------------------------------------------------------

    def pass_filter(self, uid: str, pod: str, node_names: Sequence[str]) -> None:
        """A filter passed a pod not served here: its bind may follow, to one of these nodes."""
        with self._lock:
            self._passed[uid] = PassedThrough(pod, frozenset(node_names), self._deadline())

    def pass_prioritize(self, uid: str, pod: str, node_names: Sequence[str], filter_seen: bool) -> None:
        """A prioritize of a pod not served here: a passed pod waits the bind timeout again;
        without any filter so far, the prioritize stands in for its filter."""
        with self._lock:
            passed = self._passed.get(uid)
            if passed is not None:
                passed.deadline = self._deadline()
            elif not filter_seen:
                self._passed[uid] = PassedThrough(pod, frozenset(node_names), self._deadline())

    # --- the sweeper's work, and inspection ----------------------------------------------

    def reclaim(self) -> Reclaimed:
        """Give up the held pods whose bind has not come within the bind timeout, the slot's
        cycle if no verb of it has, and the passed pods whose bind has not."""
        now = self.clock()
        with self._lock:
            expired = [(uid, a.cycle) for uid, a in self._awaiting.items() if a.deadline <= now]
            for uid, cycle in expired:
                del self._awaiting[uid]
                self._end(cycle)
            for uid in [uid for uid, p in self._passed.items() if p.deadline <= now]:
                del self._passed[uid]
            stale = self._slot if self._slot is not None and self._slot_deadline <= now else None
            if stale is not None:
                self._slot, self._slot_deadline = None, math.inf
                self._end(stale)
            hint = bool(expired) and not self._bind_seen
            self._bind_seen = self._bind_seen or hint  # said once
        return Reclaimed(expired, stale, hint)

    def awaiting_bind(self) -> int:
        """How many pods are held for their bind."""
        with self._lock:
            return len(self._awaiting)

    def footprint(self) -> Footprint:
        with self._lock:
            return Footprint(len(self._awaiting), len(self._binding), len(self._passed),
                             int(self._slot is not None), len(self.live))


def _same_pod(pod: KubeObject, args: protocol.BindingArgs) -> bool:
    """Does the bind name the pod this extender scheduled under that UID?"""
    meta = pod.get("metadata", {})
    return (meta.get("namespace") or "default") == args.pod_namespace and meta.get("name", "") == args.pod_name
