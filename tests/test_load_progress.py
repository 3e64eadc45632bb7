"""Progress while a large cluster snapshot loads.

`load_cluster` (and `load_inputs`) report the start and end of a load to a callback; the
CLI turns them into a spinner and a summary line when stderr is a terminal, and into
nothing but the ``cluster.loaded`` log event when it is not.
"""

from __future__ import annotations

import io
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from wasm_scheduler.adapters.cli import ClusterLoadStatus, human_size
from wasm_scheduler.adapters.framework.cluster import LoadStep, load_cluster
from wasm_scheduler.adapters.framework.errors import UserError
from wasm_scheduler.adapters.framework.simulation import load_inputs

NODES = 20
RUNNING = 3000
PENDING = 4


def _node(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"node-{i}", "labels": {"kubernetes.io/hostname": f"node-{i}"}},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "500"}}}


def _pod(i: int, node: str | None) -> dict:
    spec: dict = {"containers": [{"name": "app", "image": "registry.example/app:1.0",
                                  "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{i}", "namespace": "default", "uid": f"uid-{i}",
                         "labels": {"app": f"app-{i % 7}"}},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


@pytest.fixture(scope="module")
def big_cluster(tmp_path_factory: pytest.TempPathFactory) -> Path:
    items = [_node(i) for i in range(NODES)]
    items += [_pod(i, f"node-{i % NODES}") for i in range(RUNNING)]
    items += [_pod(RUNNING + i, None) for i in range(PENDING)]
    path = tmp_path_factory.mktemp("snapshot") / "big-cluster.yaml"
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    path.write_text(yaml.dump({"apiVersion": "v1", "kind": "List", "items": items}, Dumper=dumper))
    return path


def test_the_callback_hears_the_start_and_the_end(big_cluster: Path) -> None:
    steps: list[LoadStep] = []
    cluster = load_cluster(big_cluster, progress=steps.append)
    assert len(cluster.nodes) == NODES and len(cluster.pending) == PENDING
    start, end = steps
    assert (start.path, start.size_bytes, start.done) == (big_cluster, big_cluster.stat().st_size, False)
    assert (end.done, end.nodes, end.pods, end.size_bytes) == (True, NODES, RUNNING + PENDING, start.size_bytes)
    assert end.seconds > 0


def test_load_inputs_passes_the_callback_on(big_cluster: Path) -> None:
    steps: list[LoadStep] = []
    _config, cluster = load_inputs(None, big_cluster, progress=steps.append)
    assert [s.done for s in steps] == [False, True]
    assert steps[1].pods == len(cluster.running) + len(cluster.pending)


def test_a_failed_load_has_a_start_and_no_end(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("items: [\n")
    steps: list[LoadStep] = []
    with pytest.raises(UserError, match="invalid YAML"):
        load_cluster(bad, progress=steps.append)
    assert [s.done for s in steps] == [False]


def test_human_sizes() -> None:
    assert [human_size(n) for n in (0, 812, 4_100, 12_345_678, 2_000_000_000)] == \
        ["0 B", "812 B", "4.1 kB", "12.3 MB", "2.0 GB"]


def _terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=100, highlight=False), out


def test_at_a_terminal_a_spinner_then_one_summary_line(big_cluster: Path) -> None:
    console, out = _terminal()
    status = ClusterLoadStatus(console, enabled=True)
    start = LoadStep(big_cluster, 12_345_678)
    status(start)
    assert status._status is not None  # the spinner runs during the parse
    status(LoadStep(big_cluster, 12_345_678, True, NODES, 71, 1.23))
    assert status._status is None
    text = out.getvalue()
    assert "loading big-cluster.yaml (12.3 MB)…" in text
    assert f"loaded {NODES} nodes, 71 pods in 1.2 s" in text


def test_at_a_terminal_with_an_info_log_the_log_carries_the_summary(big_cluster: Path) -> None:
    console, out = _terminal()
    status = ClusterLoadStatus(console, enabled=True, summary=False)
    status(LoadStep(big_cluster, 100))
    status(LoadStep(big_cluster, 100, True, 1, 1, 0.1))
    assert "loaded 1 nodes" not in out.getvalue()


def test_a_failed_load_leaves_no_spinner(tmp_path: Path) -> None:
    console, _out = _terminal()
    status = ClusterLoadStatus(console, enabled=True)
    bad = tmp_path / "bad.yaml"
    bad.write_text("items: [\n")
    with pytest.raises(UserError):
        load_cluster(bad, progress=status)
    assert status._status is not None
    status.stop()
    assert status._status is None


def test_not_a_terminal_shows_nothing(big_cluster: Path) -> None:
    console, out = _terminal()
    status = ClusterLoadStatus(console, enabled=False)
    load_cluster(big_cluster, progress=status)
    assert out.getvalue() == ""


def _simulate_command(cluster: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "wasm_scheduler.adapters.cli", *extra, "simulate", "--cluster", str(cluster),
            "--output", "json", "--no-cache"]


def test_piped_output_stays_clean(big_cluster: Path) -> None:
    done = subprocess.run(_simulate_command(big_cluster), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert len(json.loads(done.stdout)["pods"]) == PENDING  # stdout: exactly one JSON document

    done = subprocess.run(_simulate_command(big_cluster, "--log-level", "info", "--log-format", "json"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stderr.splitlines()]  # every stderr line is a log event
    [loaded] = [e for e in events if e["event"] == "cluster.loaded"]
    assert (loaded["nodes"], loaded["pods"], loaded["pending"]) == (NODES, RUNNING + PENDING, PENDING)
    assert loaded["size_bytes"] == big_cluster.stat().st_size
    assert "loading" not in done.stderr


def test_a_terminal_on_stderr_gets_the_summary(big_cluster: Path) -> None:
    leader, follower = os.openpty()
    try:
        proc = subprocess.Popen(_simulate_command(big_cluster), stdout=subprocess.PIPE, stderr=follower,
                                env={**os.environ, "COLUMNS": "120", "TERM": "xterm"})
        os.close(follower)
        follower = -1
        seen = b""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the child closed its end (EIO on Linux)
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        out, _ = proc.communicate(timeout=60)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert proc.returncode == 0
    text = seen.decode("utf-8", "replace")
    assert f"loaded {NODES} nodes, {RUNNING + PENDING} pods in" in text
    assert len(json.loads(out)["pods"]) == PENDING  # stdout (a pipe) holds only the result
