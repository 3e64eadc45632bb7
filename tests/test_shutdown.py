"""Stopping the CLI mid-run (SIGINT, SIGTERM) stops every actor and thread: the process
exits promptly instead of hanging on a guest or a binding worker."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import GUESTS

ROOT = Path(__file__).resolve().parents[1]


def slow_inputs(tmp_path: Path) -> tuple[Path, Path]:
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [{"schedulerName": "default-scheduler",
                            "plugins": {"multiPoint": {"enabled": [{"name": "Slow"}]}},
                            "pluginConfig": [{"name": "Slow", "args": {"guestURL": str(GUESTS / "slow.wat")}}]}]}
    items = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}"},
              "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "500"}}} for i in range(20)]
    items += [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p-{i}", "namespace": "default"},
               "spec": {"containers": [{"name": "c", "image": "busybox"}]}} for i in range(400)]
    config_path, cluster_path = tmp_path / "sched.yaml", tmp_path / "cluster.yaml"
    config_path.write_text(yaml.safe_dump(config))
    cluster_path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return config_path, cluster_path


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_mid_run_stops_the_simulation_promptly(tmp_path: Path, sig: signal.Signals) -> None:
    config_path, cluster_path = slow_inputs(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "wasm_scheduler.adapters.cli", "--log-level", "info", "--log-format", "json", "simulate",
         "--config", str(config_path), "--cluster", str(cluster_path), "--output", "json"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stderr is not None
        # Wait until scheduling is under way (a cycle started), then interrupt.
        deadline = time.monotonic() + 30
        for line in process.stderr:
            if '"cycle.started"' in line or time.monotonic() > deadline:
                break
        time.sleep(0.3)
        process.send_signal(sig)
        started = time.monotonic()
        code = process.wait(timeout=30)
        assert time.monotonic() - started < 15
        assert code == 130
        rest = process.stderr.read()
        assert "interrupted" in rest and '"pool.stopped"' in rest
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
