"""SupervisorActor: one plugin's pool of guest actors, and the transitions of its pods.

This actor owns the plugin's `Assignments` (`actors/assignments.py`: the lifecycle of a
pod's instance, its table and its rules) and the pool of guest actors: starting them
(one eagerly at load, so a broken guest fails fast), the idle ones, lending one outside
every cycle, reaping idle ones beyond `minIdle`, and discarding a broken one (topping
the pool up). Each message is one transition; the supervisor asks `Assignments` what it
means, moves actors in and out of the pool accordingly and logs it:

| message          | transition (`Assignments`)  | the pool                              |
|------------------|-----------------------------|---------------------------------------|
| `BeginCycle(P)`  | `assign_slot`               | an empty slot takes an idle actor, else|
|                  |                             | a new one (`pool.maxInstances`)        |
| `Route(P)`       | `route`                     |                                        |
| `ToBinding(P)`   | `to_binding`                | a superseded binding actor goes idle   |
| `Release(P)`     | `release`                   | the freed actor goes idle              |
| `InstanceBroken` | `discard`                   | the actor is stopped, the pool topped up|
| `Borrow`/`GiveBack` | (outside every cycle)    | an idle actor lent and given back      |

The supervisor only hands out actor refs and records transitions: it never waits on a
guest actor (starting one is asynchronous: the new actor builds its instance on its own
thread), so it can never deadlock with one.

See `docs/reliability.md` for the pool settings.
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

from wasm_scheduler.actors.assignments import TOMBSTONE, Assignments, Place
from wasm_scheduler.actors.guest_actor import GuestActor, InstanceBroken, Invoke, Replied
from wasm_scheduler.actors.kube.wire_cache import WireCache
from wasm_scheduler.actors.mailbox import Ask, MailboxActor
from wasm_scheduler.logger import get_logger
from wasm_scheduler.registry.compiler import CompiledGuest
from wasm_scheduler.registry.config import PluginConfig

log = get_logger("actors.supervisor")


# --- messages ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BeginCycle(Ask["Began | Lost"]):
    """PreFilter of pod `pod_uid`: a scheduling cycle starts.

    `invoke`, if given, is the cycle's first message for the assigned actor (an
    `Invoke` whose `reply_to` is the caller's future): the supervisor sends it on with
    the route (a `Began`), and the actor answers the caller directly with a `Replied`; a
    `Lost` answers it at once. BeginCycle is then told, not asked: the caller waits on
    one future, woken once. Without `invoke`, it is asked and answers `Began` or `Lost`."""

    pod_uid: str
    pod: str = ""
    invoke: Invoke[Began | Lost] | None = None


@dataclass(frozen=True, slots=True)
class Route(Ask["Assigned | Lost"]):
    """Which actor serves `pod_uid` now? The slot's if it holds the pod, else the binding
    map's; `binding_first` (a call of the binding cycle) looks in the binding map first,
    for a pod scheduled again while its last binding cycle still runs."""

    pod_uid: str
    pod: str = ""
    binding_first: bool = False


@dataclass(frozen=True, slots=True)
class ToBinding(Ask[bool]):
    """Permit ran for `pod_uid`: its actor leaves the scheduling slot for the binding map."""

    pod_uid: str
    pod: str = ""


@dataclass(frozen=True, slots=True)
class Release(Ask[bool]):
    """The cycle of `pod_uid` is over: its actor returns to the pool."""

    pod_uid: str
    pod: str = ""
    why: str = ""


@dataclass(frozen=True, slots=True)
class Borrow(Ask["Assigned | Lost"]):
    """Lend an idle actor for a call outside every cycle."""


@dataclass(frozen=True, slots=True)
class GiveBack:
    instance_id: str


@dataclass(frozen=True, slots=True)
class GetCounts(Ask["PoolCounts"]):
    """How many actors are where, and how many were started, discarded, reaped."""


@dataclass(frozen=True, slots=True)
class GetPlacement(Ask[dict[str, str]]):
    """Where each live actor is: instance id -> "idle"/"slot"/"binding"/"lent" (inspection)."""


@dataclass(frozen=True, slots=True)
class GetActors(Ask[list[pykka.ActorRef[GuestActor]]]):
    """Every live guest actor, for a shutdown that waits for them to stop."""


@dataclass(frozen=True, slots=True)
class Reap(Ask[int]):
    """Stop idle actors beyond `min_idle` that have idled longer than `idle_seconds`."""


# --- replies -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Assigned:
    """The actor serving a pod (or lent outside every cycle)."""

    instance_id: str
    actor: pykka.ActorRef[GuestActor]


@dataclass(frozen=True, slots=True)
class Began:
    """BeginCycle's answer: the actor now serving the pod, and the pod whose cycle it ended
    by taking over the slot ("" if none). That pod's end is the one transition the facade
    does not send itself, so this is where its `CycleCache` (`actors/cycle_cache.py`)
    learns to forget it; only the supervisor knows, as it alone sees BeginCycles in order."""

    assigned: Assigned
    ended_pod_uid: str = ""


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
    #: Of the discarded, those whose guest call trapped (`call.trapped`).
    trapped: int = 0
    #: Cycles (and loans) refused because `pool.maxInstances` were busy (`pool.exhausted`).
    exhausted: int = 0

    @property
    def live(self) -> int:
        return self.idle + self.scheduling + self.binding + self.lent

    @property
    def balanced(self) -> bool:
        """started = idle + assigned + lent + discarded + reaped."""
        return self.started == self.live + self.discarded + self.reaped


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
        #: instance id -> the route to each live actor (its id and ref), made once.
        self._actors: dict[str, Assigned] = {}
        self._idle: dict[str, float] = {}  # instance id -> idle since (insertion ordered)
        #: Which actor serves which pod: the lifecycle's rules live there.
        self.assignments = Assignments()
        self._lent: set[str] = set()
        self._started = 0
        self._discarded = 0
        self._reaped = 0
        self._trapped = 0
        self._exhausted = 0
        self._reap_timer: threading.Timer | None = None

    # --- lifecycle ---------------------------------------------------------------------

    def on_start(self) -> None:
        # One instance eagerly, so a broken guest shows itself at load.
        self._idle[self._start_actor()] = self.clock()

    def on_stop(self) -> None:
        if self._reap_timer is not None:
            self._reap_timer.cancel()
        # Assignments still held end here, so a log shows every instance released.
        for held, _where in self.assignments.held():
            self.log.info("assignment.released", instance=held.instance_id, pod_uid=held.pod_uid, pod=held.pod,
                          why="shutdown")
        for assigned in self._actors.values():
            assigned.actor.stop(block=False)
        self.log.info("pool.stopped", started=self._started, discarded=self._discarded)
        self._actors.clear()
        self._idle.clear()
        self.assignments = Assignments()

    def on_receive(self, message: object) -> object:
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

    def _begin_cycle(self, msg: BeginCycle) -> Began | Lost:
        ended = ""  # the pod whose cycle the first turn ended (a later turn ends only this pod's)
        while True:
            answer = self._assign_slot(msg)
            if isinstance(answer, Began):
                ended = ended or answer.ended_pod_uid
                if answer.ended_pod_uid != ended:
                    answer = Began(answer.assigned, ended)
            if msg.invoke is None or isinstance(answer, Lost):
                break
            try:  # never waited for here: the actor answers the caller
                answer.assigned.actor.tell(msg.invoke.routed(answer))
                # pykka keeps this message until the next one: it keeps no pod or nodes.
                msg.invoke.args = ()
                return answer
            except pykka.ActorDeadError:
                # Died before the cycle's first call reached it: the pod has no state there
                # yet, so it starts on another actor (each turn discards one: this ends;
                # the slot's tombstone makes the next turn take an idle actor).
                self._instance_broken(InstanceBroken(answer.assigned.instance_id, "its actor died"))
        if msg.invoke is not None:
            assert msg.invoke.reply_to is not None, "a forwarded call carries the caller's future"
            msg.invoke.reply_to.set(Replied(answer))
        return answer

    def _alive(self, instance_id: str) -> bool:
        assigned = self._actors.get(instance_id)
        return assigned is not None and assigned.actor.is_alive()

    def _assign_slot(self, msg: BeginCycle) -> Began | Lost:
        # A known actor that died is found out when the call reaches it (ActorDeadError
        # in `_begin_cycle`), discarded and counted there, and the pod starts elsewhere.
        reused = self.assignments.reusable_slot(self._actors.__contains__)
        if reused is not None:
            instance_id = reused.instance_id
        else:
            taken = self._take_idle()
            if taken is None:
                self.assignments.clear_slot()
                return self._pool_exhausted()
            instance_id = taken
        previous = self.assignments.assign_slot(msg.pod_uid, msg.pod, instance_id)
        if reused is not None and previous is not None:
            self.log.info("assignment.reassigned", instance=instance_id, pod=msg.pod, pod_uid=msg.pod_uid,
                          previous_pod=previous.pod, previous_pod_uid=previous.pod_uid)
        else:
            self.log.info("assignment.acquired", instance=instance_id, pod=msg.pod, pod_uid=msg.pod_uid,
                          phase="scheduling")
        if msg.pod_uid in self.assignments.binding:
            # The same pod again while a binding cycle of it still holds an actor: that
            # cycle keeps its own actor; this one is separate.
            self.log.warning("assignment.pod_in_binding", pod=msg.pod, pod_uid=msg.pod_uid)
        ended = previous.pod_uid if previous is not None and previous.pod_uid != msg.pod_uid else ""
        return Began(self._actors[instance_id], ended)

    def _route(self, msg: Route) -> Assigned | Lost:
        instance_id = self.assignments.route(msg.pod_uid, msg.binding_first)
        if instance_id is None:
            return Lost(
                f"wasm plugin {self.config.name}: no instance is assigned to pod {msg.pod or msg.pod_uid} "
                "(its cycle ended or never began)"
            )
        if instance_id != TOMBSTONE and instance_id in self._actors and not self._alive(instance_id):
            self._instance_broken(InstanceBroken(instance_id, "its actor died"))
            instance_id = TOMBSTONE
        if instance_id == TOMBSTONE or instance_id not in self._actors:
            return Lost(
                f"wasm plugin {self.config.name}: the instance serving pod {msg.pod or msg.pod_uid} "
                "was discarded in this cycle; its cycle state is gone"
            )
        return self._actors[instance_id]

    def _to_binding(self, msg: ToBinding) -> bool:
        moved, superseded = self.assignments.to_binding(msg.pod_uid)
        if moved is None:
            return msg.pod_uid in self.assignments.binding
        if superseded is not None and superseded.instance_id in self._actors:
            # The pod's last binding cycle still holds an actor: a scheduler that gave up on
            # it (kube-scheduler after the extender's bind timed out) scheduled the pod again
            # and moved it to binding anew. A pod has one binding assignment: the old one
            # returns to the pool (a call of the old cycle still queued there runs first),
            # and the old cycle's later calls, routed by the pod, reach the new instance.
            self._idle[superseded.instance_id] = self.clock()
            self.log.warning("assignment.superseded", instance=superseded.instance_id, pod=msg.pod,
                             pod_uid=msg.pod_uid)
        if moved.instance_id != TOMBSTONE:
            self.log.info("assignment.to_binding", instance=moved.instance_id, pod=msg.pod, pod_uid=msg.pod_uid)
        return True

    def _release(self, msg: Release) -> bool:
        released = self.assignments.release(msg.pod_uid)
        if released is None:
            return False
        held, phase = released
        if held.instance_id in self._actors:
            self._idle[held.instance_id] = self.clock()
            self.log.info("assignment.released", instance=held.instance_id, pod=msg.pod, pod_uid=msg.pod_uid,
                          phase=phase, why=msg.why)
        return True

    def _instance_broken(self, msg: InstanceBroken) -> None:
        instance_id = msg.instance_id
        assigned = self._actors.pop(instance_id, None)
        if assigned is None:
            return
        self._discarded += 1
        self._trapped += msg.trapped
        self._idle.pop(instance_id, None)
        self._lent.discard(instance_id)
        self.assignments.discard(instance_id)
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
        held = [where for h, where in self.assignments.held() if h.instance_id in self._actors]
        scheduling, binding = held.count("slot"), held.count("binding")
        return PoolCounts(
            len(self._idle),
            scheduling,
            binding,
            len(self._lent),
            self._started,
            self._discarded,
            self._reaped,
            self._trapped,
            self._exhausted,
        )

    def _placement(self, _msg: GetPlacement) -> dict[str, str]:
        where: dict[str, list[Place]] = {i: [] for i in self._actors}
        for i in self._idle:
            where.setdefault(i, []).append("idle")
        for held, place in self.assignments.held():
            where.setdefault(held.instance_id, []).append(place)
        for i in self._lent:
            where.setdefault(i, []).append("lent")
        return {i: "+".join(places) or "nowhere" for i, places in where.items()}

    def _actors_message(self, _msg: GetActors) -> list[pykka.ActorRef[GuestActor]]:
        return [assigned.actor for assigned in self._actors.values()]

    def _reap_message(self, _msg: Reap) -> int:
        self._reap_timer = None  # this is its message (or an explicit one): a new timer may follow
        return self._reap()

    # --- the pool ----------------------------------------------------------------------

    def _room(self) -> bool:
        limit = self.config.pool.max_instances
        return limit == 0 or len(self._actors) < limit

    def _start_actor(self) -> str:
        instance_id = f"{self.config.name}-{next(self._ids)}"
        ref = GuestActor.start(self.guest, self.config, instance_id, self.wire_cache, self.actor_ref)
        self._actors[instance_id] = Assigned(instance_id, ref)
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
        self._exhausted += 1
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


_HANDLERS: dict[type, Callable[[SupervisorActor, Any], object]] = {
    BeginCycle: SupervisorActor._begin_cycle,
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
}
