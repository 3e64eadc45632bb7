"""The lifecycle's rules, one table row each: event, state before, answer, state after.

The first table drives `Assignments` (`actors/assignments.py`) directly: which instance
serves which pod, and what each transition answers. The second drives the supervisor's
transitions with its pool (`actors/supervisor.py`), its guest actors replaced by
stand-ins, so the rules about idle, new, lent and discarded instances are checked
without a guest or a thread. `tests/test_supervisor.py` checks the same rules end to
end, through the plugin facade and a real guest.

Notation: "a@i1" is pod a (uid "a", name "ns/a") served by instance i1; "a@" is pod a
whose instance was discarded (a tombstone).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pykka
import pytest

from wasm_scheduler.actors import supervisor as supervisor_module
from wasm_scheduler.actors.assignments import TOMBSTONE, Assignments, Held, moves_to_binding
from wasm_scheduler.actors.guest_actor import InstanceBroken
from wasm_scheduler.actors.supervisor import (
    Assigned,
    Began,
    BeginCycle,
    Borrow,
    GetCounts,
    GiveBack,
    Lost,
    Reap,
    Release,
    Route,
    SupervisorActor,
    ToBinding,
)
from wasm_scheduler.registry.config import PluginConfig, PoolConfig


def h(spec: str) -> Held:
    """ "a@i1" -> pod a on instance i1; "a@" -> pod a, its instance discarded."""
    uid, _, instance = spec.partition("@")
    return Held(uid, f"ns/{uid}", instance or TOMBSTONE)


def state(slot: str | None = None, *binding: str) -> Assignments:
    """The slot's assignment (or None), then the binding map's."""
    return Assignments(h(slot) if slot else None, {h(b).pod_uid: h(b) for b in binding})


def known(*instances: str) -> Callable[[str], bool]:
    return set(instances).__contains__


# --- Assignments -------------------------------------------------------------------------

#: (rule, state before, event, answer, state after)
ASSIGNMENT_RULES: list[tuple[str, Assignments, Callable[[Assignments], object], object, Assignments]] = [
    # PreFilter: which instance the cycle takes (`reusable_slot`), then `assign_slot`.
    ("PreFilter: the slot's live instance is taken over",
     state("a@i1"), lambda s: s.reusable_slot(known("i1")), h("a@i1"), state("a@i1")),
    ("PreFilter: an empty slot has nothing to take over (the pool gives one)",
     state(), lambda s: s.reusable_slot(known("i1")), None, state()),
    ("PreFilter: a discarded slot instance is not taken over",
     state("a@"), lambda s: s.reusable_slot(known("i1")), None, state("a@")),
    ("PreFilter: a slot instance the pool no longer knows is not taken over",
     state("a@i1"), lambda s: s.reusable_slot(known("i2")), None, state("a@i1")),
    ("PreFilter: a pod rejected before Permit is freed by the next pod's, which gets its instance",
     state("a@i1"), lambda s: s.assign_slot("b", "ns/b", "i1"), h("a@i1"), state("b@i1")),
    ("PreFilter: an empty slot takes the pool's instance, ending no cycle",
     state(), lambda s: s.assign_slot("b", "ns/b", "i2"), None, state("b@i2")),
    ("PreFilter: after a discard, the pod in the slot's cycle ends on a new instance",
     state("a@"), lambda s: s.assign_slot("b", "ns/b", "i2"), h("a@"), state("b@i2")),
    ("PreFilter: a pod scheduled again keeps the slot's instance",
     state("a@i1"), lambda s: s.assign_slot("a", "ns/a", "i1"), h("a@i1"), state("a@i1")),
    ("PreFilter: a pod scheduled again while its binding cycle runs: the binding one is kept",
     state(None, "a@i1"), lambda s: s.assign_slot("a", "ns/a", "i2"), None, state("a@i2", "a@i1")),
    ("PreFilter: the next pod's cycle leaves the binding map alone",
     state("a@i1", "b@i2"), lambda s: s.assign_slot("c", "ns/c", "i1"), h("a@i1"), state("c@i1", "b@i2")),
    ("PreFilter: no instance to be had (pool exhausted): the slot is empty",
     state("a@"), lambda s: s.clear_slot(), None, state()),
    # Every other call of a cycle.
    ("a scheduling-cycle call reaches the slot's instance",
     state("a@i1", "b@i2"), lambda s: s.route("a"), "i1", state("a@i1", "b@i2")),
    ("a binding-cycle call reaches the binding map's instance",
     state("a@i1", "b@i2"), lambda s: s.route("b", binding_first=True), "i2", state("a@i1", "b@i2")),
    ("a call of a pod in its binding cycle reaches it, whatever the call",
     state("a@i1", "b@i2"), lambda s: s.route("b"), "i2", state("a@i1", "b@i2")),
    ("a call of a pod with no cycle (rejected and taken over, or never begun) reaches none",
     state("b@i1"), lambda s: s.route("a"), None, state("b@i1")),
    ("a call of a pod whose instance was discarded reaches a tombstone (Error, never a fresh one)",
     state("a@", "b@"), lambda s: (s.route("a"), s.route("b", binding_first=True)), (TOMBSTONE, TOMBSTONE),
     state("a@", "b@")),
    ("a pod in both: its new cycle's calls reach the slot, its old binding cycle's the binding map",
     state("a@i2", "a@i1"), lambda s: (s.route("a"), s.route("a", binding_first=True)), ("i2", "i1"),
     state("a@i2", "a@i1")),
    ("preemption: RemovePod, Filter and AddPod of the preemptor all reach its one instance (whose "
     "mailbox runs them one at a time), and change nothing",
     state("p@i1", "b@i2"), lambda s: [s.route("p") for _ in ("removepod", "filter", "addpod")], ["i1"] * 3,
     state("p@i1", "b@i2")),
    # Permit.
    ("Permit: the pod keeps its instance through binding (slot -> binding map)",
     state("a@i1"), lambda s: s.to_binding("a"), (h("a@i1"), None), state(None, "a@i1")),
    ("Permit: the pod's discarded instance moves as a tombstone",
     state("a@"), lambda s: s.to_binding("a"), (h("a@"), None), state(None, "a@")),
    ("Permit: a pod without the slot moves nothing",
     state("b@i1", "a@i2"), lambda s: s.to_binding("a"), (None, None), state("b@i1", "a@i2")),
    ("Permit: a pod scheduled again supersedes its old binding assignment (that instance to the pool)",
     state("a@i2", "a@i1"), lambda s: s.to_binding("a"), (h("a@i2"), h("a@i1")), state(None, "a@i2")),
    # The end of a cycle: PostBind, Unreserve, any failure.
    ("PostBind: the binding instance goes back to the pool",
     state("b@i1", "a@i2"), lambda s: s.release("a"), (h("a@i2"), "binding"), state("b@i1")),
    ("Unreserve in the scheduling cycle: the slot's instance goes back to the pool",
     state("a@i1", "b@i2"), lambda s: s.release("a"), (h("a@i1"), "scheduling"), state(None, "b@i2")),
    ("Unreserve of a pod in both: its binding assignment goes first, the slot stays",
     state("a@i2", "a@i1"), lambda s: s.release("a"), (h("a@i1"), "binding"), state("a@i2")),
    ("PostBind of a guest without binding exports, after the next pod took the slot: nothing to give back",
     state("b@i1"), lambda s: s.release("a"), None, state("b@i1")),
    ("the end of a discarded pod's cycle clears its tombstone",
     state(None, "a@"), lambda s: s.release("a"), (h("a@"), "binding"), state()),
    # A trap, or an actor that died.
    ("discard: every pod the instance served keeps a tombstone; the others are untouched",
     state("a@i1", "b@i1", "c@i2"), lambda s: s.discard("i1"), None, state("a@", "b@", "c@i2")),
    ("discard of an instance serving no pod changes nothing",
     state("a@i1", "b@i2"), lambda s: s.discard("i3"), None, state("a@i1", "b@i2")),
    # Inspection.
    ("held: every live assignment and its place; tombstones hold no instance",
     state("a@i1", "b@i2", "c@"), lambda s: list(s.held()), [(h("a@i1"), "slot"), (h("b@i2"), "binding")],
     state("a@i1", "b@i2", "c@")),
]


@pytest.mark.parametrize(("rule", "before", "event", "answer", "after"), ASSIGNMENT_RULES,
                         ids=[row[0] for row in ASSIGNMENT_RULES])
def test_assignments(rule: str, before: Assignments, event: Callable[[Assignments], object], answer: object,
                     after: Assignments) -> None:
    assert event(before) == answer
    assert before == after


@pytest.mark.parametrize(("exports", "moves"), [
    (frozenset({"filter", "score"}), False),  # the slot keeps the pod through Permit
    (frozenset({"filter", "permit"}), False),
    (frozenset({"filter", "prebind"}), True),
    (frozenset({"bind"}), True),
    (frozenset({"postbind"}), True),
    (frozenset({"score", "unreserve"}), True),
])
def test_a_pod_moves_to_binding_only_for_a_guest_with_binding_cycle_exports(exports: frozenset[str],
                                                                             moves: bool) -> None:
    assert moves_to_binding(exports) is moves


# --- the supervisor's transitions with its pool ----------------------------------------------


class StandIn:
    """A guest actor's ref: alive until stopped; records what it is told."""

    def __init__(self) -> None:
        self.alive = True
        self.told: list[object] = []

    def is_alive(self) -> bool:
        return self.alive

    def stop(self, block: bool = True, timeout: float | None = None) -> None:
        self.alive = False

    def tell(self, message: object) -> None:
        if not self.alive:
            raise pykka.ActorDeadError("stopped")
        self.told.append(message)


class StandInGuestActor:
    @classmethod
    def start(cls, *_args: Any) -> StandIn:
        return StandIn()


@dataclass(frozen=True)
class Pool:
    """The supervisor's state, in the notation above. Instances are named p-1, p-2, ..."""

    slot: str | None = None
    binding: tuple[str, ...] = ()
    #: Idle instances, least recently used first.
    idle: tuple[str, ...] = ()
    lent: tuple[str, ...] = ()
    #: Instances started so far. Before: 0 counts those named as started; after: 0 is
    #: "as many as before" (none started).
    started: int = 0


def spec(held: Held) -> str:
    return f"{held.pod_uid}@{held.instance_id}"


def snapshot(sup: SupervisorActor) -> Pool:
    a = sup.assignments
    return Pool(spec(a.slot) if a.slot else None, tuple(sorted(spec(b) for b in a.binding.values())),
                tuple(sup._idle), tuple(sorted(sup._lent)), sup._started)


def given(sup: SupervisorActor, before: Pool) -> None:
    """Put the supervisor in `before`: a stand-in actor for every instance it names."""
    named = {*before.idle, *before.lent}
    for held in filter(None, (before.slot, *before.binding)):
        named.add(h(held).instance_id)
    named.discard(TOMBSTONE)
    for instance_id in named:
        sup._actors[instance_id] = Assigned(instance_id, StandIn())
    sup._idle = {instance_id: sup.clock() for instance_id in before.idle}
    sup._lent = set(before.lent)
    sup.assignments = state(before.slot, *before.binding)
    sup._started = before.started or len(named)
    sup._discarded = sup._started - len(named)  # the instances of the tombstones
    sup._ids = itertools.count(max((int(i.split("-")[1]) for i in named), default=0) + 1)


def summary(answer: object) -> object:
    """An answer in the table's terms."""
    if isinstance(answer, Began):
        return ("began", answer.assigned.instance_id, answer.ended_pod_uid)
    if isinstance(answer, Assigned):
        return ("assigned", answer.instance_id)
    if isinstance(answer, Lost):
        return "lost"
    return answer


@pytest.fixture
def supervisor(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., SupervisorActor]]:
    monkeypatch.setattr(supervisor_module, "GuestActor", StandInGuestActor)
    made: list[SupervisorActor] = []

    def make(**pool: Any) -> SupervisorActor:
        config = PluginConfig("p", "p.wasm", pool=PoolConfig(**{"min_idle": 1, "idle_seconds": 3600.0, **pool}))
        sup = SupervisorActor(None, config)  # no guest: its actors are stand-ins
        made.append(sup)
        return sup

    yield make
    for sup in made:
        sup.on_stop()  # cancels a reap timer


#: (rule, pool settings, state before, message, answer, state after)
POOL_RULES: list[tuple[str, dict[str, int], Pool, object, object, Pool]] = [
    ("PreFilter on an empty slot: an idle instance is reused, none started",
     {}, Pool(idle=("p-1",)), BeginCycle("a", "ns/a"),
     ("began", "p-1", ""), Pool(slot="a@p-1", started=1)),
    ("PreFilter: of several idle instances, the most recently used is reused",
     {"min_idle": 2}, Pool(idle=("p-1", "p-2")), BeginCycle("a", "ns/a"),
     ("began", "p-2", ""), Pool(slot="a@p-2", idle=("p-1",), started=2)),
    ("PreFilter on an empty slot with no idle instance: a new one is started",
     {}, Pool(binding=("b@p-1",)), BeginCycle("a", "ns/a"),
     ("began", "p-2", ""), Pool(slot="a@p-2", binding=("b@p-1",), started=2)),
    ("PreFilter after a pod rejected before Permit: its instance is reassigned, its cycle ended",
     {}, Pool(slot="a@p-1", idle=("p-2",)), BeginCycle("b", "ns/b"),
     ("began", "p-1", "a"), Pool(slot="b@p-1", idle=("p-2",), started=2)),
    ("PreFilter of the same pod again: its instance, no other pod's cycle ended",
     {}, Pool(slot="a@p-1"), BeginCycle("a", "ns/a"),
     ("began", "p-1", ""), Pool(slot="a@p-1", started=1)),
    ("PreFilter after a discard: the pod in the slot's cycle ends, the next starts on an idle instance",
     {}, Pool(slot="a@", idle=("p-2",), started=2), BeginCycle("b", "ns/b"),
     ("began", "p-2", "a"), Pool(slot="b@p-2", started=2)),
    ("PreFilter with pool.maxInstances busy: Lost, the slot left empty, nothing started",
     {"max_instances": 1}, Pool(slot="a@", binding=("b@p-1",), started=2), BeginCycle("c", "ns/c"),
     "lost", Pool(binding=("b@p-1",), started=2)),
    ("a call of the pod in the slot is routed to its instance",
     {}, Pool(slot="a@p-1", binding=("b@p-2",)), Route("a", "ns/a"),
     ("assigned", "p-1"), Pool(slot="a@p-1", binding=("b@p-2",))),
    ("a call of a pod whose instance was discarded: Lost, never a fresh instance",
     {}, Pool(slot="a@", idle=("p-2",), started=2), Route("a", "ns/a"),
     "lost", Pool(slot="a@", idle=("p-2",), started=2)),
    ("a call of a pod with no cycle: Lost",
     {}, Pool(slot="b@p-1"), Route("a", "ns/a"),
     "lost", Pool(slot="b@p-1")),
    ("a binding-cycle call of a pod scheduled again reaches its binding instance",
     {}, Pool(slot="a@p-2", binding=("a@p-1",)), Route("a", "ns/a", binding_first=True),
     ("assigned", "p-1"), Pool(slot="a@p-2", binding=("a@p-1",))),
    ("Permit: the pod's instance moves from the slot to the binding map",
     {}, Pool(slot="a@p-1"), ToBinding("a", "ns/a"),
     True, Pool(binding=("a@p-1",))),
    ("Permit of a pod scheduled again: its old binding instance goes idle",
     {}, Pool(slot="a@p-2", binding=("a@p-1",)), ToBinding("a", "ns/a"),
     True, Pool(binding=("a@p-2",), idle=("p-1",))),
    ("Permit of a pod without the slot moves nothing",
     {}, Pool(slot="b@p-1"), ToBinding("a", "ns/a"),
     False, Pool(slot="b@p-1")),
    ("PostBind: the pod's binding instance goes idle",
     {}, Pool(slot="b@p-2", binding=("a@p-1",)), Release("a", "ns/a", "postbind"),
     True, Pool(slot="b@p-2", idle=("p-1",))),
    ("Unreserve in the scheduling cycle: the slot's instance goes idle",
     {}, Pool(slot="a@p-1"), Release("a", "ns/a", "unreserve"),
     True, Pool(idle=("p-1",))),
    ("Unreserve of a pod whose slot the next pod took: nothing is given back",
     {}, Pool(slot="b@p-1"), Release("a", "ns/a", "unreserve"),
     False, Pool(slot="b@p-1")),
    ("the end of a discarded pod's cycle clears its tombstone, idles nothing",
     {}, Pool(binding=("a@",), idle=("p-2",), started=2), Release("a", "ns/a", "postbind"),
     True, Pool(idle=("p-2",), started=2)),
    ("a trap: the instance is discarded, its pods keep tombstones, the pool is topped up",
     {}, Pool(slot="a@p-1", binding=("b@p-1",)), InstanceBroken("p-1", "trap", trapped=True),
     None, Pool(slot="a@", binding=("b@",), idle=("p-2",), started=2)),
    ("a trap with minIdle already idle: no instance is started",
     {}, Pool(slot="a@p-1", idle=("p-2",)), InstanceBroken("p-1", "trap", trapped=True),
     None, Pool(slot="a@", idle=("p-2",), started=2)),
    ("outside every cycle (EventsToRegister): an idle instance is lent",
     {}, Pool(slot="a@p-1", idle=("p-2",)), Borrow(),
     ("assigned", "p-2"), Pool(slot="a@p-1", lent=("p-2",))),
    ("outside every cycle with no idle instance: a new one is started and lent",
     {}, Pool(slot="a@p-1"), Borrow(),
     ("assigned", "p-2"), Pool(slot="a@p-1", lent=("p-2",), started=2)),
    ("a lent instance given back goes idle",
     {}, Pool(lent=("p-1",)), GiveBack("p-1"),
     None, Pool(idle=("p-1",))),
]


@pytest.mark.parametrize(("rule", "settings", "before", "message", "answer", "after"), POOL_RULES,
                         ids=[row[0] for row in POOL_RULES])
def test_supervisor_transitions(supervisor: Callable[..., SupervisorActor], rule: str, settings: dict[str, int],
                                before: Pool, message: object, answer: object, after: Pool) -> None:
    sup = supervisor(**settings)
    given(sup, before)
    started = sup._started
    assert summary(sup.on_receive(message)) == answer
    assert snapshot(sup) == replace(after, started=after.started or started)
    counts = sup._counts(GetCounts())
    assert counts.balanced, counts


def test_the_first_instance_starts_at_load(supervisor: Callable[..., SupervisorActor]) -> None:
    sup = supervisor()
    sup.on_start()
    assert snapshot(sup) == Pool(idle=("p-1",), started=1)


def test_a_begun_cycle_hands_its_first_call_to_the_assigned_actor(supervisor: Callable[..., SupervisorActor]) -> None:
    """BeginCycle carrying the cycle's first call sends it on to the actor it picked; one
    found dead is discarded and the call goes to the next (the pod has no state anywhere
    yet). The answer still names the pod whose cycle the first pick ended."""

    class Invoke:
        args: tuple[object, ...] = ("pod",)

        def routed(self, began: Began) -> tuple[str, Began]:
            return ("routed", began)

    sup = supervisor()
    given(sup, Pool(slot="a@p-1", idle=("p-2",)))
    sup._actors["p-1"].actor.stop()
    began = sup.on_receive(BeginCycle("b", "ns/b", Invoke()))
    assert summary(began) == ("began", "p-2", "a")
    assert sup._actors["p-2"].actor.told == [("routed", began)]
    assert snapshot(sup) == Pool(slot="b@p-2", started=2)


def test_idle_instances_beyond_min_idle_are_reaped_once_idle_long_enough(
        supervisor: Callable[..., SupervisorActor]) -> None:
    now = [0.0]
    sup = supervisor(min_idle=1, idle_seconds=60.0)
    sup.clock = lambda: now[0]
    given(sup, Pool(idle=("p-1", "p-2", "p-3")))
    # The handler itself: `on_receive` would also arm the reap timer, a thread.
    assert sup._reap_message(Reap()) == 0  # not idle long enough
    now[0] = 61.0
    assert sup._reap_message(Reap()) == 2  # the oldest first, down to min_idle
    assert snapshot(sup) == Pool(idle=("p-3",), started=3)
    assert sup._reaped == 2 and sup._counts(GetCounts()).balanced
