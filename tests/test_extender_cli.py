"""`wasm-scheduler extender` as a process: it serves, and SIGTERM stops it cleanly."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.conftest import EXAMPLES
from wasm_scheduler.adapters.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_serves_until_sigterm_then_exits_cleanly() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "wasm_scheduler.adapters.cli", "extender",
         "--config", str(EXAMPLES / "scheduler-config.yaml"), "--listen", "127.0.0.1:0",
         "--cluster", str(EXAMPLES / "cluster.yaml")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("serving NodeNumber at http://127.0.0.1:"), line
        url = line.split(" at ", 1)[1].strip()
        with urllib.request.urlopen(f"{url}/healthz", timeout=10) as response:
            assert json.loads(response.read()) == {"status": "ok"}
        body = {"Pod": {"metadata": {"name": "web-3", "namespace": "default", "uid": "u"}},
                "NodeNames": ["node-03", "node-04"]}
        request = urllib.request.Request(f"{url}/prioritize", data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert json.loads(response.read()) == [{"Host": "node-03", "Score": 10}, {"Host": "node-04", "Score": 0}]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_mistakes_are_one_line(tmp_path: Path, capsys) -> None:
    assert main(["extender", "--config", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "missing.yaml" in err and "\n" not in err
    plain = tmp_path / "plain.yaml"
    plain.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    assert main(["extender", "--config", str(plain)]) == 2
    assert "no wasm plugin to serve" in capsys.readouterr().err
    assert main(["extender", "--config", str(EXAMPLES / "scheduler-config.yaml"), "--listen", "nope"]) == 2
    assert "HOST:PORT" in capsys.readouterr().err
