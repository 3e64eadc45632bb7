"""From the log alone: every pod's cycle was served by one instance, every instance was
released, and the outcome of each pod can be read back.

The default example has pods that are rejected (unschedulable), pods that preempt
others, and pods that are bound, so every path of the assignment lifecycle shows up.
"""

from __future__ import annotations

import io
import json
import logging
import sys
import threading

import structlog

from wasm_scheduler.adapters.cli import main
from wasm_scheduler.adapters.logs import configure_logging
from wasm_scheduler.adapters.trace import read_trace, render


def run_simulate_with_json_logs(capsys) -> tuple[dict, list[dict], list[str]]:
    assert main(["--log-format", "json", "--log-level", "debug", "simulate", "--output", "json"]) == 0
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    return json.loads(out), [json.loads(line) for line in lines], lines


def test_every_cycle_has_one_instance_and_every_instance_is_released(capsys) -> None:
    report, records, lines = run_simulate_with_json_logs(capsys)
    statuses = {p["status"] for p in report["pods"]}
    assert {"Scheduled", "Unschedulable"} <= statuses
    assert any(r["event"] == "cycle.finished" and "preempt" in json.dumps(r).lower() for r in records) or \
        any("preempt" in (p.get("reason") or "") for p in report["pods"])

    # Every line that concerns a guest call carries the context fields.
    calls = [r for r in records if r["event"] == "call.finished"]
    assert calls
    # At debug the framework reports every plugin call too (a level that drops them skips building them).
    assert any(r["event"] == "plugin.called" and r.get("duration_ms") is not None for r in records)
    for call in calls:
        assert {"plugin", "instance", "pod", "pod_uid", "extension_point", "phase", "duration_ms"} <= set(call)

    trace = read_trace(lines)
    assert trace.skipped_lines == 0
    assert trace.problems == {}, trace.problems
    assert trace.open_cycles == [], "an assignment was never released"
    pending = {f"{p['namespace']}/{p['name']}" for p in report["pods"]}
    traced = {pod.pod for pod in trace.pods.values() if pod.cycles}
    assert pending <= traced, "every pending pod's cycle shows in the log"
    for pod in trace.pods.values():
        for cycle in pod.cycles:
            assert len(cycle.instances) == 1
            assert cycle.ended, (pod.pod, cycle)

    # A bound pod: acquired or reassigned, then, on the same instance, its calls. NodeNumber
    # exports prefilter, prescore and score; points it does not export cost no guest call.
    # With no export of the binding cycle, nothing can reach the instance after Permit: the
    # pod keeps the scheduling slot (no move to binding) until the next pod takes it over,
    # or its binding cycle ends first and releases it.
    bound = next(p for p in report["pods"] if p["status"] == "Scheduled")
    pod_trace = trace.pods[bound["uid"]]
    last = pod_trace.cycles[-1]
    points = [point for point, _instance, _phase in last.calls]
    assert points[0] == "prefilter" and "prescore" in points and "score" in points
    assert not any("to binding" in e for e in last.events)
    assert last.ended.startswith(("reassigned", "released (postbind)", "released (shutdown)")), last.ended
    assert any("bound" in outcome or "Scheduled" in outcome or "scheduled" in outcome
               for outcome in pod_trace.outcomes), pod_trace.outcomes

    # A rejected pod's instance went to the next pod (reassigned), or was released.
    rejected = next(p for p in report["pods"] if p["status"] == "Unschedulable")
    for cycle in trace.pods[rejected["uid"]].cycles:
        assert cycle.ended.startswith(("reassigned", "released"))


def test_trace_flags_a_cycle_served_by_two_instances() -> None:
    def line(event: str, **fields: str) -> str:
        return json.dumps({"event": event, "plugin": "P", **fields})

    log = [
        line("assignment.acquired", instance="P-1", pod="ns/a", pod_uid="a"),
        line("call.finished", instance="P-1", pod="ns/a", pod_uid="a", extension_point="prefilter"),
        line("call.finished", instance="P-2", pod="ns/a", pod_uid="a", extension_point="filter"),
        line("assignment.released", instance="P-1", pod="ns/a", pod_uid="a", why="postbind"),
        "not json at all",
    ]
    trace = read_trace(log)
    assert trace.skipped_lines == 1
    assert trace.problems == {"a": ["P: one cycle served by 2 instances (P-1, P-2)"]}
    assert any("PROBLEM" in text for text in render(trace))


def test_trace_command_exits_1_on_a_problem(tmp_path, capsys) -> None:
    log = tmp_path / "bad.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in [
        {"event": "assignment.acquired", "plugin": "P", "instance": "P-1", "pod": "ns/a", "pod_uid": "a"},
        {"event": "call.finished", "plugin": "P", "instance": "P-9", "pod": "ns/a", "pod_uid": "a",
         "extension_point": "score"},
    ]))
    assert main(["trace", str(log)]) == 1
    out, err = capsys.readouterr()
    assert "PROBLEM" in out and "more than one instance" in err


class ClosedPipe(io.StringIO):
    """A stderr whose reader went away after `lines` lines."""

    def __init__(self, lines: int) -> None:
        super().__init__()
        self.left = lines

    def write(self, text: str) -> int:
        if self.left <= 0:
            raise BrokenPipeError(32, "Broken pipe")
        self.left -= text.count("\n")
        return super().write(text)


def test_a_closed_stderr_drops_later_lines_in_every_thread_and_says_so_once(monkeypatch) -> None:
    broken: list[str] = []
    stream = ClosedPipe(lines=1)
    monkeypatch.setattr(sys, "stderr", stream)
    try:
        configure_logging("info", "json", on_broken_pipe=lambda: broken.append(threading.current_thread().name))
        log = structlog.get_logger("test")
        log.info("first.line")
        worker = threading.Thread(target=lambda: [log.warning("from.worker", i=i) for i in range(3)], name="worker")
        worker.start()
        worker.join(timeout=10)
        assert not worker.is_alive()  # the log write raised nothing in the worker
        log.info("after.the.break")
        logging.getLogger("pykka").warning("a standard-library line is dropped too")
    finally:
        monkeypatch.undo()
        configure_logging("warning")
    assert [json.loads(line)["event"] for line in stream.getvalue().splitlines()] == ["first.line"]
    assert broken == ["worker"]  # once, from the thread that met the closed pipe
