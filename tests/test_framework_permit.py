"""Permit (allow, reject, wait with timeout) and Unreserve after every failure after Reserve."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.framework_support import Journal, cluster, config, node, pod, recorder, run
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, PluginContext
from wasm_scheduler.adapters.framework.results import PodStatus
from wasm_scheduler.adapters.framework.waiting_pods import WaitingPod
from wasm_scheduler.framework_api import SUCCESS, Code, PermitResult, PostFilterResult, Status


class Gate(NativePlugin):
    """Holds pods labelled role=gated in Permit; a pod labelled role=opener allows or rejects them."""

    def __init__(self, ctx: PluginContext, journal: Journal, action: str = "allow", timeout_ms: int = 5000) -> None:
        super().__init__(ctx)
        self.journal = journal
        self.action = action
        self.timeout_ms = timeout_ms

    def permit(self, state: CycleState, pod: Any, node_name: str) -> PermitResult:
        self.journal.add(self.name, "permit", pod)
        role = pod["metadata"].get("labels", {}).get("role")
        if role == "gated":
            return PermitResult(Status(Code.WAIT, "", self.name), self.timeout_ms)
        if role == "opener":
            assert self.ctx is not None
            for waiting in self.ctx.handle.iterate_waiting_pods():
                if self.action == "allow":
                    waiting.allow(self.name)
                else:
                    assert self.ctx.handle.reject_waiting_pod(waiting.uid, self.name, "the opener says no")
        return PermitResult(SUCCESS)

    def unreserve(self, state: CycleState, pod: Any, node_name: str) -> None:
        self.journal.add(self.name, "unreserve", pod)


def gate(journal: Journal, **kwargs: Any) -> Any:
    return lambda ctx: Gate(ctx, journal, **kwargs)


def gated_cluster() -> Any:
    return cluster(node("n1"), node("n2"), pod("waiter", labels={"role": "gated"}),
                   pod("opener", labels={"role": "opener"}))


def test_a_waiting_pod_is_bound_once_allowed(compiler):
    journal = Journal()
    report = run(config("Gate"), gated_cluster(), compiler, {"Gate": gate(journal)})
    assert report.outcome("default/waiter").status == PodStatus.SCHEDULED
    assert report.outcome("default/opener").status == PodStatus.SCHEDULED
    assert "unreserve" not in journal.points("waiter")


def test_a_waiting_pod_rejected_through_the_handle_is_unreserved(compiler):
    journal = Journal()
    report = run(config("Gate"), gated_cluster(), compiler, {"Gate": gate(journal, action="reject")})
    outcome = report.outcome("default/waiter")
    assert outcome.status == PodStatus.UNSCHEDULABLE
    assert "the opener says no (Gate)" in outcome.reason
    assert journal.points("waiter")[-1] == "unreserve"
    assert report.outcome("default/opener").status == PodStatus.SCHEDULED


def test_a_waiting_pod_times_out(compiler):
    journal = Journal()
    cl = cluster(node("n1"), pod("waiter", labels={"role": "gated"}))
    report = run(config("Gate"), cl, compiler, {"Gate": gate(journal, timeout_ms=50)})
    outcome = report.outcome("default/waiter")
    assert outcome.status == PodStatus.UNSCHEDULABLE
    assert "rejected due to timeout after waiting 50ms at plugin Gate" in outcome.reason
    assert journal.points("waiter") == ["permit", "unreserve"]


def test_a_pod_waiting_on_two_plugins_binds_once_both_allow(compiler):
    journal = Journal()
    # Each Gate allows the waiter in its own name when the opener reaches its Permit.
    registry = {"Gate": gate(journal), "Gate2": gate(journal, timeout_ms=2000)}
    report = run(config("Gate", "Gate2"), gated_cluster(), compiler, registry)
    assert report.outcome("default/waiter").status == PodStatus.SCHEDULED


def test_a_pod_held_by_a_plugin_nobody_allows_times_out_at_that_plugin(compiler):
    journal = Journal()

    class Holder(NativePlugin):
        def permit(self, state: CycleState, pod: Any, node_name: str) -> PermitResult:
            if pod["metadata"].get("labels", {}).get("role") == "gated":
                return PermitResult(Status(Code.WAIT, "", self.name), 60)
            return PermitResult(SUCCESS)

    registry = {"Gate": gate(journal), "Holder": lambda ctx: Holder(ctx)}
    report = run(config("Gate", "Holder"), gated_cluster(), compiler, registry)
    outcome = report.outcome("default/waiter")
    assert outcome.status == PodStatus.UNSCHEDULABLE
    assert "at plugin Holder" in outcome.reason


def test_permit_rejection_unreserves(compiler):
    journal = Journal()
    registry = {"Rec": recorder(journal, {("permit", "p"): PermitResult(Status(Code.UNSCHEDULABLE, "nope"))})}
    report = run(config("Rec"), cluster(node("n1"), pod("p")), compiler, registry)
    outcome = report.outcome("default/p")
    assert outcome.status == PodStatus.UNSCHEDULABLE
    assert "nope (Rec)" in outcome.reason
    assert journal.points("p") == ["pre_filter", "filter", "reserve", "permit", "unreserve"]


def test_reserve_failure_unreserves_every_reserve_plugin_in_reverse(compiler):
    journal = Journal()
    registry = {"R1": recorder(journal),
                "R2": recorder(journal, {("reserve", "p"): Status(Code.UNSCHEDULABLE, "no room in my books")}),
                "R3": recorder(journal)}
    report = run(config("R1", "R2", "R3"), cluster(node("n1"), pod("p")), compiler, registry)
    outcome = report.outcome("default/p")
    assert outcome.status == PodStatus.UNSCHEDULABLE
    assert "no room in my books (R2)" in outcome.reason
    order = [(pl, pt) for pl, pt, _p in journal.calls if pt in ("reserve", "unreserve")]
    assert order == [("R1", "reserve"), ("R2", "reserve"),
                     ("R3", "unreserve"), ("R2", "unreserve"), ("R1", "unreserve")]
    assert "permit" not in journal.points("p")


@pytest.mark.parametrize(("point", "code", "status"), [
    ("pre_bind", Code.ERROR, PodStatus.ERROR),
    ("pre_bind", Code.UNSCHEDULABLE, PodStatus.UNSCHEDULABLE),
    ("bind", Code.ERROR, PodStatus.ERROR),
])
def test_binding_failures_unreserve(compiler, point, code, status):
    journal = Journal()
    registry = {"Rec": recorder(journal, {(point, "p"): Status(code, f"{point} failed")})}
    cfg = config("Rec", plugins={"bind": {"enabled": [{"name": "Rec"}]}})
    report = run(cfg, cluster(node("n1"), pod("p")), compiler, registry)
    outcome = report.outcome("default/p")
    assert outcome.status == status
    assert f"{point} failed" in outcome.reason
    points = journal.points("p")
    assert points[-1] == "unreserve" and "post_bind" not in points


def test_a_forgotten_pod_frees_its_room_for_a_waiting_pod(compiler):
    journal = Journal()
    second_rejected = threading.Event()

    class FailingPreBind(NativePlugin):
        """First's PreBind fails, but only once the second pod found no room (PostFilter)."""

        def post_filter(self, state: CycleState, pod: Any, statuses: Any) -> PostFilterResult:
            if pod["metadata"]["name"] == "second":
                second_rejected.set()
            return PostFilterResult(Status(Code.UNSCHEDULABLE, "", self.name))

        def pre_bind(self, state: CycleState, pod: Any, node_name: str) -> Status:
            if pod["metadata"]["name"] == "first":
                assert second_rejected.wait(5)
                return Status(Code.ERROR, "volume not ready", self.name)
            return SUCCESS

    cl = cluster(node("n1", cpu="1"), pod("first", cpu="800m"), pod("second", cpu="800m"))
    report = run(config("Failing", "Rec"), cl, compiler,
                 {"Failing": lambda ctx: FailingPreBind(ctx), "Rec": recorder(journal)})
    assert report.outcome("default/first").status == PodStatus.ERROR
    second = report.outcome("default/second")
    assert second.status == PodStatus.SCHEDULED and second.node == "n1"
    assert second.attempts == 2  # Insufficient cpu first, then moved back by the forget event
    assert journal.points("first")[-1] == "unreserve"


def test_waiting_pod_deadlines_and_late_answers():
    now = [0.0]
    waiting = WaitingPod({"metadata": {"name": "p", "uid": "u"}}, "n1", {"A": 0.05, "B": 1.0}, clock=lambda: now[0])
    assert waiting.pending_plugins == ["A", "B"]
    assert waiting.allow("A")
    assert waiting.pending_plugins == ["B"]
    now[0] = 2.0
    assert not waiting.allow("B")  # too late: B's deadline passed first
    status = waiting.wait()
    assert status.code == Code.UNSCHEDULABLE and status.plugin == "B"
    assert "after waiting 1s at plugin B" in status.reason
    assert not waiting.reject("A", "late")
