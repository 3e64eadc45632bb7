"""The guest-cost benchmark (`adapters.benchmarks.guest_cost`) runs small and splits what it measures."""

from __future__ import annotations

import json

import pytest

from wasm_scheduler.actors.guest_instance import GuestInstance
from wasm_scheduler.actors.host_functions import HostFunctions
from wasm_scheduler.adapters.benchmarks import guest_cost
from wasm_scheduler.adapters.benchmarks.throughput import guest_path
from wasm_scheduler.adapters.benchmarks.workload import Workload


def test_timed_calls_wraps_for_the_block_only() -> None:
    score, severity = GuestInstance.__dict__["score"], HostFunctions.__dict__["severity"]
    with guest_cost.timed_calls():
        assert GuestInstance.__dict__["score"] is not score
        assert HostFunctions.__dict__["severity"] is not severity
    assert GuestInstance.__dict__["score"] is score and HostFunctions.__dict__["severity"] is severity


def test_a_small_run_splits_the_guests_cost() -> None:
    costs = guest_cost.measure({"nodenumber": guest_path()}, Workload(nodes=6, init_pods=6, pods=5), rounds=1)
    baseline, guest = costs
    assert baseline.guest == guest_cost.BASELINE and baseline.pods == 5 and baseline.plugin_ms == 0
    assert guest.guest == "nodenumber" and guest.pods == 5
    # NodeNumber runs PreFilter, PreScore and Score once a pod; it reads the pod once.
    assert {point: calls for point, (_ms, calls) in guest.extension_points.items()} == {
        "prefilter": 1.0, "prescore": 1.0, "score": 1.0}
    assert guest.host_functions["currentPod"][1] == 1.0
    assert guest.guest_ms > 0 and guest.host_functions_ms > 0
    assert guest.plugin_ms == pytest.approx(guest.guest_ms + guest.host_functions_ms + guest.handoffs_ms, abs=1e-3)


def test_the_command_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert guest_cost.main(["--nodes", "3", "--pods", "2", "--rounds", "1", "--output", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [cost["guest"] for cost in document["costs"]] == [guest_cost.BASELINE, "nodenumber-wat"]


@pytest.mark.parametrize("argv", [["--guest", "x=/nonexistent.wasm"], ["--guest", f"none={guest_path()}"],
                                  ["--pods", "0"]])
def test_a_wrong_command_line_is_one_clear_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        guest_cost.main(argv)
    assert exit_.value.code == 2
    assert "error:" in capsys.readouterr().err
