"""SchedulingGates (PreEnqueue) and the queue's gated pods, as kube-scheduler 1.33 has them."""

from __future__ import annotations

import json

import yaml

from tests.framework_support import cluster, config, node, pod, run
from wasm_scheduler.adapters.cli import main
from wasm_scheduler.adapters.framework.plugins.scheduling_gates import SchedulingGates
from wasm_scheduler.adapters.framework.pods import PodInfo
from wasm_scheduler.adapters.framework.queue import SchedulingQueue, run_pre_enqueue
from wasm_scheduler.adapters.framework.results import PodStatus
from wasm_scheduler.framework_api import SUCCESS, Code, Status

GATES = [{"name": "example.com/quota"}, {"name": "example.com/ready"}]


def gated(name: str, gates: list[dict[str, str]] | None = None, **kwargs: object) -> dict:
    return pod(name, schedulingGates=GATES if gates is None else gates, **kwargs)


def test_pre_enqueue_pod_without_gates():
    """pkg/scheduler/framework/plugins/schedulinggates/scheduling_gates_test.go, TestPreEnqueue:
    "pod does not carry scheduling gates" -> nil (Success)."""
    assert SchedulingGates().pre_enqueue(pod("p")) is SUCCESS
    assert SchedulingGates().pre_enqueue(pod("p", schedulingGates=[])) is SUCCESS


def test_pre_enqueue_pod_with_gates():
    """scheduling_gates_test.go, TestPreEnqueue: "pod carries scheduling gates" (foo, bar) ->
    UnschedulableAndUnresolvable "waiting for scheduling gates: [foo bar]"."""
    status = SchedulingGates().pre_enqueue(gated("p", [{"name": "foo"}, {"name": "bar"}]))
    assert (status.code, status.reason, status.plugin) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting for scheduling gates: [foo bar]", "SchedulingGates")


def test_scheduling_gates_is_only_a_pre_enqueue_plugin():
    plugin = SchedulingGates()
    assert not any(plugin.implements(point) for point in ("pre_filter", "filter", "score", "reserve", "bind"))
    assert plugin.events_to_register() == ()  # nothing in a snapshot lifts a gate


def test_run_pre_enqueue_answers_the_first_rejection_naming_its_plugin():
    class Other:
        name = "Other"

        def pre_enqueue(self, pod: object) -> Status:
            return Status(Code.UNSCHEDULABLE, "not yet")

    plain, with_gates = pod("plain"), gated("g", [{"name": "a"}])
    assert run_pre_enqueue([SchedulingGates()], plain) is SUCCESS
    assert run_pre_enqueue([Other(), SchedulingGates()], with_gates).plugin == "Other"
    assert run_pre_enqueue([SchedulingGates(), Other()], with_gates).reason == "waiting for scheduling gates: [a]"


def test_the_queue_keeps_a_gated_pod_out_of_the_active_queue():
    queue = SchedulingQueue(lambda a, b: a.timestamp < b.timestamp, {"default-scheduler": [SchedulingGates()]})
    assert queue.add(PodInfo.of(pod("free"))) is SUCCESS
    status = queue.add(PodInfo.of(gated("held")))
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and status.plugin == "SchedulingGates"
    other_profile = PodInfo.of(gated("other", schedulerName="other-scheduler"))
    assert queue.add(other_profile) is SUCCESS  # that profile has no PreEnqueue plugin
    popped = [queue.pop(), queue.pop(), queue.pop()]
    assert [p.info.key if p else None for p in popped] == ["default/free", "default/other", None]


def test_simulate_reports_a_gated_pod_as_gated_and_never_tries_it(compiler):
    report = run(config(), cluster(node("n1"), gated("held"), pod("free")), compiler)
    held = report.outcome("default/held")
    assert held is not None and held.status == PodStatus.GATED
    assert held.reason == "waiting for scheduling gates: [example.com/quota example.com/ready] (SchedulingGates)"
    assert held.node is None and held.attempts == 0 and not held.scores
    assert report.outcome("default/free").status == PodStatus.SCHEDULED
    assert report.summary()["gated"] == 1 and report.count(PodStatus.UNSCHEDULABLE) == 0


def test_a_gated_pods_nomination_does_not_hold_room(compiler):
    """kube-scheduler adds a pod to the nominator only when it enters the active queue."""
    held = gated("held", cpu="3", priority=1000)
    held["status"]["nominatedNodeName"] = "n1"
    report = run(config(), cluster(node("n1", cpu="4"), held, pod("low", cpu="2", priority=1)), compiler)
    assert report.outcome("default/held").status == PodStatus.GATED
    assert report.outcome("default/low").node == "n1"


def test_disabling_scheduling_gates_schedules_gated_pods(compiler):
    for plugins in ({"multiPoint": {"disabled": [{"name": "SchedulingGates"}]}},
                    {"preEnqueue": {"disabled": [{"name": "SchedulingGates"}]}},
                    {"preEnqueue": {"disabled": [{"name": "*"}]}}):
        report = run(config(plugins=plugins), cluster(node("n1"), gated("held")), compiler)
        assert report.outcome("default/held").node == "n1", plugins


def test_the_cli_shows_gated_pods_and_exits_0(capsys, tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([node("n1"), gated("held"), pod("free")]))
    code = main(["simulate", "--cluster", str(path), "--output", "json"])
    out, _err = capsys.readouterr()
    assert code == 0
    doc = json.loads(out)
    pods = {p["name"]: p for p in doc["pods"]}
    assert pods["held"]["status"] == "SchedulingGated" and pods["held"]["node"] is None
    assert doc["summary"]["gated"] == 1 and doc["summary"]["scheduled"] == 1
    code = main(["simulate", "--cluster", str(path)])
    out, _err = capsys.readouterr()
    assert code == 0
    assert "gated" in out and "waiting for scheduling gates" in out and "1 gated" in out
