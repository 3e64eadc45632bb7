"""How ``wasm-scheduler`` ends: exit statuses, a reader that goes away, an unexpected failure.

The broken-pipe cases run the command in a subprocess whose stdout or stderr is a real
pipe that the test closes, as ``wasm-scheduler ... | head -2`` does; each waits at most
60 s for the process to end by itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pykka
import pytest
import yaml

from wasm_scheduler.adapters import cli
from wasm_scheduler.adapters.cli import EXIT_BROKEN_PIPE, EXIT_POD_ERRORS, EXIT_USER_ERROR, main

ROOT = Path(__file__).resolve().parents[1]
WAIT_S = 60


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "wasm_scheduler.adapters.cli", *args]


def finish(process: subprocess.Popen[bytes]) -> int:
    try:
        return process.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"the command was still running {WAIT_S} s later")


def test_a_log_reader_that_goes_away_ends_the_command_quietly() -> None:
    # wasm-scheduler --log-level debug simulate 2>&1 >/dev/null | head -2
    process = subprocess.Popen(command("--log-level", "debug", "simulate"), cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    first = [process.stderr.readline() for _ in range(2)]
    process.stderr.close()
    assert all(first), "the command logged nothing"
    # Not 1 (an unhandled exception) nor 120 (a failed flush at exit): the quiet way out.
    assert finish(process) == EXIT_BROKEN_PIPE


def test_a_reader_of_both_streams_that_goes_away_ends_the_command_quietly() -> None:
    # wasm-scheduler --log-level info simulate 2>&1 | head -2
    process = subprocess.Popen(command("--log-level", "info", "simulate"), cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    first = [process.stdout.readline() for _ in range(2)]
    process.stdout.close()
    assert all(first)
    assert finish(process) == EXIT_BROKEN_PIPE


def test_an_output_reader_that_goes_away_ends_the_command_without_a_traceback() -> None:
    # wasm-scheduler simulate --output json | (exit): the result meets a closed pipe.
    process = subprocess.Popen(command("simulate", "--output", "json"), cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read().decode()
    assert finish(process) == EXIT_BROKEN_PIPE
    assert "Traceback" not in err and "Exception ignored" not in err and "BrokenPipe" not in err, err


class Lingering(pykka.ThreadingActor):
    """An actor a failing command started and never stopped."""


@pytest.mark.parametrize(("failure", "code"), [(BrokenPipeError, EXIT_BROKEN_PIPE), (RuntimeError, None)],
                         ids=["broken pipe", "a bug"])
def test_a_command_that_fails_unexpectedly_leaves_no_actor_behind(monkeypatch, capsys, failure, code) -> None:
    before = set(pykka.ActorRegistry.get_all())
    started: list[pykka.ActorRef[Lingering]] = []

    def failing_simulate(*args: object, **kwargs: object) -> None:
        started.append(Lingering.start())
        raise failure("in the middle of the run")

    monkeypatch.setattr(cli, "simulate", failing_simulate)
    if code is None:
        with pytest.raises(failure):  # a bug keeps its traceback
            main(["simulate"])
    else:
        assert main(["simulate"]) == code
    capsys.readouterr()
    assert started and not started[0].is_alive()
    assert set(pykka.ActorRegistry.get_all()) == before


def write_inputs(tmp_path: Path, guest_wat: str, pods: list[dict]) -> tuple[Path, Path]:
    guest = tmp_path / "guest.wat"
    guest.write_text(guest_wat)
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [{"schedulerName": "default-scheduler",
                            "plugins": {"multiPoint": {"enabled": [{"name": "Guest"}]}},
                            "pluginConfig": [{"name": "Guest", "args": {"guestURL": str(guest)}}]}]}
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}"},
              "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "20"}}} for i in range(3)]
    config_path, cluster_path = tmp_path / "sched.yaml", tmp_path / "cluster.yaml"
    config_path.write_text(yaml.safe_dump(config))
    cluster_path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [*nodes, *pods]}))
    return config_path, cluster_path


def a_pod(name: str, cpu: str = "100m") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}}


TRAPPING = '(module (memory (export "memory") 1) (func (export "filter") (result i32) unreachable))'
PASSING = '(module (memory (export "memory") 1) (func (export "filter") (result i32) (i32.const 0)))'


def test_simulate_exits_3_when_a_pods_cycle_ended_in_error(capsys, tmp_path) -> None:
    config, cluster = write_inputs(tmp_path, TRAPPING, [a_pod("p-0"), a_pod("p-1")])
    code = main(["simulate", "--config", str(config), "--cluster", str(cluster), "--output", "json"])
    out, _err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["summary"]["errors"] > 0
    assert code == EXIT_POD_ERRORS == 3


def test_simulate_exits_0_when_pods_are_only_unschedulable(capsys, tmp_path) -> None:
    config, cluster = write_inputs(tmp_path, PASSING, [a_pod("fits"), a_pod("too-big", cpu="64")])
    code = main(["simulate", "--config", str(config), "--cluster", str(cluster), "--output", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"] == {**doc["summary"], "scheduled": 1, "unschedulable": 1, "errors": 0}
    assert code == 0


def test_the_exit_statuses_are_in_the_help(capsys) -> None:
    assert main(["simulate", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "3 when any pod's cycle ended in Error" in text
    assert "0 when every pending pod was scheduled or found unschedulable" in text
    assert main(["trace", "--help"]) == 0
    assert "no pod named by --pod" in " ".join(capsys.readouterr().out.split())


def trace(capsys, log: Path, *args: str) -> tuple[int, str, str]:
    code = main(["trace", str(log), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_trace_of_a_console_log_says_why_it_shows_nothing(capsys, tmp_path) -> None:
    assert main(["--log-level", "info", "simulate"]) == 0
    log = tmp_path / "console.log"
    log.write_text(capsys.readouterr().err)
    assert log.read_text().strip(), "the run logged nothing at info"
    code, out, err = trace(capsys, log)
    assert code == EXIT_USER_ERROR
    assert out == ""
    assert err.strip().splitlines() == [f"error: {log} has no JSON log lines: run with --log-format json"]


def test_trace_of_an_unknown_pod_names_the_pods_it_saw(capsys, tmp_path) -> None:
    assert main(["--log-level", "info", "--log-format", "json", "simulate", "--output", "json"]) == 0
    log = tmp_path / "run.jsonl"
    log.write_text(capsys.readouterr().err)
    code, out, err = trace(capsys, log, "--pod", "no-such-pod")
    assert code == EXIT_USER_ERROR
    assert out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: no pod named no-such-pod in {log}; pods seen: ")
    seen = line.split("pods seen: ", 1)[1]
    assert seen.endswith(")") and "(first 10 of " in seen
    assert len(seen.split(" (first")[0].split(", ")) == 10
    # A pod that is there, by name alone: its timeline, exit 0.
    code, out, _err = trace(capsys, log, "--pod", "web-3")
    assert code == 0 and out.startswith("default/web-3 (uid ")


def test_trace_of_a_json_log_without_cycles_says_so(capsys, tmp_path) -> None:
    log = tmp_path / "quiet.jsonl"
    log.write_text(json.dumps({"event": "process.cpus", "level": "info"}) + "\n")
    code, out, err = trace(capsys, log)
    assert code == EXIT_USER_ERROR and out == ""
    assert err.startswith(f"error: {log} has no pod's cycle in it: run with --log-format json and --log-level info")
