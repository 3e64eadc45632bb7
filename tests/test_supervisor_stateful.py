"""Random sequences of framework events against a model of the assignment lifecycle.

Hypothesis drives PreFilter, Filter (sometimes on a trapping node), Permit, PreBind,
PostBind and Unreserve for a handful of pods in any order a scheduler could produce,
and after every step checks the invariants: every live actor is in exactly one place
(idle, the scheduling slot, the binding map); the pod's calls reach the actor the
model expects (the checker guest traps otherwise, which would show as a discard the
model did not expect); started = idle + assigned + discarded + reaped.
"""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests.conftest import GUESTS, SCORER_WAT
from wasm_scheduler.actors.supervisor import Assigned, Lost
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.framework_api import Code
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig

NODES = ["node-1", "node-2"]
POD_NAMES = [f"pod-{i}" for i in range(6)]
COMPILER = GuestCompiler()
CHECKER = COMPILER.compile("checker", "checker.wat", (GUESTS / "checker.wat").read_bytes())


def pod(name: str) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}}


#: The checker without an export of the binding cycle (a scoring plugin's shape).
SCORER = COMPILER.compile("scorer", "scorer.wat", SCORER_WAT.encode())


class AssignmentMachine(RuleBasedStateMachine):
    GUEST = CHECKER

    def __init__(self) -> None:
        super().__init__()
        self.plugin = WasmPlugin(self.GUEST, PluginConfig(self.GUEST.name, self.GUEST.url))
        self.slot: str | None = None  # pod in the scheduling slot
        self.slot_lost = False  # its instance trapped
        self.slot_instance: str | None = None
        self.binding: dict[str, str | None] = {}  # pod -> instance (None: trapped)
        self.expected_discards = 0

    def teardown(self) -> None:
        self.plugin.close()

    def instance(self, name: str, binding: bool = False) -> str | None:
        answer = self.plugin.assignment(pod(name), binding)
        return answer.instance_id if isinstance(answer, Assigned) else None

    def scheduling(self) -> bool:
        """A pod is in its scheduling cycle, and not also in a binding cycle of its own."""
        return self.slot is not None and self.slot not in self.binding

    # --- scheduling cycle --------------------------------------------------------------

    @rule(name=st.sampled_from(POD_NAMES))
    def pre_filter(self, name: str) -> None:
        if name in self.binding:
            return  # a pod in its binding cycle is not scheduled again (but see below)
        self.begin_cycle(name)

    @precondition(lambda self: any(name != self.slot for name in self.binding))
    @rule(data=st.data())
    def pre_filter_while_binding(self, data: st.DataObject) -> None:
        """The extender can schedule a pod again while its last binding cycle runs (after
        kube-scheduler's bind call timed out): the new cycle gets the slot, the old one
        keeps its instance in the binding map, and each cycle's calls reach its own."""
        self.begin_cycle(data.draw(st.sampled_from(sorted(n for n in self.binding if n != self.slot))))

    def begin_cycle(self, name: str) -> None:
        previous = self.slot_instance if not self.slot_lost else None
        result = self.plugin.pre_filter(None, pod(name))
        assert result.status.ok, result
        served = self.instance(name)
        if previous is not None:
            assert served == previous, "the slot's actor must be reassigned to the new pod"
        self.slot, self.slot_lost, self.slot_instance = name, False, served

    @precondition(lambda self: self.slot is not None)
    @rule(trap=st.booleans())
    def filter(self, trap: bool) -> None:
        assert self.slot is not None
        nodes = ["x-trap"] if trap else NODES
        statuses = self.plugin.filter_nodes(None, pod(self.slot), nodes)
        if self.slot_lost:
            assert all(s.code == Code.ERROR for s in statuses.values())
        elif trap:
            assert statuses["x-trap"].code == Code.ERROR
            self.expected_discards += 1
            self.slot_lost = True
            self.slot_instance = None
        else:
            assert all(s.ok for s in statuses.values()), statuses

    @precondition(lambda self: self.slot is not None)
    @rule()
    def permit(self) -> None:
        """A pod still binding from its last cycle has one binding assignment: the new one
        (the old actor returns to the pool)."""
        assert self.slot is not None
        result = self.plugin.permit(None, pod(self.slot), NODES[0])
        assert result.status.ok == (not self.slot_lost)
        self.binding[self.slot] = self.slot_instance
        self.slot, self.slot_instance, self.slot_lost = None, None, False

    @precondition(lambda self: self.scheduling())
    @rule()
    def unreserve_in_scheduling(self) -> None:
        assert self.slot is not None
        self.plugin.unreserve(None, pod(self.slot), NODES[0])
        self.slot, self.slot_instance, self.slot_lost = None, None, False

    # --- binding cycle -----------------------------------------------------------------

    @precondition(lambda self: bool(self.binding))
    @rule(data=st.data())
    def pre_bind(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.binding)))
        status = self.plugin.pre_bind(None, pod(name), NODES[0])
        assert status.ok == (self.binding[name] is not None), status

    @precondition(lambda self: bool(self.binding))
    @rule(data=st.data(), success=st.booleans())
    def end_binding(self, data: st.DataObject, success: bool) -> None:
        name = data.draw(st.sampled_from(sorted(self.binding)))
        if success:
            self.plugin.post_bind(None, pod(name), NODES[0])
        else:
            self.plugin.unreserve(None, pod(name), NODES[0])
        del self.binding[name]
        self.binding_ended(name)

    def binding_ended(self, name: str) -> None:
        """What the model does when `name`'s binding cycle ends, beyond forgetting it."""

    @rule(name=st.sampled_from(POD_NAMES))
    def stray_call_for_a_pod_without_cycle(self, name: str) -> None:
        if name == self.slot or name in self.binding:
            return
        assert self.plugin.reserve(None, pod(name), NODES[0]).code == Code.ERROR

    # --- invariants --------------------------------------------------------------------

    @invariant()
    def every_actor_is_in_exactly_one_place(self) -> None:
        placement = self.plugin.placement()
        assert all(place in ("idle", "slot", "binding") for place in placement.values()), placement
        live_binding = sum(1 for i in self.binding.values() if i is not None)
        assert list(placement.values()).count("binding") == live_binding
        assert list(placement.values()).count("slot") == (1 if self.slot_instance else 0)
        for name, instance in self.binding.items():
            if instance is not None:
                assert placement[instance] == "binding" and self.instance(name, binding=True) == instance

    @invariant()
    def the_supervisor_holds_what_the_model_holds(self) -> None:
        """Every pod the model says holds an assignment (a live instance or a tombstone) has
        one at the supervisor; every other pod has none, however the facade remembers it."""
        for name in POD_NAMES:
            answer = self.plugin.assignment(pod(name))
            unassigned = isinstance(answer, Lost) and "no instance is assigned" in answer.reason
            assert unassigned == (name != self.slot and name not in self.binding), (name, answer)

    @invariant()
    def counts_balance_and_no_unexpected_trap(self) -> None:
        counts = self.plugin.counts()
        assert counts.balanced, counts
        assert counts.discarded == self.expected_discards, "a call reached another pod's instance"


AssignmentMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestAssignments = AssignmentMachine.TestCase


class BindingFreeMachine(AssignmentMachine):
    """The same events against a guest that exports nothing after Permit. No call of a
    pod can reach an instance after its Permit, so the pod keeps the scheduling slot (it
    never moves to binding); the next PreFilter takes that actor over (the facade passes
    it on without asking the supervisor), and the end of the pod's binding cycle releases
    it only if no pod took it over meanwhile."""

    GUEST = SCORER

    def pre_filter_while_binding(self, data: st.DataObject) -> None:  # not a rule here
        raise AssertionError("only the extender schedules a pod again while it binds, and it holds the "
                             "pod's instance in the binding map whatever the guest exports")

    @precondition(lambda self: self.scheduling())
    @rule(trap=st.booleans())
    def filter(self, trap: bool) -> None:
        super().filter(trap)

    @precondition(lambda self: self.scheduling())
    @rule()
    def permit(self) -> None:
        assert self.slot is not None
        assert not self.plugin.implements("pre_bind") and not self.plugin.implements("bind")
        result = self.plugin.permit(None, pod(self.slot), NODES[0])
        assert result.status.ok == (not self.slot_lost)
        self.binding[self.slot] = None  # its binding cycle runs, on no instance of its own

    @precondition(lambda self: self.scheduling())
    @rule()
    def unreserve_in_scheduling(self) -> None:
        super().unreserve_in_scheduling()

    def pre_bind(self, data: st.DataObject) -> None:  # not a rule: the framework never calls it
        raise AssertionError("a guest without prebind gets no PreBind")

    def binding_ended(self, name: str) -> None:
        if self.slot == name:  # nobody took the slot over: its actor goes back to the pool
            self.slot, self.slot_instance, self.slot_lost = None, None, False


    @invariant()
    def the_supervisor_holds_what_the_model_holds(self) -> None:
        """Only the slot holds an assignment here: a pod in its binding cycle holds none."""
        for name in POD_NAMES:
            answer = self.plugin.assignment(pod(name))
            unassigned = isinstance(answer, Lost) and "no instance is assigned" in answer.reason
            assert unassigned == (name != self.slot), (name, answer)

    @invariant()
    def every_actor_is_in_exactly_one_place(self) -> None:
        placement = self.plugin.placement()
        assert all(place in ("idle", "slot") for place in placement.values()), placement
        assert list(placement.values()).count("slot") == (1 if self.slot_instance else 0)
        for name in self.binding:
            expected = self.slot_instance if name == self.slot else None
            assert self.instance(name) == expected, (name, self.slot)


BindingFreeMachine.TestCase.settings = AssignmentMachine.TestCase.settings
TestBindingFreeAssignments = BindingFreeMachine.TestCase
