"""DefaultPreemption: victims, the choice of node, nomination, and what happens to victims."""

from __future__ import annotations

import threading
from typing import Any

from tests.framework_support import Journal, Recorder, cluster, config, node, pod, recorder, run
from wasm_scheduler.adapters.framework import Scheduler, SchedulerOptions
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, PluginContext
from wasm_scheduler.adapters.framework.pods import PodInfo
from wasm_scheduler.adapters.framework.queue import QueuedPod
from wasm_scheduler.adapters.framework.results import PodStatus, Preemption
from wasm_scheduler.framework_api import SUCCESS, Code, PermitResult, Status


def low(name: str, node_name: str, cpu: str = "1", priority: int = 0, start: str = "2024-01-01T00:00:00Z") -> dict:
    return pod(name, cpu=cpu, priority=priority, node_name=node_name, start=start)


def test_the_least_important_pods_are_preempted_and_the_pod_is_scheduled_there(compiler):
    cl = cluster(node("n1", cpu="4"),
                 low("early", "n1", start="2024-01-01T00:00:00Z"),
                 low("middle", "n1", start="2024-01-02T00:00:00Z"),
                 low("late", "n1", start="2024-01-03T00:00:00Z"),
                 pod("urgent", cpu="2", priority=100))
    report = run(config(), cl, compiler)
    outcome = report.outcome("default/urgent")
    assert outcome.status == PodStatus.SCHEDULED and outcome.node == "n1"
    # Removing every lower-priority pod frees 3 cpu; the most important come back while the
    # pod still fits: the one that started last is the only victim.
    assert report.preemptions == [Preemption("default/late", "default/urgent", "n1")]
    assert "preempted default/late on n1" in outcome.reason
    assert outcome.attempts == 2


def test_the_node_whose_victims_matter_least_is_chosen(compiler):
    cl = cluster(node("n1", cpu="2"), node("n2", cpu="2"),
                 low("important", "n1", cpu="2", priority=10), low("unimportant", "n2", cpu="2", priority=5),
                 pod("urgent", cpu="2", priority=100))
    report = run(config(), cl, compiler)
    assert report.outcome("default/urgent").node == "n2"
    assert [p.victim for p in report.preemptions] == ["default/unimportant"]


def test_fewer_victims_win_when_priorities_tie(compiler):
    cl = cluster(node("n1", cpu="2"), node("n2", cpu="2"),
                 low("a1", "n1"), low("a2", "n1"), low("b1", "n2", cpu="2"),
                 pod("urgent", cpu="2", priority=100))
    report = run(config(), cl, compiler)
    assert report.outcome("default/urgent").node == "n2"
    assert [p.victim for p in report.preemptions] == ["default/b1"]


def test_a_pod_that_may_not_preempt_stays_unschedulable(compiler):
    cl = cluster(node("n1", cpu="1"), low("running", "n1"),
                 pod("polite", cpu="1", priority=100, preemptionPolicy="Never"))
    report = run(config(), cl, compiler)
    outcome = report.outcome("default/polite")
    assert outcome.status == PodStatus.UNSCHEDULABLE
    assert "preemption: not eligible due to preemptionPolicy=Never." in outcome.reason
    assert report.preemptions == []


def test_no_victims_and_unhelpful_nodes_are_explained(compiler):
    cl = cluster(node("n1", cpu="1"), node("tainted", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
                 low("equal", "n1", priority=100), pod("urgent", cpu="1", priority=100))
    report = run(config(), cl, compiler)
    reason = report.outcome("default/urgent").reason
    assert "Insufficient cpu (NodeResourcesFit)" in reason
    assert "untolerated taint {k: v} (TaintToleration)" in reason
    assert "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod" in reason


class ThreadRecorder(Recorder):
    """A Recorder that also notes which thread ran RemovePod."""

    threads: set[str]

    def remove_pod(self, state: CycleState, pod: Any, pod_to_remove: Any, node_info: Any) -> Status:
        self.threads.add(threading.current_thread().name)
        return super().remove_pod(state, pod, pod_to_remove, node_info)


def test_preemption_runs_the_profiles_remove_add_and_filter_on_candidates_in_parallel(compiler):
    journal = Journal()
    made: list[ThreadRecorder] = []

    def make(ctx: PluginContext) -> ThreadRecorder:
        plugin = ThreadRecorder(ctx, journal)
        plugin.threads = set()
        made.append(plugin)
        return plugin

    nodes = [node(f"n{i}", cpu="1") for i in range(4)]
    running = [low(f"l{i}", f"n{i}") for i in range(4)]
    cl = cluster(*nodes, *running, pod("urgent", cpu="1", priority=100))
    report = run(config("Rec"), cl, compiler, {"Rec": make})
    assert report.outcome("default/urgent").status == PodStatus.SCHEDULED
    points = journal.points("urgent")
    assert points.count("remove_pod") >= 4 and "add_pod" in points
    (plugin,) = made
    # In the first attempt NodeResourcesFit (before Rec) rejected every node, so Rec's first
    # Filter calls are the dry run's: one candidate node a call, each node once.
    dry_run = plugin.seen_nodes["filter"][:4]
    assert sorted(dry_run) == [["n0"], ["n1"], ["n2"], ["n3"]]
    assert any(name.startswith("parallelize") for name in plugin.threads)


class Fifo(NativePlugin):
    """QueueSort by arrival only, so a low-priority pod can be placed before a high one."""

    def less(self, a: QueuedPod, b: QueuedPod) -> bool:
        return a.timestamp < b.timestamp


FIFO_PLUGINS = {"multiPoint": {"disabled": [{"name": "PrioritySort"}]}, "queueSort": {"enabled": [{"name": "Fifo"}]}}


def test_a_pod_this_run_placed_can_be_preempted_and_is_recreated(compiler):
    cl = cluster(node("n1", cpu="4"), node("n2", cpu="4"), low("blocker", "n2", cpu="2", priority=1000),
                 pod("cheap", cpu="3", priority=0), pod("urgent", cpu="3", priority=100))
    report = run(config(plugins=FIFO_PLUGINS), cl, compiler, {"Fifo": lambda ctx: Fifo(ctx)})
    assert report.outcome("default/urgent").node == "n1"
    assert report.preemptions == [Preemption("default/cheap", "default/urgent", "n1")]
    cheap = report.outcome("default/cheap")
    assert cheap.status == PodStatus.UNSCHEDULABLE and cheap.attempts == 2  # recreated, then nowhere to go


def test_a_victim_waiting_in_permit_is_rejected(compiler):
    journal = Journal()

    class Hold(NativePlugin):
        def permit(self, state: CycleState, pod: Any, node_name: str) -> PermitResult:
            if pod["metadata"]["name"] == "cheap":
                return PermitResult(Status(Code.WAIT, "", self.name), 5000)
            return PermitResult(SUCCESS)

    cl = cluster(node("n1", cpu="4"), node("n2", cpu="4"), low("blocker", "n2", cpu="2", priority=1000),
                 pod("cheap", cpu="3", priority=0), pod("urgent", cpu="3", priority=100))
    registry = {"Fifo": lambda ctx: Fifo(ctx), "Hold": lambda ctx: Hold(ctx), "Rec": recorder(journal)}
    report = run(config("Hold", "Rec", plugins=FIFO_PLUGINS), cl, compiler, registry)
    assert report.outcome("default/urgent").node == "n1"
    assert report.preemptions == [Preemption("default/cheap", "default/urgent", "n1")]
    cheap = report.outcome("default/cheap")
    assert cheap.status == PodStatus.UNSCHEDULABLE and cheap.attempts == 2
    assert journal.points("cheap")[:5] == ["pre_filter", "filter", "reserve", "permit", "unreserve"]


def test_pods_nominated_to_a_node_keep_its_room_from_lower_priority_pods(compiler):
    cl = cluster(node("n1", cpu="4"))
    with Scheduler(config(), cl, compiler, options=SchedulerOptions()) as scheduler:
        framework = scheduler.frameworks["default-scheduler"]
        scheduler.handle.nominator.add(PodInfo.of(pod("nominated", cpu="3", priority=100)), "n1")
        n1 = scheduler.snapshot.update_view().get("n1")
        assert n1 is not None

        def fits(candidate: dict) -> Status:
            state = CycleState()  # PreFilter first, as a cycle does: AddPod reads what it wrote
            assert framework.run_pre_filter(state, candidate)[1].ok
            statuses, error = framework.run_filter_with_nominated(state, PodInfo.of(candidate), [n1])
            assert error.ok
            return statuses["n1"]

        assert fits(pod("lower", cpu="2", priority=10)).code == Code.UNSCHEDULABLE
        assert fits(pod("equal", cpu="2", priority=100)).code == Code.UNSCHEDULABLE
        assert fits(pod("higher", cpu="2", priority=1000)).ok
        assert fits(pod("small", cpu="1", priority=10)).ok


def test_an_unschedulable_prefilter_does_not_keep_later_plugins_out_of_preemption(compiler):
    # kube-scheduler 1.28 on runs every PreFilter after an Unschedulable one
    # (kubernetes#119770), so preemption's dry run can pass every Filter plugin.
    from wasm_scheduler.framework_api import PreFilterResult

    class Quota(NativePlugin):
        """Unschedulable at PreFilter until the pod was tried once; every Filter passes."""

        tried: set[str] = set()

        def pre_filter(self, state: CycleState, p: Any) -> PreFilterResult:
            name = p["metadata"]["name"]
            if name not in self.tried:
                self.tried.add(name)
                return PreFilterResult(Status(Code.UNSCHEDULABLE, "over quota until a preemption", self.name))
            return PreFilterResult(SUCCESS)

    journal = Journal()
    report = run(config("Quota", "Rec"),
                 cluster(node("n1", cpu="1"), low("low", "n1"), pod("urgent", cpu="1", priority=100)),
                 compiler, {"Quota": Quota, "Rec": recorder(journal)})
    outcome = report.outcome("default/urgent")
    assert report.preemptions == [Preemption("default/low", "default/urgent", "n1")], outcome.reason
    assert outcome.status == PodStatus.SCHEDULED and outcome.node == "n1"
    # Rec's PreFilter ran in both cycles: in the first one after Quota's rejection.
    assert journal.points("urgent", "Rec").count("pre_filter") == 2
