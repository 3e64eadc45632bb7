"""The same pods through the HTTP extender and through the in-process framework land on
the same nodes.

The profile is wasm-only (plus the queue sort and binder every profile needs): Parity
filters out nodes with an odd last digit, NodeNumber scores 100 the node whose last
digit is the pod's; the pods' digits are even, so each has exactly one best node. A
small driver plays kube-scheduler against the extender: filter, prioritize, pick the
best node, bind (to a recording stand-in for the API server).
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import EXAMPLES, GUESTS
from tests.test_extender import ApiServer
from wasm_scheduler.adapters.extender.command import ExtenderOptions, RunningExtender
from wasm_scheduler.adapters.framework.cluster import load_cluster
from wasm_scheduler.adapters.framework.config import load_config
from wasm_scheduler.adapters.framework.simulation import simulate
from wasm_scheduler.registry.compiler import GuestCompiler

NODES = [f"node-{i}" for i in range(10)]
#: Even digits only: each pod has exactly one best feasible node (no tie to break).
PODS = [f"web-{i}" for i in (4, 8, 0, 6, 2, 12, 14, 28)]


def write_inputs(tmp_path: Path) -> tuple[Path, Path]:
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{
            "schedulerName": "default-scheduler",
            "plugins": {"multiPoint": {
                "disabled": [{"name": "*"}],
                "enabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"},
                            {"name": "Parity"}, {"name": "NodeNumber", "weight": 2}],
            }},
            "pluginConfig": [
                {"name": "Parity", "args": {"guestURL": str(GUESTS / "parity.wat")}},
                {"name": "NodeNumber", "args": {"guestURL": str(EXAMPLES / "nodenumber" / "nodenumber.wasm")}},
            ],
        }],
    }
    items: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "uid": f"uid-{n}"},
         "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}} for n in NODES
    ]
    items += [
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": p, "namespace": "default", "uid": f"uid-{p}",
                      "creationTimestamp": f"2026-01-01T00:00:{i:02d}Z"},
         "spec": {"containers": [{"name": "c", "image": "nginx",
                                  "resources": {"requests": {"cpu": "100m"}}}]}}
        for i, p in enumerate(PODS)
    ]
    config_path, cluster_path = tmp_path / "sched.yaml", tmp_path / "cluster.yaml"
    config_path.write_text(yaml.safe_dump(config))
    cluster_path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return config_path, cluster_path


def post(url: str, body: Any) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def through_the_extender(config_path: Path, cluster_path: Path, compiler: GuestCompiler) -> dict[str, str]:
    api = ApiServer()
    running = RunningExtender(ExtenderOptions(config_path, "127.0.0.1:0", cluster_path, api_server=api.url),
                              compiler)
    running.server.start_background()
    placements: dict[str, str] = {}
    try:
        cluster = load_cluster(cluster_path)
        for pending in cluster.pending:  # all of equal priority: the queue keeps file order
            pod = dict(pending.pod)
            args = {"Pod": pod, "NodeNames": NODES}
            filtered = post(f"{running.server.url}/filter", args)
            assert filtered["Error"] == ""
            if not filtered["NodeNames"]:
                placements[pending.key] = ""
                continue
            scores = post(f"{running.server.url}/prioritize", {"Pod": pod, "NodeNames": filtered["NodeNames"]})
            best = max(scores, key=lambda h: h["Score"])["Host"]
            meta = pod["metadata"]
            bound = post(f"{running.server.url}/bind", {"PodName": meta["name"], "PodNamespace": meta["namespace"],
                                                        "PodUID": meta["uid"], "Node": best})
            assert bound == {"Error": ""}
            placements[pending.key] = best
        assert len(api.bindings) == sum(1 for node in placements.values() if node)
        for plugin in running.plugins:
            counts = plugin.plugin.counts()
            assert counts.binding == 0 and counts.discarded == 0 and counts.balanced
    finally:
        running.close()
        api.stop()
    return placements


def test_the_extender_and_the_framework_place_the_same_pods_on_the_same_nodes(tmp_path: Path,
                                                                              compiler: GuestCompiler) -> None:
    config_path, cluster_path = write_inputs(tmp_path)
    report = simulate(load_config(config_path), load_cluster(cluster_path), compiler=compiler)
    in_process = {o.key: (o.node or "") for o in report.pods}
    via_http = through_the_extender(config_path, cluster_path, compiler)
    assert via_http == in_process
    # The placements are the ones the plugins dictate, not an accident of both being empty.
    assert in_process == {f"default/{p}": f"node-{p[-1]}" for p in PODS}
