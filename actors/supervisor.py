"""SupervisorActor: which guest actor serves which pod, and the pool of idle ones.

This is the one place where the lifecycle of a pod's instance lives:

| event (message)                    | what happens                                            |
|------------------------------------|---------------------------------------------------------|
| `BeginCycle(P)` (PreFilter)        | the scheduling slot's actor is reassigned to P (the last |
|                                    | pod's cycle is over: it never reached Permit); an empty  |
|                                    | slot takes an idle actor, else a new one is started      |
| `SlotPassed(P, X)` (PreFilter, the | the same rule as BeginCycle, applied by the facade where |
|  facade decided)                   | the call starts: the slot's healthy actor X went to P    |
|                                    | (the facade logged it); recorded here, in the order the  |
|                                    | facade sent it, with its next message                    |
| `Route(P)` (any other call of P)   | P's actor: the slot if it holds P, else the binding map  |
|                                    | (a binding-cycle call: the binding map first, else the   |
|                                    | slot); none (its instance trapped, its cycle ended):     |
|                                    | `Lost`                                                   |
| `ToBinding(P)` (after Permit, for a| P's actor moves from the slot to the binding map (a guest|
|  guest with binding-cycle exports) | without prebind, bind, postbind and unreserve keeps the  |
|                                    | slot: no call of P can reach its instance any more); an  |
|                                    | older binding assignment of P returns to the pool        |
| `Release(P)` (end of binding cycle,| P's actor returns to the idle pool: the one in the       |
|  Unreserve, any failure)           | binding map if P has one, else the slot's if it holds P; |
|                                    | a pod holding neither is not even sent (the facade       |
|                                    | mirrors this rule)                                       |
| `InstanceBroken(id)` (from a guest | the actor is stopped; the pod it served keeps a          |
|  actor whose instance trapped)     | tombstone so its later calls get Error, never a fresh    |
|                                    | instance without its state; the pool is topped up        |
| `Borrow` / `GiveBack`              | an idle actor lent outside every cycle (EventsToRegister)|

An actor is always in exactly one place: idle, the slot, the binding map, lent, or
gone. The supervisor only hands out actor refs and records transitions: it never
waits on a guest actor (starting one is asynchronous: the new actor builds its
instance on its own thread), so it can never deadlock with one.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pykka
import structlog

from wasm_scheduler.actors.guest_actor import GuestActor, InstanceBroken, InstanceHealth, Replied
from wasm_scheduler.actors.mailbox import MailboxActor
from wasm_scheduler.actors.wire_cache import WireCache
from wasm_scheduler.registry.compiler import CompiledGuest
from wasm_scheduler.registry.config import PluginConfig

log = structlog.get_logger("actors.supervisor")


# --- messages ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BeginCycle:
    """PreFilter of pod `pod_uid`: a scheduling cycle starts.

    `invoke`, if given, is the cycle's first message for the assigned actor (an
    `Invoke` whose `reply_to` is the caller's future): the supervisor sends it on with
    the route, and the actor answers the caller directly with a `Replied`; a `Lost`
    answers it at once. BeginCycle is then told, not asked: the caller waits on one
    future, woken once."""

    pod_uid: str
    pod: str = ""
    invoke: Any = None


@dataclass(frozen=True, slots=True)
class SlotPassed:
    """The facade gave the scheduling slot's actor `instance_id` to pod `pod_uid` itself:
    BeginCycle's rule (the slot's actor goes to the next pod), applied without a round
    trip when the facade knows the slot's actor and that its instance is healthy. It
    logged the reassignment when it made it; this records it."""

    pod_uid: str
    pod: str
    instance_id: str


@dataclass(frozen=True, slots=True)
class Route:
    """Which actor serves `pod_uid` now? The slot's if it holds the pod, else the binding
    map's; `binding_first` (a call of the binding cycle) looks in the binding map first,
    for a pod scheduled again while its last binding cycle still runs."""

    pod_uid: str
    pod: str = ""
    binding_first: bool = False


@dataclass(frozen=True, slots=True)
class ToBinding:
    """Permit ran for `pod_uid`: its actor leaves the scheduling slot for the binding map."""

    pod_uid: str
    pod: str = ""


@dataclass(frozen=True, slots=True)
class Release:
    """The cycle of `pod_uid` is over: its actor returns to the pool."""

    pod_uid: str
    pod: str = ""
    why: str = ""


@dataclass(frozen=True, slots=True)
class Borrow:
    """Lend an idle actor for a call outside every cycle."""


@dataclass(frozen=True, slots=True)
class GiveBack:
    instance_id: str


@dataclass(frozen=True, slots=True)
class GetCounts:
    pass


@dataclass(frozen=True, slots=True)
class GetPlacement:
    """Where each live actor is, for tests: instance id -> "idle"/"slot"/"binding"/"lent"."""


@dataclass(frozen=True, slots=True)
class GetActors:
    """Every live guest actor, for a shutdown that waits for them to stop."""


@dataclass(frozen=True, slots=True)
class Batch:
    """Several messages in one, handled in order; the answer is the last one's. The facade
    holds a ToBinding back until its next message, which then carries it (one wake of
    this actor less per pod; the pod's actor serves it all the same meanwhile)."""

    messages: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Reap:
    """Stop idle actors beyond `min_idle` that have idled longer than `idle_seconds`."""


# --- replies -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Assigned:
    instance_id: str
    actor: pykka.ActorRef[Any]
    #: The actor's own word on its instance (`InstanceHealth`), for a facade passing it on.
    health: InstanceHealth


@dataclass(frozen=True, slots=True)
class Lost:
    """No actor can serve this call; `reason` becomes the pod's Error status."""

    reason: str


@dataclass(frozen=True, slots=True)
class PoolCounts:
    idle: int
    scheduling: int
    binding: int
    lent: int
    started: int
    discarded: int
    reaped: int

    @property
    def live(self) -> int:
        return self.idle + self.scheduling + self.binding + self.lent

    @property
    def balanced(self) -> bool:
        """started = idle + assigned + lent + discarded + reaped."""
        return self.started == self.live + self.discarded + self.reaped


#: A pod's assignment whose instance was discarded: calls of its cycle get Error.
_TOMBSTONE = ""


class SupervisorActor(MailboxActor):
    """Pod -> guest actor assignments and the idle pool of one wasm plugin."""

    def __init__(
        self,
        guest: CompiledGuest,
        config: PluginConfig,
        wire_cache: WireCache | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.guest = guest
        self.config = config
        self.wire_cache = wire_cache or WireCache()
        self.clock = clock
        self.log = log.bind(plugin=config.name)
        self._ids = itertools.count(1)
        #: instance id -> the route to each live actor (its ref and health), made once.
        self._actors: dict[str, Assigned] = {}
        self._idle: dict[str, float] = {}  # instance id -> idle since (insertion ordered)
        self._slot: tuple[str, str] | None = None  # (pod uid, instance id or tombstone)
        self._slot_pod = ""
        self._binding: dict[str, str] = {}  # pod uid -> instance id or tombstone
        self._lost: dict[str, str] = {}  # instance id -> why it was discarded (for tombstones)
        self._lent: set[str] = set()
        self._started = 0
        self._discarded = 0
        self._reaped = 0
        self._reap_timer: threading.Timer | None = None

    # --- lifecycle ---------------------------------------------------------------------

    def on_start(self) -> None:
        # One instance eagerly, so a broken guest shows itself at load.
        self._idle[self._start_actor()] = self.clock()

    def on_stop(self) -> None:
        if self._reap_timer is not None:
            self._reap_timer.cancel()
        # Assignments still held end here, so a log shows every instance released.
        held = ([self._slot] if self._slot is not None else []) + list(self._binding.items())
        for pod_uid, instance_id in held:
            if instance_id != _TOMBSTONE:
                self.log.info("assignment.released", instance=instance_id, pod_uid=pod_uid,
                              pod=self._slot_pod if self._slot and self._slot[0] == pod_uid else "", why="shutdown")
        for assigned in self._actors.values():
            assigned.actor.stop(block=False)
        self.log.info("pool.stopped", started=self._started, discarded=self._discarded)
        self._actors.clear()
        self._idle.clear()
        self._binding.clear()
        self._slot = None

    def on_receive(self, message: Any) -> Any:
        handler = _HANDLERS.get(type(message))
        if handler is None:
            raise TypeError(f"SupervisorActor got an unknown message {message!r}")
        result = handler(self, message)
        if len(self._idle) > self.config.pool.min_idle:
            self._reap()
            self._schedule_reap()
        return result

    def _schedule_reap(self) -> None:
        """While idle actors exceed min_idle, a timer tells this actor to Reap when the
        oldest could expire, so surplus instances stop even if no pod comes. The timer
        only sends a message: the reaping itself runs in the supervisor's own thread."""
        if self._reap_timer is not None or len(self._idle) <= self.config.pool.min_idle:
            return
        oldest = next(iter(self._idle.values()))
        delay = max(0.0, oldest + self.config.pool.idle_seconds - self.clock()) + 0.01
        ref = self.actor_ref

        def tell_reap() -> None:
            with contextlib.suppress(pykka.ActorDeadError):  # stopped meanwhile: nothing to reap
                ref.tell(Reap())

        self._reap_timer = threading.Timer(delay, tell_reap)
        self._reap_timer.daemon = True
        self._reap_timer.name = f"{self.config.name}-reap-timer"
        self._reap_timer.start()

    # --- transitions -------------------------------------------------------------------

    def _begin_cycle(self, msg: BeginCycle) -> Assigned | Lost:
        while True:
            answer = self._assign_slot(msg)
            if msg.invoke is None or isinstance(answer, Lost):
                break
            try:  # never waited for here: the actor answers the caller
                answer.actor.tell(msg.invoke.routed(answer))
                return answer
            except pykka.ActorDeadError:
                # Died before the cycle's first call reached it: the pod has no state there
                # yet, so it starts on another actor (each turn discards one: this ends;
                # the slot's tombstone makes the next turn take an idle actor).
                self._instance_broken(InstanceBroken(answer.instance_id, "its actor died"))
        if msg.invoke is not None:
            msg.invoke.reply_to.set(Replied(answer))
        return answer

    def _log_assignment(self, msg: BeginCycle, previous: tuple[str, str] | None, instance_id: str) -> None:
        """`previous`: the slot's last pod and actor when that actor is reassigned."""
        if previous is not None:
            self.log.info("assignment.reassigned", instance=instance_id, pod=msg.pod, pod_uid=msg.pod_uid,
                          previous_pod=self._slot_pod, previous_pod_uid=previous[0])
        else:
            self.log.info("assignment.acquired", instance=instance_id, pod=msg.pod, pod_uid=msg.pod_uid,
                          phase="scheduling")
        if msg.pod_uid in self._binding:
            # The same pod again while a binding cycle of it still holds an actor: that
            # cycle keeps its own actor; this one is separate.
            self.log.warning("assignment.pod_in_binding", pod=msg.pod, pod_uid=msg.pod_uid)

    def _assign_slot(self, msg: BeginCycle) -> Assigned | Lost:
        previous = self._slot
        if previous is not None and previous[1] != _TOMBSTONE and previous[1] in self._actors:
            instance_id = previous[1]
        else:
            taken = self._take_idle()
            if taken is None:
                self._slot = None
                return self._pool_exhausted()
            instance_id, previous = taken, None
        self._log_assignment(msg, previous, instance_id)
        self._slot = (msg.pod_uid, instance_id)
        self._slot_pod = msg.pod
        return self._actors[instance_id]

    def _slot_passed(self, msg: SlotPassed) -> None:
        """Record a reassignment the facade made (and logged): the slot's actor is P's now."""
        slot = self._slot
        if msg.instance_id not in self._actors:
            # Discarded since (its actor died under the call): P's cycle has no instance.
            self._slot, self._slot_pod = (msg.pod_uid, _TOMBSTONE), msg.pod
            return
        if slot is None or slot[1] != msg.instance_id:
            # The facade passes on only the actor it saw in the slot, and this actor sees
            # the facade's messages in the order it sent them: a disagreement is our bug.
            self.log.error("assignment.ledger_mismatch", instance=msg.instance_id, pod=msg.pod,
                           pod_uid=msg.pod_uid, slot=slot)
            self._idle.pop(msg.instance_id, None)
            self._lent.discard(msg.instance_id)
            for uid in [u for u, i in self._binding.items() if i == msg.instance_id]:
                del self._binding[uid]
        if msg.pod_uid in self._binding:
            self.log.warning("assignment.pod_in_binding", pod=msg.pod, pod_uid=msg.pod_uid)
        self._slot, self._slot_pod = (msg.pod_uid, msg.instance_id), msg.pod

    def _route(self, msg: Route) -> Assigned | Lost:
        if msg.binding_first and msg.pod_uid in self._binding:
            instance_id = self._binding[msg.pod_uid]
        elif self._slot is not None and self._slot[0] == msg.pod_uid:
            instance_id = self._slot[1]
        elif msg.pod_uid in self._binding:
            instance_id = self._binding[msg.pod_uid]
        else:
            return Lost(
                f"wasm plugin {self.config.name}: no instance is assigned to pod {msg.pod or msg.pod_uid} "
                "(its cycle ended or never began)"
            )
        if instance_id != _TOMBSTONE and instance_id in self._actors and not self._actors[instance_id].actor.is_alive():
            self._instance_broken(InstanceBroken(instance_id, "its actor died"))
            instance_id = _TOMBSTONE
        if instance_id == _TOMBSTONE or instance_id not in self._actors:
            return Lost(
                f"wasm plugin {self.config.name}: the instance serving pod {msg.pod or msg.pod_uid} "
                "was discarded in this cycle; its cycle state is gone"
            )
        return self._actors[instance_id]

    def _to_binding(self, msg: ToBinding) -> bool:
        if self._slot is None or self._slot[0] != msg.pod_uid:
            return msg.pod_uid in self._binding
        instance_id = self._slot[1]
        self._slot = None
        superseded = self._binding.get(msg.pod_uid)
        if superseded is not None and superseded != _TOMBSTONE and superseded in self._actors:
            # The pod's last binding cycle still holds an actor: a scheduler that gave up on
            # it (kube-scheduler after the extender's bind timed out) scheduled the pod again
            # and moved it to binding anew. A pod has one binding assignment: the old one
            # returns to the pool (a call of the old cycle still queued there runs first),
            # and the old cycle's later calls, routed by the pod, reach the new instance.
            self._idle[superseded] = self.clock()
            self.log.warning("assignment.superseded", instance=superseded, pod=msg.pod, pod_uid=msg.pod_uid)
        self._binding[msg.pod_uid] = instance_id
        if instance_id != _TOMBSTONE:
            self.log.info(
                "assignment.to_binding", instance=instance_id, pod=msg.pod, pod_uid=msg.pod_uid
            )
        return True

    def _release(self, msg: Release) -> bool:
        if msg.pod_uid in self._binding:
            instance_id = self._binding.pop(msg.pod_uid)
            phase = "binding"
        elif self._slot is not None and self._slot[0] == msg.pod_uid:
            instance_id = self._slot[1]
            self._slot = None
            phase = "scheduling"
        else:
            return False
        if instance_id != _TOMBSTONE and instance_id in self._actors:
            self._idle[instance_id] = self.clock()
            self.log.info(
                "assignment.released",
                instance=instance_id,
                pod=msg.pod,
                pod_uid=msg.pod_uid,
                phase=phase,
                why=msg.why,
            )
        return True

    def _instance_broken(self, msg: InstanceBroken) -> None:
        instance_id = msg.instance_id
        assigned = self._actors.pop(instance_id, None)
        if assigned is None:
            return
        assigned.health.broken = assigned.health.broken or msg.reason
        self._discarded += 1
        self._idle.pop(instance_id, None)
        self._lent.discard(instance_id)
        if self._slot is not None and self._slot[1] == instance_id:
            self._slot = (self._slot[0], _TOMBSTONE)
        for pod_uid, held in self._binding.items():
            if held == instance_id:
                self._binding[pod_uid] = _TOMBSTONE
        assigned.actor.stop(block=False)
        self.log.warning("instance.discarded", instance=instance_id, trap=msg.reason)
        if len(self._idle) < self.config.pool.min_idle and self._room():
            self._idle[self._start_actor()] = self.clock()

    def _borrow(self, _msg: Borrow) -> Assigned | Lost:
        instance_id = self._take_idle()
        if instance_id is None:
            return self._pool_exhausted()
        self._lent.add(instance_id)
        return self._actors[instance_id]

    def _give_back(self, msg: GiveBack) -> None:
        if msg.instance_id in self._lent:
            self._lent.discard(msg.instance_id)
            if msg.instance_id in self._actors:
                self._idle[msg.instance_id] = self.clock()

    def _counts(self, _msg: GetCounts) -> PoolCounts:
        scheduling = 1 if self._slot is not None and self._slot[1] in self._actors else 0
        binding = sum(1 for i in self._binding.values() if i in self._actors)
        return PoolCounts(
            len(self._idle),
            scheduling,
            binding,
            len(self._lent),
            self._started,
            self._discarded,
            self._reaped,
        )

    def _placement(self, _msg: GetPlacement) -> dict[str, str]:
        where: dict[str, list[str]] = {i: [] for i in self._actors}
        for i in self._idle:
            where.setdefault(i, []).append("idle")
        if self._slot is not None and self._slot[1] != _TOMBSTONE:
            where.setdefault(self._slot[1], []).append("slot")
        for i in self._binding.values():
            if i != _TOMBSTONE:
                where.setdefault(i, []).append("binding")
        for i in self._lent:
            where.setdefault(i, []).append("lent")
        return {i: "+".join(places) or "nowhere" for i, places in where.items()}

    def _actors_message(self, _msg: GetActors) -> list[pykka.ActorRef[Any]]:
        return [assigned.actor for assigned in self._actors.values()]

    def _batch(self, msg: Batch) -> Any:
        result = None
        for message in msg.messages:
            result = _HANDLERS[type(message)](self, message)
        return result

    def _reap_message(self, _msg: Reap) -> int:
        self._reap_timer = None  # this is its message (or an explicit one): a new timer may follow
        return self._reap()

    # --- the pool ----------------------------------------------------------------------

    def _room(self) -> bool:
        limit = self.config.pool.max_instances
        return limit == 0 or len(self._actors) < limit

    def _start_actor(self) -> str:
        instance_id = f"{self.config.name}-{next(self._ids)}"
        health = InstanceHealth()
        ref = GuestActor.start(
            self.guest, self.config, instance_id, self.wire_cache, self.actor_ref, health
        )
        self._actors[instance_id] = Assigned(instance_id, ref, health)
        self._started += 1
        return instance_id

    def _take_idle(self) -> str | None:
        """The most recently used live idle actor; else a new one, room allowing."""
        while self._idle:
            # The most recently used idle actor: its memory is warm.
            instance_id = next(reversed(self._idle))
            del self._idle[instance_id]
            if self._actors[instance_id].actor.is_alive():
                return instance_id
            self._forget_dead(instance_id)
        if not self._room():
            return None
        return self._start_actor()

    def _forget_dead(self, instance_id: str) -> None:
        """An idle actor that died on its own (never from a guest call): count it discarded."""
        self._actors.pop(instance_id, None)
        self._discarded += 1
        self.log.warning("instance.discarded", instance=instance_id, trap="its actor died while idle")

    def _pool_exhausted(self) -> Lost:
        limit = self.config.pool.max_instances
        self.log.warning("pool.exhausted", max_instances=limit)
        return Lost(
            f"wasm plugin {self.config.name}: all {limit} instances are busy "
            "(pool.maxInstances reached); retry later"
        )

    def _reap(self) -> int:
        now = self.clock()
        surplus = len(self._idle) - self.config.pool.min_idle
        stopped = 0
        # Oldest idle first (insertion order).
        for instance_id, since in list(self._idle.items()):
            if stopped >= surplus:
                break
            if now - since < self.config.pool.idle_seconds:
                continue
            del self._idle[instance_id]
            self._actors.pop(instance_id).actor.stop(block=False)
            self._reaped += 1
            stopped += 1
            self.log.info(
                "instance.reaped", instance=instance_id, idle_seconds=round(now - since, 1)
            )
        return stopped


_HANDLERS: dict[type, Callable[[SupervisorActor, Any], Any]] = {
    BeginCycle: SupervisorActor._begin_cycle,
    SlotPassed: SupervisorActor._slot_passed,
    Route: SupervisorActor._route,
    ToBinding: SupervisorActor._to_binding,
    Release: SupervisorActor._release,
    InstanceBroken: SupervisorActor._instance_broken,
    Borrow: SupervisorActor._borrow,
    GiveBack: SupervisorActor._give_back,
    GetCounts: SupervisorActor._counts,
    GetPlacement: SupervisorActor._placement,
    Reap: SupervisorActor._reap_message,
    GetActors: SupervisorActor._actors_message,
    Batch: SupervisorActor._batch,
}
